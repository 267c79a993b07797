"""Exceedance (1 - CDF) and latency-over-time plots."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from matplotlib.lines import Line2D

from rtlab.analysis import p_text
from rtlab.report import _pwcet
from rtlab.report._data import CaseData, ExperimentData
from rtlab.report._style import (
    DEADLINE_COLOUR,
    Grid,
    Plot,
    _case_styles,
    _data,
    _deadline_ns,
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

# -- exceedance ------------------------------------------------------------------


def _survival(c: CaseData) -> tuple[np.ndarray, np.ndarray]:
    """(x ns, P(latency >= x)) at every bucket's lower bound, ending at the maximum."""
    h = c.hist
    n = h.total
    if n == 0 or h.lower.size == 0:
        return np.empty(0), np.empty(0)
    x = np.clip(h.lower, c.stats.min, c.stats.max).astype(float)
    before = np.concatenate([[0], np.cumsum(h.count)[:-1]])
    y = (n - before) / n
    return np.append(x, float(c.stats.max)), np.append(y, y[-1])


def exceedance_plot(
    exps: Sequence[ExperimentData | ExperimentRecord],
    series: str | None = None,
    deadline_ns: int | None = None,
    pwcet_p: float | None = None,
) -> Plot:
    """1 - CDF on log-log axes, every case of a series overlaid; one panel per experiment.

    Cases with a pWCET fit (collected with a deadline or a probability) also get the
    fitted tail (dashed) and its confidence band, down to PWCET_P (else the probability
    the experiments were collected with, else 1e-9)."""
    data = _data(exps)
    p_end = pwcet_p or next((e.pwcet_p for e in data if e.pwcet_p), None) or _pwcet.DEFAULT_P
    name = series or _series_names(data, None)[0]
    _series_names(data, name)
    dl = _deadline_ns(data, deadline_ns)
    panels = [(e, s) for e in data if (s := _find(e, name)) is not None]
    with _style():
        nrows, ncols = _grid(len(panels), 2)
        grid = Grid(nrows, ncols, panel_w=4.6, panel_h=3.0, left=0.95, right=1.9)
        grid.top = 0.75 if len(panels) > 1 else 0.45
        grid.hgap = 0.5
        grid.wgap = 0.3
        fig = grid.figure()
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
        lo, hi, floor = math.inf, 0.0, 1.0
        alt, fitted = [], []
        for ax, (e, s) in zip(axes.flat, panels, strict=False):
            styles = _case_styles(len(s.cases))
            for c, st in zip(s.cases, styles, strict=True):
                x, y = _survival(c)
                if not x.size:
                    continue
                ax.step(
                    x / 1000.0,
                    y,
                    where="post",
                    color=st["color"],
                    linestyle=st["linestyle"],
                    linewidth=1.1,
                    label=case_title(s, c),
                )
                ax.plot(
                    [x[-1] / 1000.0],
                    [y[-1]],
                    marker=st["marker"],
                    color=st["color"],
                    markersize=4,
                    linestyle="none",
                )
                lo, hi = min(lo, x[0] / 1000.0), max(hi, x[-1] / 1000.0)
                floor = min(floor, float(y[-1]))
                curve = _pwcet.fitted_curve(c.tail, p_end)
                if curve is not None:
                    ax.plot(curve.x / 1000.0, curve.p, color=st["color"],
                            linestyle=st["linestyle"], linewidth=0.7)  # fmt: skip
                    ax.fill_betweenx(curve.band_p, curve.lo / 1000.0, curve.hi / 1000.0,
                                     color=st["color"], alpha=0.15, linewidth=0)  # fmt: skip
                    hi = max(hi, float(np.nanmax(curve.hi)) / 1000.0)
                    floor = min(floor, p_end)
                    fitted.append(
                        f"{case_title(s, c)}: {format_ns(curve.value_ns)} at {p_text(p_end)} "
                        f"[{format_ns(curve.value_lo_ns)}, {format_ns(curve.value_hi_ns)}]"
                    )
            if dl is not None:
                ax.axvline(_us(dl), color=DEADLINE_COLOUR, linestyle="--", linewidth=1.0)
                hi = max(hi, _us(dl))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(e.setup if len(panels) > 1 else name)
            worst = max(s.cases, key=lambda c: c.stats.max)
            alt.append(
                (f"{e.setup}: " if len(panels) > 1 else "")
                + f"{len(s.cases)} cases, the longest tail at {case_title(s, worst)} "
                f"(max {format_ns(worst.stats.max)}, p99.9 {format_ns(worst.stats.p999)})"
            )
        _hide_unused(axes, len(panels))
        if hi > 0:
            lo = max(lo, 0.001)  # a log axis in µs: latencies of 0 ns sit at its floor
            axes[0][0].set_xlim(lo / 1.3, hi * 1.5)
            _log_us(axes[0][0].xaxis, lo, hi)
        axes[0][0].set_ylim(floor / 2.5, 1.6)
        for ax in axes[-1]:
            ax.set_xlabel("latency x (µs, log scale)")
        for row in axes:
            row[0].set_ylabel("P(latency ≥ x)  (1 − CDF)")
        seen: dict[str, Line2D] = {}  # one legend: line style and end marker per case
        if fitted:
            seen["fitted tail (thin), 90 % band"] = Line2D([], [], color="#606060", linewidth=0.7)
        for _, s in panels:
            for c, st in zip(s.cases, _case_styles(len(s.cases)), strict=True):
                seen.setdefault(
                    case_title(s, c),
                    Line2D([], [], color=st["color"], linestyle=st["linestyle"],
                           marker=st["marker"], markersize=4),
                )  # fmt: skip
        fig.legend(
            list(seen.values()),
            list(seen.keys()),
            loc="center right",
            bbox_to_anchor=(1 - 0.05 / grid.width, 0.5),
            fontsize=8,
        )
        if len(panels) > 1:
            fig.suptitle(name, y=1 - 0.1 / grid.height, va="top", fontsize=11)
    text = (
        f"Exceedance plot of series {name}: for each latency x in µs (log scale), the "
        "fraction of samples at or above x (log scale), one line per case; a curve further "
        "right means a longer tail; the marker ends each line at its maximum"
        + (f"; the dashed line is the deadline ({format_ns(dl)})" if dl is not None else "")
        + ". "
        + "; ".join(alt)
        + "."
        + (
            f" Dashed curves with shaded bands are the fitted extreme-value tails (pWCET) down "
            f"to {p_text(p_end)} per activation with their 90 % intervals: "
            + "; ".join(fitted)
            + "."
            if fitted
            else ""
        )
    )
    return Plot(fig, f"Exceedance (1 − CDF): {name}", text)


