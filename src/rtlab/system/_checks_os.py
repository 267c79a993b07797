"""Checks of scheduler, memory, watchdog and tracing settings."""

from __future__ import annotations

from typing import Any

from rtlab.system._audit import (
    INFO,
    OK,
    WARN,
    Check,
    Context,
    cpus,
    dedicated,
    housekeeping,
    rt_explicit,
)
from rtlab.system._facts import Facts

SYSCTL = "/proc/sys"
THP = "/sys/kernel/mm/transparent_hugepage"


class _Sysctl(Check):
    """An integer sysctl judged against one value."""

    attr: str
    path: str
    name: str  # for `sysctl NAME=VALUE`
    good: int
    status: str = WARN

    @property
    def missing(self) -> str:  # type: ignore[override]
        return f"{self.path} not readable"

    def available(self, f: Facts) -> bool:
        return getattr(f, self.attr) is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        v = getattr(f, self.attr)
        return v, f"{self.path}: {v}"

    def ok(self, value: int) -> bool:
        return value == self.good

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (OK, "") if self.ok(value) else (self.status, f"sysctl {self.name}={self.good}")


def _unthrottle(f: Facts) -> str:
    """The fix that turns real-time throttling off, with what it costs."""
    fix = (
        f"sysctl kernel.sched_rt_runtime_us=-1, as CPUs {cpus(f.rt_cpus)} are isolated for "
        "real-time tasks; this loses the protection from a runaway SCHED_FIFO/RR task (it "
        "then keeps its CPU for good), so the housekeeping CPUs "
        f"{cpus(housekeeping(f))} must keep every non-real-time task alive"
    )
    if f.config.get("CONFIG_RT_GROUP_SCHED") == "y":
        fix += (
            "; with RT_GROUP_SCHED a task in a child cgroup stays limited by its cpu.rt_runtime_us"
        )
    return fix


class RtThrottling(Check):
    id = "sched.rt_runtime"
    title = "Real-time throttling suits the CPU partitioning"
    why = (
        "Throttling stops a busy real-time task for the rest of each period, which saves a "
        "shared CPU from a runaway SCHED_FIFO task; only isolated CPUs can do without it."
    )
    path = f"{SYSCTL}/kernel/sched_rt_runtime_us"
    missing = f"{path} not readable"

    def available(self, f: Facts) -> bool:
        return f.sched_rt_runtime_us is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        ev = f"{self.path}: {f.sched_rt_runtime_us} of sched_rt_period_us {f.sched_rt_period_us}"
        ev += f"; real-time CPUs {cpus(f.rt_cpus)} " + (
            "isolated" if dedicated(f) else "shared with other work"
        )
        return f.sched_rt_runtime_us, ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        on = value != -1
        if on == (not dedicated(f)):
            return OK, ""
        if on:
            return INFO, _unthrottle(f)
        period = f.sched_rt_period_us or 1_000_000
        return WARN, (
            f"sysctl kernel.sched_rt_runtime_us={period * 95 // 100} (the default 95%): "
            "without isolated real-time CPUs a runaway SCHED_FIFO/RR task keeps a shared "
            "CPU, and the kernel threads on it, for good"
        )


class RtThrottlingIsolated(Check):
    id = "sched.rt_throttling_isolated"
    title = "No throttled real-time task on an isolated CPU"
    why = "Throttling can stop a SCHED_FIFO task on an isolated CPU although nothing else needs it."
    missing = "tasks on the real-time CPUs not read (no isolated or given CPUs)"

    def available(self, f: Facts) -> bool:
        return f.tasks_read and f.sched_rt_runtime_us is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        names = ", ".join(f.rt_policy_tasks_on_rt) or "none"
        where = "isolated" if dedicated(f) else "not isolated"
        return (f.sched_rt_runtime_us, f.rt_policy_tasks_on_rt), (
            f"{SYSCTL}/kernel/sched_rt_runtime_us: {f.sched_rt_runtime_us}; SCHED_FIFO/RR "
            f"processes allowed on CPUs {cpus(f.rt_cpus)} ({where}): {names}"
        )

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        runtime, tasks = value
        if runtime == -1 or not tasks:
            return OK, ""
        if dedicated(f):
            return WARN, _unthrottle(f)
        return INFO, (
            f"isolate CPUs {cpus(f.rt_cpus)} first (boot.isolcpus): on a shared CPU throttling "
            "is what saves the machine from a runaway real-time task, so keep it there"
        )


