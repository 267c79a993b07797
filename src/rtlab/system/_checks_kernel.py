"""Checks of the kernel build, its timers and the boot command line."""

from __future__ import annotations

from typing import Any

from rtlab.system._audit import (
    FAIL,
    INFO,
    OK,
    WARN,
    Check,
    Context,
    cpus,
    housekeeping,
    rt_explicit,
)
from rtlab.system._facts import Facts
from rtlab.system._kconfig_debug import BY_SYMBOL

CMDLINE = "/proc/cmdline"
TIMER_LIST = "/proc/timer_list"
FAST_CLOCKSOURCES = {
    "tsc",
    "arch_sys_counter",
    "kvm-clock",
    "hyperv_clocksource_tsc_page",
    "riscv_clocksource",
}


class KernelConfig(Check):
    id = "kernel.config"
    title = "Kernel configuration readable"
    why = "Without the configuration the preemption model, HZ and debug options are guesses."

    def read(self, f: Facts) -> tuple[Any, str]:
        src = f.config_source
        return src, f"{src}: read" if src else "/proc/config.gz and /boot/config-<release> absent"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value:
            return OK, ""
        return (
            WARN,
            "build with CONFIG_IKCONFIG=y CONFIG_IKCONFIG_PROC=y "
            "(or install /boot/config-$(uname -r))",
        )


def _with_notes(f: Facts, opts: list[str]) -> str:
    """ "CONFIG_<A>=y, CONFIG_<B>=y (kmemleak=on ...)" or "none set"."""
    notes = f.debug_options_notes
    return ", ".join(o + "=y" + (f" ({notes[o]})" if o in notes else "") for o in opts) or (
        "none set"
    )


class DebugOptions(Check):
    id = "kernel.debug_options"
    title = "No latency-adding debug options in the kernel"
    why = (
        "Lock debugging, sanitizers and allocation tracking (LOCKDEP, KASAN, DEBUG_KMEMLEAK) "
        "add work to every lock, access or allocation."
    )
    missing = "kernel configuration not readable"

    def available(self, f: Facts) -> bool:
        return f.config_source is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        ev = f"{f.config_source}: {_with_notes(f, f.debug_options)}"
        if off := f.debug_options_off:
            ev += "; built in but off: " + ", ".join(f"{o} ({w})" for o, w in off.items())
        return f.debug_options, ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        fix = "rebuild without " + ", ".join(value) + " for a production kernel"
        boot = [BY_SYMBOL[o].boot_off for o in value if BY_SYMBOL[o].boot_off]
        return FAIL, fix + (f"; until then boot with {' '.join(boot)}" if boot else "")


class LatencyTracers(Check):
    id = "kernel.latency_tracers"
    title = "No always-on tracer hooks built in"
    why = (
        "IRQSOFF_TRACER and PREEMPT_TRACER hook every interrupt and preemption toggle, "
        "a FUNCTION_TRACER without DYNAMIC_FTRACE every call, even with no tracer running."
    )
    missing = "kernel configuration not readable"

    def available(self, f: Facts) -> bool:
        return f.config_source is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        opts = f.latency_tracer_options
        return opts, f"{f.config_source}: {_with_notes(f, opts)}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        fix = "keep " + ", ".join(value) + " for a debug kernel; disable them in production"
        if "CONFIG_FUNCTION_TRACER" in value:
            fix += " (or build CONFIG_FUNCTION_TRACER with CONFIG_DYNAMIC_FTRACE=y)"
        return WARN, fix


class RtGroupSched(Check):
    id = "kernel.rt_group_sched"
    title = "Real-time group scheduling"
    why = "With RT_GROUP_SCHED, real-time tasks in a cgroup without cpu.rt_runtime_us cannot run."
    missing = "kernel configuration not readable"

    def available(self, f: Facts) -> bool:
        return f.config_source is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        v = f.config.get("CONFIG_RT_GROUP_SCHED", "not set")
        ev = f"{f.config_source}: CONFIG_RT_GROUP_SCHED={v}"
        if v != "y":
            return False, ev
        # init/Kconfig RT_GROUP_SCHED_DEFAULT_DISABLED; kernel/sched/core.c rt_group_sched=0|1.
        on = f.config.get("CONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED") != "y"
        if on is False:
            ev += ", CONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED=y"
        param = f.rt_params.get("rt_group_sched")
        if param in ("0", "1"):
            on = param == "1"
            ev += f"; {CMDLINE}: rt_group_sched={param}"
        return on, ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        return INFO, "run real-time tasks in the root cgroup or give their cgroup cpu.rt_runtime_us"


