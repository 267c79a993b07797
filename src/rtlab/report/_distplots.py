"""Box plots against load and per-thread latency histograms."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.artist import Artist
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from rtlab.analysis import Histogram, bucket_bounds, bucket_index
from rtlab.errors import UserError
from rtlab.report._data import ExperimentData
from rtlab.report._style import (
    DEADLINE_COLOUR,
    SETUP_COLOURS,
    SETUP_HATCHES,
    SETUP_MARKERS,
    Grid,
    Plot,
    _case_styles,
    _data,
    _deadline_ns,
    _figure,
    _find,
    _grid,
    _hide_unused,
    _log_us,
    _series_names,
    _style,
    _us,
    case_title,
    x_label,
)
from rtlab.store import ExperimentRecord
from rtlab.units import format_ns

# -- box plots ---------------------------------------------------------------


def box_plot(
    exps: Sequence[ExperimentData | ExperimentRecord],
    series: str | None = None,
    deadline_ns: int | None = None,
) -> Plot:
    """Latency against the number of load processes, one log-scale panel per series.

    Tukey boxes: quartile box, median line, whiskers at the most extreme data within
    1.5 IQR, outliers as dots. Several experiments share the panels (side by side, one
    face colour and hatch per setup) and the y axis.
    """
    data = _data(exps)
    names = _series_names(data, series)
    dl = _deadline_ns(data, deadline_ns)
    with _style():
        nrows, ncols = _grid(len(names))
        fig = _figure(3.9 * ncols + 0.5, 3.3 * nrows + (0.9 if len(data) > 1 else 0.5))
        axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False)
        k = len(data)
        width = 0.8 / k
        lo, hi = math.inf, 0.0
        alt: list[str] = []
        for ax, name in zip(axes.flat, names, strict=False):
            cats: list[str] = []
            key = None
            for e in data:
                s = _find(e, name)
                if s is None:
                    continue
                key = key or s.x_key
                for c in s.cases:
                    if c.label not in cats:
                        cats.append(c.label)
            for j, e in enumerate(data):
                s = _find(e, name)
                if s is None:
                    continue
                cases = [c for c in s.cases if c.stats.count > 0]
                boxes = [
                    {
                        "med": _us(c.stats.median),
                        "q1": _us(c.stats.q1),
                        "q3": _us(c.stats.q3),
                        "whislo": _us(c.stats.whisker_low),
                        "whishi": _us(c.stats.whisker_high),
                        "fliers": np.maximum(c.outliers, 1) / 1000.0,
                        "label": c.label,
                    }
                    for c in cases
                ]
                if not boxes:
                    continue
                pos = [cats.index(c.label) + (j - (k - 1) / 2) * width for c in cases]
                style = j % len(SETUP_COLOURS)
                ax.bxp(
                    boxes,
                    positions=pos,
                    widths=width * 0.8,
                    patch_artist=True,
                    manage_ticks=False,
                    boxprops={
                        "facecolor": SETUP_COLOURS[style],
                        "hatch": SETUP_HATCHES[style],
                        "edgecolor": "#202020",
                        "linewidth": 0.8,
                    },
                    medianprops={"color": "black", "linewidth": 1.6},
                    whiskerprops={"color": "#202020", "linewidth": 0.8},
                    capprops={"color": "#202020", "linewidth": 0.8},
                    flierprops={
                        "marker": SETUP_MARKERS[style],
                        "markersize": 2.5,
                        "markerfacecolor": SETUP_COLOURS[style],
                        "markeredgecolor": "#202020",
                        "markeredgewidth": 0.4,
                        "alpha": 0.8,
                    },
                )
                for c in cases:
                    lo = min(lo, _us(c.stats.min))
                    hi = max(hi, _us(c.stats.max))
                src = {c.outlier_source for c in cases}
                alt.append(
                    f"{name}"
                    + (f" ({e.setup})" if k > 1 else "")
                    + f": median {format_ns(cases[0].stats.median)} at {cases[0].label}"
                    f" to {format_ns(cases[-1].stats.median)} at {cases[-1].label},"
                    f" largest whisker {format_ns(max(c.stats.whisker_high for c in cases))},"
                    f" worst max {format_ns(max(c.stats.max for c in cases))};"
                    f" outliers {' and '.join(_SOURCE_WORDS[x] for x in sorted(src))}"
                )
            ax.set_xticks(range(len(cats)), cats)
            ax.set_xlim(-0.6, len(cats) - 0.4)
            ax.set_xlabel(x_label(key))
            ax.set_title(name)
            ax.set_yscale("log")
            ax.grid(axis="x", visible=False)
            if dl is not None:
                ax.axhline(_us(dl), color=DEADLINE_COLOUR, linestyle="--", linewidth=1.0)
                hi = max(hi, _us(dl))
                lo = min(lo, _us(dl))
        _hide_unused(axes, len(names))
        for row in axes:
            row[0].set_ylabel("latency (µs, log scale)")
        if hi > 0:
            lo = max(lo, 0.001)  # a log axis in µs: latencies of 0 ns sit at its floor
            axes[0][0].set_ylim(lo / 1.5, hi * 1.5)
            _log_us(axes[0][0].yaxis, lo, hi)
        handles: list[Artist] = []
        if k > 1:
            handles += [
                Patch(
                    facecolor=SETUP_COLOURS[j % len(SETUP_COLOURS)],
                    hatch=SETUP_HATCHES[j % len(SETUP_HATCHES)],
                    edgecolor="#202020",
                    label=e.setup,
                )
                for j, e in enumerate(data)
            ]
        if dl is not None:
            handles.append(
                Line2D([], [], color=DEADLINE_COLOUR, ls="--", label=f"deadline {format_ns(dl)}")
            )
        if handles:
            fig.legend(handles=handles, loc="outside upper center", ncols=min(len(handles), 4))
    title = "Latency against load" + (f": {names[0]}" if len(names) == 1 else "")
    text = (
        "Box plots of wake-up latency in µs on a log scale against "
        f"{x_label(key).lower()}, one panel per series: boxes span the quartiles, the "
        "line is the median, whiskers reach the most extreme sample within 1.5 IQR and "
        "dots are the outliers beyond. " + "; ".join(alt) + "."
    )
    if dl is not None:
        text += f" The dashed line is the deadline, {format_ns(dl)}."
    return Plot(fig, title, text)


_SOURCE_WORDS = {
    "raw": "from the raw samples",
    "histogram": "from histogram buckets (midpoints) and the worst samples kept by the probe",
}


# -- histograms ----------------------------------------------------------------


def _dense(hist: Histogram) -> tuple[np.ndarray, np.ndarray]:
    """Contiguous bucket edges (ns) and counts from the first to the last non-empty bucket."""
    if hist.lower.size == 0:
        return np.empty(0), np.empty(0)
    if not hist.is_probe_geometry():
        edges = np.concatenate([hist.lower, [hist.upper[-1] + 1]]).astype(float)
        return edges, hist.count.astype(float)
    idx = bucket_index(hist.lower)
    span = np.arange(idx[0], idx[-1] + 1)
    lower, upper = bucket_bounds(span)
    counts = np.zeros(span.size)
    counts[idx - idx[0]] = hist.count
    return np.concatenate([lower, [upper[-1] + 1]]).astype(float), counts


def histogram_plot(
    exp: ExperimentData | ExperimentRecord,
    series: str | None = None,
    deadline_ns: int | None = None,
    case: str | None = None,
) -> Plot:
    """Latency histograms per measuring thread, one panel per case, log counts, max marked.

    The x axis is log-scaled µs; each bar is one of the probe's buckets (0.78 % of its
    value wide), so the curve's shape is the density on that log axis.
    """
    (data,) = _data([exp])
    name = series or _series_names([data], None)[0]
    s = _find(data, name)
    if s is None:
        _series_names([data], name)  # raises naming the known series
        raise UserError(f"no finished series {name!r}")
    cases = s.cases
    if case is not None:
        cases = [c for c in cases if case in (c.case.name, c.label)]
        if not cases:
            raise UserError(
                f"no case {case!r} in series {name!r} "
                f"(cases: {', '.join(c.label for c in s.cases)})"
            )
    dl = _deadline_ns([data], deadline_ns)
    nthreads = max((len(c.threads) for c in cases), default=1)
    styles = _case_styles(nthreads)
    with _style():
        nrows, ncols = _grid(len(cases))
        grid = Grid(nrows, ncols)
        if ncols == 1:
            grid.panel_w = 5.5  # room for the title and the legend above the one panel
        fig = grid.figure()
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
        lo, hi, top = math.inf, 0.0, 1.0
        alt = []
        for ax, c in zip(axes.flat, cases, strict=False):
            for t, st in zip(c.threads, styles, strict=False):
                edges, counts = _dense(t.hist)
                if not counts.size:
                    continue
                label = f"thread {t.index}" + (f" (CPU {t.cpu})" if t.cpu is not None else "")
                # a step line is far cheaper to lay out than a StepPatch
                ax.plot(
                    edges / 1000.0,
                    np.append(np.where(counts > 0, counts, 0.5), 0.5),
                    drawstyle="steps-post",
                    color=st["color"],
                    linestyle=st["linestyle"],
                    linewidth=1.0,
                    label=label,
                )
                if t.max_ns is not None:
                    ax.plot(
                        [_us(t.max_ns)],
                        [1.0],
                        marker=st["marker"],
                        color=st["color"],
                        markersize=4,
                        linestyle="none",
                    )
                lo = min(lo, edges[0] / 1000.0)
                top = max(top, float(counts.max()))
            mx = c.stats.max
            if c.stats.count:
                hi = max(hi, _us(mx))
                ax.axvline(_us(mx), color="black", linestyle=":", linewidth=0.9)
                ax.text(
                    _us(mx),
                    0.96,
                    f"max {format_ns(mx)} ",
                    transform=ax.get_xaxis_transform(),
                    rotation=90,
                    ha="right",
                    va="top",
                    fontsize=7.5,
                    bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 0.5},
                )
            if dl is not None:
                ax.axvline(_us(dl), color=DEADLINE_COLOUR, linestyle="--", linewidth=1.0)
                hi = max(hi, _us(dl))
            ax.set_title(case_title(s, c), fontsize=9)
            ax.set_xscale("log")
            ax.set_yscale("log")
            alt.append(
                f"{case_title(s, c)}: {c.stats.count} samples, median "
                f"{format_ns(c.stats.median)}, max {format_ns(mx)}"
            )
        _hide_unused(axes, len(cases))
        if hi > 0 and lo < math.inf:
            axes[0][0].set_xlim(max(lo, 1e-3) / 1.2, hi * 1.6)
            _log_us(axes[0][0].xaxis, lo, hi)
        axes[0][0].set_ylim(0.7, top * 3)
        for ax in axes[-1]:
            ax.set_xlabel("latency (µs, log scale)")
        for ax in axes.flat[(nrows - 1) * ncols : len(cases)]:
            ax.set_xlabel("latency (µs, log scale)")
        for row in axes:
            row[0].set_ylabel("samples per bucket")
        if nthreads > 1:
            fig.legend(
                *axes[0][0].get_legend_handles_labels(),
                loc="upper right",
                bbox_to_anchor=(1 - 0.1 / grid.width, 1 - 0.05 / grid.height),
                ncols=min(nthreads, 4),
            )
        fig.suptitle(
            f"{name} — {data.setup}",
            x=grid.left / grid.width,
            y=1 - 0.12 / grid.height,
            ha="left",
            va="top",
            fontsize=11,
        )
    title = f"Latency histograms: {name} — {data.setup}"
    text = (
        f"Histograms of wake-up latency for series {name}, one panel per case and one line "
        "per measuring thread; x: latency in µs (log scale), y: samples per histogram "
        "bucket (log scale; each bucket is 0.78 % of its value wide). The dotted line and "
        "its label mark each case's maximum"
        + (f", the dashed line the deadline ({format_ns(dl)})" if dl is not None else "")
        + ". "
        + "; ".join(alt)
        + "."
    )
    return Plot(fig, title, text)
