"""Shared look of rtlab plots: matplotlib settings, greyscale-safe styles, µs log axes."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib import rc_context
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import (
    FuncFormatter,
    LogFormatter,
    LogLocator,
    NullFormatter,
    NullLocator,
)

from rtlab.errors import UserError
from rtlab.probe import one_line
from rtlab.report._data import LOAD_KEY, CaseData, ExperimentData, SeriesData, collect
from rtlab.store import ExperimentRecord

if TYPE_CHECKING:  # the names rc_context knows: a misspelt setting is a type error
    from matplotlib.typing import RcKeyType

RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",  # text stays text: small, searchable, escaped by matplotlib
    "svg.hashsalt": "rtlab",  # the same data gives the same file
    "text.parse_math": False,  # names from the measured system are text, never TeX
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.grid": True,
    "grid.alpha": 0.35,
    "grid.linewidth": 0.5,
    "legend.fontsize": 8,
    "legend.framealpha": 0.85,
    "savefig.dpi": 150,
}

# Setups (experiments): face colours of distinct lightness, hatches and markers.
SETUP_COLOURS = ["#a6cee3", "#e66101", "#33a02c", "#5e3c99", "#fdb863", "#404040"]
SETUP_HATCHES = ["", "////", "....", "xxxx", "\\\\\\\\", "++"]
SETUP_MARKERS = ["o", "s", "^", "D", "v", "P"]
# Cases and threads: line styles and markers on top of a lightness-ordered colour map.
LINESTYLES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*", "h", "<", ">"]
DEADLINE_COLOUR = "#b2182b"


@dataclass
class Plot:
    figure: Figure
    title: str
    alt: str  # text alternative: what the figure shows, in words and numbers


@contextmanager
def _style() -> Iterator[None]:
    with rc_context(RC):
        yield


def _figure(width_in: float, height_in: float, constrained: bool = True) -> Figure:
    fig = Figure(figsize=(width_in, height_in), layout="constrained" if constrained else None)
    FigureCanvasAgg(fig)
    return fig


@dataclass
class Grid:
    """A fixed layout of equal panels in inches: cheaper to draw than a constrained one
    (which measures every tick label of every panel), for many small panels."""

    nrows: int
    ncols: int
    panel_w: float = 3.3
    panel_h: float = 1.9
    left: float = 0.8
    right: float = 0.2
    top: float = 0.8
    bottom: float = 0.6
    wgap: float = 0.25
    hgap: float = 0.45

    @property
    def width(self) -> float:
        return self.left + self.right + self.ncols * self.panel_w + (self.ncols - 1) * self.wgap

    @property
    def height(self) -> float:
        return self.top + self.bottom + self.nrows * self.panel_h + (self.nrows - 1) * self.hgap

    def figure(self) -> Figure:
        fig = _figure(self.width, self.height, constrained=False)
        fig.subplots_adjust(
            left=self.left / self.width,
            right=1 - self.right / self.width,
            top=1 - self.top / self.height,
            bottom=self.bottom / self.height,
            wspace=self.wgap / self.panel_w,
            hspace=self.hgap / self.panel_h,
        )
        return fig


def _data(exps: Sequence[ExperimentData | ExperimentRecord]) -> list[ExperimentData]:
    if all(isinstance(e, ExperimentData) for e in exps):
        return list(exps)  # type: ignore[arg-type]
    recs = [e.rec if isinstance(e, ExperimentData) else e for e in exps]
    return collect(recs)


def _us(ns: float) -> float:
    return max(float(ns), 1.0) / 1000.0  # log axes: never below 1 ns


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _tick(v: float, _pos: object = None) -> str:
    """Plain tick labels (no TeX): 1, 20, 1,000; below 1 powers of ten as 10⁻³."""
    if v >= 1:
        return f"{v:,.0f}"
    if v <= 0:
        return "0"
    e = math.log10(v)
    if abs(e - round(e)) < 1e-9:
        return "10" + str(round(e)).translate(_SUPERSCRIPT)
    return f"{v:g}"


def _log_us(axis: Axis, lo_us: float, hi_us: float) -> None:
    """A log axis in µs with plain-number labels; 1-2-5 ticks when it spans little."""
    subs = (1.0, 2.0, 5.0) if hi_us / max(lo_us, 1e-3) < 40 else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs))
    axis.set_major_formatter(FuncFormatter(_tick))
    axis.set_minor_formatter(NullFormatter())


def lean(fig: Figure) -> None:
    """No minor ticks on log axes (they add nothing the grid does not and cost most of
    the drawing time), no repeated inner tick labels, no raw control characters."""
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() == "log":
                axis.set_minor_locator(NullLocator())
                if isinstance(axis.get_major_formatter(), LogFormatter):
                    axis.set_major_formatter(FuncFormatter(_tick))
    for ax in fig.axes:  # shared axes: inner tick labels repeat the outer ones
        ss = ax.get_subplotspec()
        if ss is not None and ax.get_visible():
            if ax.get_shared_x_axes().get_siblings(ax) != [ax] and not ss.is_last_row():
                below = [
                    o
                    for o in ax.get_shared_x_axes().get_siblings(ax)
                    if o.get_visible()
                    and o.get_subplotspec().rowspan.start > ss.rowspan.start
                    and o.get_subplotspec().colspan.start == ss.colspan.start
                ]
                if below:
                    ax.tick_params(axis="x", labelbottom=False)
            if ax.get_shared_y_axes().get_siblings(ax) != [ax] and not ss.is_first_col():
                ax.tick_params(axis="y", labelleft=False)
    for text in fig.findobj(Text):  # names from files and systems: control characters shown
        shown = one_line(text.get_text())
        if shown != text.get_text():
            text.set_text(shown)


def x_label(key: str | None) -> str:
    if key == LOAD_KEY:
        return "fork-copy load processes"
    return key or "case"


def case_title(series: SeriesData, case: CaseData) -> str:
    if series.x_key == LOAD_KEY and case.load_value() is not None:
        n = case.load_value()
        return f"{n} load process" + ("" if n == 1 else "es")
    return case.case.name


def _series_names(exps: list[ExperimentData], wanted: str | None) -> list[str]:
    names: list[str] = []
    for e in exps:
        for s in e.series:
            if s.cases and s.name not in names:
                names.append(s.name)
    if wanted is not None:
        if wanted not in names:
            raise UserError(f"no finished series {wanted!r} (series: {', '.join(names) or 'none'})")
        return [wanted]
    return names


def _find(exp: ExperimentData, name: str) -> SeriesData | None:
    return next((s for s in exp.series if s.name == name and s.cases), None)


def _grid(n: int, cols: int = 3) -> tuple[int, int]:
    ncols = max(1, min(n, cols))
    return math.ceil(n / ncols), ncols


def _hide_unused(axes: np.ndarray, n: int) -> None:
    for ax in axes.flat[n:]:
        ax.set_visible(False)


def _deadline_ns(exps: list[ExperimentData], deadline_ns: int | None) -> int | None:
    if deadline_ns is not None:
        return deadline_ns
    dls = {e.deadline_ns for e in exps if e.deadline_ns is not None}
    return dls.pop() if len(dls) == 1 else None


def _case_styles(n: int) -> list[dict[str, Any]]:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]  # lightness rises monotonically: ordered in greyscale too
    return [
        {
            "color": cmap(0.82 * i / max(n - 1, 1)),
            "linestyle": LINESTYLES[i % len(LINESTYLES)],
            "marker": MARKERS[i % len(MARKERS)],
        }
        for i in range(n)
    ]
