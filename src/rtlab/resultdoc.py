"""Checks of a result document's structure (docs/result-format.md) before anything reads it.

A document that passes can be shown, compared and reported: every number rtlab computes
with is of the documented type and fits int64. One that does not gives a one-line
UserError naming the key, never an exception deep in the statistics.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rtlab.errors import UserError

INT64_MAX = 2**63 - 1


class _Where:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, what: str) -> None:
        raise UserError(f"{self.source}: {key} {what}")

    def int(self, value: Any, key: str, *, lo: int = -INT64_MAX - 1, none: bool = True) -> None:
        if value is None and none:
            return
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, f"must be an integer, not {type(value).__name__}")
        if not lo <= value <= INT64_MAX:
            self.fail(key, f"is out of range ({value})")

    def num(self, value: Any, key: str) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(key, f"must be a number, not {type(value).__name__}")
        if not math.isfinite(value) or abs(value) > INT64_MAX:
            self.fail(key, f"is out of range ({value})")

    def typed(self, value: Any, key: str, types: type | tuple[type, ...]) -> None:
        if value is not None and not isinstance(value, types):
            self.fail(key, f"has the wrong type ({type(value).__name__})")


def _histogram(w: _Where, h: Any, key: str) -> None:
    if h is None:
        return
    w.typed(h, key, Mapping)
    w.typed(h.get("unit"), f"{key}.unit", str)
    w.int(h.get("overflow"), f"{key}.overflow", lo=0)
    buckets = h.get("buckets")
    w.typed(buckets, f"{key}.buckets", list)
    for i, b in enumerate(buckets or []):
        if not isinstance(b, list) or len(b) != 3:
            w.fail(f"{key}.buckets[{i}]", "must be [lower, upper, count]")
        for v, name in zip(b, ("lower", "upper", "count"), strict=True):
            w.int(v, f"{key}.buckets[{i}].{name}", lo=0, none=False)
        if b[0] > b[1]:
            w.fail(f"{key}.buckets[{i}]", "has lower > upper")


def _series(w: _Where, s: Any, key: str) -> None:
    if s is None:
        return
    w.typed(s, key, Mapping)
    for name in ("min_ns", "mean_ns", "max_ns", "count"):
        values = s.get(name)
        w.typed(values, f"{key}.{name}", list)
        for i, v in enumerate(values or []):
            if name == "count":
                w.int(v, f"{key}.count[{i}]", lo=0)
            else:
                w.num(v, f"{key}.{name}[{i}]")


def _thread(w: _Where, t: Any, key: str) -> None:
    if not isinstance(t, Mapping):
        w.fail(key, "must be an object")
    for name in ("index", "cpu", "tid", "period_ns", "min_ns", "max_ns"):
        w.int(t.get(name), f"{key}.{name}")
    for name in ("count", "overruns", "lost", "raw_lost", "raw_samples"):
        w.int(t.get(name), f"{key}.{name}", lo=0)
    for name in ("mean_ns", "stddev_ns"):
        w.num(t.get(name), f"{key}.{name}")
    w.typed(t.get("raw_file"), f"{key}.raw_file", str)
    pct = t.get("percentiles_ns")
    w.typed(pct, f"{key}.percentiles_ns", Mapping)
    for q, v in (pct or {}).items():
        w.num(v, f"{key}.percentiles_ns.{q}")
    _histogram(w, t.get("histogram"), f"{key}.histogram")
    worst = t.get("worst")
    w.typed(worst, f"{key}.worst", list)
    for i, x in enumerate(worst or []):
        w.typed(x, f"{key}.worst[{i}]", Mapping)
        for name in ("latency_ns", "cycle", "t_ns"):
            w.int((x or {}).get(name), f"{key}.worst[{i}].{name}")
    _series(w, t.get("series"), f"{key}.series")
    if t.get("count"):
        if t.get("min_ns") is None or t.get("max_ns") is None:
            w.fail(key, "has samples but no min_ns/max_ns")
        if t["min_ns"] > t["max_ns"]:
            w.fail(key, "has min_ns > max_ns")


def _spikes(w: _Where, doc: Mapping) -> None:
    """The explanation of late samples (schema 4): optional, typed where present."""
    w.typed(doc.get("explain"), "explain", Mapping)
    spikes = doc.get("spikes")
    w.typed(spikes, "spikes", list)
    for i, s in enumerate(spikes or []):
        key = f"spikes[{i}]"
        w.typed(s, key, Mapping)
        for name in ("thread", "cycle", "latency_ns", "unexplained_ns"):
            w.int(s.get(name), f"{key}.{name}", lo=0, none=False)
        w.typed(s.get("verdict"), f"{key}.verdict", str)
        causes = s.get("causes")
        w.typed(causes, f"{key}.causes", list)
        for j, c in enumerate(causes or []):
            w.typed(c, f"{key}.causes[{j}]", Mapping)
            w.int(c.get("ns"), f"{key}.causes[{j}].ns", lo=0, none=False)
            w.typed(c.get("kind"), f"{key}.causes[{j}].kind", str)
            w.typed(c.get("name"), f"{key}.causes[{j}].name", str)
        timeline = s.get("timeline")
        w.typed(timeline, f"{key}.timeline", list)
        for j, seg in enumerate(timeline or []):
            w.typed(seg, f"{key}.timeline[{j}]", Mapping)
            w.int(seg.get("start_ns"), f"{key}.timeline[{j}].start_ns", none=False)
            w.int(seg.get("end_ns"), f"{key}.timeline[{j}].end_ns", none=False)


#: Bounds of `conditions` (docs/result-format.md#conditions): measured CPUs, interrupt rows
#: per CPU, kernel-log records, characters of one text.
MAX_CONDITION_CPUS = 64
MAX_CONDITION_IRQS = 32
MAX_CONDITION_MESSAGES = 256
MAX_CONDITION_TEXT = 1000


def _bounded(w: _Where, value: Any, key: str, most: int) -> list[Any]:
    w.typed(value, key, list)
    if value is not None and len(value) > most:
        w.fail(key, f"has {len(value)} entries (at most {most})")
    return value or []


def _text(w: _Where, value: Any, key: str) -> None:
    w.typed(value, key, str)
    if isinstance(value, str) and len(value) > MAX_CONDITION_TEXT:
        w.fail(key, f"is {len(value)} characters long (at most {MAX_CONDITION_TEXT})")


def _conditions(w: _Where, cond: Any) -> None:
    """`conditions`: null (not recorded) or the probe's evidence, each part bounded."""
    if cond is None:
        return
    w.typed(cond, "conditions", Mapping)
    for part in ("interrupts", "kmsg", "applied"):
        w.typed(cond.get(part), f"conditions.{part}", Mapping)
        _text(w, (cond.get(part) or {}).get("error"), f"conditions.{part}.error")
    ints = cond.get("interrupts") or {}
    w.int(ints.get("elapsed_ns"), "conditions.interrupts.elapsed_ns", lo=0)
    per_cpu = _bounded(w, ints.get("per_cpu"), "conditions.interrupts.per_cpu", MAX_CONDITION_CPUS)
    for i, c in enumerate(per_cpu):
        key = f"conditions.interrupts.per_cpu[{i}]"
        w.typed(c, key, Mapping)
        w.int(c.get("cpu"), f"{key}.cpu", lo=0, none=False)
        w.int(c.get("total"), f"{key}.total", lo=0)
        w.typed(c.get("timer"), f"{key}.timer", Mapping)
        w.int((c.get("timer") or {}).get("count"), f"{key}.timer.count", lo=0)
        for j, r in enumerate(_bounded(w, c.get("irqs"), f"{key}.irqs", MAX_CONDITION_IRQS)):
            w.typed(r, f"{key}.irqs[{j}]", Mapping)
            w.int(r.get("count"), f"{key}.irqs[{j}].count", lo=0)
            _text(w, r.get("name"), f"{key}.irqs[{j}].name")
    kmsg = cond.get("kmsg") or {}
    w.int(kmsg.get("lost"), "conditions.kmsg.lost", lo=0)
    messages = _bounded(w, kmsg.get("messages"), "conditions.kmsg.messages", MAX_CONDITION_MESSAGES)
    for i, m in enumerate(messages):
        w.typed(m, f"conditions.kmsg.messages[{i}]", Mapping)
        _text(w, m.get("text"), f"conditions.kmsg.messages[{i}].text")
        for name in ("t_us", "level", "facility"):
            w.int(m.get(name), f"conditions.kmsg.messages[{i}].{name}", lo=0)
    applied = cond.get("applied") or {}
    for name in ("vm_locked_kb", "vm_rss_kb", "dma_latency_us"):
        w.int(applied.get(name), f"conditions.applied.{name}", lo=0)
    for i, t in enumerate(_bounded(w, applied.get("threads"), "conditions.applied.threads", 4096)):
        w.typed(t, f"conditions.applied.threads[{i}]", Mapping)
        for name in ("policy", "cpus_allowed"):
            _text(w, t.get(name), f"conditions.applied.threads[{i}].{name}")


