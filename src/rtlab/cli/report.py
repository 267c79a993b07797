"""rtlab report: the self-contained HTML report of one or more experiments."""

from __future__ import annotations

from pathlib import Path

import click

from rtlab.cli._common import DURATION, results_option, store_from
from rtlab.errors import UserError
from rtlab.store import ExperimentRecord


def parse_loads(text: str) -> list[int]:
    """ "4,8" -> [4, 8]: the load levels of the appendix tables."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise click.BadParameter(
                f"{text!r}: expected numbers of load processes, e.g. 4,8", param_hint="--loads"
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
@click.option("--deadline", type=DURATION, help="requirement for the verdict, e.g. 100us")
@click.option(
    "--loads",
    default="4,8",
    show_default=True,
    help="numbers of load processes of the avg/max/jitter tables",
)
@results_option
def report(
    experiment_ids: tuple[str, ...],
    output: str | None,
    deadline: int | None,
    loads: str,
    results_dir: str,
) -> int:
    """Write the HTML report of EXPERIMENT_IDS (the first is the comparison baseline).

    Verdict against the deadline, system and parameters, box plots against load,
    histograms, exceedance and latency-over-time plots, tables (each also as a CSV
    file beside the HTML), comparison and audit findings. One file, no network needed.
    """
    from rtlab.report import write_report

    levels = parse_loads(loads)
    store = store_from(results_dir)
    recs = [store.open(i) for i in experiment_ids]
    if len({r.id for r in recs}) < len(recs):
        raise UserError("an experiment is named twice")
    path = Path(output) if output else default_path(recs, results_dir)
    result = write_report(recs, path, deadline_ns=deadline, loads=levels)
    click.echo(
        f"report: {result.html} ({result.figures} figures, {result.tables} tables, CSV beside it)"
    )
    return 0
