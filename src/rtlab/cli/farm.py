"""rtlab farm run: one experiment on every target of a farm file, the boards compared."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

import click

from rtlab.analysis import metrics
from rtlab.cli._baselines import (
    baselines_json,
    baselines_of_farm,
    print_board_comparisons,
    regressed_boards,
)
from rtlab.cli._common import (
    DURATION,
    console,
    print_json,
    results_option,
    rich_table,
    scale_option,
    store_from,
    visible,
    warn_store,
)
from rtlab.errors import UserError
from rtlab.experiment import read_source
from rtlab.store import Store
from rtlab.targets import read_targets
from rtlab.targets._farm import (
    EXIT_INTERRUPTED,
    Farm,
    create_farm,
    member_argv,
    member_records,
    run_farm,
    worst_exit,
)


@click.group("farm")
def farm_group() -> None:
    """Run one experiment on many targets (a board farm) and compare the boards."""


@farm_group.command("run")
@click.argument("experiment")
@click.option(
    "--targets",
    "targets_path",
    required=True,
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="the farm: a targets file, one [NAME] table per board (docs/targets.md)",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1, max=1000),
    help="targets measured at once [default: all]",
)
@scale_option
@click.option("--deadline", type=DURATION, help="latency requirement, e.g. 100us")
@click.option("--raw", is_flag=True, help="capture every sample")
@click.option("--explain", type=DURATION, metavar="DUR", help="explain samples above DUR")
@click.option(
    "--fail-if",
    "fail_if",
    multiple=True,
    metavar="EXPR",
    help="judge each board against its baseline (rtlab baseline set), e.g. 'p99>1.2x'; "
    "exit 1 when one regressed",
)
@click.option(
    "--accept-new-host-key",
    is_flag=True,
    help="record the host key of a target not in known_hosts yet (a changed key is refused)",
)
@results_option
@click.option(
    "--json", "as_json", is_flag=True, help="JSON on stdout: the farm run and its targets"
)
def farm_run(
    experiment: str,
    targets_path: str,
    jobs: int | None,
    scale: float,
    deadline: int | None,
    raw: bool,
    explain: int | None,
    fail_if: tuple[str, ...],
    accept_new_host_key: bool,
    results_dir: str,
    as_json: bool,
) -> int:
    """Run EXPERIMENT (a preset or a TOML file) on every target of the farm file, each
    target's cases one after the other and the targets at the same time. A target that
    fails does not stop the others; the summary says which failed and why. The boards'
    experiments are grouped under a farm run: `rtlab report FARM-ID` compares them.

    Each board with a baseline (`rtlab baseline set`) is compared with it; with --fail-if,
    a board that exceeds a threshold against its baseline regressed.

    Exit status: the worst of the targets' (0 ok, 1 a deadline exceeded or a board
    regressed, 6 conditions not met, then 2 bad input, 3 unreachable or lost, 4 internal
    error, 5 output not written), 130 when interrupted.
    """
    from rtlab.analysis import parse_fail_if

    thresholds = [parse_fail_if(expr) for expr in fail_if]
    path = Path(targets_path)
    specs = list(read_targets(path).values())
    source, text = read_source(experiment)
    try:
        name = tomllib.loads(text).get("experiment", {}).get("name") or Path(source).stem
    except (tomllib.TOMLDecodeError, AttributeError) as e:
        raise UserError(f"{source}: not an experiment file ({e})") from None
    store = store_from(results_dir)
    farm = create_farm(store, str(name), experiment, specs)
    options = [f"--scale={scale!r}"]
    options += [f"--deadline={deadline}ns"] if deadline else []
    options += [f"--explain={explain}ns"] if explain else []
    options += ["--raw"] if raw else []
    options += ["--accept-new-host-key"] if accept_new_host_key else []
    argv = member_argv(experiment, path, store, farm, options)
    click.echo(f"{visible(farm.id)}: {len(specs)} targets", err=True)
    interrupted = asyncio.run(
        run_farm(store, farm, argv, jobs or len(specs), lambda s: click.echo(visible(s), err=True))
    )
    report = _report(store, farm, deadline)
    against = baselines_of_farm(store, member_records(store, farm), deadline, thresholds)
    warn_store(store)
    if as_json:
        print_json(
            {
                "id": farm.id,
                "path": str(farm.path),
                "report": report,
                "interrupted": interrupted,
                "targets": farm.to_dict()["targets"],
                "baselines": baselines_json(against),
            }
        )
    else:
        _print_summary(farm, report)
        if against:
            print_board_comparisons(against, metrics("median,p99,max"))
    if interrupted:
        return EXIT_INTERRUPTED
    regressed = [1] if regressed_boards(against) else []
    return worst_exit([m.exit_code or 0 for m in farm.members] + regressed)


def _report(store: Store, farm: Farm, deadline: int | None) -> str | None:
    recs = member_records(store, farm)
    if not recs:
        return None
    try:  # the boards' results are stored already: a failing report does not fail the run
        from rtlab.report import write_report

        written = write_report(recs, farm.path / "report.html", deadline_ns=deadline)
    except UserError as e:
        click.echo(f"rtlab: no farm report written: {visible(e)}", err=True)
        return None
    for warning in written.warnings:  # boards under a hypervisor, emulated, or both kinds
        click.echo(f"warning: {visible(warning)}", err=True)
    return str(written.html)


def _print_summary(farm: Farm, report: str | None) -> None:
    rows = [
        [
            m.name,
            m.status + (f" ({m.verdict})" if m.verdict else ""),
            m.experiment or "-",
            m.error or "",
        ]
        for m in farm.members
    ]
    console().print(rich_table(farm.id, ["target", "status", "experiment", "why"], rows, 99))
    if report:
        click.echo(f"report: {visible(report)}")
