"""The HTML report of a monitor: the maximum per window over time (the OSADL long-term
plot, gaps shaded), the distribution of the window maxima, the per-CPU table and the
worst windows with their explained samples and the kernel log around them."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import numpy as np
from markupsafe import escape

from rtlab import __version__
from rtlab.errors import UserError
from rtlab.monitor import GAP_MIN_S, MonitorView, parse_utc
from rtlab.report._style import MARKERS, Plot, _figure, _log_us, _style
from rtlab.report.plots import to_svg
from rtlab.units import format_ns


def _when(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.fromtimestamp(parse_utc(text), dt.UTC).replace(tzinfo=None)


def maxima_plot(view: MonitorView) -> Plot:
    """Each window's maximum per CPU against time, log scale; gaps shaded."""
    with _style():
        fig = _figure(9.0, 3.6)
        ax = fig.add_subplot()
        lo, hi = float("inf"), 0.0
        for i, cpu in enumerate(view.cpus()):
            xs: list[Any] = []
            ys: list[float] = []
            last_end: str | None = None
            for r in view.intervals:
                t = _when(r.get("start_utc"))
                if (
                    last_end
                    and t is not None
                    and parse_utc(r["start_utc"]) - parse_utc(last_end) > GAP_MIN_S
                ):
                    xs.append(t)
                    ys.append(float("nan"))  # no line across a gap
                last_end = r.get("end_utc")
                for c in r.get("cpus") or []:
                    key = "any" if c.get("cpu") is None else str(c["cpu"])
                    if key == cpu and c.get("count") and t is not None:
                        xs.append(t)
                        ys.append(max(c.get("max_ns") or 1, 1) / 1000)
            finite = [y for y in ys if y == y]
            if finite:
                lo, hi = min(lo, min(finite)), max(hi, max(finite))
            ax.plot(
                xs,
                ys,
                marker=MARKERS[i % len(MARKERS)],
                markersize=3,
                linewidth=0.6,
                label=f"CPU {cpu}",
            )
        for g in view.gaps:
            a, b = _when(g.get("start_utc")), _when(g.get("end_utc"))
            if a is not None and b is not None:
                ax.axvspan(a, b, color="#bbbbbb", alpha=0.5, linewidth=0)  # type: ignore[arg-type]
        dl = view.rec.manifest.settings.deadline_ns
        if dl:
            ax.axhline(dl / 1000, color="#b2182b", linestyle="--", linewidth=1, label="deadline")
        ax.set_yscale("log")
        if hi > 0:
            _log_us(ax.yaxis, lo, hi)
        ax.set_ylabel("maximum per window (µs)")
        ax.set_xlabel("time (UTC)")
        ax.legend(loc="upper right")
        fig.autofmt_xdate()
    n = len(view.intervals)
    worst = max((c["max_ns"] or 0 for c in view.per_cpu()), default=0)
    return Plot(
        fig,
        "Maximum per window over time",
        f"{n} windows; largest maximum {format_ns(worst)}; {len(view.gaps)} gaps shaded",
    )


def distribution_plot(view: MonitorView) -> Plot:
    """How many windows had their maximum in each 1-2-5 bin, per CPU."""
    d = view.distribution()
    labels = [f"≤{_short(e)}" for e in d["le_ns"]] + [f">{_short(d['le_ns'][-1])}"]
    counts = np.array([d["counts"][k] for k in d["counts"]], np.int64).reshape(-1, len(labels))
    used = np.flatnonzero(counts.sum(axis=0))
    first = max(0, int(used[0]) - 1) if len(used) else 0
    last = min(len(labels), int(used[-1]) + 2) if len(used) else len(labels)
    with _style():
        fig = _figure(9.0, 3.2)
        ax = fig.add_subplot()
        keys = list(d["counts"])
        width = 0.8 / max(1, len(keys))
        x = np.arange(last - first)
        for i, key in enumerate(keys):
            ax.bar(x + i * width, counts[i, first:last], width=width, label=f"CPU {key}")
        ax.set_xticks(x + 0.4 - width / 2, labels[first:last], rotation=45, fontsize=8)
        ax.set_xlabel("maximum of the window")
        ax.set_ylabel("windows")
        ax.legend(loc="upper right")
    return Plot(
        fig,
        "Distribution of the window maxima",
        "number of windows per bin of their maximum, per CPU",
    )


