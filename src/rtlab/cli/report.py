"""rtlab report: the self-contained HTML report of one or more experiments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rtlab.analysis import metrics, parse_pivot
from rtlab.cli._baselines import baselines_json, baselines_of_farm, print_board_comparisons
from rtlab.cli._common import (
    DURATION,
    EXIT_CONDITIONS,
    EXIT_THRESHOLD,
    condition_items,
    console,
    line,
    print_json,
    results_option,
    store_from,
    verdict,
    visible,
)
from rtlab.cli._pwcet import pwcet_options, resolve
from rtlab.errors import UserError
from rtlab.results import mixed_virtualization
from rtlab.store import ExperimentRecord
from rtlab.system import EMULATED_WARNING, is_emulated, virt_label
from rtlab.targets._farm import open_experiments

LEVELS_HINT = "--load-levels"


def parse_loads(text: str) -> list[int]:
    """ "4,8" -> [4, 8]: the load levels of the appendix tables."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise click.BadParameter(
                f"{text!r}: expected numbers of load processes, e.g. 4,8", param_hint=LEVELS_HINT
            )
        out.append(int(part))
    return out


def default_path(recs: list[ExperimentRecord], results_dir: str) -> Path:
    if len(recs) == 1:
        return recs[0].path / "report.html"
    tail = f"-and-{len(recs) - 2}-more" if len(recs) > 2 else ""
    return Path(results_dir) / f"report-{recs[0].id}-vs-{recs[1].id}{tail}.html"


@click.command()
@click.argument("experiment_ids", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    help="HTML file [default: results/<id>/report.html, or results/report-<id>-vs-<id>.html]",
)
@click.option(
    "--deadline",
    type=DURATION,
    help="requirement for the verdict, e.g. 100us; exit 1 if exceeded",
)
@click.option(
    "--load-levels",
    "levels",
    default="4,8",
    show_default=True,
    help="numbers of fork-copy load processes of the avg/max/jitter tables",
)
@click.option("--loads", "old_levels", hidden=True)
@click.option(
    "--pivot",
    "pivots",
    multiple=True,
    metavar="ROWS:COLS[:STAT]",
    help="a pivot table, e.g. setup:load:p99 (repeatable) [default: chosen from what is swept]",
)
@click.option(
    "--overlay",
    metavar="ID",
    help="overlay ID's exceedance curves on the first experiment's [default: with two]",
)
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout: the files written")
@pwcet_options
@results_option
def report(
    experiment_ids: tuple[str, ...],
    output: str | None,
    deadline: int | None,
    levels: str,
    old_levels: str | None,
    pivots: tuple[str, ...],
    overlay: str | None,
    as_json: bool,
    pwcet: str | None,
    pwcet_rate: str,
    results_dir: str,
) -> int:
    """Write the HTML report of EXPERIMENT_IDS (the first is the comparison baseline); the
    id of a farm run (`rtlab farm run`) stands for its boards' experiments, and each board
    with a baseline (`rtlab baseline set`) is compared with it.

    Verdict against the deadline, system and parameters, box plots against load,
    histograms, exceedance and latency-over-time plots, pivot tables (--pivot
    ROWS:COLS[:STAT], repeatable; by default chosen from what the experiments sweep) with
    bars of the worst case and p99, the before/after overlay of two experiments, tables
    (each also as a CSV file beside the HTML), comparison and audit findings. One file,
    no network needed.
    With a deadline (--deadline, or each experiment's own) the exit status is 1 when
    any case's maximum exceeds it; it is 6 (CONDITIONS NOT MET) when a case did not run
    in the conditions it asked for (policy, CPUs, locked memory, DMA latency).
    """
    from rtlab.monitor import find_monitor
    from rtlab.report import write_report

    mon = find_monitor(store_from(results_dir), experiment_ids[0])
    if mon is not None and len(experiment_ids) == 1:  # `rtlab monitor` (docs/monitor.md)
        from rtlab.cli._monitor_show import report_monitor

        return report_monitor(mon, output, deadline, as_json)
    load_levels = parse_loads(old_levels or levels)
    specs = [parse_pivot(t) for t in pivots]
    pwcet_p, rate = resolve(pwcet, pwcet_rate)
    store = store_from(results_dir)
    recs, farm = open_experiments(store, list(experiment_ids))  # a farm run: its boards
    if len({r.id for r in recs}) < len(recs):
        raise UserError("an experiment is named twice")
    if output:
        path = Path(output)
    else:
        path = farm.path / "report.html" if farm else default_path(recs, results_dir)
    result = write_report(
        recs,
        path,
        deadline_ns=deadline,
        loads=load_levels,
        pwcet_p=pwcet_p,
        rate_hz=rate,
        pivots=specs or None,
        overlay=overlay,
    )
    status, lines, judged, withheld = 0, [], False, []
    mixed = mixed_virtualization(recs)
    many = len(result.experiments) > 1
    not_met: list[dict[str, Any]] = []
    warned: list[dict[str, Any]] = []
    refused = False  # conditions not met where a verdict could be given
    for e in result.experiments:
        virt = e.rec.manifest.virtualization
        rows = [] if mixed else e.verdict_rows()
        code, text = verdict(rows, None if mixed else e.deadline_ns, virt, e.conditions)
        status = max(status, code)
        if text is not None:
            lines.append(line(f"{e.id}: ", text) if many else text)
        emulated = is_emulated(virt)
        refused = refused or (code == EXIT_CONDITIONS and not emulated)
        if e.deadline_ns is not None and not mixed:
            if emulated:
                withheld.append(e.id)
            elif code != EXIT_CONDITIONS:
                judged = True
        for items, which in ((not_met, "not_met"), (warned, "warnings")):
            items += [{"experiment": e.id, **x} for x in condition_items(e.conditions, which)]
    if mixed:  # each side's latencies include a different hypervisor (or none)
        judged = False
        lines.insert(0, line(("NO VERDICT", "bold yellow"), f": {mixed}"))
    if refused:
        word: str | None = "CONDITIONS NOT MET"
    else:
        word = "FAIL" if status == EXIT_THRESHOLD else ("PASS" if judged else None)
    against = baselines_of_farm(store, recs, deadline) if farm is not None else []
    if as_json:
        print_json(
            {
                "baselines": baselines_json(against) if against else None,
                "html": str(result.html),
                "csv": [str(p) for p in result.csv],
                "figures": result.figures,
                "tables": result.tables,
                "verdict": word,
                "no_verdict": mixed or {i: EMULATED_WARNING for i in withheld} or None,
                "virtualization": {
                    e.id: virt_label(e.rec.manifest.virtualization) for e in result.experiments
                },
                "warnings": result.warnings,
                "conditions_not_met": not_met,
                "condition_warnings": warned,
            }
        )
        return status
    click.echo(
        f"report: {visible(result.html)} ({result.figures} figures, {result.tables} tables, "
        "CSV beside it)"
    )
    for warning in result.warnings:
        console(err=True).print(line(("warning", "yellow"), f": {warning}"))
    for text in lines:
        console().print(text)
    if against:  # a farm run's boards, each against its baseline
        print_board_comparisons(against, metrics("median,p99,max"))
    return status
