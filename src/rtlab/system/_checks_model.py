"""Checks whose advice depends on what the system is for: the preemption model against the
deadline, the tick mode against what the real-time CPUs run.

Published measurements behind the advice (docs/audit.md, "Preemption model, tick mode,
throttling, governor"):
periodic ticks gave the lowest latencies, tickless idle (NO_HZ_IDLE) a worse mean and
tail because every wake-up from idle restarts the tick and leaves a deeper idle state,
full dynticks (NO_HZ_FULL) worse still unless its conditions hold; the kernel's
Documentation/timers/no_hz.rst says full dynticks pays only on a CPU with one runnable
task and its RCU callbacks offloaded, and that aggressive real-time systems often run
HZ_PERIODIC "to avoid degrading from-idle transition latencies".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rtlab.system._audit import FAIL, INFO, OK, WARN, Check, Context, cpus, dedicated, rt_explicit
from rtlab.system._facts import Facts

US, MS = 1_000, 1_000_000
CPU = "/sys/devices/system/cpu"
# An idle state whose exit takes longer than this is "deep" (x86 C1/C1E exit in 1-10 µs,
# C6 and deeper in about 100 µs or more; the arch's default idle is shallow).
SHALLOW_IDLE_US = 10


@dataclass(frozen=True)
class Reach:
    """What a preemption model typically reaches: the worst case on typical hardware under
    load, conservatively (docs/audit.md cites the kind of figure)."""

    typical: str
    fail_below_ns: int  # a deadline below this is not plausibly met (0: never FAIL)
    ok_from_ns: int  # a deadline from this on is comfortably met


REACH = {
    "rt": Reach("worst case tens of µs on typical hardware, about 100 µs under load", 0, 100 * US),
    "full": Reach("worst case hundreds of µs, a few ms under load", 100 * US, 10 * MS),
    "none": Reach("worst case several ms, tens of ms under load", 1 * MS, 100 * MS),
}
REACH["lazy"] = REACH["full"]
REACH["voluntary"] = REACH["none"]
TIGHT = "1 ms"  # below this deadline, only PREEMPT_RT is recommended


def duration_arg(ns: int) -> str:
    """NS as a --deadline argument: 100us, 2ms, 1500ns."""
    for unit, scale in (("s", 1_000_000_000), ("ms", MS), ("us", US)):
        if ns % scale == 0:
            return f"{ns // scale}{unit}"
    return f"{ns}ns"


def _prose(ns: int) -> str:
    """NS for people, exact: 50 µs, 2 ms."""
    arg = duration_arg(ns)
    number = arg.rstrip("nmsu")
    return f"{number} {arg[len(number) :].replace('us', 'µs')}"


def _measure(ctx: Context) -> str:
    d = duration_arg(ctx.deadline_ns) if ctx.deadline_ns else "D"
    return f"a measurement settles it: rtlab run quick --deadline {d} under the expected load"


class PreemptModel(Check):
    id = "kernel.preempt"
    title = "Preemption model suits the deadline"
    why = (
        "The preemption model bounds how long kernel code can keep a woken real-time task "
        "waiting; only PREEMPT_RT makes almost all of it, interrupt handlers included, "
        "preemptible."
    )
    missing = "no kernel config, /sys/kernel/realtime or PREEMPT in the version string"
    missing_fix = "make the kernel configuration readable (CONFIG_IKCONFIG_PROC=y)"

    def available(self, f: Facts) -> bool:
        return f.preempt_model != "unknown" and f.preempt_model.split(":")[-1] in REACH

    def missing_for(self, f: Facts) -> str:
        if f.preempt_model.startswith("dynamic"):
            return (
                "PREEMPT_DYNAMIC kernel running an unknown model (no "
                "/sys/kernel/debug/sched/preempt, preempt= or configured default)"
            )
        return self.missing

    def read(self, f: Facts) -> tuple[Any, str]:
        where = f.config_source or "/proc/sys/kernel/version"
        if f.preempt_debugfs:
            where += f", /sys/kernel/debug/sched/preempt: {f.preempt_debugfs}"
        model = f.preempt_model.split(":")[-1]
        return f.preempt_model, f"{where}: {f.preempt_model} (typical: {REACH[model].typical})"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        model = value.split(":")[-1]
        reach, d = REACH[model], ctx.deadline_ns
        better = self._better(value, model)
        if d is None:
            if model == "rt":
                return OK, ""
            status = INFO if model in ("full", "lazy") else WARN
            return status, (
                f"for deadlines below {TIGHT}: {better}; give --deadline to "
                f"judge this model against it; {_measure(ctx)}"
            )
        if d >= reach.ok_from_ns:
            return OK, ""
        if model == "rt":  # no model reaches further: the hardware and tuning decide
            return WARN, (
                f"deadline {_prose(d)} is borderline even for PREEMPT_RT: isolate the "
                f"CPU and tune it (rtlab tune); {_measure(ctx)}"
            )
        if d < reach.fail_below_ns:
            return FAIL, (
                f"deadline {_prose(d)} is out of this model's reach: {better}; " + _measure(ctx)
            )
        return WARN, f"deadline {_prose(d)} is borderline for this model: {better}; " + (
            _measure(ctx)
        )

    @staticmethod
    def _better(value: str, model: str) -> str:
        rt = f"build with CONFIG_PREEMPT_RT=y ({REACH['rt'].typical})"
        if value.startswith("dynamic") and model in ("none", "voluntary"):
            return f"{rt}; until then boot with preempt=full (PREEMPT_DYNAMIC)"
        return rt


def _deep_states(f: Facts) -> list[tuple[int, str, int]]:
    """(cpu, "stateK/NAME", exit latency µs) of enabled idle states deeper than shallow on
    the real-time CPUs (or every CPU); none with idle=poll, which never enters them."""
    if f.rt_params.get("idle") == "poll" or f.rt_params.get("cpuidle.off") == "1":
        return []
    scope = f.rt_cpus or f.cpus_online
    out = []
    for c in scope:
        for s in f.idle_states.get(str(c), []):
            lat = s["latency_us"] or 0
            if not s["disabled"] and lat > SHALLOW_IDLE_US:
                out.append((c, f"{s['state']}/{s['name']}", lat))
    return out


def tick_mode(f: Facts) -> str:
    """What the tick does on the real-time CPUs: "periodic", "idle" (stopped while idle) or
    "full" (stopped while one task runs). NO_HZ_FULL without nohz_full= on those CPUs
    behaves like NO_HZ_IDLE there; nohz=off keeps the tick periodic."""
    if f.timer_mode == "HZ_PERIODIC" or f.rt_params.get("nohz") == "off":
        return "periodic"
    rt = f.rt_cpus or f.cpus_online
    if f.timer_mode == "NO_HZ_FULL" and rt and set(rt) <= set(f.nohz_full_cpus):
        return "full"
    return "idle"


class TimerMode(Check):
    id = "timer.mode"
    title = "Tick mode suits what the real-time CPUs run"
    why = (
        "A stopped tick is restarted on every wake-up from idle, and a tickless idle CPU sinks "
        "into deeper idle states: periodic ticks measure best unless a CPU runs one busy task."
    )
    missing = "timer mode unknown (kernel configuration not readable)"

    def available(self, f: Facts) -> bool:
        return f.timer_mode is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        mode, deep = tick_mode(f), _deep_states(f)
        ev = f"{f.config_source}: CONFIG_{f.timer_mode}=y"
        if f.rt_params.get("nohz") == "off":
            ev += "; nohz=off: the tick stays periodic"
        elif f.timer_mode == "NO_HZ_FULL" and mode == "idle":
            ev += f"; no nohz_full= on CPUs {cpus(f.rt_cpus)}: behaves like NO_HZ_IDLE there"
        elif mode == "full":
            ev += f"; nohz_full={cpus(f.nohz_full_cpus)} rcu_nocbs={cpus(f.rcu_nocbs_cpus)}"
        if mode == "idle":
            worst = max((lat for _, _, lat in deep), default=0)
            ev += (
                f"; each wake-up from idle restarts the tick and pays the idle state's exit "
                f"latency (deepest enabled: {worst} us)"
                if deep
                else f"; idle states exit within {SHALLOW_IDLE_US} us (shallow)"
            )
        ev += f"; CPUs {cpus(f.rt_cpus)} " + (
            "isolated: meant for one busy task each" if dedicated(f) else "not isolated"
        )
        return (mode, bool(deep)), ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        mode, deep = value
        rt = cpus(f.rt_cpus)
        if mode == "full":
            return OK, ""
        fixes = []
        if mode == "idle" and deep:
            fixes.append(
                f"keep the real-time CPUs in shallow idle states (exit <= {SHALLOW_IDLE_US} us: "
                f"echo 1 > {CPU}/cpuN/cpuidle/stateK/disable, or hold /dev/cpu_dma_latency), "
                "or keep the tick periodic (boot with nohz=off, or build CONFIG_HZ_PERIODIC=y)"
            )
        if dedicated(f) and f.timer_mode != "NO_HZ_FULL":  # else boot.nohz_full advises
            fixes.append(
                f"only if each of CPUs {rt} runs one busy task that never sleeps: "
                f"CONFIG_NO_HZ_FULL=y and boot with nohz_full={rt} rcu_nocbs={rt}"
            )
        if not fixes:
            return OK, ""
        status = WARN if mode == "idle" and deep and rt_explicit(f) else INFO
        return status, "; ".join(fixes)
