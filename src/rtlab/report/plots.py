"""Reusable latency plots (matplotlib, no display): box plots against load, per-thread
histograms, exceedance (1 - CDF), latency over time and the timeline of an explained spike.

Every function takes stored experiments (`ExperimentRecord`s, or the `ExperimentData`
that `rtlab.report.collect` reads once for many plots; `spike_plot` one spike of a
document) and returns a `Plot`: the
matplotlib `Figure`, a title and a text alternative. `save(plot, "fig.svg")` writes SVG,
PNG or PDF; `to_svg(plot)` gives the SVG text that the HTML report inlines. Figures are
built without pyplot, on an Agg canvas, so nothing ever opens a window. Times are
plotted in µs; colours come with distinct markers, hatches and line styles so that
setups and cases stay apart in greyscale print.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from rtlab.errors import UserError
from rtlab.report._data import ExperimentData
from rtlab.report._distplots import box_plot, histogram_plot
from rtlab.report._spikeplot import spike_plot
from rtlab.report._style import Plot, _data, _style, lean
from rtlab.report._tailplots import exceedance_plot, timeline_plot
from rtlab.store import ExperimentRecord

__all__ = [
    "FORMATS",
    "KINDS",
    "Plot",
    "box_plot",
    "exceedance_plot",
    "figure_for",
    "histogram_plot",
    "save",
    "spike_plot",
    "timeline_plot",
    "to_svg",
]

#: File formats `save` writes, by file extension.
FORMATS = ("svg", "png", "pdf")
#: Plot kinds of `figure_for` (and `rtlab plot --kind`).
KINDS = ("box", "hist", "exceedance", "timeline")


# -- output -------------------------------------------------------------------------


def figure_for(
    kind: str,
    exps: Sequence[ExperimentData | ExperimentRecord],
    series: str | None = None,
    deadline_ns: int | None = None,
    case: str | None = None,
    pwcet_p: float | None = None,
) -> Plot:
    """The plot of KIND (one of `KINDS`) for the given experiments (PWCET_P: how far the
    exceedance plot draws fitted tails)."""
    data = _data(exps)
    if kind == "box":
        return box_plot(data, series, deadline_ns)
    if kind == "hist":
        return histogram_plot(data[0], series, deadline_ns, case)
    if kind == "exceedance":
        return exceedance_plot(data, series, deadline_ns, pwcet_p)
    if kind == "timeline":
        return timeline_plot(data, series, deadline_ns)
    raise UserError(f"unknown plot kind {kind!r} (one of {', '.join(KINDS)})")


def save(plot: Plot, path: str | Path) -> Path:
    """Write the figure as SVG, PNG or PDF (by extension), atomically."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise UserError(f"{path}: unknown figure format {fmt or '(none)'!r} (svg, png, pdf)")
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    try:
        lean(plot.figure)
        with _style():
            plot.figure.savefig(tmp, format=fmt, metadata=_metadata(fmt, plot))
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write ({e.strerror or e})") from None
    return path


def _metadata(fmt: str, plot: Plot) -> dict:
    if fmt == "svg":
        return {"Date": None, "Title": plot.title, "Description": plot.alt}
    if fmt == "pdf":
        return {"CreationDate": None, "ModDate": None, "Title": plot.title}
    return {"Title": plot.title, "Description": plot.alt}


# an id attribute inside a tag (text nodes have < and > escaped, attributes their quotes)
_ID = re.compile(r'(<[^<>]*?\s)id="([^"]+)"')


def to_svg(plot: Plot, prefix: str = "f") -> str:
    """The figure as an inline ``<svg>`` element for HTML: no XML prolog, ids prefixed
    with PREFIX (unique per page), a <title>/<desc> text alternative, scalable width."""
    import io

    from markupsafe import escape

    buf = io.StringIO()
    lean(plot.figure)
    with _style():
        plot.figure.savefig(buf, format="svg", metadata={"Date": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, count=1, flags=re.S)
    ids = {m.group(2) for m in _ID.finditer(svg)}
    svg = _ID.sub(lambda m: f'{m.group(1)}id="{prefix}-{m.group(2)}"', svg)
    svg = re.sub(
        r"url\(#([^)]+)\)",
        lambda m: f"url(#{prefix}-{m.group(1)})" if m.group(1) in ids else m.group(0),
        svg,
    )
    svg = re.sub(
        r'xlink:href="#([^"]+)"',
        lambda m: f'xlink:href="#{prefix}-{m.group(1)}"' if m.group(1) in ids else m.group(0),
        svg,
    )
    head_end = svg.index(">") + 1
    head = svg[:head_end]
    head = head.replace(
        "<svg ",
        f'<svg role="img" aria-labelledby="{prefix}-title {prefix}-desc" '
        'preserveAspectRatio="xMidYMid meet" ',
        1,
    )
    alt = (
        f'<title id="{prefix}-title">{escape(plot.title)}</title>'
        f'<desc id="{prefix}-desc">{escape(plot.alt)}</desc>'
    )
    return head + alt + svg[head_end:]
