"""Late samples explained: what the probe traced for each spike (`--explain`), ranked over
many spikes, the gaps of a spike's timeline no event covers, and the audit checks that
concern each kind of cause.

A spike (docs/result-format.md) has `causes` ({kind, name, ns, ...}) and `unexplained_ns`
that add up to its latency, and a `timeline` of segments relative to the intended
activation. `rank_causes` sums the causes of many spikes: `rtlab explain` prints the
ranking and the report tabulates it, from this one function. The unexplained time is
split into the part the CPU was idle (`unexplained_idle_ns`: a slow idle-state exit, or
the CPU taken away) and the rest (interrupts off, non-preemptible kernel code, SMI,
hypervisor), as the probe's verdicts tell them apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

#: Cause kinds the probe writes; the ranking adds UNEXPLAINED for time no event covers.
CAUSE_KINDS = ("thread", "irq", "softirq", "timer", "other")
UNEXPLAINED = "unexplained"

#: Audit check IDs (rtlab.system) that concern a cause, most direct first. Only these
#: are matched; a cause with none (an IPI, "other") is shown without an audit finding.
IRQ_CHECKS = (
    "irq.affinity",
    "boot.isolcpus_flags",
    "boot.threadirqs",
    "irq.default_affinity",
    "boot.irqaffinity",
)
TICK_CHECKS = ("boot.nohz_full", "timer.mode", "boot.nohz_full_config")
RCU_CHECKS = ("boot.rcu_nocbs", "boot.rcu_nocbs_nohz", "boot.rcu_nocb_poll")
WORKQUEUE_CHECKS = ("workqueue.cpumask", "workqueue.writeback", "vm.stat_interval")
TASK_CHECKS = ("tasks.user", "boot.isolcpus")
#: No event while the CPU was busy: non-preemptible kernel code, interrupts off (longer
#: with debug options and the irqsoff tracer), an NMI. While it was idle: a deep idle
#: state waking up. (SMI and hypervisor time have no audit check of their own.)
BUSY_CHECKS = (
    "kernel.preempt",
    "kernel.debug_options",
    "kernel.latency_tracers",
    "watchdog.nmi",
)
IDLE_CHECKS = ("cpu.idle_latency", "boot.cstate_limit")
UNEXPLAINED_CHECKS = (*BUSY_CHECKS, *IDLE_CHECKS)
#: Names of the two parts of the unexplained time in the ranking.
IDLE, BUSY = "idle", "not idle"
SOFTIRQ_CHECKS: dict[str, tuple[str, ...]] = {
    "TIMER": (*TICK_CHECKS, "sched.timer_migration"),
    "HRTIMER": (*TICK_CHECKS, "sched.timer_migration"),
    "RCU": RCU_CHECKS,
    "SCHED": ("boot.isolcpus", "boot.nohz_full"),
}
#: Work items (a kworker's `work` function) with checks of their own, first.
WORK_CHECKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("vmstat", ("vm.stat_interval", "workqueue.cpumask")),
    ("wb_workfn", ("workqueue.writeback", "vm.dirty_writeback", "workqueue.cpumask")),
)
#: Kernel threads by name prefix; any other thread is a task allowed on the CPU.
THREAD_CHECKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("kworker/", WORKQUEUE_CHECKS),
    ("ksoftirqd/", IRQ_CHECKS[:2]),
    ("irq/", IRQ_CHECKS[:3]),
    ("rcu", RCU_CHECKS),
    ("migration/", ("watchdog.soft", "tasks.kthreads")),
    ("watchdog/", ("watchdog.soft",)),
    ("kswapd", ("mm.swap", "mm.thp")),
    ("khugepaged", ("mm.thp",)),
    ("kcompactd", ("mm.thp_defrag", "mm.thp")),
    ("ksmd", ("mm.ksm",)),
)
TIMER_CHECKS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tick", TICK_CHECKS),
    ("watchdog", ("watchdog.soft",)),
    ("mce", ("mce.check_interval",)),
    ("clocksource", ("boot.tsc_reliable",)),
    ("delayed_work", WORKQUEUE_CHECKS),
)
#: Audit statuses worth naming beside a cause.
MATCHED_STATUSES = ("FAIL", "WARN")


@dataclass(frozen=True)
class CauseTotal:
    """One cause summed over spikes: kind and name (plus the IRQ number or vector that
    tells device interrupts apart), its total time and share of the spikes' latency."""

    kind: str  # one of CAUSE_KINDS, or UNEXPLAINED
    name: str
    total_ns: int
    share: float  # of the summed latency of the spikes, 0..1
    spikes: int  # spikes it appears in
    irq: int | None = None
    vector: str | None = None
    pids: tuple[int, ...] = ()  # threads: every PID seen under this name
    policies: tuple[str, ...] = ()  # threads: "fifo 50", "other", ...
    works: tuple[str, ...] = ()  # kworkers: the work functions they ran

    @property
    def what(self) -> str:
        return describe(asdict(self))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pids"], d["policies"], d["works"] = (
            list(self.pids),
            list(self.policies),
            list(self.works),
        )
        return d


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


