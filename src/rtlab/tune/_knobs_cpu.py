"""Per-CPU knobs: cpufreq, cpuidle, interrupt affinities, workqueue masks, task affinities.

Files and formats (the kernel's Documentation):
admin-guide/pm/cpufreq.rst (cpuN/cpufreq/scaling_governor, scaling_min_freq and
cpuinfo_max_freq in kHz), admin-guide/pm/cpuidle.rst (cpuN/cpuidle/stateK/disable, 0 or 1;
latency in µs), core-api/irq/irq-affinity.rst (/proc/irq/N/smp_affinity_list a CPU list,
/proc/irq/default_smp_affinity a hex mask), core-api/workqueue.rst and
admin-guide/kernel-per-CPU-kthreads.rst (/sys/devices/virtual/workqueue/cpumask and the
WQ_SYSFS writeback workqueue's cpumask, hex masks).
"""

from __future__ import annotations

import os
from typing import ClassVar

from rtlab.system import format_cpulist, parse_task_stat
from rtlab.system._audit import hexmask
from rtlab.system._checks_cpu import DEFAULT_IDLE_LIMIT_US
from rtlab.system._cmdline import cpulist_or_none
from rtlab.system._facts import PF_KTHREAD, SCHED_FIFO, SCHED_RR
from rtlab.tune._knobs import LATENCY, Knob, Setting, Sysctl, TaskMove, Write

CPU = "sys/devices/system/cpu"
SCHED_DEADLINE = 6
PF_NO_SETAFFINITY = 0x04000000  # include/linux/sched.h: userland may not change its CPUs


class Governor(Knob):
    check = "cpu.governor"
    family = "governor"
    compare = "text"
    why = "performance governor: the clock does not ramp up only after the work arrives"

    def writes(self, s: Setting) -> list[Write]:
        out: list[Write] = []
        for c in s.rt:
            if s.facts.governors.get(str(c), "performance") != "performance":
                out += s.write(self, f"{CPU}/cpu{c}/cpufreq/scaling_governor", "performance")
        return out

    def owns(self, check: str, target: str) -> bool:
        return check == self.check and target.endswith("scaling_governor")


class MinFrequency(Knob):
    """No audit check of its own: the latency profile pins the clock at its maximum."""

    check = "cpu.governor"
    family = "min frequency"
    why = (
        "scaling_min_freq = the maximum (latency profile; no audit check of its own, "
        "selected with cpu.governor): no frequency ramp at all"
    )

    def gate(self, s: Setting) -> str | None:
        if s.profile != LATENCY:
            return "the balanced profile leaves the minimum frequency alone"
        if not s.facts.governors:
            return "no cpufreq: the frequency is set by firmware or the hypervisor"
        return None

    def writes(self, s: Setting) -> list[Write]:
        out: list[Write] = []
        for c in s.rt:
            base = f"{CPU}/cpu{c}/cpufreq"
            # The kernel clamps the minimum to scaling_max_freq: ask for no more than it.
            limits = [_int(s.read(f"{base}/{f}")) for f in ("cpuinfo_max_freq", "scaling_max_freq")]
            top = min((v for v in limits if v is not None), default=None)
            if top is not None:
                out += s.write(self, f"{base}/scaling_min_freq", str(top))
        return out

    def owns(self, check: str, target: str) -> bool:
        return check == self.check and target.endswith("scaling_min_freq")


class IdleStates(Knob):
    check = "cpu.idle_latency"
    family = "idle states"
    why = "idle state disabled: its exit latency would delay the woken task"

    def gate(self, s: Setting) -> str | None:
        if s.profile == LATENCY and not s.deadline_ns and s.runnable.get(self.check):
            return None  # every state deeper than POLL, whatever the 100 µs default says
        return s.gate(self.check)

    def writes(self, s: Setting) -> list[Write]:
        if s.deadline_ns:
            limit: float | None = s.deadline_ns / 1000
        else:
            limit = None if s.profile == LATENCY else DEFAULT_IDLE_LIMIT_US
        out: list[Write] = []
        for c in s.rt:
            for st in s.facts.idle_states.get(str(c), []):
                lat, name = st["latency_us"] or 0, st["name"] or "?"
                if st["disabled"]:
                    continue
                if limit is None:
                    if st["state"] == "state0" or name.upper() == "POLL":
                        continue
                    why = f"{name} (exit {lat} µs): the latency profile keeps only state0/POLL"
                elif lat <= limit:
                    continue
                else:
                    why = f"{name}: exit latency {lat} µs > {limit:g} µs"
                out += s.write(self, f"{CPU}/cpu{c}/cpuidle/{st['state']}/disable", "1", why)
        return out