def _short(ns: int) -> str:
    """1-2-5 bounds as short labels: 500 µs, 2 ms, 1 s."""
    for unit, scale in (("s", 10**9), ("ms", 10**6), ("µs", 10**3)):
        if ns >= scale:
            return f"{ns / scale:g} {unit}"
    return f"{ns} ns"


def _table(headers: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _worst_html(view: MonitorView) -> str:
    parts = []
    for w in view.worst():
        parts.append(
            f"<h3>window #{escape(w['seq'])} {escape(w['start_utc'])} .. "
            f"{escape(w['end_utc'])}: max {escape(format_ns(w['max_ns']))}</h3>"
        )
        parts.append(
            _table(
                ["CPU", "max", "p99", "samples", "misses"],
                [
                    [
                        c["cpu"],
                        format_ns(c["max_ns"]),
                        format_ns(c["p99_ns"]),
                        c["count"],
                        "-" if c["misses"] is None else c["misses"],
                    ]
                    for c in w["cpus"]
                ],
            )
        )
        if w["spikes"]:
            parts.append(
                _table(
                    ["CPU", "latency", "cause", "causes (ns)", "kernel stack"],
                    [
                        [
                            s.get("cpu"),
                            format_ns(s.get("latency_ns")),
                            s.get("verdict") or "-",
                            ", ".join(
                                f"{c.get('kind')} {c.get('name')} {c.get('ns')}"
                                for c in s.get("causes") or []
                            ),
                            " ← ".join((s.get("cause_stack") or [])[:6]),
                        ]
                        for s in w["spikes"]
                    ],
                )
            )
        elif (w.get("explain") or {}).get("status") == "unavailable":
            parts.append(f"<p>not explained: {escape(w['explain'].get('reason'))}</p>")
        if w["messages"]:
            parts.append("<p>kernel log in this window and the ones around it:</p>")
            parts.append(
                _table(
                    ["window", "symptom", "message"],
                    [[m["seq"], m.get("symptom") or "", m.get("text")] for m in w["messages"]],
                )
            )
    return "\n".join(parts)


def write_monitor_report(view: MonitorView, path: Path) -> int:
    """Write the report to PATH (a new file renamed into place); the number of figures."""
    rec, s = view.rec, view.rec.manifest.settings
    plots = [maxima_plot(view), distribution_plot(view)] if view.intervals else []
    cov = view.coverage()
    figures = "\n".join(
        f"<figure>{to_svg(p, f'm{i}')}<figcaption>{escape(p.title)}: {escape(p.alt)}"
        "</figcaption></figure>"
        for i, p in enumerate(plots)
    )
    target = "local" if rec.manifest.target is None else rec.manifest.target.get("name")
    gaps = (
        _table(
            ["from", "to", "seconds", "reason"],
            [
                [g.get("start_utc"), g.get("end_utc"), g.get("seconds"), g.get("reason")]
                for g in view.gaps
            ],
        )
        if view.gaps
        else "<p>none</p>"
    )
    html = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>rtlab monitor {escape(rec.id)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:auto}}
table{{border-collapse:collapse;margin:0.5em 0}}td,th{{border:1px solid #ccc;padding:2px 6px;
font-size:90%}}svg{{max-width:100%;height:auto}}</style></head><body>
<h1>Monitor {escape(rec.id)}</h1>
<p>{escape(rec.manifest.name)}: target {escape(target)}, kernel
{escape(rec.system().get("kernel_release"))}, CPUs {escape(s.cpus)}, {escape(s.policy)} every
{escape(format_ns(s.period_ns))}, windows of {escape(format_ns(s.window_ns))};
{len(view.intervals)} windows from {escape(cov["first_utc"])} to {escape(cov["last_utc"])},
{cov["measured_s"]:.0f} s measured, {len(view.gaps)} gaps. rtlab {escape(__version__)}.</p>
<h2>Maximum per window over time</h2>
{figures}
<h2>Per CPU</h2>
{_table(*view.cpu_table())}
<h2>Gaps</h2>
{gaps}
<h2>Kernel-log symptoms</h2>
<p>{escape(", ".join(f"{k} ×{n}" for k, n in view.symptoms().items()) or "none")}</p>
<h2>Worst windows</h2>
{_worst_html(view)}
</body></html>
"""
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    try:
        tmp.write_text(html)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"{path}: cannot write the report ({e.strerror})") from None
    return len(plots)
