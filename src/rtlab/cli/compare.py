"""rtlab compare: the same statistics side by side per matching case, with ratios."""

from __future__ import annotations

import math
from typing import Any

import click

from rtlab.analysis import METRICS, parse_fail_if, rank_test, ratio_table
from rtlab.cli._common import (
    DURATION,
    check_exclusive,
    console,
    fmt,
    output_options,
    print_csv,
    print_json,
    results_option,
    rich_table,
    store_from,
)
from rtlab.results import case_samples, case_stats, row_label, setup_labels


def _metric_list(text: str) -> list[str]:
    out = []
    for name in text.split(","):
        if name.strip() not in METRICS:
            raise click.BadParameter(
                f"unknown metric '{name}' (known: {', '.join(METRICS)})", param_hint="--metrics"
            )
        out.append(name.strip())
    return out


@click.command()
@click.argument("experiment_ids", nargs=-1, required=True)
@click.option("--deadline", type=DURATION, help="count samples above this, e.g. 100us")
@click.option(
    "--metrics",
    default="median,p99,max",
    show_default=True,
    help="comma-separated: min, mean, median, p90, p99, p99.9, p99.99, max, jitter, stddev",
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
    metrics: str,
    fail_if: tuple[str, ...],
    results_dir: str,
    as_json: bool,
    as_csv: bool,
) -> int:
    """Compare EXPERIMENT_IDS case by case; the first is the baseline.

    Cases match by series and swept value. With raw samples on both sides, a
    Mann-Whitney rank test says whether the distributions differ.
    """
    check_exclusive(as_json, as_csv)
    if len(experiment_ids) < 2:
        raise click.UsageError("compare needs at least two experiments")
    wanted = _metric_list(metrics)
    thresholds = [parse_fail_if(expr) for expr in fail_if]
    store = store_from(results_dir)
    recs = [store.open(i) for i in experiment_ids]
    labels = setup_labels(recs)
    base = recs[0]
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    for case in base.cases:
        matches = [
            next(
                (
                    c
                    for c in r.cases
                    if (c.series, c.name) == (case.series, case.name) and c.status == "done"
                ),
                None,
            )
            for r in recs[1:]
        ]
        if case.status != "done" or not all(matches):
            continue
        a = case_stats(base, case, deadline)
        a_samples = case_samples(base, case)
        for rec, label, other in zip(recs[1:], labels[1:], matches, strict=True):
            b = case_stats(rec, other, deadline)
            row = {
                "series": case.series,
                "case": case.name,
                "label": row_label(case),
                "baseline": base.id,
                "other": rec.id,
                "baseline_setup": labels[0],
                "other_setup": label,
                "baseline_stats": a.to_dict(),
                "other_stats": b.to_dict(),
                "ratios": ratio_table(a, b),
                "rank_test": None,
            }
            b_samples = case_samples(rec, other) if a_samples is not None else None
            if a_samples is not None and b_samples is not None:
                row["rank_test"] = rank_test(a_samples, b_samples).__dict__
            for t in thresholds:
                exceeded, text = t.check(a, b)
                if exceeded:
                    failures.append(f"{case.series} / {case.name}: {label}: {text}")
            rows.append(row)
    if as_json:
        print_json(
            {
                "experiments": [r.id for r in recs],
                "setups": labels,
                "rows": rows,
                "failures": failures,
            }
        )
    elif as_csv:
        flat = []
        for r in rows:
            item = {k: r[k] for k in ("series", "case", "baseline", "other")}
            for m in wanted:
                key = METRICS[m]
                item[f"{m}_baseline"] = r["baseline_stats"][key]
                item[f"{m}_other"] = r["other_stats"][key]
                item[f"{m}_ratio"] = r["ratios"].get(key)
            item["p_value"] = r["rank_test"]["pvalue"] if r["rank_test"] else None
            flat.append(item)
        cols = (
            ["series", "case", "baseline", "other"]
            + [f"{m}_{s}" for m in wanted for s in ("baseline", "other", "ratio")]
            + ["p_value"]
        )
        print_csv(flat, cols)
    else:
        _print_tables(recs, labels, rows, wanted)
    if not rows:
        click.echo("no matching finished cases", err=True)
    for f in failures:
        click.echo(f"FAIL {f}", err=True)
    return 1 if failures else 0


def _print_tables(recs, labels, rows, wanted) -> None:
    out = console()
    for i, (rec, label) in enumerate(zip(recs, labels, strict=True)):
        out.print(f"{'ABCDEFGHIJ'[i] if i < 10 else i}: {rec.id}  [bold]{label}[/bold]")
    for other in recs[1:]:
        series: dict[str, list] = {}
        for r in rows:
            if r["other"] == other.id:
                series.setdefault(r["series"], []).append(r)
        for name, srows in series.items():
            headers = ["case"]
            for m in wanted:
                headers += [f"{m} A", f"{m} B", "B/A"]
            headers.append("p (rank)")
            table = []
            for r in srows:
                cells = [r["label"]]
                for m in wanted:
                    key = METRICS[m]
                    ratio = r["ratios"].get(key)
                    cells += [
                        fmt(r["baseline_stats"][key], True),
                        fmt(r["other_stats"][key], True),
                        "-" if ratio is None or not math.isfinite(ratio) else f"{ratio:.2f}x",
                    ]
                rt = r["rank_test"]
                cells.append(f"{rt['pvalue']:.2g}" if rt else "-")
                table.append(cells)
            out.print(rich_table(f"{name}: B = {other.id}", headers, table))
