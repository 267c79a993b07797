"""What each meter's question needs beside the latency statistics: one view per meter.

    periodic   which periodic mechanism should my control loop use?
               latency percentiles, CPU cost per activation, overruns, drift
    response   how fast does my handler react to an event?
               latency percentiles, lost events, the highest sustained rate
    noise      how much of my CPU does the OS steal?  one row per CPU:
               % stolen, noise per second, the longest gap, real-time throttling

`meter_rows(doc)` turns one result document into the rows of its meter's view;
`show`, `compare` and the report print them with the view's columns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rtlab.units import format_ns


@dataclass(frozen=True)
class Column:
    key: str  # key of a row
    label: str  # table header
    unit: str  # "ns", "count", "pct", "per_s", "text"
    doc: str

    def format(self, value: Any) -> str:
        """VALUE as a table cell in this column's unit; "-" when unknown."""
        v = _num(value) if self.unit != "text" else value
        if v is None:
            return "-"
        if self.unit == "ns":
            return format_ns(v)
        if self.unit == "pct":
            return f"{v:.3g} %"
        if self.unit == "per_s":
            return f"{v:,.0f}"
        if self.unit == "count":
            return str(int(v))
        return str(v)


@dataclass(frozen=True)
class MeterView:
    meter: str
    title: str
    question: str
    per_thread: bool  # one row per measuring thread (CPU), else one per case
    latency: tuple[str, ...]  # CaseStats keys shown beside (case rows only)
    columns: tuple[Column, ...]
    rows: Callable[[Mapping[str, Any]], list[dict[str, Any]]]


def _threads(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in doc.get("threads") or [] if isinstance(t, Mapping)]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _weighted(threads: list[Mapping[str, Any]], key: str) -> float | None:
    """Mean of KEY over threads, weighted by their sample counts."""
    pairs = [(_num(t.get(key)), int(t.get("count") or 0)) for t in threads]
    pairs = [(v, n) for v, n in pairs if v is not None and n > 0]
    total = sum(n for _, n in pairs)
    return sum(v * n for v, n in pairs) / total if total else None


def _sum(threads: list[Mapping[str, Any]], key: str) -> int:
    return sum(int(t.get(key) or 0) for t in threads if isinstance(t.get(key), int))


def _text(doc: Mapping[str, Any], key: str) -> str | None:
    params = doc.get("params")
    value = params.get(key) if isinstance(params, Mapping) else None
    if value is None:
        value = next((t.get(key) for t in _threads(doc) if t.get(key) is not None), None)
    return None if value is None else str(value)


def _periodic(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    threads = _threads(doc)
    drifts = [_num(t.get("drift_ns")) for t in threads]
    drifts = [d for d in drifts if d is not None]
    return [
        {
            "mechanism": _text(doc, "mechanism"),
            "cpu_ns_per_activation": _weighted(threads, "cpu_ns_per_activation"),
            "overruns": _sum(threads, "overruns"),
            "drift_ns": max(drifts, key=abs) if drifts else None,
        }
    ]


def _response(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    threads = _threads(doc)
    return [
        {
            "transport": _text(doc, "transport"),
            "lost": _sum(threads, "lost"),
            "max_rate_per_s": _num(doc.get("max_rate_per_s")),
        }
    ]


def _noise(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for t in _threads(doc):
        thr = t.get("throttled")
        thr = thr if isinstance(thr, Mapping) else None
        rows.append(
            {
                "cpu": t.get("cpu"),
                "noise_pct": _num(t.get("noise_pct")),
                "noise_ns_per_s": _num(t.get("noise_ns_per_s")),
                "gaps": int(t.get("count") or 0),
                "max_gap_ns": _num(t.get("max_ns")),
                "throttled": None if thr is None else int(thr.get("count") or 0),
                "throttled_ns": None if thr is None else _num(thr.get("total_ns")),
            }
        )
    return rows


VIEWS: dict[str, MeterView] = {
    v.meter: v
    for v in (
        MeterView(
            "periodic",
            "Periodic mechanisms",
            "Which periodic mechanism should my control loop use?",
            False,
            ("median", "p99", "max"),
            (
                Column("mechanism", "mechanism", "text", "how the thread is woken"),
                Column(
                    "cpu_ns_per_activation",
                    "CPU / activation",
                    "ns",
                    "thread CPU time per activation (signal handling included)",
                ),
                Column("overruns", "overruns", "count", "activations missed entirely"),
                Column("drift_ns", "drift", "ns", "accumulated drift of relative sleeps"),
            ),
            _periodic,
        ),
        MeterView(
            "response",
            "Event response",
            "How fast does my handler react to an event?",
            False,
            ("median", "p99", "max"),
            (
                Column("transport", "transport", "text", "how the event reaches the handler"),
                Column("lost", "lost", "count", "events fired while the handler was busy"),
                Column("max_rate_per_s", "max rate /s", "per_s", "highest sustained event rate"),
            ),
            _response,
        ),
        MeterView(
            "noise",
            "OS noise",
            "How much of my CPU does the OS steal?",
            True,
            (),
            (
                Column("cpu", "CPU", "text", "measured CPU"),
                Column("noise_pct", "% stolen", "pct", "share of the CPU lost to noise"),
                Column("noise_ns_per_s", "noise / s", "ns", "noise time per second"),
                Column("gaps", "gaps", "count", "gaps above the threshold"),
                Column("max_gap_ns", "max gap", "ns", "the longest gap"),
                Column("throttled", "throttled", "count", "gaps of real-time throttling"),
                Column("throttled_ns", "throttled time", "ns", "their total length"),
            ),
            _noise,
        ),
    )
}


def meter_rows(doc: Mapping[str, Any]) -> tuple[MeterView, list[dict[str, Any]]] | None:
    """The view of DOC's meter and its rows, or None for a meter without one (wakeup)."""
    view = VIEWS.get(str(doc.get("meter")))
    return None if view is None else (view, view.rows(doc))
