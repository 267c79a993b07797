"""What each meter's question needs beside the latency statistics: one view per meter.

    periodic   which periodic mechanism should my control loop use?
               latency percentiles, CPU cost per activation and share, overruns, drift
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

from rtlab.analysis._sched_view import sched_rows
from rtlab.units import format_ns


@dataclass(frozen=True)
class Column:
    key: str  # key of a row
    label: str  # table header
    unit: str  # "ns", "count", "pct", "per_s", "num" (4 significant digits), "text"
    doc: str
    compared: bool = True  # `rtlab compare` prints A and B (else only `show` and JSON)

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
        if self.unit == "num":
            return f"{v:.4g}"
        return str(v)


@dataclass(frozen=True)
class MeterView:
    meter: str
    title: str
    question: str
    key: str | None  # the row key that tells a case's rows apart (cpu, size), or one row
    latency: tuple[str, ...]  # CaseStats keys shown beside (case rows only)
    columns: tuple[Column, ...]
    rows: Callable[[Mapping[str, Any]], list[dict[str, Any]]]
    # Comparing a baseline row with another: the extra columns and how they are computed.
    pair_columns: tuple[Column, ...] = ()
    pair: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]] | None = None


def _threads(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in doc.get("threads") or [] if isinstance(t, Mapping)]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


def _weighted(threads: list[Mapping[str, Any]], key: str) -> float | None:
    """Mean of KEY over threads, weighted by their sample counts."""
    pairs: list[tuple[float, int]] = []
    for t in threads:
        v, n = _num(t.get(key)), int(t.get("count") or 0)
        if v is not None and n > 0:
            pairs.append((v, n))
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


def _share_pct(part_ns: float | None, whole_ns: float | None) -> float | None:
    return None if part_ns is None or not whole_ns or whole_ns <= 0 else 100 * part_ns / whole_ns


def _periodic(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    threads = _threads(doc)
    drifts = [d for t in threads if (d := _num(t.get("drift_ns"))) is not None]
    per_activation = _weighted(threads, "cpu_ns_per_activation")
    return [
        {
            "mechanism": _text(doc, "mechanism"),
            "cpu_ns_per_activation": per_activation,
            # One activation per interval: its CPU time over the interval is the share.
            "cpu_pct": _share_pct(per_activation, _num(_param(doc, "interval_ns"))),
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
                "gaps": None if t.get("count") is None else int(t["count"]),  # unknown: rtla top
                "max_gap_ns": _num(t.get("max_ns")),
                "throttled": None if thr is None else int(thr.get("count") or 0),
                "throttled_ns": None if thr is None else _num(thr.get("total_ns")),
            }
        )
    return rows


def _cpu_share(threads: list[Mapping[str, Any]]) -> float | None:
    """The threads' CPU time over their wall time, in %: also for threads without samples
    (a worker at 0 Hz); the mean of their cpu_pct, weighted by samples, without the parts."""
    parts = [(c, w) for t in threads if (c := _num(t.get("cpu_ns"))) is not None
             and (w := _num(t.get("wall_ns")))]  # fmt: skip
    if parts:
        return _share_pct(sum(c for c, _ in parts), sum(w for _, w in parts))
    return _weighted(threads, "cpu_pct")


def _worker(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    threads = _threads(doc)
    return [
        {
            "design": _text(doc, "design"),
            "rate_hz": _num(_param(doc, "rate_hz")),
            "cpu_pct": _cpu_share(threads),
            "lost": _sum(threads, "lost"),
        }
    ]


def _pipeline(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    threads = _threads(doc)
    fills = [int(t["max_fill"]) for t in threads if isinstance(t.get("max_fill"), int)]
    period = _num(_param(doc, "period_ns"))
    consumer = _text(doc, "consumer")
    return [
        {
            "consumer": consumer if period is None else f"{consumer} {format_ns(period)}",
            "work_ns": _num(_param(doc, "work_ns")),  # absent before schema 8
            "cpu_pct": _cpu_share(threads),
            "ring": _param(doc, "ring"),
            "rate_hz": _num(_param(doc, "rate_hz")),
            "records": _sum(threads, "records"),
            "overruns": _sum(threads, "overruns"),
            "max_fill": max(fills) if fills else None,
        }
    ]


def _preempt(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for t in _threads(doc):
        p = t.get("preemptions")
        p = p if isinstance(p, Mapping) else {}
        m = t.get("migrations")  # absent before schema 8
        m = m if isinstance(m, Mapping) else {}
        by = [b for b in p.get("by") or [] if isinstance(b, Mapping)]
        top = by[0] if by else None
        migrations = m.get("nr_migrations")
        rows.append(
            {
                "cpu": t.get("cpu"),
                "voluntary": p.get("voluntary"),
                "involuntary": p.get("involuntary"),
                "kernel_mode": p.get("kernel_mode"),
                "user_mode": p.get("user_mode"),
                "migrations": migrations if migrations is not None else m.get("cpu_changes"),
                "off_cpu_ns": _num(p.get("off_cpu_ns")),
                "top": None
                if top is None
                else f"{top.get('comm')} ({top.get('pid')}, {top.get('policy')}:"
                f"{top.get('priority')})",
                "top_ns": None if top is None else _num(top.get("time_ns")),
                "top_count": None if top is None else top.get("count"),
                "by_unavailable": p.get("by_unavailable"),
            }
        )
    return rows


def _faults(threads: list[Mapping[str, Any]], kind: str) -> int:
    return sum(
        int(t["faults"].get(kind) or 0) for t in threads if isinstance(t.get("faults"), Mapping)
    )


def _pagefault(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    threads = _threads(doc)
    return [
        {
            "region": _text(doc, "region"),
            "protect": _text(doc, "protect"),
            "pages": _sum(threads, "pages"),
            "minor": _faults(threads, "minor"),
            "major": _faults(threads, "major"),
        }
    ]


def _alloc(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for t in _threads(doc):
        for z in t.get("sizes") or []:
            if not isinstance(z, Mapping):
                continue
            faults = z.get("faults")
            f: Mapping[str, Any] = faults if isinstance(faults, Mapping) else {}
            touch = z.get("touch")  # --touch, schema 8
            tz: Mapping[str, Any] = touch if isinstance(touch, Mapping) else {}
            rows.append(
                {
                    "size": z.get("size_bytes"),
                    "pattern": t.get("pattern"),
                    "tuned": "tuned" if t.get("tuned") else "default",
                    "calls": z.get("count"),
                    "p50_ns": _num(z.get("p50_ns")),
                    "p99_ns": _num(z.get("p99_ns")),
                    "max_ns": _num(z.get("max_ns")),
                    "touch_p50_ns": _num(tz.get("p50_ns")),
                    "touch_max_ns": _num(tz.get("max_ns")),
                    "minor": f.get("minor"),
                    "major": f.get("major"),
                }
            )
    return rows


def _param(doc: Mapping[str, Any], key: str) -> Any:
    params = doc.get("params")
    return params.get(key) if isinstance(params, Mapping) else None


def _throughput(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    tp = doc.get("throughput")
    tp = tp if isinstance(tp, Mapping) else {}
    values = [v for v in tp.get("values") or [] if _num(v) is not None]
    times = {k: v for k, v in _dict(tp.get("times")).items() if isinstance(v, Mapping)}
    return [
        {
            "workload": tp.get("workload"),
            "unit": tp.get("unit"),
            "better": "higher" if tp.get("higher_is_better") else "lower",
            "mean": _num(tp.get("mean")),
            "stddev": _num(tp.get("stddev")),
            "ci_low": _num(tp.get("ci_low")),
            "ci_high": _num(tp.get("ci_high")),
            "runs": len(values),
            "values": values,
            "user_s": _num(_dict(times.get("user_s")).get("mean")),
            "system_s": _num(_dict(times.get("system_s")).get("mean")),
            "times": times or None,
            "policy": _dict(tp.get("policy")).get("policy") or "other",
        }
    ]


def _dict(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _run_times(row: Mapping[str, Any], key: str) -> list[float]:
    runs = _dict(_dict(row.get("times")).get(key)).get("values") or []
    return [v for v in runs if _num(v) is not None]


def _throughput_pair(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    from rtlab.throughput import change_pct  # numpy bootstrap: only when comparing

    if not a.get("values") or not b.get("values"):
        return {}
    out: dict[str, Any] = change_pct(a["values"], b["values"])
    for key in ("user_s", "system_s"):  # absent before the CPU times were recorded
        va, vb = _run_times(a, key), _run_times(b, key)
        out[f"{key}_change_pct"] = change_pct(va, vb)["change_pct"] if va and vb else None
    return out


VIEWS: dict[str, MeterView] = {
    v.meter: v
    for v in (
        MeterView(
            "periodic",
            "Periodic mechanisms",
            "Which periodic mechanism should my control loop use?",
            None,
            ("median", "p99", "max"),
            (
                Column("mechanism", "mechanism", "text", "how the thread is woken"),
                Column(
                    "cpu_ns_per_activation",
                    "CPU / activation",
                    "ns",
                    "thread CPU time per activation (signal handling included)",
                ),
                Column("cpu_pct", "CPU %", "pct", "CPU time per activation / the interval"),
                Column("overruns", "overruns", "count", "activations missed entirely"),
                Column("drift_ns", "drift", "ns", "accumulated drift of relative sleeps"),
            ),
            _periodic,
        ),
        MeterView(
            "response",
            "Event response",
            "How fast does my handler react to an event?",
            None,
            ("median", "p99", "max"),
            (
                Column("transport", "transport", "text", "how the event reaches the handler"),
                Column("lost", "lost", "count", "events fired while the handler was busy"),
                Column("max_rate_per_s", "max rate /s", "per_s", "highest sustained event rate"),
            ),
            _response,
        ),
        MeterView(
            "sched",
            "Application threads",
            "How late do my program's own threads run, and why were they woken?",
            "thread",
            (),
            (
                Column("thread", "thread", "text", "the observed thread's name (#2: the second)"),
                Column("tid", "TID", "count", "its thread ID", compared=False),
                Column("program", "program", "text", "the command started, or the process"),
                Column("timer", "timer", "count", "activations by a timer it armed"),
                Column("timer_max_ns", "timer max", "ns", "timer latency: expiry to running"),
                Column("wakeup", "wake-ups", "count", "activations by any other wake-up"),
                Column("wakeup_max_ns", "wake-up max", "ns", "sched_waking to running"),
                Column(
                    "period_ns", "period", "ns", "detected from its timer expiries", compared=False
                ),
                Column(
                    "runtime_ns",
                    "run / activation",
                    "ns",
                    "mean CPU time per activation",
                    compared=False,
                ),
                Column("overruns", "overruns", "count", "expiries while it still ran"),
                Column("preemptions", "preempted", "count", "switched out while runnable"),
                Column("migrations", "migrations", "count", "moves to another CPU", compared=False),
                Column("note", "note", "text", "what could not be measured", compared=False),
            ),
            sched_rows,
        ),
        MeterView(
            "noise",
            "OS noise",
            "How much of my CPU does the OS steal?",
            "cpu",
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
        MeterView(
            "pagefault",
            "Page faults",
            "What does the first touch of a page cost, and do locking and prefaulting help?",
            None,
            ("median", "p99", "max"),
            (
                Column("region", "region", "text", "static, stack, heap, mmap or file"),
                Column("protect", "protection", "text", "none, mlock, prefault, mlock+prefault"),
                Column("pages", "pages", "count", "pages touched"),
                Column("minor", "minor faults", "count", "in the measured pass"),
                Column("major", "major faults", "count", "in the measured pass"),
            ),
            _pagefault,
        ),
        MeterView(
            "alloc",
            "Allocation",
            "What does malloc/free cost per size, with the C library's defaults and tuned?",
            "size",
            (),
            (
                Column("size", "size (B)", "count", "block size"),
                Column("pattern", "pattern", "text", "pairs, batch or random"),
                Column("tuned", "allocator", "text", "the C library's defaults or tuned"),
                Column("calls", "calls", "count", "malloc and free calls timed"),
                Column("p50_ns", "p50", "ns", "median of one call"),
                Column("p99_ns", "p99", "ns", "99th percentile of one call"),
                Column("max_ns", "max", "ns", "the slowest call"),
                Column("touch_p50_ns", "touch p50", "ns", "median time to write every page"),
                Column("touch_max_ns", "touch max", "ns", "slowest write of every page"),
                Column("minor", "minor faults", "count", "while measuring this size"),
                Column("major", "major faults", "count", "while measuring this size"),
            ),
            _alloc,
        ),
        MeterView(
            "preempt",
            "Preemptions",
            "Who takes the CPU from my thread, how often and for how long?",
            "cpu",
            (),
            (
                Column("cpu", "CPU", "text", "measured CPU"),
                Column("voluntary", "voluntary", "count", "context switches the thread asked for"),
                Column("involuntary", "involuntary", "count", "preemptions"),
                Column("kernel_mode", "in kernel", "count", "preempted in kernel mode (R+)"),
                Column("user_mode", "to user", "count", "preempted on return to user mode"),
                Column("migrations", "migrations", "count", "CPU changes (unpinned thread)"),
                Column("off_cpu_ns", "off CPU", "ns", "time runnable but not running"),
                Column("top", "top preemptor", "text", "command (PID, policy:priority)"),
                Column("top_ns", "its time", "ns", "time the top preemptor held the CPU"),
                Column("top_count", "its count", "count", "times it preempted"),
                Column("by_unavailable", "attribution", "text", "why no attribution, if none"),
            ),
            _preempt,
        ),
        MeterView(
            "worker",
            "Worker designs",
            "Polling or blocking: what does the hand-off cost in latency and CPU?",
            None,
            ("median", "p99", "max"),
            (
                Column("design", "design", "text", "how the worker waits for an item"),
                Column("rate_hz", "rate /s", "per_s", "items handed off per second"),
                Column("cpu_pct", "worker CPU", "pct", "the worker's CPU time / wall time"),
                Column("lost", "lost", "count", "items overwritten before the worker took them"),
            ),
            _worker,
        ),
        MeterView(
            "pipeline",
            "Producer/consumer pipelines",
            "Does the consumer keep up with the producer, and at what CPU share?",
            None,
            ("median", "p99", "max"),
            (
                Column("consumer", "consumer", "text", "periodic (its period) or aperiodic"),
                Column("work_ns", "work", "ns", "the consumer's busy time per record"),
                Column("cpu_pct", "consumer CPU", "pct", "the consumer's CPU time / wall time"),
                Column("ring", "ring", "count", "records the ring holds"),
                Column("rate_hz", "rate /s", "per_s", "records produced per second"),
                Column("records", "records", "count", "records produced"),
                Column("overruns", "overruns", "count", "records dropped: the ring was full"),
                Column("max_fill", "max fill", "count", "most records waiting at once"),
            ),
            _pipeline,
        ),
        MeterView(
            "throughput",
            "Throughput",
            "What does this setup cost everything else?",
            None,
            (),
            (
                Column("workload", "workload", "text", "hackbench, stress-ng, iperf3, ..."),
                Column("unit", "unit", "text", "what the figure counts"),
                Column("better", "better", "text", "whether higher or lower is better"),
                Column("mean", "mean", "num", "mean over the runs"),
                Column("stddev", "stddev", "num", "sample standard deviation", False),
                Column("ci_low", "95 % CI low", "num", "bootstrap interval of the mean", False),
                Column("ci_high", "95 % CI high", "num", "bootstrap interval of the mean", False),
                Column("runs", "runs", "count", "repetitions"),
                Column("user_s", "user s", "num", "user CPU time of a run, mean"),
                Column("system_s", "system s", "num", "system CPU time of a run, mean"),
            ),
            _throughput,
            (
                Column("change_pct", "change", "pct", "B's mean against A's"),
                Column("change_lo", "CI low", "pct", "95 % bootstrap interval of the change"),
                Column("change_hi", "CI high", "pct", "95 % bootstrap interval of the change"),
                Column("excludes_zero", "differs", "text", "the interval excludes 0"),
                Column("user_s_change_pct", "user change", "pct", "B's user time against A's"),
                Column(
                    "system_s_change_pct", "system change", "pct", "B's system time against A's"
                ),
            ),
            _throughput_pair,
        ),
    )
}


def meter_rows(doc: Mapping[str, Any]) -> tuple[MeterView, list[dict[str, Any]]] | None:
    """The view of DOC's meter and its rows, or None for a meter without one (wakeup)."""
    view = VIEWS.get(str(doc.get("meter")))
    return None if view is None else (view, view.rows(doc))
