"""Checks of CPUs, interrupts and what else may run on the real-time CPUs."""

from __future__ import annotations

from typing import Any

from rtlab.system._audit import (
    FAIL,
    OK,
    WARN,
    Check,
    Context,
    cpu_scope,
    cpus,
    every_cpu,
    hexmask,
    housekeeping,
    rt_explicit,
)
from rtlab.system._facts import Facts
from rtlab.system._virt import EMULATED_WARNING, HYPERVISOR_WARNING, is_emulated, virt_label

CPU = "/sys/devices/system/cpu"
DEFAULT_IDLE_LIMIT_US = 100  # without --deadline, idle exit latencies above this are flagged
NOT_EXPLICIT = "no isolated or given real-time CPUs (use --rt-cpus)"


class Smt(Check):
    id = "cpu.smt"
    title = "Simultaneous multithreading"
    why = "SMT siblings share one core's pipeline and caches, so a sibling's work slows the other."
    missing = f"{CPU}/smt/active and topology not readable"

    def available(self, f: Facts) -> bool:
        return f.smt_active is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        pairs = sorted({tuple(s) for s in f.thread_siblings.values() if len(s) > 1})
        ev = f"{CPU}/smt/active: {int(bool(f.smt_active))}"
        if pairs:
            ev += "; siblings " + " ".join(cpus(list(p)) for p in pairs)
        return f.smt_active, ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        # Every CPU is affected, so no real-time CPU given still means a warning.
        if not value:
            return OK, ""
        return WARN, "boot with nosmt (or echo off > /sys/devices/system/cpu/smt/control)"


class SmtSiblingIsolated(Check):
    id = "cpu.smt_sibling"
    title = "SMT siblings of the real-time CPUs are isolated too"
    why = "Work on a non-isolated sibling competes for the real-time CPU's core."
    missing = NOT_EXPLICIT

    def available(self, f: Facts) -> bool:
        return rt_explicit(f)

    def read(self, f: Facts) -> tuple[Any, str]:
        rt = set(f.rt_cpus)
        iso = set(f.isolated_cpus) | (rt if f.rt_cpus_source == "--rt-cpus" else set())
        gaps = sorted(
            {s for c in rt for s in f.thread_siblings.get(str(c), [c]) if s not in iso} - rt
        )
        sib = "; ".join(f"cpu{c}: {cpus(f.thread_siblings.get(str(c)))}" for c in sorted(rt))
        return gaps, f"{CPU}/cpuN/topology/thread_siblings_list: {sib}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        return FAIL, f"isolate siblings {cpus(value)} as well, or take them offline"


class Governor(Check):
    id = "cpu.governor"
    title = "Performance governor on the real-time CPUs"
    why = "Other governors lower the clock while idle and ramp it up only after the work arrives."
    missing = "no cpufreq: the frequency is set by firmware or the hypervisor"

    def available(self, f: Facts) -> bool:
        return bool(f.governors)

    def read(self, f: Facts) -> tuple[Any, str]:
        govs = {c: f.governors.get(str(c)) for c in every_cpu(f) if str(c) in f.governors}
        text = ", ".join(f"cpu{c}={g}" for c, g in govs.items())
        return govs, f"{CPU}/cpuN/cpufreq/scaling_governor on {cpu_scope(f)}: {text}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        slow = [c for c, g in value.items() if g != "performance"]
        if not slow:
            return OK, ""
        return WARN, (
            f"for c in {' '.join(map(str, slow))}; do echo performance > "
            f"{CPU}/cpu$c/cpufreq/scaling_governor; done; to keep it after a reboot: boot with "
            "cpufreq.default_governor=performance (Linux 5.9 and later), or build "
            "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE=y; or build without CONFIG_CPU_FREQ "
            "(no scaling at all: the clock stays where the firmware set it, so check that "
            "is the highest, and the CPUs draw full power while idle)"
        )