class TimerMigration(_Sysctl):
    id = "sched.timer_migration"
    title = "Timers stay on the CPU that armed them"
    why = "Timer migration moves expiry work between CPUs, onto busy real-time CPUs too."
    attr = "timer_migration"
    path = f"{SYSCTL}/kernel/timer_migration"
    name = "kernel.timer_migration"
    good = 0


class NumaBalancing(_Sysctl):
    id = "sched.numa_balancing"
    title = "Automatic NUMA balancing off"
    why = "NUMA balancing unmaps pages periodically, so the real-time task takes page faults."
    attr = "numa_balancing"
    path = f"{SYSCTL}/kernel/numa_balancing"
    name = "kernel.numa_balancing"
    good = 0


class StatInterval(_Sysctl):
    id = "vm.stat_interval"
    title = "vmstat updates are infrequent"
    why = "The per-CPU vmstat work item runs on every CPU once per stat_interval."
    attr = "stat_interval_s"
    path = f"{SYSCTL}/vm/stat_interval"
    name = "vm.stat_interval"
    good = 10
    status = INFO

    def ok(self, value: int) -> bool:
        return value >= self.good


class DirtyWriteback(_Sysctl):
    id = "vm.dirty_writeback"
    title = "Writeback flusher wakes up rarely"
    why = "The flusher threads wake every dirty_writeback_centisecs and contend for locks."
    attr = "dirty_writeback_centisecs"
    path = f"{SYSCTL}/vm/dirty_writeback_centisecs"
    name = "vm.dirty_writeback_centisecs"
    good = 1500
    status = INFO

    def ok(self, value: int) -> bool:
        return value == 0 or value >= self.good


class SoftWatchdog(Check):
    id = "watchdog.soft"
    title = "Soft-lockup watchdog off on the real-time CPUs"
    why = "The soft-lockup detector runs an hrtimer and a stopper thread on every watched CPU."
    missing = f"{SYSCTL}/kernel/watchdog not readable"

    def available(self, f: Facts) -> bool:
        return f.watchdog is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        watched = sorted(set(f.watchdog_cpus or f.cpus_online) & set(f.rt_cpus))
        ev = f"{SYSCTL}/kernel/watchdog: {f.watchdog}; watchdog_cpumask: {cpus(f.watchdog_cpus)}"
        return (f.watchdog, watched), ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        on, watched = value
        if not on or not watched:
            return OK, ""
        return INFO, (
            f"boot with nowatchdog, or sysctl kernel.watchdog_cpumask={cpus(housekeeping(f))}"
            if rt_explicit(f)
            else "boot with nowatchdog (or sysctl kernel.watchdog=0)"
        )


class NmiWatchdog(_Sysctl):
    id = "watchdog.nmi"
    title = "NMI watchdog off"
    why = "The hard-lockup detector raises a perf NMI on every CPU periodically."
    attr = "nmi_watchdog"
    path = f"{SYSCTL}/kernel/nmi_watchdog"
    name = "kernel.nmi_watchdog"
    good = 0


class Thp(Check):
    id = "mm.thp"
    title = "Transparent huge pages not always on"
    why = "With THP always, faults may compact memory and khugepaged scans the address space."
    missing = f"{THP}/enabled not readable"

    def available(self, f: Facts) -> bool:
        return f.thp_enabled is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.thp_enabled, f"{THP}/enabled: [{f.thp_enabled}]"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value != "always":
            return OK, ""
        return WARN, f"boot with transparent_hugepage=madvise (or echo madvise > {THP}/enabled)"


