"""Checks real-time evaluations rely on: RCU priority boosting on PREEMPT_RT, memory
commitment and the OOM killer, and where real-time threads sit against the IRQ threads."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from rtlab.system._audit import INFO, OK, WARN, Check, Context
from rtlab.system._cpus import cpulist_or_none, format_cpulist
from rtlab.system._facts import Facts

VM = "/proc/sys/vm"
LISTED = 8  # threads named in one evidence string
COMMIT_MARGIN = 1.25  # the commit limit suggested: this much above what is committed now
OVERCOMMIT = {0: "heuristic", 1: "always", 2: "never"}


def _thread(t: dict[str, Any]) -> str:
    where = f" CPUs {t['cpus']}" if t.get("cpus") else ""
    return f"{t['comm']} ({t['tid']}) {t['policy']}:{t['priority']}{where}"


def _listed(items: list[str], total: int) -> str:
    more = f" and {total - LISTED} more" if total > LISTED else ""
    return ", ".join(items[:LISTED]) + more


class _Flag(Check):
    """OK when the value read is true, else STATUS with FIX."""

    status: ClassVar[str]
    fix: ClassVar[str]

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (OK, "") if value else (self.status, self.fix)


class RcuBoost(_Flag):
    id = "kernel.rcu_boost"
    title = "RCU readers are priority-boosted (PREEMPT_RT)"
    why = (
        "On PREEMPT_RT an RCU reader can be preempted; without RCU_BOOST a reader preempted "
        "by a busy real-time task holds up every grace period, and the memory freed after "
        "it, until the CPU is free (kernel/rcu/Kconfig). Boosted readers run at "
        "rcutree.kthread_prio (fifo:1 by default) after CONFIG_RCU_BOOST_DELAY ms."
    )
    status = WARN
    fix = "rebuild with CONFIG_RCU_BOOST=y (the default with PREEMPT_RT)"

    def available(self, f: Facts) -> bool:
        return f.preempt_model == "rt" and f.config_source is not None

    def missing_for(self, f: Facts) -> str:
        if f.preempt_model != "rt":
            return f"not a PREEMPT_RT kernel (preempt model {f.preempt_model}): not applicable"
        return "kernel configuration not readable (/proc/config.gz, /boot/config-<release>)"

    def read(self, f: Facts) -> tuple[Any, str]:
        boost = f.config.get("CONFIG_RCU_BOOST")
        ev = f"{f.config_source}: CONFIG_RCU_BOOST={boost or 'not set'}"
        if (delay := f.config.get("CONFIG_RCU_BOOST_DELAY")) is not None:
            ev += f", CONFIG_RCU_BOOST_DELAY={delay} (ms)"
        if f.rcu_kthread_prio is not None:
            ev += f"; boot line rcutree.kthread_prio={f.rcu_kthread_prio}"
        if (rcub := f.rt_kthreads.get("rcub/N")) is not None:
            ev += f"; rcub/N threads at {', '.join(rcub)}"
        return boost == "y", ev


class Overcommit(Check):
    id = "vm.overcommit"
    title = "Memory is committed only when it can be backed"
    why = (
        "With overcommit (vm.overcommit_memory 0 or 1) malloc succeeds for memory that may "
        "not exist; when it is touched later the OOM killer picks a process, perhaps the "
        "real-time one. With 2 (never) an allocation beyond swap + overcommit_ratio % of RAM "
        "fails at once, where the program can handle it; programs that reserve much more "
        "than they use then fail, so size the ratio on what is committed "
        "(/proc/meminfo Committed_AS) and protect the real-time process with "
        "oom_score_adj -1000 either way."
    )
    missing = f"{VM}/overcommit_memory not readable"

    def available(self, f: Facts) -> bool:
        return f.overcommit_memory is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        mode = f.overcommit_memory
        ev = (
            f"{VM}/overcommit_memory: {mode} ({OVERCOMMIT.get(mode or 0, 'unknown')}), "
            f"overcommit_ratio: {f.overcommit_ratio}, overcommit_kbytes: {f.overcommit_kbytes}"
        )
        if f.commit_limit_kb is not None and f.committed_as_kb is not None:
            ev += (
                f"; /proc/meminfo: CommitLimit {f.commit_limit_kb} kB, "
                f"Committed_AS {f.committed_as_kb} kB"
            )
        return mode, ev

    def ratio(self, f: Facts) -> int | None:
        """The overcommit_ratio that leaves COMMIT_MARGIN above what is committed now."""
        if not f.mem_total_kb or f.committed_as_kb is None:
            return None
        need = COMMIT_MARGIN * f.committed_as_kb - (f.swap_total_kb or 0)
        return max(50, math.ceil(need * 100 / f.mem_total_kb))

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        protect = "; and echo -1000 > /proc/PID/oom_score_adj for the real-time process"
        if value == 2:
            if f.overcommit_kbytes or not f.commit_limit_kb or f.committed_as_kb is None:
                return OK, ""
            if f.committed_as_kb <= f.commit_limit_kb / COMMIT_MARGIN:
                return OK, ""
            ratio = self.ratio(f)
            return INFO, (
                f"allocations are close to the commit limit: sysctl vm.overcommit_ratio={ratio}"
            )
        ratio = self.ratio(f)
        fix = f"sysctl vm.overcommit_memory=2 vm.overcommit_ratio={ratio or 'R'}"
        if ratio is not None:
            fix += f" (swap + {ratio} % of RAM is {COMMIT_MARGIN}x Committed_AS now)"
        if ratio is not None and ratio > 100:
            fix += ", or commit less: more is committed than RAM and swap can back"
        return (WARN if value == 1 else INFO), fix + protect


class OomPolicy(Check):
    id = "vm.oom"
    title = "The OOM killer spares the real-time process"
    why = (
        "Out of memory, the kernel kills the process with the highest oom_score unless its "
        "oom_score_adj is -1000 (OOMScoreAdjust=-1000 in a systemd unit); with "
        "oom_kill_allocating_task=1 it kills whichever process allocated last, the "
        "real-time one too unless it is at -1000; panic_on_oom stops the whole system "
        "(right only with a watchdog or failover that restarts it) (mm/oom_kill.c)."
    )
    missing = f"{VM}/panic_on_oom and oom_kill_allocating_task not readable"

    def available(self, f: Facts) -> bool:
        return f.panic_on_oom is not None or f.oom_kill_allocating_task is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        exposed = [t for t in f.rt_user_thread_list if t.get("oom_score_adj") != -1000]
        names = sorted({f"{t['comm']} ({t['pid']}): {t.get('oom_score_adj')}" for t in exposed})
        ev = (
            f"{VM}/oom_kill_allocating_task: {f.oom_kill_allocating_task}, "
            f"panic_on_oom: {f.panic_on_oom}"
        )
        if f.rt_threads_read:
            ev += (
                "; real-time processes not at oom_score_adj -1000 (/proc/PID/oom_score_adj): "
                f"{_listed(names, len(names)) or 'none'}"
            )
        return sorted({t["pid"] for t in exposed}), ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        fixes = []
        if value:
            pids = " ".join(map(str, value[:LISTED]))
            fixes.append(f"for PID in {pids}; do echo -1000 > /proc/$PID/oom_score_adj; done")
        if f.oom_kill_allocating_task and value:
            fixes.append("sysctl vm.oom_kill_allocating_task=0")
        if f.panic_on_oom:
            fixes.append(
                "keep vm.panic_on_oom only with a watchdog that restarts the system, "
                "else sysctl vm.panic_on_oom=0"
            )
        return (INFO, "; ".join(fixes)) if fixes else (OK, "")


class IrqThreads(_Flag):
    id = "irq.threads"
    title = "Interrupt handlers run in threads"
    why = (
        "Threaded handlers (irq/N-name, PREEMPT_RT or the threadirqs boot option) run at "
        "fifo:50 by default (kernel/irq/manage.c), so a real-time task can be placed above "
        "or below its device's handler; unthreaded handlers preempt every task."
    )
    missing = "threads not read (/proc/PID/stat)"
    status = INFO
    fix = "boot with threadirqs (or a PREEMPT_RT kernel) to thread the handlers"

    def available(self, f: Facts) -> bool:
        return f.rt_threads_read

    def read(self, f: Facts) -> tuple[Any, str]:
        prios = ", ".join(f"{p} x{n}" for p, n in f.irq_thread_prios.items())
        ev = f"/proc/PID/stat: {f.irq_threads} IRQ threads"
        if f.irq_threads:
            names = _listed(f.irq_thread_names, f.irq_threads)
            ev += f" at {prios} ({names})"
        kernel = [f"{g} {'/'.join(p)}" for g, p in sorted(f.rt_kthreads.items())]
        ev += f"; other real-time kernel threads: {_listed(kernel, len(kernel)) or 'none'}"
        if "migration/N" in f.rt_kthreads:
            ev += " (migration/N: the stop class, above every policy, shown as fifo:99)"
        return f.irq_threads, ev


class RtPriorities(Check):
    id = "tasks.rt_priority"
    title = "Real-time priorities below 99 and below the IRQ threads they need"
    why = (
        "99 is the top fifo priority, where the kernel shows its stop-class migration/N "
        "threads: nothing can be raised above a task there, and fifo tasks of equal priority "
        "never preempt each other. A task above the IRQ thread of its device does not get "
        "that device's data while it runs."
    )

    def available(self, f: Facts) -> bool:
        return f.rt_threads_read and f.rt_user_threads > 0

    def missing_for(self, f: Facts) -> str:
        if not f.rt_threads_read:
            return "threads not read (/proc/PID/task/TID/stat)"
        return "no SCHED_FIFO/RR user thread running: nothing to compare"

    def above_irq(self, f: Facts) -> list[dict[str, Any]]:
        """User threads above every IRQ thread allowed on their CPUs."""
        out = []
        for t in f.rt_user_thread_list:
            cpus = cpulist_or_none(t.get("cpus") or "") or []
            irq = [f.irq_thread_max_prio[str(c)] for c in cpus if str(c) in f.irq_thread_max_prio]
            if irq and t["priority"] > max(irq):
                out.append(t)
        return out

    def read(self, f: Facts) -> tuple[Any, str]:
        threads = [_thread(t) for t in f.rt_user_thread_list]
        ev = f"/proc/PID/task/TID/stat: {f.rt_user_threads} user real-time threads: "
        ev += _listed(threads, f.rt_user_threads)
        by_prio: dict[int, list[int]] = {}
        for cpu, prio in f.irq_thread_max_prio.items():
            by_prio.setdefault(prio, []).append(int(cpu))
        tops = [f"{p} on CPUs {format_cpulist(c)}" for p, c in sorted(by_prio.items())]
        ev += f"; highest IRQ thread priority: {', '.join(tops) or 'no real-time IRQ thread'}"
        at_99 = [t for t in f.rt_user_thread_list if t["priority"] >= 99]
        return (at_99, self.above_irq(f)), ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        at_99, above = value
        fixes = [f"chrt -f -p 98 {t['tid']} ({t['comm']})" for t in at_99[:LISTED]]
        if above:
            names = ", ".join(_thread(t) for t in above[:LISTED])
            fixes.append(
                f"{names} above every IRQ thread of its CPUs: raise the IRQ thread of your "
                "device with chrt -f -p PRIO PID (ps -eo pid,rtprio,comm | grep irq/)"
            )
        if at_99:
            return WARN, "; ".join(fixes)
        return (INFO, "; ".join(fixes)) if fixes else (OK, "")
