"""Figures of the layouts: bars of the worst case and p99 per setup (grouped per load or
stressor), the before/after overlay of two experiments' exceedance curves on one axis per
case, and box plots with one panel per setup."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.patches import Patch

from rtlab.analysis import Pivot
from rtlab.report._data import ExperimentData
from rtlab.report._distplots import box_plot
from rtlab.report._style import (
    SETUP_COLOURS,
    SETUP_HATCHES,
    Plot,
    _figure,
    _grid,
    _hide_unused,
    _log_us,
    _style,
    _us,
)
from rtlab.report._tailplots import _survival
from rtlab.units import format_ns

#: Largest pivot drawn as bars (rows x columns), and most overlay panels.
MAX_BARS = 240
MAX_OVERLAYS = 12
OVERLAY_COLOURS = ("#1f78b4", "#e66101")  # before, after: apart in greyscale by line style


def bar_plot(pivots: Sequence[Pivot]) -> Plot | None:
    """One panel per pivot of durations (the worst case, the p99, ...): a group of bars per
    column (load or stressor), one bar per row (setup), on a log scale; None when there is
    nothing to draw or too much."""
    shown = [p for p in pivots if p.spec.bound_ns is None and p.cells]
    shown = [p for p in shown if len(p.row_labels) * len(p.col_labels) <= MAX_BARS]
    if not shown:
        return None
    first = shown[0]
    nrow, ncol = len(first.row_labels), len(first.col_labels)
    alt: list[str] = []
    with _style():
        longest = max(len(first.label(r)) for r in first.row_labels)
        legend_cols = 1 if longest > 40 else 2 if longest > 20 else 3
        width = max(4.5, 0.35 * nrow * ncol + 1.5, legend_cols * (0.075 * longest + 0.6))
        legend_h = 0.22 * math.ceil(nrow / legend_cols)
        fig = _figure(width, 2.9 * len(shown) + 0.5 + legend_h)
        axes = fig.subplots(len(shown), 1, squeeze=False, sharex=True, sharey=True)
        bar = 0.8 / max(nrow, 1)
        lo, hi = math.inf, 0.0
        for ax, p in zip(axes[:, 0], shown, strict=True):
            for i in range(nrow):
                xs, ys = [], []
                for j in range(len(p.col_labels)):
                    c = p.cell(i, j)
                    if c is None or not math.isfinite(c.value):
                        continue
                    xs.append(j + (i - (nrow - 1) / 2) * bar)
                    ys.append(_us(c.value))
                    lo, hi = min(lo, ys[-1]), max(hi, ys[-1])
                style = i % len(SETUP_COLOURS)
                ax.bar(
                    xs,
                    ys,
                    bar * 0.9,
                    color=SETUP_COLOURS[style],
                    hatch=SETUP_HATCHES[style],
                    edgecolor="#202020",
                    linewidth=0.6,
                )
            ax.set_yscale("log")
            ax.set_ylabel(f"{p.spec.stat_name} (µs, log)")
            ax.set_title(p.spec.title)
            ax.grid(axis="x", visible=False)
            worst = max(
                (c for c in p.cells.values() if math.isfinite(c.value)),
                key=lambda c: c.value,
                default=None,
            )
            if worst is not None:
                alt.append(f"{p.spec.stat_name}: highest {format_ns(worst.value)} ({worst.case})")
        last = axes[-1, 0]
        ticks = [first.label(c) for c in first.col_labels]
        crowded = sum(len(t) for t in ticks) * 0.08 > width - 1.0
        last.set_xticks(
            range(ncol), ticks, rotation=25 if crowded else 0, ha="right" if crowded else "center"
        )
        last.set_xlabel(" + ".join(first.spec.cols))
        if hi > 0:
            axes[0, 0].set_ylim(max(lo, 0.001) / 1.5, hi * 1.5)
            _log_us(axes[0, 0].yaxis, max(lo, 0.001), hi)
        handles = [
            Patch(
                facecolor=SETUP_COLOURS[i % len(SETUP_COLOURS)],
                hatch=SETUP_HATCHES[i % len(SETUP_HATCHES)],
                edgecolor="#202020",
                label=first.label(r),
            )
            for i, r in enumerate(first.row_labels)
        ]
        fig.legend(handles=handles, loc="outside upper center", ncols=legend_cols)
    text = (
        f"Bar chart of {', '.join(p.spec.stat_name for p in shown)} in µs on a log scale, "
        f"one group of bars per {' + '.join(first.spec.cols)}, one bar per "
        f"{' + '.join(first.spec.rows)}: " + "; ".join(alt) + "."
    )
    return Plot(fig, f"{' and '.join(p.spec.stat_name for p in shown)} per setup", text)


def overlay_plot(before: ExperimentData, after: ExperimentData) -> Plot | None:
    """Exceedance curves (1 - CDF) of BEFORE and AFTER on one log-log axis per case both
    finished (matched by series and case name), at most `MAX_OVERLAYS` panels."""
    found = {(c.series, c.name): c for c in after.cases()}
    pairs = [(a, found[(a.series, a.name)]) for a in before.cases() if (a.series, a.name) in found]
    pairs = [(a, b) for a, b in pairs if a.stats.count and b.stats.count]
    if not pairs:
        return None
    left_out = max(0, len(pairs) - MAX_OVERLAYS)
    pairs = pairs[:MAX_OVERLAYS]
    alt: list[str] = []
    with _style():
        nrows, ncols = _grid(len(pairs), 3)
        fig = _figure(3.6 * ncols + 0.4, 2.8 * nrows + 0.8)
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
        lo, hi = math.inf, 0.0
        for ax, (a, b) in zip(axes.flat, pairs, strict=False):
            for k, (e, c) in enumerate(((before, a), (after, b))):
                x, y = _survival(c)
                if not x.size:
                    continue
                xs = np.maximum(x, 1.0) / 1000.0
                ax.step(
                    xs,
                    y,
                    where="post",
                    color=OVERLAY_COLOURS[k],
                    linestyle="--" if k else "-",
                    linewidth=1.4,
                    label=e.setup,
                )
                lo, hi = min(lo, float(xs.min())), max(hi, float(xs.max()))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{a.series}: {a.name}" if a.name != a.series else a.series)
            alt.append(
                f"{a.series} {a.label}: max {format_ns(a.stats.max)} -> {format_ns(b.stats.max)}"
                f", p99 {format_ns(a.stats.p99)} -> {format_ns(b.stats.p99)}"
            )
        _hide_unused(axes, len(pairs))
        for row in axes:
            row[0].set_ylabel("P(latency ≥ x)")
        for ax in axes[-1]:
            ax.set_xlabel("latency (µs, log)")
        if hi > 0:
            _log_us(axes[0][0].xaxis, max(lo, 0.001), hi)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside upper center", ncols=2)
    text = (
        f"Exceedance curves of {before.setup} (before, solid) and {after.setup} (after, dashed)"
        " overlaid, one log-log panel per case both ran: " + "; ".join(alt) + "."
    )
    if left_out:
        text += f" {left_out} more matched cases are not drawn."
    return Plot(fig, f"Before and after: {before.setup} against {after.setup}", text)


def box_plots_per_setup(exps: Sequence[ExperimentData]) -> list[tuple[ExperimentData, Plot]]:
    """One box-plot figure per setup (its series as panels), for comparing kernels panel by
    panel rather than side by side."""
    out = []
    for e in exps:
        if any(s.cases for s in e.series):
            plot = box_plot([e])
            plot.title = f"{e.setup}: {plot.title}"
            out.append((e, plot))
    return out
