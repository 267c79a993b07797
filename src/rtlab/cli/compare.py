"""rtlab compare: the same statistics side by side per matching case, with ratios."""

from __future__ import annotations

import math

import click

from rtlab.analysis import Metric, metrics, parse_fail_if
from rtlab.cli._common import (
    DURATION,
    check_exclusive,
    console,
    fmt,
    line,
    output_options,
    print_csv,
    print_json,
    results_option,
    rich_table,
    store_from,
)
from rtlab.errors import UserError
from rtlab.results import compare_records


def _metric_list(text: str) -> list[Metric]:
    try:
        wanted = metrics(text)
    except UserError as e:
        raise click.BadParameter(str(e), param_hint="--metrics") from None
    if not wanted:
        raise click.BadParameter("no metric given", param_hint="--metrics")
    return wanted


@click.command()
@click.argument("experiment_ids", nargs=-1, required=True)
@click.option("--deadline", type=DURATION, help="count samples above this, e.g. 100us")
@click.option(
    "--metrics",
    "metric_names",
    default="median,p99,max",
    show_default=True,
    help="comma-separated: min, avg, median, p90, p99, p99.9, p99.99, max, jitter, stddev",
)
@click.option(
    "--fail-if",
    "fail_if",
    multiple=True,
    metavar="EXPR",
    help="exit 1 when a later experiment exceeds the first, e.g. 'p99>1.2x', 'max>+50us'",
)
@results_option
@output_options
def compare(
    experiment_ids: tuple[str, ...],
    deadline: int | None,
    metric_names: str,
    fail_if: tuple[str, ...],
    results_dir: str,
    as_json: bool,
    as_csv: bool,
) -> int:
    """Compare EXPERIMENT_IDS case by case; the first is the baseline.

    Cases match by series and case name. With raw samples on both sides, a
    Mann-Whitney rank test says whether the distributions differ. Exit 1 when a
    --fail-if threshold is exceeded.
    """
    check_exclusive(as_json, as_csv)
    if len(experiment_ids) < 2:
        raise click.UsageError("compare needs at least two experiments")
    wanted = _metric_list(metric_names)
    thresholds = [parse_fail_if(expr) for expr in fail_if]
    store = store_from(results_dir)
    recs = [store.open(i) for i in experiment_ids]
    comp = compare_records(recs, deadline, thresholds)
    if as_json:
        print_json(
            {
                "experiments": [s.id for s in comp.sides],
                "setups": [s.setup for s in comp.sides],
                "rows": [r.to_dict() for r in comp.rows],
                "failures": comp.failures,
            }
        )
    elif as_csv:
        flat = []
        for r in comp.rows:
            item = {"series": r.series, "case": r.case, "baseline": r.baseline, "other": r.other}
            for m in wanted:
                item[f"{m.key}_baseline"] = getattr(r.baseline_stats, m.key)
                item[f"{m.key}_other"] = getattr(r.other_stats, m.key)
                item[f"{m.key}_ratio"] = r.ratios.get(m.key)
            item["p_value"] = r.rank_test.pvalue if r.rank_test else None
            flat.append(item)
        cols = (
            ["series", "case", "baseline", "other"]
            + [f"{m.key}_{s}" for m in wanted for s in ("baseline", "other", "ratio")]
            + ["p_value"]
        )
        print_csv(flat, cols)
    else:
        _print_tables(comp, wanted)
    if not comp.rows:
        click.echo("no matching finished cases", err=True)
    err = console(err=True)
    for f in comp.failures:
        err.print(line(("FAIL", "bold red"), f" {f}"))
    return 1 if comp.failures else 0


def _ratio_cell(ratio: float | None) -> str:
    return "-" if ratio is None or not math.isfinite(ratio) else f"{ratio:.2f}x"


def _print_tables(comp, wanted: list[Metric]) -> None:
    out = console()
    for i, side in enumerate(comp.sides):
        out.print(line(f"{'ABCDEFGHIJ'[i] if i < 10 else i}: {side.id}  ", (side.setup, "bold")))
    for side in comp.sides[1:]:
        series: dict[str, list] = {}
        for r in comp.rows:
            if r.other == side.id:
                series.setdefault(r.series, []).append(r)
        for name, srows in series.items():
            headers = ["case"]
            for m in wanted:
                headers += [f"{m.label} A", f"{m.label} B", "B/A"]
            headers.append("p (rank)")
            table = []
            for r in srows:
                cells = [r.label]
                for m in wanted:
                    cells += [
                        fmt(getattr(r.baseline_stats, m.key), m.duration),
                        fmt(getattr(r.other_stats, m.key), m.duration),
                        _ratio_cell(r.ratios.get(m.key)),
                    ]
                cells.append(f"{r.rank_test.pvalue:.2g}" if r.rank_test else "-")
                table.append(cells)
            out.print(rich_table(f"{name}: B = {side.id}", headers, table))
