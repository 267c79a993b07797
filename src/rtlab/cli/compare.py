"""rtlab compare: the same statistics side by side per matching case, with ratios."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import click

from rtlab.analysis import (
    Comparison,
    ComparisonRow,
    MeterView,
    Metric,
    metrics,
    p_text,
    parse_below,
    parse_fail_if,
)
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
from rtlab.cli._pwcet import cell, pwcet_options, resolve, title
from rtlab.errors import UserError
from rtlab.results import compare_records, meter_tables, mixed_virtualization
from rtlab.store import ExperimentRecord
from rtlab.system import virt_label
from rtlab.units import format_ns

# Per meter: its view and, per row both sides have, (row key, the pair of rows).
MeterPairs = dict[str, tuple[MeterView, list[tuple[tuple[Any, ...], dict[str, Any]]]]]


def _metric_list(text: str) -> tuple[list[Metric], list[int]]:
    """The statistics of --metrics, and the bounds of its below:B entries."""
    names, bounds = [], []
    try:
        for part in text.split(","):
            bound = parse_below(part)
            if bound is not None:
                bounds.append(bound)
            elif part.strip():
                names.append(part)
        wanted = metrics(names)
    except UserError as e:
        raise click.BadParameter(str(e), param_hint="--metrics") from None
    if not wanted and not bounds:
        raise click.BadParameter("no metric given", param_hint="--metrics")
    return wanted, bounds


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
    help="exit 1 when a later experiment exceeds the first, e.g. 'p99>1.2x', 'max>+50us', "
    "'pwcet(1e-9)>100us'",
)
@click.option(
    "--baseline",
    "against_baseline",
    is_flag=True,
    help="compare each experiment with its own board's baseline (rtlab baseline set); "
    "exit 1 when a board regressed",
)
@pwcet_options
@results_option
@output_options
def compare(
    experiment_ids: tuple[str, ...],
    deadline: int | None,
    metric_names: str,
    fail_if: tuple[str, ...],
    against_baseline: bool,
    pwcet: str | None,
    pwcet_rate: str,
    results_dir: str,
    as_json: bool,
    as_csv: bool,
) -> int:
    """Compare EXPERIMENT_IDS case by case; the first is the baseline.

    Cases match by series and case name. With raw samples on both sides, a
    Mann-Whitney rank test says whether the distributions differ. Exit 1 when a
    --fail-if threshold is exceeded. --pwcet P adds each side's latency exceeded with
    probability P per activation.

    With --baseline, each experiment (a farm run's id stands for its boards') is
    compared with its own board's baseline instead, and the exit status is 1 when a
    board regressed (a --fail-if threshold exceeded against its baseline).
    """
    check_exclusive(as_json, as_csv)
    if against_baseline:
        if as_csv:
            raise click.UsageError("--baseline has no --csv output (use --json)")
        return _against_baselines(experiment_ids, deadline, metric_names, fail_if, pwcet,
                                  pwcet_rate, results_dir, as_json)  # fmt: skip
    if len(experiment_ids) < 2:
        raise click.UsageError("compare needs at least two experiments (or --baseline)")
    wanted, bounds = _metric_list(metric_names)
    p, rate = resolve(pwcet, pwcet_rate)
    thresholds = [parse_fail_if(expr, rate) for expr in fail_if]
    store = store_from(results_dir)
    recs = [store.open(i) for i in experiment_ids]
    comp = compare_records(recs, deadline, thresholds, () if p is None else (p,), bounds)
    meters = _meter_pairs(recs, deadline, comp)
    mixed = mixed_virtualization(recs)
    failures = [] if mixed else comp.failures
    err = console(err=True)
    if mixed and not as_json:
        err.print(line(("WARNING", "bold yellow"), f": {mixed}"))
    if as_json:
        print_json(
            {
                "experiments": [s.id for s in comp.sides],
                "setups": [s.setup for s in comp.sides],
                "virtualization": [virt_label(r.manifest.virtualization) for r in recs],
                "warning": mixed,
                "rows": [r.to_dict() for r in comp.rows],
                "meters": {m: [p for _, p in pairs] for m, (_, pairs) in meters.items()},
                "failures": failures,
                "not_judged": comp.failures if mixed else [],
            }
        )
    elif as_csv:
        flat: list[dict[str, Any]] = []
        for r in comp.rows:
            item: dict[str, Any] = {
                "series": r.series,
                "case": r.case,
                "baseline": r.baseline,
                "other": r.other,
            }
            for m in wanted:
                item[f"{m.key}_baseline"] = getattr(r.baseline_stats, m.key)
                item[f"{m.key}_other"] = getattr(r.other_stats, m.key)
                item[f"{m.key}_ratio"] = r.ratios.get(m.key)
            for bound, shares in r.shares.items():
                for side, share in zip(("baseline", "other"), shares, strict=True):
                    item[f"below_{bound}ns_{side}"] = _nan_none(share.value)
            item["p_value"] = r.rank_test.pvalue if r.rank_test else None
            if p is not None:
                for side, e in zip(("baseline", "other"), r.pwcet[p], strict=True):
                    item[f"pwcet_{side}_ns"] = e.value_ns
                    item[f"pwcet_{side}_lo_ns"] = e.lo_ns
                    item[f"pwcet_{side}_hi_ns"] = e.hi_ns
                    item[f"pwcet_{side}_refused"] = e.refused
            flat.append(item)
        cols = (
            ["series", "case", "baseline", "other"]
            + [f"{m.key}_{s}" for m in wanted for s in ("baseline", "other", "ratio")]
            + [f"below_{b}ns_{s}" for b in bounds for s in ("baseline", "other")]
            + ["p_value"]
        )
        if p is not None:
            cols += [f"pwcet_{s}_{v}" for s in ("baseline", "other")
                     for v in ("ns", "lo_ns", "hi_ns", "refused")]  # fmt: skip
        print_csv(flat, cols)
    else:
        _print_tables(comp, wanted, bounds)
        _print_meters(meters)
        if p is not None:
            _print_pwcet(comp, p, rate)
    if not comp.rows:
        click.echo("no matching finished cases", err=True)
    for f in failures:
        err.print(line(("FAIL", "bold red"), f" {f}"))
    if mixed and comp.failures:
        err.print(
            line(("NO VERDICT", "bold yellow"), f": {len(comp.failures)} --fail-if not judged")
        )
    return 1 if failures else 0


def _against_baselines(
    experiment_ids: tuple[str, ...],
    deadline: int | None,
    metric_names: str,
    fail_if: tuple[str, ...],
    pwcet: str | None,
    pwcet_rate: str,
    results_dir: str,
    as_json: bool,
) -> int:
    from rtlab.cli._baselines import baselines_json, print_board_comparisons, regressed_boards
    from rtlab.history import against_baselines
    from rtlab.targets._farm import open_experiments

    wanted, _ = _metric_list(metric_names)
    p, rate = resolve(pwcet, pwcet_rate)
    thresholds = [parse_fail_if(expr, rate) for expr in fail_if]
    store = store_from(results_dir)
    recs, _farm = open_experiments(store, list(experiment_ids))
    if len({r.id for r in recs}) < len(recs):
        raise UserError("an experiment is named twice")
    results = against_baselines(store, recs, deadline, thresholds, () if p is None else (p,))
    regressed = regressed_boards(results)
    if as_json:
        print_json(baselines_json(results))
    else:
        print_board_comparisons(results, wanted)
        if not any(r.baseline for r in results):
            click.echo("no board has a baseline: rtlab baseline set BOARD ID", err=True)
    return 1 if regressed else 0


def _ratio_cell(ratio: float | None) -> str:
    return "-" if ratio is None or not math.isfinite(ratio) else f"{ratio:.2f}x"


def _nan_none(v: float) -> float | None:
    return None if math.isnan(v) else v


def _print_tables(comp: Comparison, wanted: list[Metric], bounds: Sequence[int] = ()) -> None:
    out = console()
    for i, side in enumerate(comp.sides):
        out.print(line(f"{'ABCDEFGHIJ'[i] if i < 10 else i}: {side.id}  ", (side.setup, "bold")))
    for side in comp.sides[1:]:
        series: dict[str, list[ComparisonRow]] = {}
        for r in comp.rows:
            if r.other == side.id:
                series.setdefault(r.series, []).append(r)
        for name, srows in series.items():
            headers = ["case"]
            for m in wanted:
                headers += [f"{m.label} A", f"{m.label} B", "B/A"]
            for b in bounds:
                headers += [f"≤ {format_ns(b)} A", f"≤ {format_ns(b)} B"]
            headers.append("p (rank)")
            table = []
            for r in srows:
                cells = [r.label]
                for m in wanted:
                    cells += [
                        m.text(getattr(r.baseline_stats, m.key)),
                        m.text(getattr(r.other_stats, m.key)),
                        _ratio_cell(r.ratios.get(m.key)),
                    ]
                for b in bounds:
                    pair = r.shares.get(b)
                    cells += [s.text() for s in pair] if pair else ["-", "-"]
                cells.append(f"{r.rank_test.pvalue:.2g}" if r.rank_test else "-")
                table.append(cells)
            out.print(rich_table(f"{name}: B = {side.id}", headers, table))


def _print_pwcet(comp: Comparison, p: float, rate: float) -> None:
    out = console()
    headers = ["B", "series", "case", f"pWCET({p_text(p)}) A", f"pWCET({p_text(p)}) B", "B/A"]
    cells, refusals = [], []
    for r in comp.rows:
        a, b = r.pwcet[p]
        ratio = b.value_ns / a.value_ns if a.value_ns and b.value_ns else None
        cells.append([r.other, r.series, r.label, cell(a), cell(b), _ratio_cell(ratio)])
        for side, e, exp in (("A", a, r.baseline), ("B", b, r.other)):
            if e.refused is not None and (side == "B" or r.other == comp.sides[1].id):
                refusals.append(f"  {r.series} / {r.label} ({side} = {exp}): refused: {e.refused}")
    out.print(line(title(p, rate)))  # a line of its own: a table title would wrap
    out.print(rich_table(None, headers, cells, 3))
    for text in refusals:
        out.print(line(text))


def _row_key(view: MeterView, row: Mapping[str, Any]) -> tuple[Any, ...]:
    return (row["series"], row["case"], row.get(view.key) if view.key else None)


def _meter_pairs(
    recs: Sequence[ExperimentRecord], deadline: int | None, comp: Comparison
) -> MeterPairs:
    """Per meter with a view: (view, [(key, {"other", "baseline": row, "other_row": row})])
    for every case (or CPU) both the baseline and a later experiment have. The statistics
    are the comparison's own (COMP), not computed again."""
    tables = [
        meter_tables(rec, deadline, {c.index: side.stats(c) for c in side.cases})
        for rec, side in zip(recs, comp.sides, strict=True)
    ]
    base = {view.meter: (view, rows) for view, rows in tables[0]}
    out: MeterPairs = {}
    for rec, rec_tables in zip(recs[1:], tables[1:], strict=True):
        for view, rows in rec_tables:
            if view.meter not in base:
                continue
            mine = {_row_key(view, r): r for r in base[view.meter][1]}
            for r in rows:
                a = mine.get(_row_key(view, r))
                if a is not None:
                    pair = {"other": rec.id, "baseline_row": a, "other_row": r}
                    if view.pair is not None:
                        pair["change"] = view.pair(a, r)
                    out.setdefault(view.meter, (view, []))[1].append((_row_key(view, r), pair))
    return out


def _print_meters(meters: MeterPairs) -> None:
    from rtlab.analysis import METRICS

    out = console()
    for view, pairs in meters.values():
        numeric = [c for c in view.columns if c.unit != "text" and c.compared]
        text = [c for c in view.columns if c.unit == "text"]
        headers = ["B", "series", "case"] + [c.label for c in text]
        for k in view.latency:
            headers += [f"{METRICS[k].label} A", f"{METRICS[k].label} B"]
        for c in numeric:
            headers += [f"{c.label} A", f"{c.label} B"]
        headers += [c.label for c in view.pair_columns]
        cells = []
        for _, p in pairs:
            a, b = p["baseline_row"], p["other_row"]
            row = [p["other"], a["series"], a["label"]] + [c.format(a.get(c.key)) for c in text]
            for k in view.latency:
                row += [fmt(a.get(k), True), fmt(b.get(k), True)]
            for c in numeric:
                row += [c.format(a.get(c.key)), c.format(b.get(c.key))]
            row += [c.format(p.get("change", {}).get(c.key)) for c in view.pair_columns]
            cells.append(row)
        out.print(rich_table(f"{view.title}: {view.question}", headers, cells, 3))
