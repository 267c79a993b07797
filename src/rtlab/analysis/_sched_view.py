"""The rows of the sched meter's view: one per observed thread of the user's program (the
document's `threads[i].sched`), named by the program, with its timer and wake-up latency
counts; a slot no thread took is left out. A row is keyed by the thread's name (`worker`,
`worker#2` for the second of that name), so that `compare` pairs the same thread of two
runs, whose TIDs differ."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _dict(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _program(doc: Mapping[str, Any]) -> str | None:
    """What was measured: the command started, else the process name or ID attached."""
    params = _dict(doc.get("params"))
    command = params.get("command")
    if isinstance(command, list) and command:
        return " ".join(str(w) for w in command)
    for key in ("process", "comm", "pid", "tids"):
        if params.get(key) is not None:
            return f"{'' if key == 'process' else key + ' '}{params[key]}"
    return None


def _ended(doc: Mapping[str, Any]) -> str:
    """How a started program ended, when it was not the probe that stopped it."""
    c = _dict(_dict(doc.get("sched")).get("command"))
    if not c or c.get("stopped_by_probe") is True:
        return ""
    if isinstance(c.get("start_error"), str):
        return f" (not started: {c['start_error']})"
    if _int(c.get("signal")) is not None:
        return f" (ended by signal {c['signal']})"
    if _int(c.get("exit_status")) is not None:
        return f" (ended with exit status {c['exit_status']})"
    return ""


def sched_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    program = _program(doc)
    if program is not None:
        program += _ended(doc)
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    threads = doc.get("threads")
    for t in threads if isinstance(threads, list) else []:
        s = _dict(_dict(t).get("sched"))
        tid = _int(s.get("tid"))
        if not tid:
            continue  # a slot no thread of the program took
        timer, wakeup = _dict(s.get("timer_latency")), _dict(s.get("wakeup_latency"))
        runtime = _dict(s.get("runtime"))
        name = str(s.get("comm") or "?")
        seen[name] = seen.get(name, 0) + 1
        rows.append(
            {
                "thread": name if seen[name] == 1 else f"{name}#{seen[name]}",
                "tid": tid,
                "program": program,
                "timer": _int(timer.get("count")),
                "timer_max_ns": timer.get("max_ns"),
                "wakeup": _int(wakeup.get("count")),
                "wakeup_max_ns": wakeup.get("max_ns"),
                "period_ns": s.get("period_ns"),
                "runtime_ns": runtime.get("mean_ns"),
                "overruns": _int(s.get("overruns")),
                "preemptions": _int(s.get("preemptions")),
                "migrations": _int(s.get("migrations")),
                "note": s.get("note"),
            }
        )
    return rows