# -- latency over time ---------------------------------------------------------------


def _per_second(c: CaseData) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-second min, mean and max over the case's threads (ns, NaN for empty seconds)."""
    n = max((t.sec_min.size for t in c.threads), default=0)
    if n == 0:
        return np.empty(0), np.empty(0), np.empty(0)

    def stack(attr: str, fill: float) -> np.ndarray:
        out = np.full((len(c.threads), n), fill)
        for i, t in enumerate(c.threads):
            v = getattr(t, attr)
            out[i, : v.size] = v
        return out

    mins, maxs = stack("sec_min", np.nan), stack("sec_max", np.nan)
    means, counts = stack("sec_mean", np.nan), stack("sec_count", 0.0)
    counts = np.where(np.isnan(means), 0.0, counts)
    total = counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(total > 0, np.nansum(np.nan_to_num(means) * counts, axis=0) / total, np.nan)
        empty = np.all(np.isnan(mins), axis=0)
        lo = np.where(empty, np.nan, np.nanmin(np.where(np.isnan(mins), np.inf, mins), axis=0))
        hi = np.where(empty, np.nan, np.nanmax(np.where(np.isnan(maxs), -np.inf, maxs), axis=0))
    return lo, mean, hi


def timeline_plot(
    exps: Sequence[ExperimentData | ExperimentRecord],
    series: str | None = None,
    deadline_ns: int | None = None,
) -> Plot:
    """Per-second min-max band and mean of a series' cases, one after another in time.

    One row per experiment; crosses are the worst samples the probe kept, at their time.
    """
    data = _data(exps)
    name = series or _series_names(data, None)[0]
    _series_names(data, name)
    dl = _deadline_ns(data, deadline_ns)
    panels = [(e, s) for e in data if (s := _find(e, name)) is not None]
    with _style():
        grid = Grid(len(panels), 1, panel_w=9.4, panel_h=2.2, left=0.9, right=0.2)
        grid.top = 1.05 if len(panels) > 1 else 0.8
        grid.hgap = 1.0
        grid.bottom = 1.0
        fig = grid.figure()
        axes = fig.subplots(len(panels), 1, sharey=True, squeeze=False)[:, 0]
        lo, hi = math.inf, 0.0
        alt = []
        for ax, (e, s) in zip(axes, panels, strict=True):
            offset, mids, labels, bounds = 0.0, [], [], []
            worst_seen = None
            for i, c in enumerate(s.cases):
                mn, mean, mx = _per_second(c)
                length = c.elapsed_ns / 1e9 if c.elapsed_ns > 0 else max(float(mn.size), 1.0)
                if mn.size:
                    # second k spans [k, k + 1) s, the last one cut at the case's end
                    t = offset + np.minimum(np.arange(mn.size + 1), max(length, mn.size - 1))
                    ax.fill_between(
                        t,
                        np.append(np.fmax(mn, 1), np.fmax(mn[-1], 1)) / 1000.0,
                        np.append(np.fmax(mx, 1), np.fmax(mx[-1], 1)) / 1000.0,
                        step="post",
                        facecolor="#9ecae1",
                        edgecolor="#3182bd",
                        linewidth=0.4,
                        label="min–max per second" if i == 0 else None,
                    )
                    ax.step(
                        t,
                        np.append(np.fmax(mean, 1), np.fmax(mean[-1], 1)) / 1000.0,
                        where="post",
                        color="#08306b",
                        linewidth=1.2,
                        label="mean per second" if i == 0 else None,
                    )
                    lo = min(lo, float(np.nanmin(mn)) / 1000.0)
                    hi = max(hi, float(np.nanmax(mx)) / 1000.0)
                pts = [(w["t_ns"], w["latency_ns"]) for th in c.threads for w in th.worst]
                if pts:
                    wt, wl = np.array(pts, dtype=float).T
                    ax.plot(
                        offset + wt / 1e9,
                        np.maximum(wl, 1) / 1000.0,
                        "x",
                        color="black",
                        markersize=3.5,
                        markeredgewidth=0.8,
                        label="worst samples" if worst_seen is None else None,
                    )
                    worst_seen = True
                    hi = max(hi, float(wl.max()) / 1000.0)
                if i:
                    ax.axvline(offset, color="#606060", linestyle=":", linewidth=0.8)
                mids.append(offset + length / 2)
                labels.append(c.label)
                bounds.append(offset)
                offset += length
            if dl is not None:
                ax.axhline(
                    _us(dl),
                    color=DEADLINE_COLOUR,
                    linestyle="--",
                    linewidth=1.0,
                    label=f"deadline {format_ns(dl)}",
                )
                hi, lo = max(hi, _us(dl)), min(lo, _us(dl))
            ax.set_xlim(0, max(offset, 1.0))
            ax.set_yscale("log")
            ax.set_ylabel("latency (µs, log scale)")
            ax.set_title(e.setup if len(panels) > 1 else name, loc="left")
            top = ax.secondary_xaxis("top")
            top.set_xticks(mids, labels)
            top.tick_params(length=0, labelsize=8)
            top.set_xlabel(x_label(s.x_key), fontsize=8)
            alt.append(
                (f"{e.setup}: " if len(panels) > 1 else "")
                + f"{len(s.cases)} cases over {offset:.0f} s"
            )
        if hi > 0:
            lo = max(lo, 0.001)  # a log axis in µs: latencies of 0 ns sit at its floor
            axes[0].set_ylim(lo / 1.5, hi * 4)
            _log_us(axes[0].yaxis, lo, hi)
        axes[-1].set_xlabel("measuring time (s), the cases one after another")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncols=4, bbox_to_anchor=(0.5, 0.0))
        if len(panels) > 1:
            fig.suptitle(name, y=1 - 0.08 / grid.height, va="top", fontsize=11)
    text = (
        f"Latency over time for series {name}: the cases one after another on a time axis "
        "in seconds, their swept values above; the shaded band spans each second's minimum "
        "to maximum latency (µs, log scale), the line is each second's mean and crosses "
        "are the worst samples the probe kept. " + "; ".join(alt) + "."
    )
    return Plot(fig, f"Latency over time: {name}", text)
