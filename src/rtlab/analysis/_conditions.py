"""Did a case run in the conditions it asked for? The judgement of a result document's
`conditions` (docs/result-format.md#conditions) and of its threads' policy fallback.

Conditions not met (the run measured something else; `rtlab` refuses a verdict, exit 6):
a thread's policy read back differs from the one asked for (or fell back), a pinned
thread may run elsewhere, memory asked to be locked is not, /dev/cpu_dma_latency does
not hold the value asked for (or a tighter one). Warnings (said with the verdict):
device interrupts on an isolated measured CPU, local timer ticks on a nohz_full CPU
running a meter, kernel-log symptoms while measuring, evidence that could not be read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from rtlab.analysis._spikes import _int
from rtlab.system._cpus import cpulist_or_none, format_cpulist

#: Kernel-log symptoms, matched on a message's text whatever its facility: (name, regex).
#: Each pattern is the fixed part of the kernel's own format string.
SYMPTOMS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("RT throttling", r"sched: RT throttling activated"),
        ("deadline replenish lagged", r"sched: DL replenish lagged"),
        ("RCU stall", r"self-detected stall on CPU|INFO: \S+ detected stalls"),
        ("soft lockup", r"watchdog: BUG: soft lockup"),
        ("hung task", r"INFO: task \S.* blocked for more than"),
        ("NOHZ tick-stop error", r"NOHZ tick-stop error"),
        ("spurious IRQ", r"irq \d+: nobody cared"),
        ("clocksource unstable", r"Marking clocksource .* as unstable"),
        ("perf interrupt too long", r"perf: interrupt took too long"),
    )
)
#: syslog facility of a record written to /dev/kmsg by a user-space process (LOG_USER).
USER_FACILITY = 1
#: Estimated ticks per second above which a nohz_full CPU running a meter is said to tick:
#: nohz_full working with one task gives about 1/s, not working about HZ (100..1000).
TICKS_WARN_PER_S = 10.0
#: Device interrupt rows named per CPU in the warnings (the rest are counted).
IRQ_WARN_ROWS = 3
#: Kernel-log symptoms named in the warnings (the rest are counted).
SYMPTOM_WARN_ROWS = 5
#: Interrupt rows per CPU kept in the detail (show --json, the report).
IRQ_DETAIL_ROWS = 8
#: Meters whose threads sleep on a timer: each activation is a local timer interrupt of
#: its own, subtracted to estimate the ticks. Busy meters never sleep: the timer rate is
#: the tick rate. Others (woken by events) get no estimate.
TIMER_METERS = ("wakeup", "periodic")
BUSY_METERS = ("noise", "preempt", "alloc")


@dataclass
class Conditions:
    """The judgement of one case's conditions, with the evidence it rests on."""

    recorded: bool  # the document carries the probe's evidence (schema 6 probe)
    not_met: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    cpus: list[dict[str, Any]] = field(default_factory=list)  # per measured CPU
    messages: list[dict[str, Any]] = field(default_factory=list)  # kernel log while measuring
    messages_lost: int = 0
    messages_read: bool = False  # the kernel log was read (its messages are all there were)
    applied: dict[str, Any] | None = None  # policy, CPUs, locked memory, dma latency
    errors: list[str] = field(default_factory=list)  # evidence that could not be read

    @property
    def met(self) -> bool:
        return not self.not_met

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "met": self.met}


