"""Pivot tables: one case variable on rows, one on columns, one statistic in the cells
(`rtlab show --pivot`, `rtlab report --pivot`), e.g. setup x load of the worst case.

Spelling: ``ROWS:COLS[:STAT]``. ROWS and COLS are a case key as written in experiments
(``load``, ``policy``, ``forkcopy``, ``mechanism``, ``sysctl.kernel.sched_rt_runtime_us``,
...), ``priority`` (from the policy), ``series``, ``case``, ``experiment`` or ``setup`` (one
per experiment, named by its label or by what differs); several joined by ``+``
(``setup+series``). STAT is a statistic (``max p99 p95 p50 mean min stddev variance count``
and every other of `METRICS`) or ``below:B``, the share of samples at or below the bound B;
default ``max``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rtlab.analysis._below import Share, parse_below, share_text
from rtlab.analysis._metrics import metric
from rtlab.analysis._stats import CaseStats
from rtlab.errors import UserError

#: Keys every case has, whatever its experiment.
SPECIAL_KEYS = ("setup", "series", "case", "experiment")
#: Most keys joined by "+" on one side, and most rows or columns of one pivot.
MAX_KEYS = 4
MAX_LABELS = 10_000
DEFAULT_STAT = "max"


@dataclass(frozen=True)
class PivotSpec:
    """A parsed ``ROWS:COLS[:STAT]``."""

    text: str
    rows: tuple[str, ...]
    cols: tuple[str, ...]
    stat: str  # a METRICS key, or "below"
    bound_ns: int | None = None  # stat "below"

    @property
    def stat_name(self) -> str:
        """The statistic as spelled in headers and file names: "max", "below:100us"."""
        if self.bound_ns is not None:
            return f"below:{_bound_text(self.bound_ns)}"
        return metric(self.stat).label

    @property
    def name(self) -> str:
        """A file-name-safe name: "setup-x-load-max"."""
        raw = f"{'+'.join(self.rows)}-x-{'+'.join(self.cols)}-{self.stat_name}"
        return "".join(ch if ch.isalnum() or ch in "-_+" else "-" for ch in raw).strip("-")

    @property
    def title(self) -> str:
        what = (
            f"share of samples at or below {_bound_text(self.bound_ns)}"
            if self.bound_ns is not None
            else metric(self.stat).label
        )
        return f"{what}: {' + '.join(self.rows)} × {' + '.join(self.cols)}"


def _bound_text(ns: int) -> str:
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("us", 10**3)):
        if ns >= scale and ns % scale == 0:
            return f"{ns // scale}{unit}"
    return f"{ns}ns"


def _keys(text: str, where: str, spec: str) -> tuple[str, ...]:
    keys = tuple(k.strip() for k in text.split("+"))
    if not all(keys) or len(keys) > MAX_KEYS:
        raise UserError(
            f"bad --pivot {spec!r}: {where} must be 1 to {MAX_KEYS} case keys joined by '+'"
        )
    return keys


def parse_pivot(text: str) -> PivotSpec:
    """``setup:load``, ``policy:load:p99``, ``setup+series:forkcopy:below:100us``."""
    spec = str(text)
    parts = spec.split(":", 2)
    if len(parts) < 2:
        raise UserError(f"bad --pivot {spec!r}: expected ROWS:COLS[:STAT], e.g. setup:load:max")
    rows = _keys(parts[0], "ROWS", spec)
    cols = _keys(parts[1], "COLS", spec)
    if set(rows) & set(cols):
        raise UserError(f"bad --pivot {spec!r}: a key is on both rows and columns")
    stat_text = parts[2].strip() if len(parts) > 2 else DEFAULT_STAT
    try:
        bound = parse_below(stat_text)
    except UserError as e:
        raise UserError(f"bad --pivot {spec!r}: {e}") from None
    if bound is not None:
        return PivotSpec(spec, rows, cols, "below", bound)
    try:
        found = metric(stat_text)
    except UserError as e:
        raise UserError(f"bad --pivot {spec!r}: {e}, or below:BOUND") from None
    if found.unit == "flag":
        raise UserError(f"bad --pivot {spec!r}: {found.label} is not a statistic")
    return PivotSpec(spec, rows, cols, found.key)


def _priority(policy: Any) -> Any:
    """99 of "fifo:99", -20 of "other:-20"; None without one."""
    if not isinstance(policy, str) or ":" not in policy:
        return None
    tail = policy.partition(":")[2].strip()
    try:
        return int(tail)
    except ValueError:
        return tail or None


@dataclass
class PivotCase:
    """One finished case as a pivot sees it."""

    experiment: str
    setup: str
    series: str
    case: str
    params: dict[str, Any]
    stats: CaseStats
    below: Callable[[int], Share] | None = None  # the share at or below a bound

    def value(self, key: str) -> Any:
        if key in SPECIAL_KEYS:
            return getattr(self, key)
        if key in self.params:
            return self.params[key]
        if key == "priority":
            return _priority(self.params.get("policy"))
        return None

    def has(self, key: str) -> bool:
        return key in SPECIAL_KEYS or key in self.params or self.value(key) is not None


def label_text(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


@dataclass
class Cell:
    value: float  # NaN: no samples or no answer
    exact: bool = True
    low: float | None = None  # "below" from histograms: the range the data allow
    high: float | None = None
    case: str = ""  # experiment / series / case, for messages


@dataclass
class Pivot:
    spec: PivotSpec
    row_labels: list[tuple[Any, ...]]
    col_labels: list[tuple[Any, ...]]
    cells: dict[tuple[int, int], Cell] = field(default_factory=dict)

    def cell(self, i: int, j: int) -> Cell | None:
        return self.cells.get((i, j))

    def text(self, cell: Cell | None) -> str:
        """A cell as tables show it: "-" for no case, "n/a" for no value."""
        if cell is None:
            return "-"
        if math.isnan(cell.value):
            return "n/a"
        if self.spec.bound_ns is not None:
            return share_text(cell.value, cell.exact)
        return metric(self.spec.stat).text(cell.value)

    @staticmethod
    def label(values: tuple[Any, ...]) -> str:
        return " · ".join(label_text(v) for v in values)

    def csv_columns(self) -> list[str]:
        return [*self.spec.rows, *(self.label(c) for c in self.col_labels)]

    def csv_rows(self) -> list[dict[str, Any]]:
        """One row per row label; durations in ns, shares in [0, 1], empty for no case."""
        out = []
        cols = [self.label(c) for c in self.col_labels]
        for i, r in enumerate(self.row_labels):
            row: dict[str, Any] = {k: label_text(v) for k, v in zip(self.spec.rows, r, strict=True)}
            for j, name in enumerate(cols):
                c = self.cell(i, j)
                row[name] = None if c is None or math.isnan(c.value) else _plain(c.value)
            out.append(row)
        return out

    def to_json(self) -> dict[str, Any]:
        def cell_json(c: Cell | None) -> Any:
            if c is None:
                return None
            v = None if math.isnan(c.value) else _plain(c.value)
            if self.spec.bound_ns is None:
                return v
            return {"share": v, "exact": c.exact, "range": [c.low, c.high]}

        return {
            "pivot": self.spec.text,
            "rows": list(self.spec.rows),
            "cols": list(self.spec.cols),
            "stat": self.spec.stat_name,
            "unit": "share" if self.spec.bound_ns is not None else metric(self.spec.stat).unit,
            "row_labels": [[label_text(v) for v in r] for r in self.row_labels],
            "col_labels": [[label_text(v) for v in c] for c in self.col_labels],
            "cells": [
                [cell_json(self.cell(i, j)) for j in range(len(self.col_labels))]
                for i in range(len(self.row_labels))
            ],
        }


def _plain(v: float) -> float | int:
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else float(v)


def _check_keys(cases: Sequence[PivotCase], spec: PivotSpec) -> None:
    known = sorted({k for c in cases for k in c.params} | set(SPECIAL_KEYS) | {"priority"})
    for key in (*spec.rows, *spec.cols):
        if not any(c.has(key) for c in cases):
            shown = ", ".join(known[:40]) + (", ..." if len(known) > 40 else "")
            raise UserError(
                f"bad --pivot {spec.text!r}: no case has the key '{key}' (known: {shown})"
            )


def pivot(cases: Sequence[PivotCase], spec: PivotSpec) -> Pivot:
    """The pivot of CASES; rows and columns in the order they first appear. Two cases in one
    cell are an error naming them (a key is missing to tell them apart)."""
    if not cases:
        raise UserError("nothing to pivot: no finished case")
    _check_keys(cases, spec)
    rows: dict[tuple[Any, ...], int] = {}
    cols: dict[tuple[Any, ...], int] = {}
    out = Pivot(spec, [], [])
    for c in cases:
        r = tuple(c.value(k) for k in spec.rows)
        k = tuple(c.value(k) for k in spec.cols)
        i = rows.setdefault(_hashable(r), len(rows))
        j = cols.setdefault(_hashable(k), len(cols))
        if i == len(out.row_labels):
            out.row_labels.append(r)
        if j == len(out.col_labels):
            out.col_labels.append(k)
        if len(rows) > MAX_LABELS or len(cols) > MAX_LABELS:
            raise UserError(f"--pivot {spec.text!r}: more than {MAX_LABELS} rows or columns")
        where = f"{c.experiment} / {c.series} / {c.case}"
        if (i, j) in out.cells:
            other = out.cells[(i, j)].case
            used = {*spec.rows, *spec.cols}
            order = ("series", "case", "setup")
            if not other.startswith(f"{c.experiment} / "):  # two experiments: their setup
                order = ("setup", "experiment", "series")
            extra = next(k for k in (*order, "experiment") if k not in used)
            raise UserError(
                f"--pivot {spec.text!r}: {other} and {where} fall in one cell "
                f"({out.label(r)}, {out.label(k)}); add a key with '+', e.g. "
                f"{'+'.join(spec.rows)}+{extra}:{'+'.join(spec.cols)}"
            )
        out.cells[(i, j)] = _cell(c, spec, where)
    return out


def _hashable(values: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(v if isinstance(v, str | int | float | bool | None) else repr(v) for v in values)


def _cell(c: PivotCase, spec: PivotSpec, where: str) -> Cell:
    if spec.bound_ns is None:
        return Cell(float(getattr(c.stats, spec.stat)), bool(c.stats.exact), case=where)
    if c.below is None:
        return Cell(math.nan, False, case=where)
    share = c.below(spec.bound_ns)
    low, high = share.range
    return Cell(
        share.value,
        share.exact,
        None if math.isnan(low) else low,
        None if math.isnan(high) else high,
        where,
    )