class TimerHz(Check):
    id = "timer.hz"
    title = "Scheduler tick rate (HZ)"
    why = "The tick sets the granularity of timer-wheel timeouts and load balancing (not hrtimers)."
    missing = "CONFIG_HZ unknown (kernel configuration not readable)"

    def available(self, f: Facts) -> bool:
        return f.hz is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.hz, f"{f.config_source}: CONFIG_HZ={f.hz}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (OK, "") if value >= 1000 else (INFO, "CONFIG_HZ_1000=y")


class HresActive(Check):
    id = "timer.hres"
    title = "High-resolution timers active"
    why = "Without high-resolution mode every timer expires on a tick boundary."
    missing = f"{TIMER_LIST} not readable"

    def available(self, f: Facts) -> bool:
        return f.hres_active is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.hres_active, f"{TIMER_LIST}: hres_active={int(bool(f.hres_active))}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value:
            return OK, ""
        return FAIL, "CONFIG_HIGH_RES_TIMERS=y and no highres=off on the command line"


class EventHandler(Check):
    id = "timer.event_handler"
    title = "Per-CPU clock event devices run hrtimers"
    why = "A periodic tick handler means timers fire at tick resolution, not when they are due."
    missing = f"{TIMER_LIST} has no per-CPU event_handler"

    def available(self, f: Facts) -> bool:
        return bool(f.clock_event_handlers)

    def read(self, f: Facts) -> tuple[Any, str]:
        hs = f.clock_event_handlers
        return hs, f"{TIMER_LIST}: event_handler {', '.join(hs)}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value == ["hrtimer_interrupt"]:
            return OK, ""
        return WARN, "a one-shot capable clock event device and high-resolution timers"


class TimerResolution(Check):
    id = "timer.resolution"
    title = "Timer resolution is 1 ns"
    why = "A coarse clock resolution rounds every sleep up to the next tick."
    missing = f"{TIMER_LIST} has no .resolution"

    def available(self, f: Facts) -> bool:
        return f.timer_resolution_ns is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.timer_resolution_ns, f"{TIMER_LIST}: resolution {f.timer_resolution_ns} ns"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (OK, "") if value <= 1 else (WARN, "enable high-resolution timers")


class Clocksource(Check):
    id = "timer.clocksource"
    title = "Fast clocksource"
    why = "HPET or ACPI PM clock reads take microseconds and cannot be done in the vDSO."
    missing = "/sys/devices/system/clocksource/clocksource0/current_clocksource not readable"

    def available(self, f: Facts) -> bool:
        return f.clocksource is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        avail = " ".join(f.clocksources_available)
        return f.clocksource, f"current_clocksource: {f.clocksource} (available: {avail})"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value in FAST_CLOCKSOURCES:
            return OK, ""
        better = [c for c in f.clocksources_available if c in FAST_CLOCKSOURCES]
        return WARN, (f"boot with clocksource={better[0]}" if better else "use a TSC or arch timer")


def _config_lacks(f: Facts, symbol: str) -> bool:
    """The kernel's configuration is readable and SYMBOL is not built in."""
    return f.config_source is not None and f.config.get(symbol) != "y"


class Isolcpus(Check):
    id = "boot.isolcpus"
    title = "Real-time CPUs isolated from the scheduler"
    why = "An isolated CPU runs only what is placed on it; others share it with every task."

    def read(self, f: Facts) -> tuple[Any, str]:
        if not f.isolated_cpus:
            return (False, True), f"{CMDLINE}: no isolcpus, nohz_full or isolated cpuset partition"
        ev = f"isolated CPUs {cpus(f.isolated_cpus)} ({f.isolation_source})"
        # kernel/sched/isolation.c: flags given without "domain" leave the CPUs in the
        # scheduler domains (only no flags at all means domain).
        flags = f.isolcpus_flags if f.isolation_source == "isolcpus" else []
        if flags and "domain" not in flags:
            ev += f"; {CMDLINE}: isolcpus={f.rt_params.get('isolcpus')} has no domain flag"
            return (True, False), ev
        return (True, True), ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        isolated, domain = value
        if f.isolation_source == "isolcpus" and _config_lacks(f, "CONFIG_CPU_ISOLATION"):
            # init/Kconfig: without CPU_ISOLATION, isolcpus= is not parsed (isolation.c)
            return WARN, "rebuild with CONFIG_CPU_ISOLATION=y: this kernel ignores isolcpus="
        if isolated and domain and set(f.rt_cpus) <= set(f.isolated_cpus):
            return OK, ""
        rt = f.rt_cpus if rt_explicit(f) else f.cpus_online[-1:]
        c = cpus(rt)
        return WARN, (
            f"boot with isolcpus=managed_irq,domain,{c} rcu_nocbs={c} (and nohz_full={c} "
            "only for one busy task per CPU: timer.mode)"
        )


