"""rtlab bench: what a kernel setup costs everything else (throughput workloads)."""

from __future__ import annotations

import json

import click

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
@click.option("--name", default="throughput", show_default=True, help="experiment name")
@click.option("--json", "as_json", is_flag=True, help='JSON on stdout: {"id", "path", "cases"}')
@results_option
def throughput_cmd(
    repeat: int, scale: float, workloads: str | None, name: str, as_json: bool, results_dir: str
) -> int:
    """Run the throughput suite REPEAT times per workload and store it (meter
    `throughput`): mean, stddev and a 95 % bootstrap interval per workload.

    `rtlab compare` of two such experiments shows the % change per workload and
    whether its interval excludes zero. Needs hackbench (rt-tests), stress-ng, iperf3.
    """
    store = store_from(results_dir)
    chosen = select_workloads(workloads)

    def progress(w: Workload, i: int, value: float) -> None:
        click.echo(f"  {w.name} run {i + 1}/{repeat}: {value:.4g} {w.unit}", err=True)

    click.echo(f"throughput: {len(chosen)} workloads x {repeat} runs", err=True)
    docs = [measure(w, repeat, scale, progress) for w in chosen]
    manifest = new_manifest(
        name=name,
        description=f"throughput suite, {repeat} runs per workload, scale {scale:g}",
        source="bench:throughput",
        series=[SeriesRecord("throughput", "workloads of `rtlab bench throughput`", ["workload"])],
        cases=[
            CaseRecord(
                i,
                "throughput",
                w.name,
                {"workload": w.name},
                {"meter": "throughput", "workload": w.name, "repeat": repeat},
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