class IrqAffinity(Knob):
    check = "irq.affinity"
    family = "IRQs"
    compare = "list"
    why = "interrupt moved to the housekeeping CPUs"

    def writes(self, s: Setting) -> list[Write]:
        rt, hk = set(s.rt), format_cpulist(s.housekeeping)
        out: list[Write] = []
        for irq, q in s.facts.irqs.items():
            if rt & (set(q["affinity"] or []) | set(q["effective"] or [])):
                why = f"IRQ {irq} ({q['name'] or '?'}) off the real-time CPUs"
                out += s.write(self, f"proc/irq/{irq}/smp_affinity_list", hk, why)
        return out


class DefaultIrqAffinity(Sysctl):
    check = "irq.default_affinity"
    family = "IRQs"
    path = "proc/irq/default_smp_affinity"
    compare = "mask"
    why = "interrupts requested from now on start on the housekeeping CPUs"

    def new(self, s: Setting) -> str:
        return hexmask(s.housekeeping)


class WorkqueueMask(Sysctl):
    check = "workqueue.cpumask"
    family = "workqueues"
    path = "sys/devices/virtual/workqueue/cpumask"
    compare = "mask"
    why = "unbound workqueues run on the housekeeping CPUs only"

    def new(self, s: Setting) -> str:
        return hexmask(s.housekeeping)


class WritebackMask(WorkqueueMask):
    check = "workqueue.writeback"
    path = "sys/bus/workqueue/devices/writeback/cpumask"
    why = "dirty-page writeback runs on the housekeeping CPUs only"


class _Tasks(Knob):
    """Tasks allowed on the real-time CPUs get the rest of their CPUs (else housekeeping)."""

    kind: ClassVar[str]
    kthreads: ClassVar[bool]

    def tasks(self, s: Setting) -> list[TaskMove]:
        rt, out = set(s.rt), []
        for pid, tid, comm, flags, policy, cpus in _threads(s):
            if bool(flags & PF_KTHREAD) != self.kthreads or not rt & set(cpus):
                continue
            if self.kthreads and (flags & PF_NO_SETAFFINITY or len(cpus) < 2):
                continue  # per-CPU kernel threads belong where they are
            if policy in (SCHED_FIFO, SCHED_RR, SCHED_DEADLINE):
                continue  # the real-time workload itself
            if s.root.live and pid == os.getpid():
                continue
            new = sorted(set(cpus) - rt) or s.housekeeping
            why = f"{self.kind} {comm} kept off the real-time CPUs"
            out.append(TaskMove(tid, comm, self.kind, format_cpulist(cpus), format_cpulist(new),
                                self.check, self.family, why))  # fmt: skip
        return out


class KernelThreads(_Tasks):
    check = "tasks.kthreads"
    family = "kernel threads"
    kind = "kernel thread"
    kthreads = True
    why = "movable kernel threads kept off the real-time CPUs"


class UserTasks(_Tasks):
    check = "tasks.user"
    family = "processes"
    kind = "process"
    kthreads = False
    why = "processes without a real-time policy kept off the real-time CPUs"


def _threads(s: Setting) -> list[tuple[int, int, str, int, int, list[int]]]:
    """(pid, tid, comm, flags, policy, allowed CPUs) of every thread under ROOT/proc."""
    out = []
    for name in s.root.listdir("proc") or []:
        if not name.isdigit():
            continue
        tids = [t for t in s.root.listdir(f"proc/{name}/task") or [] if t.isdigit()]
        dirs = [f"proc/{name}/task/{t}" for t in tids] or [f"proc/{name}"]
        for d in dirs:
            stat = s.read(f"{d}/stat")
            parsed = parse_task_stat(stat) if stat else None
            cpus = _allowed(s.read(f"{d}/status"))
            if parsed is not None and cpus is not None:
                out.append((int(name), int(d.rsplit("/", 1)[1]), *parsed, cpus))
    return out


def _allowed(status: str | None) -> list[int] | None:
    for line in (status or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return cpulist_or_none(line.split(":", 1)[1].strip())
    return None


def _int(text: str | None) -> int | None:
    try:
        return int(text.split()[0]) if text else None
    except ValueError:
        return None
