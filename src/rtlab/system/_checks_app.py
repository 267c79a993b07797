"""The application audit: an application's threads against the guidance real-time
evaluations give (docs/audit.md, "Application audit"). Each check judges every thread of
the processes given, in the system audit's finding format."""

from __future__ import annotations

from typing import Any, ClassVar

from rtlab.system._app import AppFacts, AppThread, KernelThread, cpus_text
from rtlab.system._audit import FAIL, INFO, OK, STATUSES, WARN, Finding

LISTED = 8  # threads named in one evidence string
ANY = "PID"


def _listed(items: list[str]) -> str:
    more = f" and {len(items) - LISTED} more" if len(items) > LISTED else ""
    return ", ".join(items[:LISTED]) + more


def _worst(*statuses: str) -> str:
    return max(statuses, key=STATUSES.index, default=OK)


def _judged(f: AppFacts) -> list[AppThread]:
    """The threads the real-time checks judge: the fifo/rr ones, else every thread (an
    application without one is judged as a whole)."""
    rt = [t for t in f.threads if t.rt]
    return rt or f.threads


def _ptext(t: AppThread | KernelThread) -> str:
    return f"{t.policy}:{t.priority}" if t.policy in ("fifo", "rr") else t.policy


def _irq_on(f: AppFacts, cpus: list[int] | None) -> list[KernelThread]:
    """The real-time IRQ threads that may run on CPUS."""
    mine = set(cpus or f.system.cpus_online)
    return [
        k
        for k in f.irq_threads
        if k.policy in ("fifo", "rr") and (k.cpus is None or mine & set(k.cpus))
    ]


class AppCheck:
    id: ClassVar[str]
    title: ClassVar[str]
    why: ClassVar[str]

    def judge(self, f: AppFacts) -> tuple[str, str, str]:
        """(status, evidence, fix)."""
        raise NotImplementedError

    def run(self, f: AppFacts) -> Finding:
        status, evidence, fix = self.judge(f)
        return Finding(self.id, status, self.title, evidence, "" if status == OK else fix, self.why)