class IsolcpusFlags(Check):
    id = "boot.isolcpus_flags"
    title = "isolcpus also keeps managed interrupts away"
    why = "Without managed_irq, multi-queue device interrupts (NVMe, NICs) still land there."
    missing = f"{CMDLINE}: no isolcpus="

    def available(self, f: Facts) -> bool:
        return "isolcpus" in f.rt_params

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.isolcpus_flags, f"{CMDLINE}: isolcpus={f.rt_params['isolcpus']}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if "managed_irq" in value:
            return OK, ""
        return INFO, f"isolcpus=managed_irq,domain,{cpus(f.isolated_cpus)}"


class NohzFull(Check):
    id = "boot.nohz_full"
    title = "Tick stopped on the real-time CPUs (nohz_full)"
    why = "nohz_full stops the tick while one task runs: it pays only for one busy task per CPU."
    missing = "no isolated or given real-time CPUs to check"

    def available(self, f: Facts) -> bool:
        return rt_explicit(f)

    def read(self, f: Facts) -> tuple[Any, str]:
        return f.nohz_full_cpus, f"{CMDLINE}: nohz_full={cpus(f.nohz_full_cpus)}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        # Full dynticks pays only for one busy task per CPU (timer.mode): advice, not a warning.
        if set(f.rt_cpus) <= set(value):
            return OK, ""
        c = cpus(f.rt_cpus)
        return INFO, (
            f"only if each of CPUs {c} runs one busy task that never sleeps: boot with "
            f"nohz_full={c} rcu_nocbs={c} (needs CONFIG_NO_HZ_FULL=y); a task that sleeps "
            "between activations pays the wake from idle instead"
        )


class NohzFullConfig(Check):
    id = "boot.nohz_full_config"
    title = "nohz_full is supported by the kernel"
    why = "Without CONFIG_NO_HZ_FULL the nohz_full= parameter is silently ignored."
    missing = "nohz_full not in use, or kernel configuration not readable"

    def available(self, f: Facts) -> bool:
        return bool(f.nohz_full_cpus) and f.config_source is not None

    def read(self, f: Facts) -> tuple[Any, str]:
        v = f.config.get("CONFIG_NO_HZ_FULL", "not set")
        return (
            v == "y",
            f"nohz_full={cpus(f.nohz_full_cpus)}; {f.config_source}: CONFIG_NO_HZ_FULL={v}",
        )

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (OK, "") if value else (FAIL, "rebuild with CONFIG_NO_HZ_FULL=y")


class RcuNocbsCoversNohz(Check):
    id = "boot.rcu_nocbs_nohz"
    title = "Every nohz_full CPU also offloads RCU callbacks"
    why = "RCU callbacks run on a CPU that is not in rcu_nocbs and interrupt its real-time task."
    missing = "nohz_full not in use"

    def available(self, f: Facts) -> bool:
        return bool(f.nohz_full_cpus)

    def read(self, f: Facts) -> tuple[Any, str]:
        gap = sorted(set(f.nohz_full_cpus) - set(f.rcu_nocbs_cpus))
        ev = f"{CMDLINE}: nohz_full={cpus(f.nohz_full_cpus)} rcu_nocbs={cpus(f.rcu_nocbs_cpus)}"
        return gap, ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if not value:
            return OK, ""
        return WARN, f"add CPUs {cpus(value)} to rcu_nocbs= (rcu_nocbs={cpus(f.nohz_full_cpus)})"


class RcuNocbs(Check):
    id = "boot.rcu_nocbs"
    title = "RCU callbacks offloaded from the real-time CPUs"
    why = "Offloaded RCU callbacks run in kernel threads on housekeeping CPUs instead."
    missing = "no isolated or given real-time CPUs to check"

    def available(self, f: Facts) -> bool:
        return rt_explicit(f)

    def read(self, f: Facts) -> tuple[Any, str]:
        ev = f"{CMDLINE}: rcu_nocbs={cpus(f.rcu_nocbs_cpus)}"
        if f.rcu_nocbs_cpus and _config_lacks(f, "CONFIG_RCU_NOCB_CPU"):
            ev += f"; {f.config_source}: CONFIG_RCU_NOCB_CPU not set"
        return f.rcu_nocbs_cpus, ev

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value and _config_lacks(f, "CONFIG_RCU_NOCB_CPU"):
            # kernel/rcu/Kconfig: without RCU_NOCB_CPU, rcu_nocbs= is not parsed
            return WARN, "rebuild with CONFIG_RCU_NOCB_CPU=y: this kernel ignores rcu_nocbs="
        if set(f.rt_cpus) <= set(value):
            return OK, ""
        return WARN, f"boot with rcu_nocbs={cpus(f.rt_cpus)}"