class IdleExitLatency(Check):
    id = "cpu.idle_latency"
    title = "Idle states wake up within the deadline"
    why = "A CPU in a deep idle state needs its exit latency before it can run the woken task."
    missing = "no cpuidle states (no cpuidle driver)"

    def available(self, f: Facts) -> bool:
        return any(str(c) in f.idle_states for c in every_cpu(f))

    def read(self, f: Facts) -> tuple[Any, str]:
        enabled: list[tuple[int, str, int]] = []  # (cpu, "stateK/NAME", exit latency us)
        for c in every_cpu(f):
            for s in f.idle_states.get(str(c), []):
                if not s["disabled"]:
                    enabled.append((c, f"{s['state']}/{s['name']}", s["latency_us"] or 0))
        kinds = sorted({(lat, s.split("/")[1]) for _, s, lat in enabled})
        text = ", ".join(f"{name} {lat} us" for lat, name in kinds) or "none enabled"
        return enabled, f"{CPU}/cpuN/cpuidle/stateK/latency on {cpu_scope(f)}: {text}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        limit_us = ctx.deadline_ns / 1000 if ctx.deadline_ns else DEFAULT_IDLE_LIMIT_US
        over = [(c, s, lat) for c, s, lat in value if lat > limit_us]
        if not over:
            return OK, ""
        states = " ".join(sorted({s.split("/")[0] for _, s, _ in over}))
        cpu_nums = " ".join(str(c) for c in sorted({c for c, _, _ in over}))
        fix = (
            f"for c in {cpu_nums}; do for s in {states}; do echo 1 > {CPU}/cpu$c/cpuidle/$s/"
            "disable; done; done; or hold /dev/cpu_dma_latency at 0 "
            "(rtlab-probe wakeup --dma-latency 0us); or build without CONFIG_CPU_IDLE (the "
            "CPUs then only use the architecture's default idle instruction: more power and "
            "heat; a kernel with the ACPI processor driver, the default on ACPI x86 and arm64, "
            "selects CPU_IDLE)"
        )
        return (FAIL if ctx.deadline_ns else WARN), fix


class IrqAffinity(Check):
    id = "irq.affinity"
    title = "No interrupt is routed to a real-time CPU"
    why = "An interrupt handled on the real-time CPU delays its task by the handler's duration."
    missing = NOT_EXPLICIT

    def available(self, f: Facts) -> bool:
        return rt_explicit(f)

    def read(self, f: Facts) -> tuple[Any, str]:
        rt = set(f.rt_cpus)
        serving = [i for i, q in f.irqs.items() if rt & set(q["effective"] or [])]
        allowed = [
            i for i, q in f.irqs.items() if rt & set(q["affinity"] or []) and i not in serving
        ]

        def show(irqs: list[str]) -> str:
            return ", ".join(f"{i} ({f.irqs[i]['name'] or '?'})" for i in irqs[:8]) + (
                f" and {len(irqs) - 8} more" if len(irqs) > 8 else ""
            )

        ev = f"/proc/irq/N/effective_affinity_list: {len(f.irqs)} IRQs; "
        ev += f"served on CPUs {cpus(rt)}: {show(serving) or 'none'}"
        if allowed:
            ev += f"; allowed there: {show(allowed)}"
        return (serving, allowed), ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        serving, allowed = value
        if not serving and not allowed:
            return OK, ""
        hk = cpus(housekeeping(f))
        irqs = " ".join(serving + allowed)
        fix = f"for i in {irqs}; do echo {hk} > /proc/irq/$i/smp_affinity_list; done"
        return (FAIL if serving else WARN), fix


class DefaultIrqAffinity(Check):
    id = "irq.default_affinity"
    title = "New interrupts avoid the real-time CPUs"
    why = "Interrupts requested later (hot-plugged devices) start with the default affinity."
    missing = NOT_EXPLICIT

    def available(self, f: Facts) -> bool:
        return rt_explicit(f) and f.default_irq_affinity is not None

    def missing_for(self, f: Facts) -> str:
        return "/proc/irq/default_smp_affinity not readable" if rt_explicit(f) else NOT_EXPLICIT

    def read(self, f: Facts) -> tuple[Any, str]:
        v = f.default_irq_affinity or []
        return sorted(set(v) & set(f.rt_cpus)), f"/proc/irq/default_smp_affinity: CPUs {cpus(v)}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        return WARN, f"echo {hexmask(housekeeping(f))} > /proc/irq/default_smp_affinity"


class UserTasks(Check):
    id = "tasks.user"
    title = "No non-real-time process may run on the real-time CPUs"
    why = (
        "Any process allowed on the CPU can delay the real-time task's wake-up or evict its cache."
    )
    missing = NOT_EXPLICIT

    def available(self, f: Facts) -> bool:
        return f.tasks_read

    def read(self, f: Facts) -> tuple[Any, str]:
        names = ", ".join(f.user_tasks_on_rt_names)
        return f.user_tasks_on_rt, (
            f"/proc/PID/status Cpus_allowed_list: {f.user_tasks_on_rt} non-real-time processes on "
            f"CPUs {cpus(f.rt_cpus)}" + (f" ({names})" if names else "")
        )

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        return WARN, (
            f"isolate the CPUs (isolcpus=) or move the processes: taskset -apc "
            f"{cpus(housekeeping(f))} PID"
        )