class Priority(AppCheck):
    id = "app.priority"
    title = "Threads run under a real-time policy, below 99 and placed against the IRQ threads"
    why = (
        "A SCHED_OTHER thread waits behind every real-time thread and shares its CPU by "
        "fairness; a fifo thread below or at an IRQ thread's priority (fifo:50 by default) "
        "waits for every interrupt handled on its CPUs; above the IRQ thread of the device "
        "it waits for, it never gets that device's data while it runs; at 99, where the "
        "kernel shows its stop-class migration/N threads, nothing can be raised above it."
    )

    def __init__(self, device_irqs: list[int] | None = None) -> None:
        self.device_irqs = device_irqs or []

    def _device(self, k: KernelThread) -> bool:
        return any(k.comm.startswith(f"irq/{n}-") for n in self.device_irqs)

    def judge(self, f: AppFacts) -> tuple[str, str, str]:
        rt = [t for t in f.threads if t.rt]
        others = [t for t in f.threads if not t.rt]
        ev = f"/proc/PID/task/TID/stat (fields 41 policy, 40 rt_priority): {len(rt)} of "
        ev += f"{len(f.threads)} threads fifo, rr or deadline"
        ev += f" ({_listed([f'{t.name()} {_ptext(t)}' for t in rt])})" if rt else ""
        statuses, fixes = [OK], []
        if not rt:
            statuses.append(WARN)
            pids = " ".join(str(p["pid"]) for p in f.processes)
            fixes.append(
                f"no thread runs under a real-time policy: chrt -f -p PRIO TID for the "
                f"time-critical threads (of PID {pids}), PRIO above the IRQ threads of "
                "other devices (51-98 with the default fifo:50)"
            )
        elif others:
            statuses.append(INFO)
            ev += f"; at {others[0].policy}: {_listed([t.name() for t in others])}"
            fixes.append("threads at other are fine only if they do no time-critical work")
        irq_seen: dict[str, KernelThread] = {}
        alike: dict[tuple[str, str, int], list[AppThread]] = {}  # one fix per problem
        for t in rt:
            if t.policy == "deadline":
                continue  # above every fifo/rr thread, IRQ threads included
            irqs = _irq_on(f, t.cpus)
            irq_seen.update({k.comm: k for k in irqs})
            rest = [k for k in irqs if not self._device(k)]
            if t.priority >= 99:
                alike.setdefault(("99", "", 99), []).append(t)
            for k in irqs:
                if self._device(k) and t.priority > k.priority:
                    alike.setdefault(("above", k.comm, k.pid), []).append(t)
            top = max(rest, key=lambda k: k.priority, default=None)
            if top is not None and t.priority <= top.priority:
                kind = "below" if t.priority < top.priority else "equal"
                alike.setdefault((kind, f"{top.comm} {_ptext(top)}", top.priority), []).append(t)
        for (kind, irq, n), ts in alike.items():
            names, tids = _listed([t.name() for t in ts]), " ".join(str(t.tid) for t in ts[:LISTED])
            statuses.append(INFO if kind == "equal" else WARN)
            if kind == "99":
                fixes.append(f"{names} at 99: for TID in {tids}; do chrt -f -p 98 $TID; done")
            elif kind == "above":
                fixes.append(
                    f"{names} above its device's {irq}: chrt -f -p PRIO {n} with PRIO above "
                    "the thread's, or lower the thread"
                )
            elif kind == "below":
                fixes.append(
                    f"{names} below {irq} on its CPUs: every such interrupt delays it; "
                    f"chrt -f -p {n + 1} TID ({tids}), or move those IRQs off its CPUs"
                )
            else:
                fixes.append(
                    f"{names} at the priority of {irq}: neither preempts the other; "
                    "chrt one above or below"
                )
        if rt:
            seen = [f"{k.comm} {_ptext(k)}" for k in sorted(irq_seen.values(), key=lambda k: k.pid)]
            ev += (
                f"; IRQ threads on their CPUs: {_listed(seen)}"
                if seen
                else "; no threaded real-time IRQ handler on their CPUs (hard interrupts "
                "preempt every thread whatever its priority)"
            )
            if self.device_irqs and not any(self._device(k) for k in f.irq_threads):
                ev += f"; no IRQ thread of --irq {','.join(map(str, self.device_irqs))}"
            kernel = sorted({f"{k.comm.split('/')[0]}/N {_ptext(k)}" for k in f.kernel_rt_threads})
            ev += f"; kernel real-time threads: {_listed(kernel) or 'none'}"
            if any(k.comm.startswith("migration/") for k in f.kernel_rt_threads):
                ev += " (migration/N: the stop class, shown as fifo:99)"
        return _worst(*statuses), ev, "; ".join(fixes)


