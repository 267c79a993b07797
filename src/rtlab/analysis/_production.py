"""Production conditions of a case (docs/result-format.md, schema 8): the load average and
the CPU time split per category from /proc/stat between the start and the end of
measuring, for the measured CPUs and for the whole system."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab.system._cpus import format_cpulist

#: /proc/stat's categories in the order tables show them (guest time is inside user).
CATEGORIES = ("user", "nice", "system", "irq", "softirq", "iowait", "idle", "steal")
#: Busy categories: all but idle and iowait (as activity.cpu_busy_pct counts them).
BUSY = ("user", "nice", "system", "irq", "softirq", "steal")
#: The columns of the production table (`rtlab show`, the report): one row per case.
#: The CPU time columns are % of the measured CPUs' time; the load average is the one at
#: the end of measuring (the start's is in the JSON).
HEADERS = ["series", "case", "CPUs", *CATEGORIES, "all busy", "load 1/5/15"]


def _dict(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _split(cats: Mapping[str, Any]) -> dict[str, int] | None:
    values = {c: cats.get(c) for c in CATEGORIES}
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values.values()):
        return None
    return values  # type: ignore[return-value]


def _pct(split: Mapping[str, int]) -> dict[str, float | None]:
    total = sum(split.values())
    return {c: (100.0 * split[c] / total if total else None) for c in CATEGORIES}


def measured_cpus(doc: Mapping[str, Any]) -> list[str] | None:
    """The CPUs the measuring threads were pinned to, as /proc/stat keys; None when a
    thread was not pinned (it may have run on any CPU)."""
    cpus: list[str] = []
    for t in doc.get("threads") or []:
        cpu = _dict(t).get("cpu")
        if not isinstance(cpu, int) or isinstance(cpu, bool):
            return None
        if str(cpu) not in cpus:
            cpus.append(str(cpu))
    return cpus or None


def production(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """DOC's production conditions, or None when it did not record them (before schema 8,
    imported, throughput): the split in % per CPU, of the measured CPUs together and of all
    CPUs, the busy %, and the load average at the start and the end of measuring."""
    activity = _dict(doc.get("activity"))
    per_cpu = _dict(activity.get("cpu_time_ns"))
    splits = {str(k): s for k, v in per_cpu.items() if (s := _split(_dict(v))) is not None}
    if "all" not in splits:
        return None
    measured = measured_cpus(doc)
    keys = [k for k in splits if k != "all"]
    chosen = [k for k in keys if k in (measured or keys)]
    together = {c: sum(splits[k][c] for k in chosen) for c in CATEGORIES}
    load = _dict(activity.get("loadavg"))

    def row(split: Mapping[str, int]) -> dict[str, Any]:
        pct = _pct(split)
        busy = sum(v for c, v in pct.items() if c in BUSY and v is not None)
        return {"ns": dict(split), "pct": pct, "busy_pct": busy if sum(split.values()) else None}

    return {
        "interval_ns": activity.get("interval_ns"),
        "measured_cpus": chosen if measured is not None else None,
        "measured": row(together),
        "all": row(splits["all"]),
        "per_cpu": {k: row(splits[k]) for k in keys},
        "loadavg_start": load.get("start") if isinstance(load.get("start"), Mapping) else None,
        "loadavg_end": load.get("end") if isinstance(load.get("end"), Mapping) else None,
    }


def _fmt_pct(v: Any) -> str:
    return "-" if not isinstance(v, int | float) else f"{v:.1f}"


def _fmt_load(avg: Any) -> str:
    a = _dict(avg)
    vals = [a.get(k) for k in ("avg_1min", "avg_5min", "avg_15min")]
    if not all(isinstance(v, int | float) for v in vals):
        return "-"
    return "/".join(f"{v:.2f}" for v in vals)


def production_row(series: str, case: str, p: Mapping[str, Any]) -> list[str]:
    """One row of the production table (HEADERS) for a case's production(doc)."""
    cpus = p["measured_cpus"]
    where = "all" if cpus is None else (format_cpulist([int(c) for c in cpus]) or "-")
    load = _fmt_load(p["loadavg_end"] or p["loadavg_start"])
    return [
        series,
        case,
        where,
        *(_fmt_pct(p["measured"]["pct"][c]) for c in CATEGORIES),
        _fmt_pct(p["all"]["busy_pct"]),
        load,
    ]
