"""rtlab plot: one figure of an experiment as SVG, PNG or PDF, for papers and slides."""

from __future__ import annotations

from pathlib import Path

import click

from rtlab.cli._common import DURATION, results_option, store_from, visible
from rtlab.cli._pwcet import pwcet_options, resolve

KINDS = ("box", "hist", "exceedance", "timeline")


@click.command()
@click.argument("experiment_ids", nargs=-1, required=True)
@click.option("--kind", type=click.Choice(KINDS), default="box", show_default=True)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    help="figure file: .svg, .png or .pdf",
)
@click.option("--series", help="only this series (box); the series to draw (others)")
@click.option("--case", "case_name", help="hist: only this case (name or swept value)")
@click.option("--deadline", type=DURATION, help="draw this deadline, e.g. 100us")
@pwcet_options
@results_option
def plot(
    experiment_ids: tuple[str, ...],
    kind: str,
    output: str,
    series: str | None,
    case_name: str | None,
    deadline: int | None,
    pwcet: str | None,
    pwcet_rate: str,
    results_dir: str,
) -> int:
    """Write one figure of EXPERIMENT_IDS to --output (format from its extension).

    box: latency against load, one panel per series (several experiments side by side);
    hist: histograms per thread of one series of the first experiment; exceedance and
    timeline: one series, one panel per experiment. exceedance with --pwcet P: the
    fitted tail of each case with raw samples, and its band, down to P.
    """
    from rtlab.report import collect
    from rtlab.report.plots import FORMATS, figure_for, save

    out = Path(output)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise click.BadParameter(
            f"{output}: unknown format {fmt or '(none)'!r} (svg, png, pdf)", param_hint="--output"
        )
    if not out.parent.is_dir():
        raise click.BadParameter(f"{out.parent}: no such directory", param_hint="--output")
    store = store_from(results_dir)
    recs = [store.open(i) for i in experiment_ids]
    p, rate = resolve(pwcet, pwcet_rate)
    data = collect(recs, None, p, rate) if p is not None and kind == "exceedance" else recs
    fig = figure_for(kind, data, series=series, deadline_ns=deadline, case=case_name, pwcet_p=p)
    save(fig, out)
    click.echo(f"{kind} plot: {visible(out)}")
    return 0