class Affinity(AppCheck):
    id = "app.affinity"
    title = "Real-time threads are pinned to isolated CPUs, away from other devices' IRQs"
    why = (
        "On a CPU shared with other tasks a real-time thread waits for their kernel work and "
        "interrupts; allowed on several CPUs it migrates and loses its caches. An isolated "
        "CPU (isolcpus, nohz_full, an isolated cpuset partition) with its interrupts moved "
        "away runs it alone."
    )

    def __init__(self, device_irqs: list[int] | None = None) -> None:
        self.device_irqs = {str(n) for n in device_irqs or []}

    def judge(self, f: AppFacts) -> tuple[str, str, str]:
        s = f.system
        iso = set(s.isolated_cpus)
        judged = _judged(f)
        ev = (
            f"/proc/PID/task/TID/status Cpus_allowed_list: "
            f"{_listed([f'{t.name()} CPUs {cpus_text(t.cpus)}' for t in judged])}; "
            f"isolated CPUs: {cpus_text(s.isolated_cpus)}"
            + (f" ({s.isolation_source})" if s.isolation_source else "")
        )
        statuses, fixes = [OK], []
        shared = [t for t in judged if t.cpus is None or not set(t.cpus) <= iso]
        if shared:
            statuses.append(WARN)
            if iso:
                target = cpus_text(sorted(iso))
                fixes.append(
                    f"{_listed([t.name() for t in shared])} may run on CPUs that are not "
                    f"isolated: taskset -p -c CPU TID with CPU one of {target}"
                )
            else:
                fixes.append(
                    "no CPU is isolated: it shares its CPUs with every task; boot with "
                    "isolcpus=domain,managed_irq,N nohz_full=N rcu_nocbs=N (or rtlab "
                    "partition) and pin it there with taskset -p -c N TID"
                )
        loose = [t for t in judged if t.cpus is not None and len(t.cpus) > 1]
        if loose:
            statuses.append(WARN)
            fixes.append(f"pin each of {_listed([t.name() for t in loose])} to one CPU")
        mine = set().union(*(set(t.cpus or s.cpus_online) for t in judged)) if judged else set()
        irqs = [
            f"{n} ({(i.get('name') or '?').split()[-1]}) on CPU {cpus_text(i['effective'])}"
            for n, i in s.irqs.items()
            if n not in self.device_irqs and i.get("effective") and mine & set(i["effective"])
        ]
        ev += "; IRQs handled on their CPUs (/proc/irq/N/effective_affinity_list): "
        ev += _listed(irqs) or "none"
        if irqs and iso and mine <= iso:
            statuses.append(WARN)
            home = cpus_text([c for c in s.cpus_online if c not in iso]) or "0"
            fixes.append(
                f"move the other devices' IRQs off: echo {home} > /proc/irq/N/smp_affinity_list"
            )
        return _worst(*statuses), ev, "; ".join(fixes)


class Memlock(AppCheck):
    id = "app.memlock"
    title = "Memory is locked (mlockall)"
    why = (
        "An unlocked page can be reclaimed and faulted back in from disk in the middle of a "
        "cycle (a major fault, milliseconds). mlockall(MCL_CURRENT | MCL_FUTURE) keeps "
        "every page resident; whether MCL_FUTURE was given cannot be seen from outside."
    )

    def judge(self, f: AppFacts) -> tuple[str, str, str]:
        statuses, parts, fixes = [OK], [], []
        for p in f.processes:
            lck, rss = p["vm_lck_kb"], p["vm_rss_kb"]
            parts.append(
                f"{p['comm']} ({p['pid']}): VmLck {lck} kB of VmRSS {rss} kB, "
                f"Max locked memory {p['memlock_limit'] or '?'}"
            )
            if lck is None:
                statuses.append(INFO)
            elif lck == 0:
                statuses.append(WARN)
                fixes.append(
                    f"{p['comm']} ({p['pid']}) locks nothing: call "
                    "mlockall(MCL_CURRENT | MCL_FUTURE) at start (with ulimit -l unlimited "
                    "or LimitMEMLOCK=infinity for a non-root user)"
                )
            elif rss is not None and lck < rss // 2:
                statuses.append(INFO)
                fixes.append(
                    f"{p['comm']} ({p['pid']}) locks part of its memory (mlock of some "
                    "ranges?): mlockall(MCL_CURRENT | MCL_FUTURE) locks it all"
                )
        ev = "/proc/PID/status, /proc/PID/limits: " + "; ".join(parts)
        ev += "; MCL_FUTURE (memory mapped later is locked too) cannot be seen from outside"
        return _worst(*statuses), ev, "; ".join(fixes)


def _deltas(ts: list[AppThread], key: str) -> list[str]:
    return [f"{t.name()} {getattr(t, key)}" for t in ts if getattr(t, key)]