class ThpDefrag(Check):
    id = "mm.thp_defrag"
    title = "Huge page faults do not compact synchronously"
    why = "defrag=always makes a faulting task stall while memory is compacted."
    missing = f"{THP}/defrag not readable"

    def available(self, f: Facts) -> bool:
        return f.thp_defrag is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.thp_defrag, f"{THP}/defrag: [{f.thp_defrag}]"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value != "always":
            return OK, ""
        return WARN, f"echo defer+madvise > {THP}/defrag"


class Swap(Check):
    id = "mm.swap"
    title = "No swap"
    why = "A swapped-out page of the real-time task costs a disk read on its next access."
    missing = "/proc/swaps not readable"

    def available(self, f: Facts) -> bool:
        return f.swap_devices is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        devs = f.swap_devices or []
        return devs, f"/proc/swaps: {', '.join(devs) or 'no swap'}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        return WARN, "swapoff -a, or lock the real-time task's memory (mlockall)"


class Ksm(Check):
    id = "mm.ksm"
    title = "Kernel same-page merging off"
    why = "KSM scans and merges pages, so writes to merged pages take copy-on-write faults."
    missing = "/sys/kernel/mm/ksm/run not readable (no KSM)"

    def available(self, f: Facts) -> bool:
        return f.ksm_run is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.ksm_run, f"/sys/kernel/mm/ksm/run: {f.ksm_run}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (OK, "") if value == 0 else (WARN, "echo 0 > /sys/kernel/mm/ksm/run")


class MceInterval(Check):
    id = "mce.check_interval"
    title = "Machine-check polling off"
    why = "The machine-check poll runs a timer on every CPU each check_interval seconds."
    missing = "no machine-check polling (not x86 or not readable)"
    path = "/sys/devices/system/machinecheck/machinecheck0/check_interval"

    def available(self, f: Facts) -> bool:
        return f.mce_check_interval_s is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.mce_check_interval_s, f"{self.path}: {f.mce_check_interval_s} s"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value == 0:
            return OK, ""
        return (
            INFO,
            "for f in /sys/devices/system/machinecheck/*/check_interval; do echo 0 > $f; done",
        )


class CurrentTracer(Check):
    id = "trace.current"
    title = "No tracer running"
    why = "A running tracer adds its overhead to every traced event."
    missing = "tracefs not mounted or not readable"

    def available(self, f: Facts) -> bool:
        return f.current_tracer is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.current_tracer, f"tracing/current_tracer: {f.current_tracer}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value == "nop":
            return OK, ""
        return WARN, "echo nop > /sys/kernel/tracing/current_tracer"


class LatencyTracersAvailable(Check):
    id = "trace.available"
    title = "timerlat, osnoise and hwlat tracers available"
    why = "These tracers tell where a latency spike came from (IRQ, thread, hardware)."
    missing = "tracefs not mounted and kernel configuration not readable"
    wanted = ("timerlat", "osnoise", "hwlat")

    def available(self, f: Facts) -> bool:
        return f.tracers_available is not None or f.config_source is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        if f.tracers_available is not None:
            have = [t for t in self.wanted if t in f.tracers_available]
            return (have, True), f"tracing/available_tracers: {' '.join(f.tracers_available)}"
        keys = ("CONFIG_TIMERLAT_TRACER", "CONFIG_OSNOISE_TRACER", "CONFIG_HWLAT_TRACER")
        have = [t for t, k in zip(self.wanted, keys, strict=True) if f.config.get(k) == "y"]
        return (have, False), f"{f.config_source}: built in: {' '.join(have) or 'none'}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        have, mounted = value
        lacking = [t for t in self.wanted if t not in have]
        if lacking:
            opts = " ".join(f"CONFIG_{t.upper()}_TRACER=y" for t in lacking)
            return INFO, f"rebuild with {opts}"
        if not mounted:
            return INFO, "mount -t tracefs nodev /sys/kernel/tracing"
        return OK, ""