def explanation(doc: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """(explain, spikes) of a result document: (None, []) for a run without --explain,
    a document older than schema 4 included."""
    explain = doc.get("explain")
    spikes = doc.get("spikes")
    explain = dict(explain) if isinstance(explain, Mapping) else None
    spikes = [dict(s) for s in spikes if isinstance(s, Mapping)] if isinstance(spikes, list) else []
    return explain, spikes if explain is not None else []


def policy_text(c: Mapping[str, Any]) -> str:
    """ "fifo 50", "other", "other nice -5", or "" when the policy is unknown."""
    policy = _str(c.get("policy"))
    if not policy:
        return ""
    prio = _int(c.get("priority"))
    if prio is None:
        return policy
    return f"{policy} {prio}" if policy in ("fifo", "rr") else f"{policy} nice {prio}"


def describe(c: Mapping[str, Any]) -> str:
    """A cause or timeline segment in words: "thread spin", "irq 24 eth0",
    "irq local_timer" (an x86 vector or IPI), "softirq TIMER", "timer tick_sched_timer",
    "measuring thread", "idle", "unexplained (CPU idle)"."""
    kind, name = str(c.get("kind") or "other"), str(c.get("name") or "")
    if kind == "irq":
        irq = _int(c.get("irq"))
        return f"irq {irq} {name}".rstrip() if irq is not None else f"irq {_vector(c)}".rstrip()
    if kind == UNEXPLAINED:
        return {IDLE: "unexplained (CPU idle)", BUSY: "unexplained (CPU not idle)"}.get(name, kind)
    if kind == "self":
        return "measuring thread"
    if kind in ("idle", "unknown") or not name:
        return kind
    if kind == "other":
        return name
    return f"{kind} {name}"


def _vector(c: Mapping[str, Any]) -> str:
    return _str(c.get("vector")) or str(c.get("name") or "")


def _key(c: Mapping[str, Any]) -> tuple[str, str, int | None, str | None]:
    kind = str(c.get("kind") or "other")
    irq = _int(c.get("irq")) if kind == "irq" else None
    vector = _vector(c) if kind == "irq" and irq is None else None
    return kind, str(c.get("name") or ""), irq, vector


def rank_causes(spikes: Iterable[Mapping[str, Any]]) -> list[CauseTotal]:
    """The causes of SPIKES summed by kind and name (device IRQs also by number), the
    unexplained time as one or two more rows (CPU idle, not idle), largest total first;
    shares of the summed latency."""
    totals: dict[tuple, int] = {}
    seen: dict[tuple, int] = {}
    pids: dict[tuple, set[int]] = {}
    policies: dict[tuple, list[str]] = {}
    works: dict[tuple, list[str]] = {}
    latency = 0
    for s in spikes:
        latency += _int(s.get("latency_ns")) or 0
        in_spike = set()
        causes = [c for c in s.get("causes") or [] if isinstance(c, Mapping)]
        causes += unexplained_parts(s)
        for c in causes:
            k = _key(c)
            totals[k] = totals.get(k, 0) + (_int(c.get("ns")) or 0)
            in_spike.add(k)
            if k[0] == "thread":
                if (pid := _int(c.get("pid"))) is not None:
                    pids.setdefault(k, set()).add(pid)
                for seen_list, text in ((policies, policy_text(c)), (works, _str(c.get("work")))):
                    if text and text not in seen_list.setdefault(k, []):
                        seen_list[k].append(text)
        for k in in_spike:
            seen[k] = seen.get(k, 0) + 1
    rows = [
        CauseTotal(
            kind=k[0],
            name=k[1],
            total_ns=ns,
            share=ns / latency if latency > 0 else 0.0,
            spikes=seen[k],
            irq=k[2],
            vector=k[3],
            pids=tuple(sorted(pids.get(k, ()))),
            policies=tuple(policies.get(k, ())),
            works=tuple(works.get(k, ())),
        )
        for k, ns in totals.items()
    ]
    return sorted(rows, key=lambda r: (-r.total_ns, -r.spikes, r.kind, r.name, r.irq or -1))


def unexplained_parts(spike: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The spike's unexplained time as causes of kind UNEXPLAINED: named IDLE and BUSY
    when the probe split it (unexplained_idle_ns), else one without a name."""
    total = _int(spike.get("unexplained_ns")) or 0
    idle = _int(spike.get("unexplained_idle_ns"))
    if total <= 0:
        return []
    if idle is None:
        return [{"kind": UNEXPLAINED, "name": "", "ns": total}]
    idle = min(max(idle, 0), total)
    parts = [(BUSY, total - idle), (IDLE, idle)]
    return [{"kind": UNEXPLAINED, "name": n, "ns": ns} for n, ns in parts if ns > 0]


def _unexplained_at(seg: Mapping[str, Any], woken: int | None) -> list[tuple[int, int]]:
    """The parts of a timeline segment the probe counts as unexplained: idle or unknown
    state; another thread before the measuring thread was woken (the timer or interrupt
    was late, not the thread); the measuring thread itself once woken."""
    a, b, kind = seg["start_ns"], seg["end_ns"], seg.get("kind")
    if kind in ("idle", "unknown"):
        return [(a, b)]
    if kind == "thread" and woken is not None:
        return [(a, min(b, woken))]
    if kind == "self":
        return [(a, b)] if woken is None else [(max(a, woken), b)]
    return []


def segments(spike: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The spike's timeline in time order, plus segments of kind UNEXPLAINED for the
    time between the activation (0) and the wake-up (latency_ns) that the probe counted
    as unexplained: no segment covers it, or the segment explains nothing (see
    `_unexplained_at`)."""
    segs = [
        dict(t)
        for t in spike.get("timeline") or []
        if isinstance(t, Mapping)
        and _int(t.get("start_ns")) is not None
        and _int(t.get("end_ns")) is not None
    ]
    end = _int(spike.get("latency_ns")) or 0
    woken = _int(spike.get("woken_ns"))
    spans: list[tuple[int, int]] = []
    at = 0
    for t in sorted(segs, key=lambda t: (t["start_ns"], t["end_ns"])):
        if t["start_ns"] > at:
            spans.append((at, t["start_ns"]))  # no segment: a gap
        at = max(at, t["end_ns"])
        spans += _unexplained_at(t, woken)
    spans.append((at, end))
    merged: list[list[int]] = []
    for a, b in sorted((max(a, 0), min(b, end)) for a, b in spans):
        if b <= a:
            continue
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    segs += [{"start_ns": a, "end_ns": b, "kind": UNEXPLAINED, "name": ""} for a, b in merged]
    return sorted(segs, key=lambda t: (t["start_ns"], t["end_ns"], t.get("kind") == UNEXPLAINED))


def related_checks(cause: Mapping[str, Any]) -> tuple[str, ...]:
    """The audit check IDs that concern CAUSE (a cause, or {"kind": UNEXPLAINED})."""
    kind, name = str(cause.get("kind") or ""), str(cause.get("name") or "")
    if kind == UNEXPLAINED:
        return {IDLE: IDLE_CHECKS, BUSY: BUSY_CHECKS}.get(name, UNEXPLAINED_CHECKS)
    if kind == "irq":
        if _int(cause.get("irq")) is not None:
            return IRQ_CHECKS
        vector = _vector(cause).lower()
        if "timer" in vector:
            return TICK_CHECKS
        if vector.startswith(("mce", "threshold", "deferred_error")):
            return ("mce.check_interval",)
        return ()
    if kind == "softirq":
        return SOFTIRQ_CHECKS.get(name.upper(), IRQ_CHECKS[:2])
    if kind == "timer":
        low = name.lower()
        if low == "hrtimer_wakeup":  # the callback that wakes sleepers, the measured one too
            return ()
        found = next((ids for part, ids in TIMER_CHECKS if part in low), None)
        return found or ("sched.timer_migration",)
    if kind == "thread":
        work = str(cause.get("work") or "")
        found = next((ids for part, ids in WORK_CHECKS if part in work), None)
        found = found or next((ids for p, ids in THREAD_CHECKS if name.startswith(p)), None)
        return found or TASK_CHECKS
    return ()


def related_findings(
    cause: Mapping[str, Any], findings: Iterable[Mapping[str, Any]] | None
) -> list[dict[str, Any]]:
    """The FAIL and WARN audit findings about CAUSE, matched by check ID, most direct
    check first."""
    ids = related_checks(cause)
    by_id = {
        f.get("id"): dict(f)
        for f in findings or []
        if isinstance(f, Mapping) and str(f.get("status", "")).upper() in MATCHED_STATUSES
    }
    return [by_id[i] for i in ids if i in by_id]


#: Bounds on a spike's `cause_stack` read from a document (the probe keeps 32 frames).
MAX_STACK_FRAMES = 64
MAX_FRAME_CHARS = 200
#: Frames that enter an interrupt (x86-64 `asm_sysvec_*`/`asm_common_interrupt`, arm64
#: `el1h_64_irq*`/`el0t_64_irq*`): the frames below the last one are the interrupted code.
_ENTRY_PREFIXES = ("asm_sysvec_", "asm_common_interrupt", "el1h_64_irq", "el0t_64_irq")


@dataclass(frozen=True)
class CauseStack:
    """The kernel stack of a spike's main cause, taken by the timer interrupt that stopped
    it (`cause_stack`, innermost first): the interrupt's own frames, then the code it
    stopped (`stopped`), empty when that was user space."""

    frames: tuple[str, ...]
    stopped: tuple[str, ...]
    user: bool  # the interrupt stopped user-space code (no kernel frame below its entry)
    at_ns: int | None  # the interrupt, relative to the intended activation
    truncated: bool
    unavailable: str | None  # why there is no stack, or None


def _entry_index(frames: tuple[str, ...]) -> int | None:
    found = None
    for i, f in enumerate(frames):
        if f.startswith(_ENTRY_PREFIXES):
            found = i
    return found


def cause_stack(spike: Mapping[str, Any]) -> CauseStack | None:
    """The stack of SPIKE's main cause, or None when the document has neither a stack nor
    a reason (it predates them). Frames past the bounds are dropped."""
    raw, why = spike.get("cause_stack"), _str(spike.get("cause_stack_unavailable"))
    if not isinstance(raw, list):
        return None if why is None else CauseStack((), (), False, None, False, why[:300])
    frames = tuple(f[:MAX_FRAME_CHARS] for f in raw[:MAX_STACK_FRAMES] if isinstance(f, str))
    if not frames:
        return CauseStack((), (), False, None, False, why or "the stack had no frame")
    entry = _entry_index(frames)
    stopped = frames if entry is None else frames[entry + 1 :]
    return CauseStack(
        frames,
        stopped,
        entry is not None and not stopped,
        _int(spike.get("cause_stack_at_ns")),
        bool(spike.get("cause_stack_truncated")) or len(raw) > MAX_STACK_FRAMES,
        None,
    )


def stopped_text(st: CauseStack, frames: int = 3) -> str:
    """One line: the innermost FRAMES frames of the stopped code, "user space", or why
    there is no stack."""
    if st.unavailable:
        return f"no stack: {st.unavailable}"
    if st.user:
        return "user space (no kernel frame below the timer interrupt)"
    shown = " ← ".join(st.stopped[:frames])
    return shown + (" ← …" if len(st.stopped) > frames or st.truncated else "")