class Faults(AppCheck):
    id = "app.faults"
    title = "No page faults during the window"
    why = (
        "A major fault waits for the disk; a minor fault enters the kernel to map a page "
        "(first touch, copy on write): microseconds each, and a lock a real-time thread may "
        "wait for. A real-time thread allocates and touches its memory before its loop."
    )

    def judge(self, f: AppFacts) -> tuple[str, str, str]:
        seen = [t for t in f.threads if t.minflt is not None]
        rt = [t for t in seen if t.rt]
        ev = (
            f"/proc/PID/task/TID/stat (fields 10 minflt, 12 majflt) over {f.window_s:g} s: "
            f"major {_listed(_deltas(seen, 'majflt')) or 'none'}; "
            f"minor {_listed(_deltas(seen, 'minflt')) or 'none'}"
        )
        statuses, fixes = [OK], []
        if [t for t in rt if t.majflt]:
            statuses.append(FAIL)
        elif [t for t in seen if t.majflt]:
            statuses.append(WARN)
        if [t for t in seen if t.majflt]:
            fixes.append("major faults: mlockall(MCL_CURRENT | MCL_FUTURE) before the loop")
        if minor := [t for t in rt if t.minflt]:
            statuses.append(WARN)
            fixes.append(
                f"minor faults in {_listed([t.name() for t in minor])}: allocate and touch "
                "its memory (heap, stack: prefault) before the loop, mlockall, and turn "
                "off transparent huge pages and malloc trimming (mallopt M_TRIM_THRESHOLD, "
                "M_MMAP_MAX)"
            )
        if not rt and f.threads and all(not t.rt for t in f.threads):
            ev += "; no real-time (fifo, rr, deadline) thread: minor faults are not judged"
        return _worst(*statuses), ev, "; ".join(fixes)


class Switches(AppCheck):
    id = "app.switches"
    title = "Real-time threads sleep between activations and are not preempted"
    why = (
        "An involuntary switch of a fifo/rr thread means something of higher priority (an "
        "IRQ thread, a kernel thread, another real-time task) or throttling took its CPU; "
        "a thread that never switches voluntarily never sleeps: it busy-waits, and "
        "throttling or a starved CPU follows."
    )

    def judge(self, f: AppFacts) -> tuple[str, str, str]:
        rt = [t for t in f.threads if t.rt and t.voluntary is not None]
        ev = (
            "/proc/PID/task/TID/status voluntary_ctxt_switches/nonvoluntary_ctxt_switches "
            f"over {f.window_s:g} s: "
            + (_listed([f"{t.name()} {t.voluntary}/{t.nonvoluntary}" for t in f.threads]) or "none")
        )
        statuses, fixes = [OK], []
        if pre := [t for t in rt if t.nonvoluntary]:
            statuses.append(INFO)
            fixes.append(
                f"{_listed([t.name() for t in pre])} were preempted: find what ran instead "
                "(a sched_switch trace of its CPUs), raise its priority or move the other "
                "work off its CPUs"
            )
        busy = [t for t in rt if t.voluntary == 0 and (t.cpu_s or 0) >= f.window_s / 2]
        if idle := [t for t in rt if t.voluntary == 0 and t not in busy]:
            ev += f"; did not run in the window (blocked): {_listed([t.name() for t in idle])}"
        if busy:
            statuses.append(WARN)
            fixes.append(
                f"{_listed([t.name() for t in busy])} never slept in the window and used "
                "at least half of it on a CPU (stat utime + stime): a busy "
                "real-time thread starves its CPU (and is throttled unless "
                "sched_rt_runtime_us is -1); sleep until the next activation "
                "(clock_nanosleep TIMER_ABSTIME)"
            )
        if not rt:
            ev += "; no real-time (fifo, rr, deadline) thread: switches are not judged"
        return _worst(*statuses), ev, "; ".join(fixes)


