"""rtlab bench: what a kernel setup costs everything else (throughput workloads)."""

from __future__ import annotations

import json

import click

from rtlab._benchopts import applied, check_policy, parse_policy, user_workload
from rtlab.cli._common import console, print_json, print_views, results_option, store_from, visible
from rtlab.records import CaseRecord, SeriesRecord, new_manifest
from rtlab.results import meter_tables
from rtlab.system import collect_fingerprint
from rtlab.throughput import WORKLOADS, Workload, measure, select_workloads


@click.group("bench")
def bench_group() -> None:
    """Benchmarks of the system itself, stored as experiments."""


@bench_group.command("throughput")
@click.option("--repeat", type=click.IntRange(1, 1000), default=5, show_default=True,
              help="runs of each workload")  # fmt: skip
@click.option("--scale", type=click.FloatRange(0.01, 100), default=1.0, show_default=True,
              help="multiply each workload's size (loops, seconds)")  # fmt: skip
@click.option("--workloads", metavar="LIST", help=f"comma-separated, of: {', '.join(WORKLOADS)}")
@click.option("--workload", "commands", metavar="'[NAME=]CMD'", multiple=True,
              help="also time this command (split as a shell would, run without one; "
                   "named by its first word or NAME); repeatable")  # fmt: skip
@click.option("--policy", default="other", show_default=True, metavar="POLICY",
              help="run every workload at other, fifo:PRIO or rr:PRIO")  # fmt: skip
@click.option("--name", default="throughput", show_default=True, help="experiment name")
@click.option("--json", "as_json", is_flag=True, help='JSON on stdout: {"id", "path", "cases"}')
@results_option
def throughput_cmd(
    repeat: int,
    scale: float,
    workloads: str | None,
    name: str,
    as_json: bool,
    results_dir: str,
    commands: tuple[str, ...] = (),
    policy: str = "other",
) -> int:
    """Run the throughput suite REPEAT times per workload and store it (meter
    `throughput`): mean, stddev and a 95 % bootstrap interval per workload, and the
    user and system CPU time of each run with theirs.

    --workload 'CMD' times a command of yours the same way (its wall time per run):
    given alone, only the commands run; with --workloads, the listed built-ins too.
    --policy fifo:PRIO runs every workload at SCHED_FIFO (refused without the privilege
    or with real-time throttling off). `rtlab compare` of two such experiments shows the
    % change per workload and whether its interval excludes zero. The built-ins need
    hackbench (rt-tests), stress-ng, iperf3.
    """
    store = store_from(results_dir)
    chosen = select_workloads(workloads) if workloads or not commands else []
    taken = {w.name for w in chosen}
    chosen += [user_workload(c, taken) for c in commands]
    sched = parse_policy(policy)
    record = check_policy(sched) if sched is not None else None

    def progress(w: Workload, i: int, value: float) -> None:
        click.echo(f"  {w.name} run {i + 1}/{repeat}: {value:.4g} {w.unit}", err=True)

    click.echo(f"throughput: {len(chosen)} workloads x {repeat} runs", err=True)
    with applied(sched):
        docs = [measure(w, repeat, scale, progress, record) for w in chosen]
    manifest = new_manifest(
        name=name,
        description=f"throughput suite, {repeat} runs per workload, scale {scale:g}"
        + (f", at {policy}" if sched else ""),
        source="bench:throughput",
        series=[SeriesRecord("throughput", "workloads of `rtlab bench throughput`", ["workload"])],
        cases=[
            CaseRecord(
                i,
                "throughput",
                w.name,
                {"workload": w.name},
                {"meter": "throughput", "workload": w.name, "repeat": repeat}
                | ({"policy": policy} if sched else {}),
            )
            for i, w in enumerate(chosen)
        ],
        scale=scale,
    )
    names = [w.name for w in chosen]
    rec = store.create(
        manifest, f"# rtlab bench throughput\n# {json.dumps(names)}\n", collect_fingerprint(),
        documents=dict(enumerate(docs)),
    )  # fmt: skip
    if as_json:
        print_json({"id": rec.id, "path": str(rec.path), "cases": len(docs)})
    else:
        click.echo(f"{visible(rec.id)}: {len(docs)} workloads stored")
        print_views(console(), meter_tables(rec))
    return 0
