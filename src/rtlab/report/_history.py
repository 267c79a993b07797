"""A board's history: one statistic per experiment over time, kernel changes marked."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rtlab.analysis import Metric
from rtlab.history import HistoryRow
from rtlab.report._style import Plot, _figure, _style, _us


def _when(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return None


def history_plot(rows: Sequence[HistoryRow], stat: Metric, board: str) -> Plot:
    """STAT of each column (case) of ROWS against the experiment's start time (its order
    where a time is missing), one line per column; a dashed vertical line where the
    kernel changed, labelled with the new release."""
    columns = list(dict.fromkeys(k for r in rows for k in r.values))
    times = [_when(r.created_utc) for r in rows]
    xs: list = times if all(t is not None for t in times) else list(range(len(rows)))
    with _style():
        fig = _figure(7.0, 3.4)
        ax = fig.add_subplot()
        for col in columns:
            pts = [
                (x, _us(v))
                for x, r in zip(xs, rows, strict=True)
                if (v := r.values.get(col)) is not None
            ]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=col)
        for x, r in zip(xs, rows, strict=True):
            if r.kernel_change:
                ax.axvline(x, linestyle="--", color="0.4", linewidth=0.9)
                ax.annotate(
                    r.kernel or "?", (x, 1.0), xycoords=("data", "axes fraction"),
                    rotation=90, va="top", ha="right", fontsize=7, color="0.3",
                )  # fmt: skip
        ax.set_ylabel(f"{stat.label} (µs)" if stat.duration else stat.label)
        ax.set_title(f"{board}: {stat.label} per experiment")
        if len(columns) > 1:
            ax.legend(fontsize=7)
        if xs and not isinstance(xs[0], int):
            fig.autofmt_xdate()
    changes = sum(r.kernel_change is not None for r in rows)
    alt = (
        f"{stat.label} of {', '.join(columns)} over {len(rows)} experiments of {board}, "
        f"{changes} kernel change(s) marked"
    )
    return Plot(fig, f"{board} history", alt)