class Migrations(AppCheck):
    id = "app.migrations"
    title = "Real-time threads do not migrate between CPUs"
    why = (
        "A migrated thread runs with cold caches and is delayed by the move; a thread "
        "allowed on one CPU cannot migrate."
    )

    def judge(self, f: AppFacts) -> tuple[str, str, str]:
        judged = [t for t in _judged(f) if t.minflt is not None]
        pinned = [t for t in judged if t.cpus is not None and len(t.cpus) == 1]
        loose = [t for t in judged if t not in pinned]
        if not f.sched_file:
            ev = "/proc/PID/task/TID/sched not readable (CONFIG_SCHED_DEBUG not set)"
            moved = [t for t in loose if len(t.cpus_run) > 1]
            ev += "; last CPU (stat field 39) at both samples: "
            ev += _listed([f"{t.name()} {cpus_text(t.cpus_run)}" for t in judged]) or "none"
            if moved:
                return WARN, ev, f"{_listed([t.name() for t in moved])} moved: pin it (taskset)"
            if loose:
                return INFO, ev + "; migrations not counted", "pin each thread to one CPU"
            return OK, ev + "; every thread allowed on one CPU", ""
        ev = f"/proc/PID/task/TID/sched se.nr_migrations over {f.window_s:g} s: "
        ev += _listed(_deltas(judged, "migrations")) or "none"
        if moved := [t for t in judged if t.migrations]:
            return (
                WARN,
                ev,
                (
                    f"{_listed([t.name() for t in moved])} migrated: pin each to one CPU "
                    "(taskset -p -c CPU TID)"
                ),
            )
        return OK, ev, ""


class Throttling(AppCheck):
    id = "app.throttling"
    title = "Real-time throttling did not stop the application"
    why = (
        "With kernel.sched_rt_runtime_us below its period, real-time threads that use more "
        "than that share of a period are stopped until its end; the kernel says so once per "
        'boot ("sched: RT throttling activated", kernel/sched/rt.c) and not for which thread.'
    )

    def judge(self, f: AppFacts) -> tuple[str, str, str]:
        s = f.system
        runtime, period = s.sched_rt_runtime_us, s.sched_rt_period_us
        ev = f"/proc/sys/kernel/sched_rt_runtime_us: {runtime} of sched_rt_period_us {period}"
        if runtime == -1:
            return OK, ev + ": throttling off", ""
        if not any(t.rt for t in f.threads):
            return OK, ev + "; no real-time (fifo, rr, deadline) thread: not throttled", ""
        if not f.kernel_log_read:
            ev += "; kernel log (/dev/kmsg) not readable: throttling events not seen"
            return INFO, ev, "read it as root, or check dmesg for 'RT throttling activated'"
        if f.throttling_logged:
            ev += f"; kernel log: {f.throttling_logged[0]}, printed once per boot for any task"
            return (
                WARN,
                ev,
                (
                    "a real-time task ran longer than sched_rt_runtime_us in a period since boot: "
                    "if it was this application, its threads must sleep more, or on isolated "
                    "CPUs sysctl kernel.sched_rt_runtime_us=-1"
                ),
            )
        return OK, ev + "; kernel log: no 'RT throttling activated' since boot", ""


def app_checks(device_irqs: list[int] | None = None) -> list[AppCheck]:
    return [
        Priority(device_irqs),
        Affinity(device_irqs),
        Memlock(),
        Faults(),
        Switches(),
        Migrations(),
        Throttling(),
    ]


def run_app_audit(f: AppFacts, device_irqs: list[int] | None = None) -> list[Finding]:
    return [c.run(f) for c in app_checks(device_irqs)]


def app_document(f: AppFacts, findings: list[Finding]) -> dict[str, Any]:
    """What `rtlab audit --pid PID --json` prints: {"facts", "findings"}."""
    return {"facts": f.to_dict(), "findings": [x.to_dict() for x in findings]}
