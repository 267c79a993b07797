"""A kernel configuration fragment from the audit's kernel findings (`rtlab audit --kconfig`).

The fragment is merged into a kernel tree's .config with scripts/kconfig/merge_config.sh.
Only findings that are not OK add settings, each right after a comment that names the
check it comes from. Every line is a comment, CONFIG_<NAME>=VALUE or
"# CONFIG_<NAME> is not set": merge_config.sh compares the lines literally, so no setting
carries a trailing comment. The symbols and their dependencies are the kernel's own
(tests/fixtures/kconfig-symbols.txt names the Kconfig file of each).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from rtlab.system._audit import OK, Finding, dedicated
from rtlab.system._facts import DEFAULT_GOVERNORS, Facts
from rtlab.system._kconfig_debug import BY_SYMBOL, LOCKDEP_SELECTORS

# The lines merge_config.sh reads: CONFIG_<NAME>=VALUE or "# CONFIG_<NAME> is not set".
SETTING = re.compile(r'^CONFIG_[A-Z0-9_]+=(y|m|n|[0-9]+|".*")$|^# CONFIG_[A-Z0-9_]+ is not set$')
HZ_CHOICES = (100, 250, 300, 1000)  # kernel/Kconfig.hz
TICK_MODES = {
    "HZ_PERIODIC": "CONFIG_HZ_PERIODIC",
    "NO_HZ_IDLE": "CONFIG_NO_HZ_IDLE",
    "NO_HZ_FULL": "CONFIG_NO_HZ_FULL",
}
VARIANTS = ("debug", "production")  # --kconfig-variant; none: the findings' settings alone
TRACERS = (  # trace.available: the tracers rtlab explain and the audit recommend
    ("timerlat", "CONFIG_TIMERLAT_TRACER"),
    ("osnoise", "CONFIG_OSNOISE_TRACER"),
    ("hwlat", "CONFIG_HWLAT_TRACER"),
)


@dataclass
class Entry:
    value: str | None  # None: "# CONFIG_<NAME> is not set"
    why: str  # the comment above it; "\n" continues it on further comment lines
    checks: list[str]  # the audit checks that call for it


@dataclass
class Fragment:
    entries: dict[str, Entry] = field(default_factory=dict)  # in the order first asked for

    def set(self, symbol: str, value: str | None, check: str, why: str) -> None:
        if symbol not in self.entries:
            self.entries[symbol] = Entry(value, why, [check])
        elif check not in self.entries[symbol].checks:
            self.entries[symbol].checks.append(check)

    def has(self, symbol: str, value: str = "y") -> bool:
        return symbol in self.entries and self.entries[symbol].value == value

    def lines(self) -> list[str]:
        out: list[str] = []
        for symbol, e in self.entries.items():
            first, *more = e.why.split("\n")
            out.append(f"# {', '.join(e.checks)}: {first}")
            out.extend(f"#   {text}" for text in more)
            out.append(f"# {symbol} is not set" if e.value is None else f"{symbol}={e.value}")
        return out


def _kernel_config(fr: Fragment, f: Facts, x: Finding) -> None:
    fr.set("CONFIG_IKCONFIG", "y", x.id, "keep the configuration in the kernel (init/Kconfig)")
    fr.set("CONFIG_IKCONFIG_PROC", "y", x.id, "as /proc/config.gz, where the audit reads it")


def _preempt(fr: Fragment, f: Facts, x: Finding) -> None:
    if f.preempt_model in ("unknown", "rt"):
        return
    fr.set("CONFIG_EXPERT", "y", x.id, "PREEMPT_RT depends on EXPERT (kernel/Kconfig.preempt)")
    # The current model is not unset: before 6.13 the later PREEMPT_RT=y wins the choice,
    # after it NONE and VOLUNTARY depend on !PREEMPT_RT; where PREEMPT_RT cannot be set,
    # "# CONFIG_PREEMPT_VOLUNTARY is not set" only demoted the kernel to PREEMPT_NONE.
    fr.set(
        "CONFIG_PREEMPT_RT",
        "y",
        x.id,
        f"fully preemptible kernel (now {f.preempt_model})\n"
        "it also depends on ARCH_SUPPORTS_RT, selected by the architecture: mainline x86,\n"
        "arm64 and riscv since 6.12, older kernels with the PREEMPT_RT patch set; without it\n"
        "make olddefconfig drops this line (before 6.13 the model then becomes PREEMPT_NONE)",
    )


def _hz(fr: Fragment, f: Facts, x: Finding) -> None:
    if f.hz is None or f.hz >= 1000:
        return
    fr.set("CONFIG_HZ_1000", "y", x.id, f"1000 Hz tick (now {f.hz}; kernel/Kconfig.hz)")
    if f.hz in HZ_CHOICES:
        fr.set(f"CONFIG_HZ_{f.hz}", None, x.id, "the timer-frequency choice holds one value")
    fr.set("CONFIG_HZ", "1000", x.id, "the value HZ_1000 gives CONFIG_HZ")


def _nohz_full(fr: Fragment, f: Facts, x: Finding) -> None:
    if f.config.get("CONFIG_NO_HZ_FULL") == "y" or f.timer_mode == "NO_HZ_FULL":
        return
    fr.set(
        "CONFIG_NO_HZ_FULL",
        "y",
        x.id,
        "stop the tick on the nohz_full= CPUs (kernel/time/Kconfig)\n"
        "it selects RCU_NOCB_CPU and CPU_ISOLATION",
    )
    if f.timer_mode in TICK_MODES:
        fr.set(TICK_MODES[f.timer_mode], None, x.id, "the tick-handling choice holds one mode")


def _nohz_full_isolated(fr: Fragment, f: Facts, x: Finding) -> None:
    if dedicated(f):  # boot.nohz_full advises full dynticks for isolated CPUs only
        _nohz_full(fr, f, x)


def _timer_mode(fr: Fragment, f: Facts, x: Finding) -> None:
    if dedicated(f):  # isolated CPUs: full dynticks, for one busy task each (the comment)
        _nohz_full(fr, f, x)
        return
    if f.timer_mode in (None, "HZ_PERIODIC"):
        return
    fr.set(
        "CONFIG_HZ_PERIODIC",
        "y",
        x.id,
        "keep the tick periodic: no tick restart and no deeper idle state on each wake\n"
        "from idle (kernel/time/Kconfig; or boot with nohz=off, or keep idle states shallow)",
    )
    fr.set(TICK_MODES[f.timer_mode], None, x.id, "the tick-handling choice holds one mode")


def _governor(fr: Fragment, f: Facts, x: Finding) -> None:
    symbol = "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE"
    if f.config.get(symbol) == "y":
        return
    fr.set(
        symbol,
        "y",
        x.id,
        "the performance governor from boot on (drivers/cpufreq/Kconfig; without a\n"
        "rebuild: boot with cpufreq.default_governor=performance, Linux 5.9 and later).\n"
        "An alternative: no CONFIG_CPU_FREQ at all, no scaling, the clock stays where\n"
        "the firmware set it (check that is the highest; full power while idle)",
    )
    for gov in DEFAULT_GOVERNORS:
        other = f"CONFIG_CPU_FREQ_DEFAULT_GOV_{gov.upper()}"
        if other != symbol and f.config.get(other) == "y":
            fr.set(other, None, x.id, "the default-governor choice holds one governor")


def _hres(fr: Fragment, f: Facts, x: Finding) -> None:
    fr.set("CONFIG_HIGH_RES_TIMERS", "y", x.id, "high-resolution timers (kernel/time/Kconfig)")


def _isolation(fr: Fragment, f: Facts, x: Finding) -> None:
    if f.config.get("CONFIG_CPU_ISOLATION") != "y":
        fr.set("CONFIG_CPU_ISOLATION", "y", x.id, "isolcpus= needs CPU_ISOLATION (init/Kconfig)")


def _rcu_nocbs(fr: Fragment, f: Facts, x: Finding) -> None:
    if f.config.get("CONFIG_RCU_NOCB_CPU") == "y":
        return
    if f.config.get("CONFIG_NO_HZ_FULL") != "y" and not fr.has("CONFIG_NO_HZ_FULL"):
        fr.set(
            "CONFIG_RCU_EXPERT",
            "y",
            x.id,
            "RCU_NOCB_CPU depends on RCU_EXPERT || NO_HZ_FULL (kernel/rcu/Kconfig)",
        )
    fr.set("CONFIG_RCU_NOCB_CPU", "y", x.id, "rcu_nocbs= needs RCU_NOCB_CPU (kernel/rcu/Kconfig)")


def _rcu_boost(fr: Fragment, f: Facts, x: Finding) -> None:
    fr.set(
        "CONFIG_RCU_BOOST",
        "y",
        x.id,
        "boost preempted RCU readers (kernel/rcu/Kconfig)\n"
        "it depends on (RT_MUTEXES && PREEMPT_RCU && RCU_EXPERT) || PREEMPT_RT",
    )


def _debug(fr: Fragment, f: Facts, x: Finding) -> None:
    for symbol in f.debug_options:
        o = BY_SYMBOL[symbol]
        if symbol != "CONFIG_LOCKDEP":
            fr.set(symbol, None, x.id, f"{o.cost} ({o.kconfig})")
            continue
        selectors = [s for s in LOCKDEP_SELECTORS if s in f.debug_options]
        for s in selectors:  # LOCKDEP has no prompt: it goes when nothing selects it
            fr.set(s, None, x.id, f"{BY_SYMBOL[s].cost}; it selects LOCKDEP ({o.kconfig})")
        if not selectors:
            fr.set(symbol, None, x.id, f"{o.cost} ({o.kconfig}); find what selects it")


def _tracers(fr: Fragment, f: Facts, x: Finding) -> None:
    for symbol in f.latency_tracer_options:
        o = BY_SYMBOL[symbol]
        if symbol == "CONFIG_FUNCTION_TRACER":
            fr.set(
                "CONFIG_DYNAMIC_FTRACE",
                "y",
                x.id,
                "NOPs instead of an mcount call in every function (kernel/trace/Kconfig)\n"
                "without HAVE_DYNAMIC_FTRACE in the architecture, unset FUNCTION_TRACER",
            )
        elif symbol.startswith("CONFIG_PROFILE_"):
            fr.set(
                "CONFIG_BRANCH_PROFILE_NONE",
                "y",
                x.id,
                f"no branch profiling: {symbol[7:]} {o.cost} ({o.kconfig}, a choice)",
            )
        else:
            fr.set(symbol, None, x.id, f"{o.cost} even with no tracer running ({o.kconfig})")


def _trace_available(fr: Fragment, f: Facts, x: Finding) -> None:
    if f.tracers_available is not None:
        lacking = [s for t, s in TRACERS if t not in f.tracers_available]
    else:
        lacking = [s for _, s in TRACERS if f.config.get(s) != "y"]
    if not lacking:
        return
    fr.set("CONFIG_FTRACE", "y", x.id, 'the "Tracers" menu they are in (kernel/trace/Kconfig)')
    for name, symbol in TRACERS:
        if symbol in lacking:
            fr.set(symbol, "y", x.id, f"the {name} tracer, to explain latency spikes")


SETTERS: dict[str, Callable[[Fragment, Facts, Finding], None]] = {
    "kernel.config": _kernel_config,
    "kernel.preempt": _preempt,
    "kernel.debug_options": _debug,
    "kernel.rcu_boost": _rcu_boost,
    "kernel.latency_tracers": _tracers,
    "timer.hz": _hz,
    "timer.mode": _timer_mode,
    "timer.hres": _hres,
    "boot.isolcpus": _isolation,
    "boot.nohz_full": _nohz_full_isolated,
    "boot.nohz_full_config": _nohz_full,
    "boot.rcu_nocbs_nohz": _rcu_nocbs,
    "boot.rcu_nocbs": _rcu_nocbs,
    "trace.available": _trace_available,
    "cpu.governor": _governor,
}


def settings(text: str) -> list[str]:
    """The setting lines of a fragment (everything else in it is a comment)."""
    return [line for line in text.splitlines() if SETTING.match(line)]


def _debug_variant(fr: Fragment, f: Facts) -> None:
    """The tracers that find where a latency comes from (rtla, rtlab explain)."""
    check = "variant debug"
    fr.set("CONFIG_FTRACE", "y", check, 'the "Tracers" menu (kernel/trace/Kconfig)')
    for name, symbol in TRACERS:
        fr.set(symbol, "y", check, f"the {name} tracer, to find where a latency comes from")


def _production_variant(fr: Fragment, f: Facts) -> None:
    """The tracers a debug kernel added, removed once the latency is understood."""
    have = set(f.tracers_available or [])
    for name, symbol in reversed(TRACERS):  # hwlat, osnoise, timerlat (it selects osnoise)
        if f.config.get(symbol) == "y" or name in have:
            fr.set(
                symbol,
                None,
                "variant production",
                f"the {name} tracer was for debugging; a production kernel goes without",
            )


def build_fragment(f: Facts, findings: list[Finding], variant: str | None = None) -> Fragment:
    """The settings the non-OK kernel findings call for, and VARIANT's: "debug" keeps the
    always-on tracer hooks and adds the latency tracers, "production" adds no tracer and
    removes them (the debug options go in every variant)."""
    fr = Fragment()
    skip = {"debug": "kernel.latency_tracers", "production": "trace.available"}.get(variant or "")
    for x in findings:
        # A finding that could not judge (INFO without a fix) calls for nothing.
        if x.status != OK and x.fix and x.id in SETTERS and x.id != skip:
            SETTERS[x.id](fr, f, x)
    if variant == "debug":
        _debug_variant(fr, f)
    elif variant == "production":
        _production_variant(fr, f)
    return fr


def kconfig_settings(f: Facts, findings: list[Finding]) -> list[tuple[str, str]]:
    """(setting line, the first check that calls for it) of the fragment, in its order:
    what `rtlab tune plan` prints as kernel configuration changes."""
    return [
        (f"# {symbol} is not set" if e.value is None else f"{symbol}={e.value}", e.checks[0])
        for symbol, e in build_fragment(f, findings).entries.items()
    ]


def kconfig_fragment(
    f: Facts, findings: list[Finding], source: str, version: str, variant: str | None = None
) -> str:
    """The fragment's text: a header, then the settings the non-OK kernel findings call for
    (and those of VARIANT, "debug" or "production")."""
    fr = build_fragment(f, findings, variant)
    option = f" --kconfig-variant {variant}" if variant else ""
    header = [
        f"# Kernel configuration fragment written by rtlab {version} (rtlab audit --kconfig"
        f"{option})",
        f"# from {source}: kernel {f.kernel_release or '?'}, "
        f"configuration {f.config_source or 'not readable'}",
        "# Merge into a kernel tree, then let Kconfig resolve the dependencies:",
        "#   scripts/kconfig/merge_config.sh -m .config THIS_FILE && make olddefconfig",
        "# Only findings that are not OK add settings: an OK finding adds nothing.",
        "# Each setting follows a comment naming the audit check it comes from.",
    ]
    if not fr.entries:
        header.append("# No kernel finding calls for a change: nothing to set.")
    return "\n".join(header + ([""] if fr.entries else []) + fr.lines()) + "\n"
