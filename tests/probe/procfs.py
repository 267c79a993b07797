"""Read-only views of /proc used by the probe tests (never kills by name)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcStat:
    pid: int
    comm: str
    state: str
    ppid: int
    pgid: int
    rt_priority: int
    policy: int


def _parse_stat(text: str, pid: int) -> ProcStat:
    # comm may contain spaces and parentheses: split at the last ')'.
    head, _, rest = text.rpartition(")")
    comm = head.split("(", 1)[1]
    f = rest.split()
    # f[0] is field 3 (state); field N is f[N - 3].
    return ProcStat(pid, comm, f[0], int(f[1]), int(f[2]), int(f[40 - 3]), int(f[41 - 3]))


def stat(pid: int, tid: int | None = None) -> ProcStat | None:
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    try:
        return _parse_stat(Path(path).read_text(), tid or pid)
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def all_processes() -> list[ProcStat]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = stat(int(name))
            if s:
                out.append(s)
    return out


def children(pid: int) -> list[ProcStat]:
    return [p for p in all_processes() if p.ppid == pid]


def live_in_group(pgid: int) -> list[ProcStat]:
    """Processes of group PGID that have not exited (zombies have exited)."""
    return [p for p in all_processes() if p.pgid == pgid and p.state != "Z"]


def threads(pid: int) -> list[ProcStat]:
    out = []
    for name in os.listdir(f"/proc/{pid}/task"):
        s = stat(pid, int(name))
        if s:
            out.append(s)
    return out


def cpus_allowed(pid: int, tid: int | None = None) -> str:
    path = f"/proc/{pid}/status" if tid is None else f"/proc/{pid}/task/{tid}/status"
    for line in Path(path).read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no Cpus_allowed_list")


def wait_for(predicate, timeout_s: float = 10.0, step_s: float = 0.02):
    """Poll PREDICATE until it returns something truthy; return it (or the last falsy value)."""
    end = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() >= end:
            return value
        time.sleep(step_s)
