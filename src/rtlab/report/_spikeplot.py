"""The timeline of one explained spike: what ran on the CPU from before the intended
activation until the late wake-up, one lane per thread, interrupt, softirq or timer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from rtlab.analysis import (
    UNEXPLAINED,
    describe,
    related_findings,
    segments,
    unexplained_parts,
)
from rtlab.probe import one_line
from rtlab.report._style import DEADLINE_COLOUR, Plot, _figure, _style
from rtlab.units import format_ns

#: Face colour and hatch per segment kind: told apart in greyscale print by the hatch.
KIND_STYLE: dict[str, tuple[str, str]] = {
    "self": ("#5e3c99", ""),
    "thread": ("#e66101", ""),
    "irq": ("#1f78b4", "////"),
    "softirq": ("#a6cee3", "...."),
    "timer": ("#33a02c", "xxxx"),
    "idle": ("#e0e0e0", ""),
    "unknown": ("#bdbdbd", ""),
    UNEXPLAINED: ("#ffffff", "\\\\\\\\"),
    "other": ("#fdb863", "++"),
}
KIND_LABEL = {"self": "measuring thread"}
MAX_LABEL = 44  # characters of a lane label; longer ones lose their middle
WAKE_COLOUR = "#1b7837"


def lane_label(seg: Mapping[str, Any]) -> str:
    """The lane a segment is drawn in: "thread spin (PID 123)", "irq 24 eth0", ...
    (control characters escaped: tick labels are drawn from these strings)."""
    text = describe(seg)
    if seg.get("kind") in ("thread", "self") and seg.get("pid") is not None:
        text += f" (PID {seg['pid']})"
    text = one_line(text)
    return (
        text
        if len(text) <= MAX_LABEL
        else text[: MAX_LABEL // 2 - 1] + "…" + text[-(MAX_LABEL // 2) :]
    )


def _lanes(segs: list[dict[str, Any]]) -> list[str]:
    """Lanes in the order they first appear; unexplained time last."""
    order: list[str] = []
    for s in segs:
        label = lane_label(s)
        if label not in order and s.get("kind") != UNEXPLAINED:
            order.append(label)
    if any(s.get("kind") == UNEXPLAINED for s in segs):
        order.append(UNEXPLAINED)
    return order


def _layout(lanes: list[str], legend_rows: int) -> Figure:
    """A fixed layout (a constrained one costs twice the drawing time): the left margin
    fits the longest lane label, the right one the legend, the height both."""
    left = 0.3 + 0.08 * max((len(x) for x in lanes), default=4)
    right, top, bottom = 1.75, 0.4, 0.6
    height = max(0.34 * max(len(lanes), 1), 0.16 * legend_rows)
    fig = _figure(left + 5.2 + right, top + height + bottom, constrained=False)
    w, h = left + 5.2 + right, top + height + bottom
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h)
    return fig


def spike_plot(
    spike: Mapping[str, Any],
    title: str,
    deadline_ns: int | None = None,
    findings: Sequence[Mapping[str, Any]] | None = None,
) -> Plot:
    """The spike's timeline in µs relative to the intended activation: one lane per
    thread, IRQ, softirq, timer, idle and unexplained time; vertical lines at the
    activation (0), the deadline when given and the wake-up (the spike's latency)."""
    latency = int(spike.get("latency_ns") or 0)
    segs = segments(spike)
    lanes = _lanes(segs)
    woken = spike.get("woken_ns")
    kinds_drawn = {str(s.get("kind") or "other") for s in segs}
    with _style():
        fig = _layout(lanes, 4 + len(kinds_drawn))
        ax = fig.subplots()
        used: dict[str, str] = {}
        for s in segs:
            kind = str(s.get("kind") or "other")
            face, hatch = KIND_STYLE.get(kind, KIND_STYLE["other"])
            y = lanes.index(lane_label(s))
            ax.broken_barh(
                [(s["start_ns"] / 1000.0, (s["end_ns"] - s["start_ns"]) / 1000.0)],
                (y - 0.36, 0.72),
                facecolors=face,
                edgecolors="#303030",
                hatch=hatch,
                linewidth=0.5,
            )
            used.setdefault(kind, face)
        lo = min([0.0] + [s["start_ns"] / 1000.0 for s in segs])
        hi = max([latency / 1000.0] + [s["end_ns"] / 1000.0 for s in segs])
        marks = [Line2D([], [], color="black", linewidth=1.2, label="activation (0)")]
        ax.axvline(0.0, color="black", linewidth=1.2)
        if isinstance(woken, int) and 0 < woken < latency:
            ax.axvline(woken / 1000.0, color="#606060", linestyle=":", linewidth=1.0)
            marks.append(
                Line2D([], [], color="#606060", linestyle=":", label=f"woken {format_ns(woken)}")
            )
        ax.axvline(latency / 1000.0, color=WAKE_COLOUR, linestyle="-.", linewidth=1.2)
        marks.append(
            Line2D([], [], color=WAKE_COLOUR, linestyle="-.", label=f"wake-up {format_ns(latency)}")
        )
        dl_note = ""
        if deadline_ns is not None:
            if deadline_ns / 1000.0 <= max(hi, 1e-3) * 1.5:
                ax.axvline(deadline_ns / 1000.0, color=DEADLINE_COLOUR, linestyle="--")
                hi = max(hi, deadline_ns / 1000.0)
                marks.append(
                    Line2D(
                        [],
                        [],
                        color=DEADLINE_COLOUR,
                        linestyle="--",
                        label=f"deadline {format_ns(deadline_ns)}",
                    )
                )
            else:
                dl_note = f" (the deadline, {format_ns(deadline_ns)}, is beyond the window)"
        pad = 0.03 * (hi - lo or 1.0)
        ax.set_xlim(lo - pad, hi + pad)
        ax.set_ylim(len(lanes) - 0.5, -0.5)  # first lane on top
        ax.set_yticks(range(len(lanes)), lanes)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("µs relative to the intended activation" + dl_note)
        ax.set_title(str(spike.get("verdict") or ""), fontsize=9, loc="left")
        kinds = [Patch(facecolor=f, edgecolor="#303030", hatch=KIND_STYLE.get(k, ("", ""))[1],
                       label=KIND_LABEL.get(k, k)) for k, f in used.items()]  # fmt: skip
        ax.legend(
            handles=marks + kinds,
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            fontsize=7,
            borderaxespad=0,
        )
    return Plot(fig, one_line(title), one_line(_alt(spike, lanes, deadline_ns, findings)))


def _alt(
    spike: Mapping[str, Any],
    lanes: list[str],
    deadline_ns: int | None,
    findings: Sequence[Mapping[str, Any]] | None,
) -> str:
    latency = int(spike.get("latency_ns") or 0)
    causes = [c for c in spike.get("causes") or [] if isinstance(c, Mapping)]
    parts = [f"{describe(c)} {format_ns(c.get('ns'))}" for c in causes]
    parts += [f"{describe(c)} {format_ns(c['ns'])}" for c in unexplained_parts(spike)]
    text = (
        f"Timeline of a wake-up {format_ns(latency)} late (cycle {spike.get('cycle')}, "
        f"CPU {spike.get('cpu')}): {spike.get('verdict') or 'no verdict'}. Causes: "
        + ", ".join(parts)
        + ". Lanes: "
        + ", ".join(lanes)
        + "; x in µs relative to the intended activation, lines at the activation (0), "
        + (f"the deadline ({format_ns(deadline_ns)}), " if deadline_ns is not None else "")
        + "and the wake-up."
    )
    if spike.get("events_lost"):
        text += " Trace events were lost around this spike."
    if spike.get("window_truncated"):
        text += " The look-back window was cut short."
    seen: dict[str, Mapping[str, Any]] = {}  # the most direct finding of each cause
    for c in [*causes, *unexplained_parts(spike)]:
        found = related_findings(c, findings)
        if found:
            seen.setdefault(str(found[0].get("id")), found[0])
    if seen:
        text += " Related audit findings: " + "; ".join(
            f"{i} {f.get('status')} ({f.get('title')})" for i, f in seen.items()
        )
        text += "."
    return text