class KernelThreads(Check):
    id = "tasks.kthreads"
    title = "No unbound kernel thread may run on the real-time CPUs"
    why = "Unbound kernel threads (kworkers, kswapd, RCU) run wherever they are allowed."
    missing = NOT_EXPLICIT

    def available(self, f: Facts) -> bool:
        return f.tasks_read

    def read(self, f: Facts) -> tuple[Any, str]:
        names = ", ".join(f.kthreads_on_rt_names)
        return f.kthreads_on_rt, (
            f"/proc/PID/status Cpus_allowed_list: {f.kthreads_on_rt} unbound kernel threads "
            f"allowed on CPUs {cpus(f.rt_cpus)}" + (f" ({names})" if names else "")
        )

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        return (
            WARN,
            f"boot with isolcpus=domain,{cpus(f.rt_cpus)} "
            f"(or kthread_cpus={cpus(housekeeping(f))})",
        )


class _MaskCheck(Check):
    """A cpumask file that should leave the real-time CPUs out."""

    path: str
    attr: str
    missing = NOT_EXPLICIT

    def available(self, f: Facts) -> bool:
        return rt_explicit(f) and getattr(f, self.attr) is not None

    def missing_for(self, f: Facts) -> str:
        # Isolated or given CPUs but no mask file: say so, not "no real-time CPUs".
        return f"{self.path} not readable" if rt_explicit(f) else NOT_EXPLICIT

    def read(self, f: Facts) -> tuple[Any, str]:
        v = getattr(f, self.attr) or []
        return sorted(set(v) & set(f.rt_cpus)), f"{self.path}: CPUs {cpus(v)}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        return WARN, f"echo {hexmask(housekeeping(f))} > {self.path}"


class WorkqueueMask(_MaskCheck):
    id = "workqueue.cpumask"
    title = "Unbound workqueues avoid the real-time CPUs"
    why = "Unbound work items run on any CPU of the workqueue cpumask."
    path = "/sys/devices/virtual/workqueue/cpumask"
    attr = "workqueue_cpus"


class WritebackMask(_MaskCheck):
    id = "workqueue.writeback"
    title = "Writeback work avoids the real-time CPUs"
    why = "Dirty-page writeback runs in the writeback workqueue on the CPUs of its cpumask."
    path = "/sys/bus/workqueue/devices/writeback/cpumask"
    attr = "writeback_cpus"


class Hypervisor(Check):
    id = "cpu.hypervisor"
    title = "Runs on the hardware, not under a hypervisor"
    why = (
        "A guest's latencies include the hypervisor's: the host may deschedule a vCPU at any "
        "time and delivers its timers and interrupts; under emulation (TCG) every instruction "
        "is translated, so latencies are emulation times."
    )
    missing = "no /proc/cpuinfo, /sys/hypervisor/type, DMI, device tree or clocksource readable"

    def available(self, f: Facts) -> bool:
        return f.hypervisor.get("present") is not None or f.virtualization.get("kind") == "vm"

    def read(self, f: Facts) -> tuple[Any, str]:
        v = f.virtualization
        ev = list(f.hypervisor.get("evidence") or [])
        if str(v.get("source")).startswith("the host"):
            ev.insert(
                0,
                f"host: {v.get('hypervisor') or 'vm'} under {str(v.get('accel')).upper()}, "
                f"host kernel {v.get('host_kernel') or '?'}",
            )
        return v, "; ".join(ev) or "no hypervisor flag, /sys/hypervisor/type or virtual DMI"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if is_emulated(value):
            return FAIL, (
                f"{EMULATED_WARNING}: no latency verdict holds; boot with accel=kvm, or "
                "measure on the hardware"
            )
        if value.get("kind") != "vm":
            return OK, ""
        return WARN, (
            f"{virt_label(value)}: {HYPERVISOR_WARNING}; measure on the hardware for the "
            "verdict, or pin each vCPU to its own host CPU and isolate those on the host"
        )


class StealTime(Check):
    id = "cpu.steal"
    title = "No steal time (the CPUs are not shared with other guests)"
    why = (
        "Steal time (/proc/stat, 8th value of the cpu lines) is time the host ran something "
        "else while this system's vCPUs wanted to run: a latency can include it."
    )
    missing = "/proc/stat has no steal value"

    def available(self, f: Facts) -> bool:
        return f.hypervisor.get("steal_ticks") is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        per_cpu = f.hypervisor.get("steal_cpus") or {}
        ev = f"/proc/stat: steal {f.hypervisor['steal_ticks']} ticks since boot"
        if per_cpu:
            ev += " (" + ", ".join(f"{c} {n}" for c, n in list(per_cpu.items())[:16]) + ")"
        return f.hypervisor["steal_ticks"], ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        return WARN, (
            f"the host is shared: {HYPERVISOR_WARNING}; give the guest dedicated host CPUs "
            "or measure on the hardware"
        )