def _dict(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _num(v: float) -> str:
    return f"{v:,.0f}" if v >= 10 else f"{v:.1f}"


def policy_of(read_back: Mapping[str, Any]) -> str | None:
    """threads[i].policy (an object read back) in the canonical text of params.policy,
    for the policies whose text carries no durations; None for deadline or unknown."""
    name, prio, nice = read_back.get("name"), read_back.get("priority"), read_back.get("nice")
    if name in ("fifo", "rr") and _int(prio) is not None:
        return f"{name}:{prio}"
    if name in ("other", "batch") and _int(nice) is not None:
        return f"{name}:{nice}"
    return name if name == "idle" else None


def _asked_policy(doc: Mapping[str, Any]) -> Any:
    """The policy the measuring threads should run: params.policy, except for the periodic
    meter's deadline mechanism, whose thread runs SCHED_DEADLINE by design. The sched
    meter's threads are a program's, whose policy is its own (params.policy is the probe's
    reader's): nothing was asked of them."""
    params = _dict(doc.get("params"))
    if doc.get("meter") == "sched":
        return None
    if doc.get("meter") == "periodic" and params.get("mechanism") == "deadline":
        return "deadline"
    return params.get("policy")


def _policy(doc: Mapping[str, Any], out: Conditions, applied: list[Any]) -> None:
    asked = _asked_policy(doc)
    by_index = {_int(a.get("index")): a for a in applied if isinstance(a, Mapping)}
    for i, t in enumerate(_list(doc.get("threads"))):
        t = _dict(t)
        got = _dict(by_index.get(i)).get("policy")
        if not isinstance(got, str):
            got = policy_of(_dict(t.get("policy")))
        if t.get("policy_fallback") is True:
            why = t.get("policy_fallback_reason")
            out.not_met.append(
                f"T{i} ran {got or 'the inherited policy'}, not {asked or 'the policy asked for'}"
                + (f" (fell back: {why})" if isinstance(why, str) and why else " (fell back)")
            )
        elif isinstance(asked, str) and isinstance(got, str) and got != asked:
            if asked == "deadline" and got.startswith("deadline:"):
                continue  # runtime, deadline and period are the mechanism's own
            out.not_met.append(f"T{i} ran {got}, not {asked}")


def _affinity(doc: Mapping[str, Any], out: Conditions, applied: list[Any]) -> None:
    threads = _list(doc.get("threads"))
    for a in applied:
        a = _dict(a)
        i, text = _int(a.get("index")), a.get("cpus_allowed")
        if i is None or not 0 <= i < len(threads) or not isinstance(text, str):
            continue
        cpu = _int(_dict(threads[i]).get("cpu"))
        if cpu is None:
            continue  # not pinned: any CPU is as asked
        allowed = cpulist_or_none(text)
        if allowed != [cpu]:
            where = "CPUs " + (format_cpulist(allowed) if allowed else repr(text))
            out.not_met.append(f"T{i} may run on {where}, not only on CPU {cpu}")


def _memory(doc: Mapping[str, Any], out: Conditions, applied: Mapping[str, Any]) -> None:
    params = _dict(doc.get("params"))
    mlock = params.get("mlock") is True
    if doc.get("meter") == "pagefault":  # it undoes the runner's mlockall: --protect decides
        mlock = "mlock" in str(params.get("protect", ""))
    if mlock:
        locked, rss = _int(applied.get("vm_locked_kb")), _int(applied.get("vm_rss_kb"))
        if doc.get("mlocked") is False:
            why = doc.get("mlock_error")
            why = why if isinstance(why, str) and why else None
            if why is not None and not why.startswith("mlockall"):
                why = f"mlockall: {why}"
            out.not_met.append("memory not locked" + (f" ({why})" if why else ""))
        elif locked is not None and rss is not None and locked < rss / 2:
            out.not_met.append(f"memory not locked: {locked:,} of {rss:,} kB resident locked")
    asked = _int(params.get("dma_latency_us"))
    if asked is not None and "dma_latency_us" in applied:
        held = _int(applied.get("dma_latency_us"))
        if held is None:
            out.not_met.append(f"/dev/cpu_dma_latency {asked} µs not held")
        elif held > asked:  # the kernel's target is the smallest request held: at most ours
            out.not_met.append(f"/dev/cpu_dma_latency at {held} µs, above the {asked} µs asked for")


def irq_label(irq: str, name: str) -> str:
    """ "IRQ 36 virtio0-input.0" from /proc/interrupts' number and name column (the chip
    and trigger words before the device are dropped: "PCI-MSI 512000-edge virtio0-input.0")."""
    words = name.split()
    for k in range(len(words) - 1, -1, -1):
        w = words[k]
        if re.search(r"-(edge|level|fasteoi|eoi)$", w, re.I) or w in ("Edge", "Level"):
            name = " ".join(words[k + 1 :]) or name
            break
    return f"IRQ {irq} {name}" if irq.isdigit() else f"{irq} ({name})"


def _meter_kind(doc: Mapping[str, Any]) -> str | None:
    meter = doc.get("meter")
    if meter == "periodic" and _dict(doc.get("params")).get("mechanism") == "busy-poll":
        return "busy"
    if meter in TIMER_METERS:
        return "timer"
    return "busy" if meter in BUSY_METERS else None


def _interrupts(
    doc: Mapping[str, Any], out: Conditions, isolated: set[int], nohz_full: set[int]
) -> None:
    ints = _dict(_dict(doc.get("conditions")).get("interrupts"))
    if isinstance(ints.get("error"), str):
        out.errors.append(f"interrupts not read: {ints['error']}")
    if ints.get("truncated") is True:
        out.errors.append("interrupts: /proc/interrupts beyond the probe's read limit, cut")
    elapsed_ns = _int(ints.get("elapsed_ns"))
    secs = elapsed_ns / 1e9 if elapsed_ns else None
    threads = [_dict(t) for t in _list(doc.get("threads"))]
    pinned = all(_int(t.get("cpu")) is not None for t in threads)
    kind = _meter_kind(doc)
    for entry in _list(ints.get("per_cpu")):
        entry = _dict(entry)
        cpu = _int(entry.get("cpu"))
        if cpu is None:
            continue
        irqs = [_dict(r) for r in _list(entry.get("irqs"))]
        timer = _dict(entry.get("timer"))
        count = _int(timer.get("count"))
        timer_per_s = count / secs if count is not None and secs else None
        mine = [t for t in threads if _int(t.get("cpu")) == cpu]
        ticks = None
        if timer_per_s is not None and mine and pinned:
            own = sum(_int(t.get("count")) or 0 for t in mine) / secs if secs else 0.0
            ticks = max(0.0, timer_per_s - own) if kind == "timer" else None
            ticks = timer_per_s if kind == "busy" else ticks
        total = _int(entry.get("total"))
        row = {
            "cpu": cpu,
            "isolated": cpu in isolated,
            "nohz_full": cpu in nohz_full,
            "interrupts": total,
            "interrupts_per_s": total / secs if total is not None and secs else None,
            "timer": timer.get("name") if timer else None,
            "timer_per_s": timer_per_s,
            "ticks_per_s": ticks,
            "irqs": [
                {
                    "irq": str(r.get("irq")),
                    "name": str(r.get("name") or ""),
                    "device": r.get("device") is True,
                    "count": _int(r.get("count")) or 0,
                }
                for r in irqs[:IRQ_DETAIL_ROWS]
            ],
        }
        out.cpus.append(row)
        if cpu in isolated:
            devices = [r for r in irqs if r.get("device") is True and (_int(r.get("count")) or 0)]
            for r in devices[:IRQ_WARN_ROWS]:
                label = irq_label(str(r.get("irq")), str(r.get("name") or ""))
                out.warnings.append(
                    f"{label} fired {_int(r.get('count')):,} times on CPU {cpu} (isolated)"
                )
            if len(devices) > IRQ_WARN_ROWS:
                out.warnings.append(
                    f"{len(devices) - IRQ_WARN_ROWS} more device IRQs on CPU {cpu} (isolated)"
                )
        if cpu in nohz_full and ticks is not None and ticks > TICKS_WARN_PER_S:
            own_part = (
                f", less the meter's own {timer_per_s - ticks:,.0f}/s wake-ups"
                if kind == "timer" and timer_per_s is not None
                else ""
            )
            out.warnings.append(
                f"CPU {cpu} (nohz_full) ticked about {_num(ticks)} times/s (local timer "
                f"interrupts {_num(timer_per_s or 0.0)}/s{own_part}; about 1/s expected)"
            )


def symptom_of(text: str) -> str | None:
    """The kernel-log symptom TEXT shows (SYMPTOMS), or None."""
    return next((name for name, rx in SYMPTOMS if rx.search(text)), None)


def _kmsg(doc: Mapping[str, Any], out: Conditions) -> None:
    kmsg = _dict(_dict(doc.get("conditions")).get("kmsg"))
    if isinstance(kmsg.get("error"), str):
        out.errors.append(f"kernel log not read: {kmsg['error']}")
    out.messages_read = bool(kmsg) and not isinstance(kmsg.get("error"), str)
    out.messages_lost = _int(kmsg.get("lost")) or 0
    found = []
    for m in _list(kmsg.get("messages")):
        m = _dict(m)
        text = m["text"] if isinstance(m.get("text"), str) else ""
        user = _int(m.get("facility")) == USER_FACILITY
        symptom = symptom_of(text)
        out.messages.append(
            {
                "t_us": _int(m.get("t_us")),
                "level": _int(m.get("level")),
                "facility": _int(m.get("facility")),
                "user_space": user,
                "symptom": symptom,
                "text": text,
            }
        )
        if symptom is not None:
            found.append(f"{symptom}: {text!r}" + (" (logged by user space)" if user else ""))
    out.warnings += [f"kernel log: {w}" for w in found[:SYMPTOM_WARN_ROWS]]
    if len(found) > SYMPTOM_WARN_ROWS:
        out.warnings.append(f"kernel log: {len(found) - SYMPTOM_WARN_ROWS} more symptoms")
    if out.messages_lost:
        out.errors.append(f"kernel log: {out.messages_lost} records lost (overwritten or cut)")


def judge_conditions(
    doc: Mapping[str, Any], isolated: set[int] | None = None, nohz_full: set[int] | None = None
) -> Conditions:
    """The conditions of the case of DOC (a migrated result document). ISOLATED: the
    CPUs isolated on the system (isolcpus, nohz_full, a cpuset partition), NOHZ_FULL:
    its nohz_full CPUs, from the experiment's fingerprint."""
    cond = doc.get("conditions")
    out = Conditions(recorded=isinstance(cond, Mapping))
    applied = _dict(_dict(cond).get("applied"))
    if isinstance(applied.get("error"), str):
        out.errors.append(f"applied settings not read back: {applied['error']}")
        applied = {}
    threads_applied = _list(applied.get("threads"))
    _policy(doc, out, threads_applied)
    _affinity(doc, out, threads_applied)
    _memory(doc, out, applied)
    if applied:
        out.applied = {
            "threads": [
                {k: _dict(a).get(k) for k in ("index", "tid", "policy", "cpus_allowed")}
                for a in threads_applied
            ],
            **{k: _int(applied.get(k)) for k in ("vm_locked_kb", "vm_rss_kb", "dma_latency_us")},
        }
    _interrupts(doc, out, isolated or set(), nohz_full or set())
    _kmsg(doc, out)
    out.warnings += [f"evidence incomplete: {e}" for e in out.errors]
    return out


def conditions_summary(c: Conditions) -> str:
    """One line of what the case really had: the settings read back, each measured CPU's
    interrupt and timer rates, the kernel messages."""
    if not c.recorded:
        return "evidence not recorded (a document of an older probe, or imported)"
    parts = []
    if c.applied is not None:
        threads = c.applied["threads"]
        policies = sorted({str(t["policy"]) for t in threads if t.get("policy")})
        cpus = sorted({str(t["cpus_allowed"]) for t in threads if t.get("cpus_allowed")})
        text = "/".join(policies) or "?"
        text += f" on CPUs {' | '.join(cpus)}" if cpus else ""
        locked, rss = c.applied["vm_locked_kb"], c.applied["vm_rss_kb"]
        if locked is not None and rss is not None:
            text += f", {locked:,} of {rss:,} kB locked"
        if c.applied["dma_latency_us"] is not None:
            text += f", dma latency {c.applied['dma_latency_us']} µs"
        parts.append(text)
    for cpu in c.cpus:
        text = f"CPU {cpu['cpu']}"
        flags = [f for f in ("isolated", "nohz_full") if cpu[f]]
        text += f" ({', '.join(flags)})" if flags else ""
        if cpu["interrupts_per_s"] is not None:
            text += f": {_num(cpu['interrupts_per_s'])} interrupts/s"
        if cpu["timer_per_s"] is not None:
            text += f", local timer {_num(cpu['timer_per_s'])}/s"
        if cpu["ticks_per_s"] is not None:
            text += f" (about {_num(cpu['ticks_per_s'])} ticks/s)"
        parts.append(text)
    n = len(c.messages)
    if c.messages_read:
        parts.append(f"kernel log: {n} message{'s' if n != 1 else ''}")
    else:
        parts.append("kernel log: not read")
    return "; ".join(parts)
