"""Load tests: start a load, find its process group, measure what it does."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from .._skips import need_tool
from . import procfs

GONE_WITHIN_S = 1.0
EXTERNAL = {"stress-ng": "stress-ng", "hackbench": "hackbench", "iperf3": "iperf3"}


def kind_of(spec: str) -> str:
    return spec.split("@")[0].split(",")[0].split(":")[0]


def skip_unless_installed(spec: str) -> None:
    tool = EXTERNAL.get(kind_of(spec))
    if tool:
        need_tool(tool)


@dataclass(frozen=True)
class Activity:
    cpu_ticks: int  # utime + stime + cutime + cstime of every process, USER_HZ ticks
    switches: int  # voluntary + involuntary context switches of every live process
    processes: int


def _cpu_ticks(pid: int) -> int:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0
    f = text.rpartition(")")[2].split()
    return sum(int(v) for v in f[14 - 3 : 18 - 3])  # fields 14-17


def _switches(pid: int) -> int:
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                total += int(line.split(":")[1])
    except (FileNotFoundError, ProcessLookupError):
        return 0
    return total


def group_activity(pgid: int) -> Activity:
    members = procfs.live_in_group(pgid)
    return Activity(
        sum(_cpu_ticks(p.pid) for p in members),
        sum(_switches(p.pid) for p in members),
        len(members),
    )


def start_load(probe: Path, args: list[str], cwd: Path, nworkers: int):
    """Start `rtlab-probe ARGS` and wait for NWORKERS load workers; (process, group)."""
    proc = subprocess.Popen(
        [str(probe), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd
    )

    def workers() -> list[procfs.ProcStat]:
        found = [c for c in procfs.children(proc.pid) if c.comm.startswith("rtlab:")]
        return found if len(found) >= nworkers or proc.poll() is not None else []

    found = procfs.wait_for(workers)
    if proc.poll() is not None:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise AssertionError(f"probe ended early ({proc.returncode}): {err}")
    assert len(found) == nworkers, found
    groups = {w.pgid for w in found}
    assert len(groups) == 1 and proc.pid not in groups
    return proc, groups.pop()


def wait_gone(pgid: int) -> list[procfs.ProcStat]:
    """Processes of PGID still alive after GONE_WITHIN_S (empty when all are gone)."""
    procfs.wait_for(lambda: not procfs.live_in_group(pgid), timeout_s=GONE_WITHIN_S)
    return procfs.live_in_group(pgid)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait()
