"""Each board against its own baseline: the output of `compare --baseline` and farms."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rtlab.analysis import Metric, Threshold
from rtlab.cli._common import console, line, rich_table
from rtlab.history import BoardComparison, against_baselines, load_baselines
from rtlab.store import ExperimentRecord, Store

STYLES = {"regressed": "bold red", "not judged": "bold yellow"}


def _change(rows: list, m: Metric) -> str:
    """The largest ratio of M over the matched cases, e.g. "1.8x (forkcopy=4)"."""
    best: tuple[float, str] | None = None
    for r in rows:
        ratio = r.ratios.get(m.key)
        if ratio is not None and math.isfinite(ratio) and (best is None or ratio > best[0]):
            best = (ratio, r.label)
    return "-" if best is None else f"{best[0]:.2f}x ({best[1]})"


def _rank(rows: list) -> str:
    """Cases whose rank test says the distributions differ, of those tested."""
    tested = [r for r in rows if r.rank_test is not None]
    if not tested:
        return "-"
    higher = [r for r in tested if r.significant and r.ratios.get("median", 1.0) > 1.0]
    return f"{len(higher)}/{len(tested)} higher"


def print_board_comparisons(results: Sequence[BoardComparison], wanted: Sequence[Metric]) -> None:
    """One row per experiment: its board, baseline, verdict, the largest change of each
    metric over its cases (and which), the cases a rank test finds higher; then each
    failure."""
    headers = ["board", "experiment", "baseline", "verdict"]
    headers += [f"{m.label} B/A max" for m in wanted] + ["p < 0.05 (rank)"]
    rows: list[list[Any]] = []
    for r in results:
        comp_rows = r.comparison.rows if r.comparison else []
        rows.append(
            [r.board.name, r.experiment, r.baseline or "-", r.status.upper()]
            + [_change(comp_rows, m) for m in wanted]
            + [_rank(comp_rows)]
        )
    out = console()
    out.print(rich_table("against each board's baseline", headers, rows, right_from=4))
    err = console(err=True)
    for r in results:
        if r.status == "regressed":
            for f in r.failures:
                err.print(line(("REGRESSED", STYLES["regressed"]), f" {r.board.name}: {f}"))
        elif r.why:
            err.print(line((r.status.upper(), "bold yellow"), f" {r.board.name}: {r.why}"))


def regressed_boards(results: Sequence[BoardComparison]) -> list[str]:
    return sorted({r.board.name for r in results if r.status == "regressed"})


def baselines_of_farm(
    store: Store,
    recs: Sequence[ExperimentRecord],
    deadline_ns: int | None,
    thresholds: Sequence[Threshold] = (),
) -> list[BoardComparison]:
    """A farm's boards (RECS) against their baselines; [] when no board has one."""
    if not recs or not load_baselines(store):
        return []
    return against_baselines(store, recs, deadline_ns, thresholds)


def baselines_json(results: Sequence[BoardComparison]) -> dict[str, Any]:
    return {
        "boards": [r.to_dict() for r in results],
        "regressed": regressed_boards(results),
    }
