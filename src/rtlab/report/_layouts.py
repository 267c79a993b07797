"""The report's layouts: pivot tables (one case key on rows, one on columns, a statistic in
the cells), chosen by `report --pivot` or by default from what the experiments sweep, and
the bar chart of the worst case and p99 per setup that the first pivot lays out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rtlab.analysis import Pivot, PivotCase, PivotSpec, Share, parse_pivot, pivot, share_below
from rtlab.errors import UserError
from rtlab.report._data import CaseData, ExperimentData
from rtlab.report._tables import Table

#: Keys that count or name a load: the columns of the default pivots.
LOAD_KEYS = ("load", "forkcopy")
#: Statistics of the default pivots: the worst case and the 99th percentile.
DEFAULT_STATS = ("max", "p99")

TITLE = "Layouts"
INTRO = (
    "Pivot tables: one case variable on the rows, one on the columns, one statistic in the "
    "cells (rtlab report --pivot ROWS:COLS[:STAT]; by default from what the experiments "
    "sweep). Setups are named by their label or by what differs between them."
)


def _below(e: ExperimentData, c: CaseData) -> Callable[[int], Share]:
    def share(bound_ns: int) -> Share:
        return share_below(e.rec.document(c.case), e.rec.document_path(c.case).parent, bound_ns)

    return share


def pivot_cases(exps: Sequence[ExperimentData]) -> list[PivotCase]:
    """Every finished case of EXPS as a pivot sees it (statistics as collected)."""
    return [
        PivotCase(
            e.id,
            e.setup,
            c.series,
            c.name,
            {**c.case.params, **c.case.swept},
            c.stats,
            _below(e, c),
        )
        for e in exps
        for c in e.cases()
    ]


def _swept(exps: Sequence[ExperimentData]) -> list[str]:
    keys: list[str] = []
    for e in exps:
        for c in e.cases():
            keys += [k for k in c.case.swept if k not in keys]
    return keys


def default_layout(exps: Sequence[ExperimentData]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(rows, cols) of the default pivots, e.g. setup x load for several experiments of the
    stress preset, series x forkcopy for one of the standard preset, mechanism x series for
    the mechanisms preset, policy x setup for the policies preset; () when nothing is swept
    and there is one experiment."""
    swept = _swept(exps)
    many = len(exps) > 1
    series = {c.series for e in exps for c in e.cases()}
    load = next((k for k in LOAD_KEYS if k in swept), None)
    other = [k for k in swept if k != load]
    if load is not None:
        rows: tuple[str, ...] = ("setup",) if many else ()
        rows += tuple(other[:1])
        if len(series) > 1 or not rows:
            rows += ("series",)
        return rows, (load,)
    if other:
        if len(series) > 1:
            return (other[0],), ("setup", "series") if many else ("series",)
        return (other[0],), ("setup",)
    if many:
        return ("series",), ("setup",)
    return (), ()


def default_specs(exps: Sequence[ExperimentData]) -> list[PivotSpec]:
    rows, cols = default_layout(exps)
    if not rows:
        return []
    return [parse_pivot(f"{'+'.join(rows)}:{'+'.join(cols)}:{s}") for s in DEFAULT_STATS]


def pivot_table(p: Pivot, index: int) -> Table:
    """P as a report table; its CSV has durations in ns and shares in [0, 1]."""
    t = Table(
        f"pivot-{index}-{p.spec.name}"[:80],
        p.spec.title,
        [" + ".join(p.spec.rows)] + [p.label(c) for c in p.col_labels],
        csv_columns=p.csv_columns(),
        csv_rows=p.csv_rows(),
    )
    t.rows = [
        [p.label(r)] + [p.text(p.cell(i, j)) for j in range(len(p.col_labels))]
        for i, r in enumerate(p.row_labels)
    ]
    return t


def build_pivots(exps: Sequence[ExperimentData], specs: Sequence[PivotSpec] | None) -> list[Pivot]:
    """The pivots asked for (a bad key or a collision is an error), else the defaults that
    fit (a default that puts two cases in one cell is left out)."""
    cases = pivot_cases(exps)
    if not cases:
        return []
    if specs:
        return [pivot(cases, s) for s in specs]
    out = []
    for s in default_specs(exps):
        try:
            out.append(pivot(cases, s))
        except UserError:
            continue
    return out