def check_document(doc: Any, source: str) -> None:
    """UserError (one line) unless DOC has the documented structure and ranges."""
    w = _Where(source)
    if not isinstance(doc, Mapping):
        w.fail("document", "must be a JSON object")
    threads = doc.get("threads")
    if not isinstance(threads, list):
        w.fail("threads", "must be a list")
    for i, t in enumerate(threads):
        _thread(w, t, f"threads[{i}]")
    w.typed(doc.get("complete"), "complete", bool)
    w.int(doc.get("elapsed_ns"), "elapsed_ns", lo=0)
    for name in ("start_utc", "end_utc", "meter", "tool", "version"):
        w.typed(doc.get(name), name, str)
    w.typed(doc.get("loads"), "loads", list)
    w.typed(doc.get("params"), "params", Mapping)
    _spikes(w, doc)
    _conditions(w, doc.get("conditions"))
    activity = doc.get("activity")
    w.typed(activity, "activity", Mapping)
    if activity:
        busy = activity.get("cpu_busy_pct")
        w.typed(busy, "activity.cpu_busy_pct", Mapping)
        for cpu, v in (busy or {}).items():
            w.num(v, f"activity.cpu_busy_pct.{cpu}")
        for name in ("ctxt_per_s", "intr_per_s"):
            w.num(activity.get(name), f"activity.{name}")
        _cpu_time(w, activity)


def _cpu_time(w: _Where, activity: Mapping[str, Any]) -> None:
    """activity.cpu_time_ns and activity.loadavg (schema 8; null when not recorded)."""
    w.int(activity.get("tick_ns"), "activity.tick_ns", lo=1)
    split = activity.get("cpu_time_ns")
    w.typed(split, "activity.cpu_time_ns", Mapping)
    for cpu, cats in (split or {}).items():
        w.typed(cats, f"activity.cpu_time_ns.{cpu}", Mapping)
        for cat, v in (cats if isinstance(cats, Mapping) else {}).items():
            w.int(v, f"activity.cpu_time_ns.{cpu}.{cat}", lo=0, none=False)
    load = activity.get("loadavg")
    w.typed(load, "activity.loadavg", Mapping)
    for when, avg in (load or {}).items():
        w.typed(avg, f"activity.loadavg.{when}", Mapping)
        for name, v in (avg if isinstance(avg, Mapping) else {}).items():
            w.num(v, f"activity.loadavg.{when}.{name}")