class RcuNocbPoll(Check):
    id = "boot.rcu_nocb_poll"
    title = "RCU offload threads poll instead of being woken"
    why = "Without rcu_nocb_poll the real-time CPU itself wakes the RCU offload threads."
    missing = "rcu_nocbs not in use"

    def available(self, f: Facts) -> bool:
        return bool(f.rcu_nocbs_cpus)

    def read(self, f: Facts) -> tuple[Any, str]:
        on = "rcu_nocb_poll" in f.rt_params
        return on, f"{CMDLINE}: rcu_nocb_poll {'present' if on else 'absent'}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (OK, "") if value else (INFO, "add rcu_nocb_poll to the command line")


class IrqAffinityParam(Check):
    id = "boot.irqaffinity"
    title = "Default interrupt affinity excludes the real-time CPUs"
    why = "irqaffinity= keeps interrupts requested after boot on housekeeping CPUs."
    missing = "no isolated or given real-time CPUs to check"

    def available(self, f: Facts) -> bool:
        return rt_explicit(f)

    def read(self, f: Facts) -> tuple[Any, str]:
        v = f.irqaffinity_cpus
        return v, f"{CMDLINE}: irqaffinity=" + ("absent" if v is None else cpus(v))

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        fix = f"boot with irqaffinity={cpus(housekeeping(f))}"
        if value is None:
            return WARN, fix
        return (FAIL, fix) if set(value) & set(f.rt_cpus) else (OK, "")


class ThreadIrqs(Check):
    id = "boot.threadirqs"
    title = "Interrupt handlers run in threads"
    why = "Threaded handlers can be prioritised below the real-time task; hard handlers cannot."

    def read(self, f: Facts) -> tuple[Any, str]:
        if f.preempt_model == "rt":
            return True, "PREEMPT_RT forces threaded interrupt handlers"
        on = "threadirqs" in f.rt_params
        return on, f"{CMDLINE}: threadirqs {'present' if on else 'absent'}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (OK, "") if value else (INFO, "add threadirqs to the command line")


class SkewTick(Check):
    id = "boot.skew_tick"
    title = "Ticks of different CPUs are skewed"
    why = "Aligned ticks make every CPU contend for the same locks at the same moment."

    def read(self, f: Facts) -> tuple[Any, str]:
        v = f.rt_params.get("skew_tick")
        return v == "1", f"{CMDLINE}: skew_tick=" + (v if v is not None else "absent")

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (OK, "") if value else (INFO, "add skew_tick=1 to the command line")


class CstateLimit(Check):
    id = "boot.cstate_limit"
    title = "Deep idle states limited at boot"
    why = "Waking from a deep C-state can take longer than the deadline."

    def read(self, f: Facts) -> tuple[Any, str]:
        keys = ("idle", "intel_idle.max_cstate", "processor.max_cstate", "cpuidle.off")
        given = {k: f.rt_params[k] for k in keys if k in f.rt_params}
        ev = " ".join(f"{k}={v}" for k, v in given.items()) or "no idle=, max_cstate=, cpuidle.off="
        return bool(given), f"{CMDLINE}: {ev}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        # intel_idle and processor (ACPI C-states) are x86's; cpuidle.off=1 turns the
        # cpuidle subsystem off on every architecture (admin-guide/pm/cpuidle.rst)
        x86 = (f.arch or "x86_64") in ("x86_64", "i386", "i486", "i586", "i686")
        limit = "intel_idle.max_cstate=1 processor.max_cstate=1" if x86 else "cpuidle.off=1"
        fix = f"boot with {limit}, or hold /dev/cpu_dma_latency at 0 while the real-time task runs"
        return (OK, "") if value else (INFO, fix)


class TscReliable(Check):
    id = "boot.tsc_reliable"
    title = "TSC not watched by the clocksource watchdog"
    why = "The clocksource watchdog periodically reads a slow reference clock on every CPU."
    missing = "clocksource is not the TSC"

    def available(self, f: Facts) -> bool:
        return f.clocksource == "tsc"

    def read(self, f: Facts) -> tuple[Any, str]:
        v = f.rt_params.get("tsc")
        return v, f"{CMDLINE}: tsc=" + (v if v is not None else "absent")

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        if value in ("reliable", "nowatchdog"):
            return OK, ""
        return INFO, "boot with tsc=reliable when the TSC is known to be stable"


class BootTracing(Check):
    id = "boot.tracing"
    title = "No tracing enabled at boot"
    why = "A tracer or trace events started at boot add overhead to every traced path."

    def read(self, f: Facts) -> tuple[Any, str]:
        given = {k: f.rt_params[k] for k in ("ftrace", "trace_event") if k in f.rt_params}
        ev = " ".join(f"{k}={v}" for k, v in given.items()) or "no ftrace=, trace_event="
        return bool(given), f"{CMDLINE}: {ev}"

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        return (
            (WARN, "remove ftrace= and trace_event= from the command line") if value else (OK, "")
        )
