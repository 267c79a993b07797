"""One window of a monitor: the probe call that measures it and the row kept of it.

A window is one run of `rtlab-probe wakeup` (one thread per CPU, `--duration WINDOW`);
of its result document the monitor keeps a row of a few hundred bytes per CPU: the
extremes, p99, count, mean, deadline misses, overruns, the histogram counted at the
metrics' bounds, the kernel-log symptoms and, with `--explain`, the explained worst
samples. The document itself is dropped: storage grows by the window, not by the sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rtlab.analysis._conditions import symptom_of
from rtlab.analysis._hist import Histogram
from rtlab.monitor._record import MonitorSettings
from rtlab.probecall import Option, ProbeCall
from rtlab.system import parse_cpulist

#: Histogram bounds of the rows and of the metrics' histograms: 1 µs .. 100 ms.
LE_NS: tuple[int, ...] = tuple(
    m * 10**e for e in range(3, 9) for m in (1, 2, 5) if m * 10**e <= 100_000_000
)
#: Kernel-log messages kept per row (symptoms first), and their text's length.
MESSAGES_KEPT = 16
TEXT_KEPT = 300
#: Causes and stack frames kept per explained sample.
CAUSES_KEPT = 5
FRAMES_KEPT = 12


def window_call(s: MonitorSettings, window_ns: int | None = None) -> ProbeCall:
    """The probe call of one window (WINDOW_NS: a shorter last one)."""
    opts = [
        Option("cpus", s.cpus, "cpus"),
        Option("policy", s.policy, "policy"),
        Option("interval", f"{s.period_ns}ns", "interval"),
        Option("duration", f"{window_ns or s.window_ns}ns", "duration"),
        Option("quiet", None, "quiet"),
    ]
    if s.deadline_ns:
        opts.append(Option("deadline", f"{s.deadline_ns}ns", "deadline"))
    if s.explain_ns:
        opts.append(Option("explain", f"{s.explain_ns}ns", "explain"))
        ncpus = len(parse_cpulist(s.cpus)) if s.cpus else 1  # the probe keeps N in all
        opts.append(Option("explain-max", str(min(s.explain_max * ncpus, 1000)), "explain_max"))
    return ProbeCall("wakeup", tuple(opts))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def le_counts(thread: Mapping[str, Any], bounds: list[int]) -> list[int]:
    """Samples at or below each bound (a probe bucket counts when its lower bound is: the
    error is the bucket's width, at most 0.78 % of the bound)."""
    h = Histogram.from_document_thread(thread)
    if not len(h.count):
        return [0] * len(bounds)
    cum = np.cumsum(h.count)
    at = np.searchsorted(h.lower, np.asarray(bounds, dtype=np.int64), side="right")
    return [int(cum[i - 1]) if i else 0 for i in at]


def _cpu_row(t: Mapping[str, Any], misses: int | None, bounds: list[int]) -> dict[str, Any]:
    count = _int(t.get("count")) or 0
    mean = t.get("mean_ns")
    pct: Mapping[str, Any] = (
        t["percentiles_ns"] if isinstance(t.get("percentiles_ns"), Mapping) else {}
    )
    return {
        "cpu": _int(t.get("cpu")),
        "count": count,
        "min_ns": _int(t.get("min_ns")),
        "max_ns": _int(t.get("max_ns")),
        "p99_ns": _int(pct.get("99")),
        "sum_ns": round(mean * count) if isinstance(mean, int | float) and count else 0,
        "overruns": _int(t.get("overruns")) or 0,
        "misses": misses,
        "le": le_counts(t, bounds) if count else [0] * len(bounds),
        "overflow": _int((t.get("histogram") or {}).get("overflow")) or 0,
    }


def _messages(doc: Mapping[str, Any]) -> dict[str, Any]:
    kmsg = (doc.get("conditions") or {}).get("kmsg") or {}
    messages: list[Any] = kmsg["messages"] if isinstance(kmsg.get("messages"), list) else []
    kept: list[dict[str, Any]] = []
    symptoms: dict[str, int] = {}
    for m in messages:
        if not isinstance(m, Mapping) or not isinstance(m.get("text"), str):
            continue
        symptom = symptom_of(m["text"])
        if symptom is not None:
            symptoms[symptom] = symptoms.get(symptom, 0) + 1
        kept.append(
            {
                "t_us": _int(m.get("t_us")),
                "facility": _int(m.get("facility")),
                "symptom": symptom,
                "text": m["text"][:TEXT_KEPT],
            }
        )
    kept.sort(key=lambda m: m["symptom"] is None)  # stable: symptoms first, in time order
    return {
        "symptoms": symptoms,
        "messages": kept[:MESSAGES_KEPT],
        "messages_total": len(messages),
        "messages_lost": _int(kmsg.get("lost")) or 0,
        "error": kmsg.get("error") if isinstance(kmsg.get("error"), str) else None,
    }


def _spike(s: Mapping[str, Any]) -> dict[str, Any]:
    causes = [c for c in s.get("causes") or [] if isinstance(c, Mapping)]
    stack = s.get("cause_stack") if isinstance(s.get("cause_stack"), list) else None
    return {
        "cpu": _int(s.get("cpu")),
        "latency_ns": _int(s.get("latency_ns")),
        "t_ns": _int(s.get("t_ns")),
        "verdict": s.get("verdict") if isinstance(s.get("verdict"), str) else None,
        "causes": [dict(c) for c in causes[:CAUSES_KEPT]],
        "unexplained_ns": _int(s.get("unexplained_ns")),
        "cause_stack": stack[:FRAMES_KEPT] if stack else None,
    }


def interval_row(
    seq: int,
    doc: Mapping[str, Any],
    misses: Mapping[int, int],
    bounds: list[int],
    explain_max: int,
) -> dict[str, Any]:
    """The row of one window: DOC its result document (migrated), MISSES the deadline
    misses of each thread (the probe's last progress line)."""
    threads = [t for t in doc.get("threads") or [] if isinstance(t, Mapping)]
    cpus = [_cpu_row(t, misses.get(i), bounds) for i, t in enumerate(threads)]
    spikes: list[dict[str, Any]] = []  # worst first: the EXPLAIN_MAX worst of each CPU
    per_cpu: dict[int | None, int] = {}
    for sp in doc.get("spikes") or []:
        if isinstance(sp, Mapping):
            kept = _spike(sp)
            per_cpu[kept["cpu"]] = per_cpu.get(kept["cpu"], 0) + 1
            if per_cpu[kept["cpu"]] <= explain_max:
                spikes.append(kept)
    explain = doc.get("explain") if isinstance(doc.get("explain"), Mapping) else None
    return {
        "kind": "interval",
        "seq": seq,
        "start_utc": doc.get("start_utc"),
        "end_utc": doc.get("end_utc"),
        "elapsed_ns": _int(doc.get("elapsed_ns")),
        "complete": bool(doc.get("complete")),
        "kernel": ((doc.get("host") or {}).get("uname") or {}).get("release"),
        "cpus": cpus,
        "kmsg": _messages(doc),
        "explain": None
        if explain is None
        else {"status": explain.get("status"), "reason": explain.get("reason")},
        "spikes": spikes,
    }
