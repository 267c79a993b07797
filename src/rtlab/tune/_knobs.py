"""Tuning knobs: small objects over the audit's root, each fixing one audit check.

A knob names the check it fixes (its ID is what `--only` takes) and the family it belongs
to (what `rtlab compare` names a setup by). Its gate says whether it plans anything: by
default only when its check could run and found something (any status but OK), so a knob
never writes what the audit does not ask for. Its writes are planned against the values
read now; the Changer journals and makes them.

This module holds the base and the system-wide knobs (sysctls, THP, KSM); the per-CPU
ones (cpufreq, cpuidle, IRQs, workqueues, tasks) are in _knobs_cpu.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from rtlab.system import OK, Facts, Finding, Root, format_cpulist
from rtlab.tune._apply import normalize

LATENCY, BALANCED = "latency", "balanced"
PROFILES = (LATENCY, BALANCED)
SYSCTL = "proc/sys"
THP = "sys/kernel/mm/transparent_hugepage"


@dataclass(frozen=True)
class Write:
    """One planned write: PATH (relative to the root) from CURRENT to NEW."""

    path: str
    current: str | None
    new: str
    compare: str
    check: str
    family: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TaskMove:
    """A task to keep off the real-time CPUs: its CPU affinity from CURRENT to NEW."""

    pid: int
    comm: str
    kind: str  # "kernel thread" or "process"
    current: str
    new: str
    check: str
    family: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Setting:
    """What every knob plans from: the root, the facts, the audit's findings, the choices."""

    root: Root
    facts: Facts
    findings: dict[str, Finding]
    runnable: dict[str, bool]  # check ID -> its facts were there (available())
    profile: str
    deadline_ns: int | None
    allow_rt_unthrottled: bool
    rt: list[int] = field(default_factory=list)
    housekeeping: list[int] = field(default_factory=list)
    rt_explicit: bool = False
    warnings: list[str] = field(default_factory=list)

    def read(self, path: str) -> str | None:
        return self.root.read(path)

    def gate(self, check: str) -> str | None:
        """Why CHECK's knob plans nothing (None: it plans)."""
        finding = self.findings.get(check)
        if finding is None:
            return f"no audit check {check}"
        if not self.runnable.get(check, False):
            return f"the check could not run: {finding.evidence}"
        if finding.status == OK:
            return "the audit finds it OK"
        return None

    def write(self, knob: Knob, path: str, new: str, why: str = "") -> list[Write]:
        """[the write of NEW to PATH] unless PATH is unreadable or already holds NEW."""
        current = self.read(path)
        if current is None or normalize(knob.compare, current) == normalize(knob.compare, new):
            return []
        return [Write(path, current, new, knob.compare, knob.check, knob.family, why or knob.why)]


class Knob:
    """A setting that fixes one audit check: gate() -> writes() (or tasks())."""

    check: ClassVar[str]
    family: ClassVar[str]
    why: ClassVar[str]
    compare: ClassVar[str] = "int"

    def gate(self, s: Setting) -> str | None:
        return s.gate(self.check)

    def writes(self, s: Setting) -> list[Write]:
        return []

    def tasks(self, s: Setting) -> list[TaskMove]:
        return []

    def owns(self, check: str, target: str) -> bool:
        """True when an outcome of CHECK on TARGET was planned by this knob."""
        return check == self.check


class Sysctl(Knob):
    """One file, one value (a sysctl or a sysfs switch)."""

    path: ClassVar[str]
    value: ClassVar[str]

    def new(self, s: Setting) -> str:
        return self.value

    def writes(self, s: Setting) -> list[Write]:
        return s.write(self, self.path, self.new(s))


class TimerMigration(Sysctl):
    check = "sched.timer_migration"
    family = "timer migration"
    path = f"{SYSCTL}/kernel/timer_migration"
    value = "0"
    why = "kernel.timer_migration=0: timers stay on the CPU that armed them"


class StatInterval(Sysctl):
    check = "vm.stat_interval"
    family = "vmstat"
    path = f"{SYSCTL}/vm/stat_interval"
    value = "10"
    why = "vm.stat_interval=10: the per-CPU vmstat work runs every 10 s instead of every second"


class DirtyWriteback(Sysctl):
    check = "vm.dirty_writeback"
    family = "writeback"
    path = f"{SYSCTL}/vm/dirty_writeback_centisecs"
    value = "1500"
    why = "vm.dirty_writeback_centisecs=1500: the flusher threads wake every 15 s"


class WatchdogMask(Sysctl):
    check = "watchdog.soft"
    family = "watchdogs"
    path = f"{SYSCTL}/kernel/watchdog_cpumask"
    compare = "list"
    why = "kernel.watchdog_cpumask: the soft-lockup detector's timer runs on housekeeping CPUs only"

    def gate(self, s: Setting) -> str | None:
        if not s.rt_explicit:
            return "no real-time CPUs isolated or given (the audit's fix is nowatchdog at boot)"
        return s.gate(self.check)

    def new(self, s: Setting) -> str:
        return format_cpulist(s.housekeeping)


class NmiWatchdog(Sysctl):
    check = "watchdog.nmi"
    family = "watchdogs"
    path = f"{SYSCTL}/kernel/nmi_watchdog"
    value = "0"
    why = "kernel.nmi_watchdog=0: no periodic perf NMI on every CPU"


class Thp(Sysctl):
    check = "mm.thp"
    family = "THP"
    path = f"{THP}/enabled"
    compare = "choice"
    why = "transparent huge pages never (latency) or only where madvised (balanced)"

    def new(self, s: Setting) -> str:
        # never: no huge-page faults or khugepaged scans at all; the audit's madvise
        # (balanced) still lets madvised regions fault in huge pages.
        return "never" if s.profile == LATENCY else "madvise"


class ThpDefrag(Sysctl):
    check = "mm.thp_defrag"
    family = "THP"
    path = f"{THP}/defrag"
    compare = "choice"
    why = "no synchronous compaction on huge-page faults (never; defer+madvise as the audit says)"

    def new(self, s: Setting) -> str:
        return "never" if s.profile == LATENCY else "defer+madvise"


class NumaBalancing(Sysctl):
    check = "sched.numa_balancing"
    family = "NUMA balancing"
    path = f"{SYSCTL}/kernel/numa_balancing"
    value = "0"
    why = "kernel.numa_balancing=0: no periodic unmapping, so no NUMA hinting faults"


class Ksm(Sysctl):
    check = "mm.ksm"
    family = "KSM"
    path = "sys/kernel/mm/ksm/run"
    value = "0"
    why = "ksm run=0: ksmd stops scanning (pages merged already stay merged)"


RT_WARNING = (
    "kernel.sched_rt_runtime_us=-1 turns real-time throttling off: a runaway SCHED_FIFO "
    "task now keeps its CPU for good (rtlab tune reset puts the limit back)"
)


class RtThrottling(Sysctl):
    check = "sched.rt_runtime"
    family = "RT throttling"
    path = f"{SYSCTL}/kernel/sched_rt_runtime_us"
    value = "-1"
    why = "kernel.sched_rt_runtime_us=-1: a busy real-time task is never stopped for the rest"

    def gate(self, s: Setting) -> str | None:
        reason = s.gate(self.check)
        if reason is None and not s.allow_rt_unthrottled:
            return (
                "needs --allow-rt-unthrottled (a runaway SCHED_FIFO task would then keep "
                "its CPU for good)"
            )
        return reason

    def writes(self, s: Setting) -> list[Write]:
        out = super().writes(s)
        if out:
            s.warnings.append(RT_WARNING)
        return out
