"""Kernel options that add latency to a production kernel, judged with the boot line.

Every symbol here was checked against the kernel's own Kconfig files; the file each one
comes from is named in the table and listed in tests/fixtures/kconfig-symbols.txt, and
tests/test_audit_kconfig.py fails when this module names a symbol that list lacks.
Options the kernel documents as free or nearly free when unused (SCHED_DEBUG, SCHEDSTATS,
FAULT_INJECTION, KFENCE, DEBUG_LIST, PAGE_OWNER without page_owner=on) are not flagged.

Some options are built in but off at boot, and some are built off but switched on by a
boot parameter (CONFIG_DEBUG_KMEMLEAK_DEFAULT_OFF with kmemleak=on): their `state` reads
the configuration and the command line the way the kernel does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from rtlab.system._cmdline import Cmdline

# (active, why) for an option that is built in: why is the boot parameter that made it
# active, or the reason it is off.
State = Callable[[dict[str, str], Cmdline], tuple[bool, str]]


@dataclass(frozen=True)
class KOption:
    symbol: str  # "CONFIG_DEBUG_KMEMLEAK"
    kconfig: str  # where the kernel defines it
    cost: str  # what it costs, after the Kconfig help text
    state: State | None = None  # None: active whenever built in
    boot_off: str = ""  # the boot parameter that turns it off without a rebuild


def kstrtobool(value: str | None) -> bool | None:
    """The kernel's kstrtobool(): y/Y/1/on true, n/N/0/off false, anything else None."""
    if not value:
        return None
    c = value[0].lower()
    if c in "y1":
        return True
    if c in "n0":
        return False
    if c == "o" and len(value) > 1:
        return {"n": True, "f": False}.get(value[1].lower())
    return None


def _values(cmd: Cmdline, *names: str) -> list[tuple[str, str]]:
    """(name, value) of every NAME on the command line, in order ("" for a bare flag)."""
    return [(k, v or "") for k, v in cmd.params if k in names]


def _kmemleak(config: dict[str, str], cmd: Cmdline) -> tuple[bool, str]:
    # mm/kmemleak.c: kmemleak=off disables; kmemleak=on is needed with DEFAULT_OFF.
    values = [v for _, v in _values(cmd, "kmemleak")]
    if "off" in values:
        return False, "kmemleak=off on the command line"
    if config.get("CONFIG_DEBUG_KMEMLEAK_DEFAULT_OFF") == "y":
        if "on" in values:
            return True, "kmemleak=on overrides CONFIG_DEBUG_KMEMLEAK_DEFAULT_OFF=y"
        return False, "CONFIG_DEBUG_KMEMLEAK_DEFAULT_OFF=y and no kmemleak=on"
    return True, ""


def _debug_objects(config: dict[str, str], cmd: Cmdline) -> tuple[bool, str]:
    # lib/debugobjects.c: debug_objects / no_debug_objects, the last one counts.
    on = config.get("CONFIG_DEBUG_OBJECTS_ENABLE_DEFAULT", "1") != "0"
    why = "" if on else "CONFIG_DEBUG_OBJECTS_ENABLE_DEFAULT=0 and no debug_objects"
    for name, _ in _values(cmd, "debug_objects", "no_debug_objects"):
        on, why = name == "debug_objects", f"{name} on the command line"
    return on, why


def _bool_param(param: str, default_symbol: str | None) -> State:
    """An option switched by PARAM=<kstrtobool> (the last valid value counts), else by
    DEFAULT_SYMBOL=y."""

    def state(config: dict[str, str], cmd: Cmdline) -> tuple[bool, str]:
        on = default_symbol is not None and config.get(default_symbol) == "y"
        why = "" if on else f"off unless {param}=on"
        for _, value in _values(cmd, param):
            b = kstrtobool(value)
            if b is not None:
                on, why = b, f"{param}={value} on the command line"
        return on, why

    return state


def _slub_debug_on(config: dict[str, str], cmd: Cmdline) -> tuple[bool, str]:
    # mm/Kconfig.debug: "SLUB debugging may be switched off ... by specifying slab_debug=-"
    # (slub_debug= in older kernels, still accepted).
    values = _values(cmd, "slub_debug", "slab_debug")
    if values and values[-1][1] == "-":
        return False, f"{values[-1][0]}=- on the command line"
    return True, ""


def _kasan(config: dict[str, str], cmd: Cmdline) -> tuple[bool, str]:
    # Only the hardware tag-based mode can be switched off at boot (kasan=off).
    values = [v for _, v in _values(cmd, "kasan")]
    if config.get("CONFIG_KASAN_HW_TAGS") == "y" and values and values[-1] == "off":
        return False, "CONFIG_KASAN_HW_TAGS=y and kasan=off"
    return True, ""


def _ubsan(config: dict[str, str], cmd: Cmdline) -> tuple[bool, str]:
    # Kernels that still have UBSAN_SANITIZE_ALL instrument only opted-in files without it.
    has_option = "CONFIG_ARCH_HAS_UBSAN_SANITIZE_ALL" in config
    if has_option and config.get("CONFIG_UBSAN_SANITIZE_ALL") != "y":
        return False, "CONFIG_UBSAN_SANITIZE_ALL not set: only opted-in files are checked"
    return True, ""


def _kcov(config: dict[str, str], cmd: Cmdline) -> tuple[bool, str]:
    if config.get("CONFIG_KCOV_INSTRUMENT_ALL") != "y":
        return False, "CONFIG_KCOV_INSTRUMENT_ALL not set: only opted-in files are instrumented"
    return True, ""


def _function_tracer(config: dict[str, str], cmd: Cmdline) -> tuple[bool, str]:
    if config.get("CONFIG_DYNAMIC_FTRACE") == "y":
        return False, "CONFIG_DYNAMIC_FTRACE=y patches the calls to NOPs"
    return True, "no CONFIG_DYNAMIC_FTRACE"


# LOCKDEP has no prompt: these select it (lib/Kconfig.debug), a fragment turns them off.
LOCKDEP_SELECTORS = (
    "CONFIG_PROVE_LOCKING",
    "CONFIG_LOCK_STAT",
    "CONFIG_DEBUG_LOCK_ALLOC",
    "CONFIG_DEBUG_WW_MUTEX_SLOWPATH",
)

# kernel.debug_options: a debug kernel's costs on every lock, allocation or access.
DEBUG_OPTIONS: tuple[KOption, ...] = (
    KOption("CONFIG_PROVE_LOCKING", "lib/Kconfig.debug", "lock dependency proof on every lock"),
    KOption(
        "CONFIG_LOCKDEP",
        "lib/Kconfig.debug",
        "lock dependency tracking on every lock (no prompt: selected)",
    ),
    KOption("CONFIG_DEBUG_LOCK_ALLOC", "lib/Kconfig.debug", "checks every freed lock"),
    KOption("CONFIG_LOCK_STAT", "lib/Kconfig.debug", "contention statistics on every lock"),
    KOption("CONFIG_DEBUG_LOCKDEP", "lib/Kconfig.debug", "lockdep checking itself"),
    KOption("CONFIG_DEBUG_SPINLOCK", "lib/Kconfig.debug", "out-of-line checked spinlocks"),
    KOption("CONFIG_DEBUG_MUTEXES", "lib/Kconfig.debug", "checked mutexes"),
    KOption("CONFIG_DEBUG_RWSEMS", "lib/Kconfig.debug", "checked rw semaphores"),
    KOption("CONFIG_DEBUG_RT_MUTEXES", "lib/Kconfig.debug", "checked rt mutexes"),
    KOption("CONFIG_DEBUG_WW_MUTEX_SLOWPATH", "lib/Kconfig.debug", "injected w/w mutex backoffs"),
    KOption("CONFIG_DEBUG_ATOMIC_SLEEP", "lib/Kconfig.debug", "a check in every might_sleep()"),
    KOption(
        "CONFIG_DEBUG_PREEMPT", "lib/Kconfig.debug", "debug routines on every this_cpu operation"
    ),
    KOption("CONFIG_DEBUG_PLIST", "lib/Kconfig.debug", "walks a plist on every change"),
    KOption("CONFIG_DEBUG_PER_CPU_MAPS", "lib/Kconfig.debug", "checks every per-CPU map access"),
    KOption("CONFIG_DEBUG_VM", "lib/Kconfig.debug", "extended virtual-memory checks"),
    KOption(
        "CONFIG_DEBUG_OBJECTS",
        "lib/Kconfig.debug",
        "tracks timer, work and RCU objects",
        _debug_objects,
        "no_debug_objects",
    ),
    KOption(
        "CONFIG_DEBUG_KMEMLEAK",
        "mm/Kconfig.debug",
        "traces every allocation, scans memory",
        _kmemleak,
        "kmemleak=off",
    ),
    KOption(
        "CONFIG_DEBUG_PAGEALLOC",
        "mm/Kconfig.debug",
        "unmaps freed pages",
        _bool_param("debug_pagealloc", "CONFIG_DEBUG_PAGEALLOC_ENABLE_DEFAULT"),
        "debug_pagealloc=off",
    ),
    KOption(
        "CONFIG_PAGE_POISONING",
        "mm/Kconfig.debug",
        "fills and checks freed pages",
        _bool_param("page_poison", None),
        "page_poison=0",
    ),
    KOption(
        "CONFIG_SLUB_DEBUG_ON",
        "mm/Kconfig.debug",
        "slab debugging on every allocation",
        _slub_debug_on,
        "slub_debug=-",
    ),
    KOption("CONFIG_KASAN", "lib/Kconfig.kasan", "checks every memory access", _kasan),
    KOption("CONFIG_KCSAN", "lib/Kconfig.kcsan", "watchpoints that delay tasks for microseconds"),
    KOption("CONFIG_KMSAN", "lib/Kconfig.kmsan", "tracks every uninitialised value"),
    KOption("CONFIG_UBSAN", "lib/Kconfig.ubsan", "runtime undefined-behaviour checks", _ubsan),
    KOption("CONFIG_KCOV", "lib/Kconfig.debug", "coverage callbacks in every block", _kcov),
    KOption(
        "CONFIG_CONTEXT_TRACKING_USER_FORCE",
        "kernel/time/Kconfig",
        "context tracking on every kernel entry",
    ),
)

# kernel.latency_tracers: tracer hooks that cost even while no tracer runs.
LATENCY_TRACERS: tuple[KOption, ...] = (
    KOption("CONFIG_IRQSOFF_TRACER", "kernel/trace/Kconfig", "hooks every irq disable/enable"),
    KOption("CONFIG_PREEMPT_TRACER", "kernel/trace/Kconfig", "hooks every preempt disable/enable"),
    KOption(
        "CONFIG_FUNCTION_TRACER",
        "kernel/trace/Kconfig",
        "an mcount call in every function",
        _function_tracer,
    ),
    KOption("CONFIG_PROFILE_ANNOTATED_BRANCHES", "kernel/trace/Kconfig", "counts every likely()"),
    KOption("CONFIG_PROFILE_ALL_BRANCHES", "kernel/trace/Kconfig", "counts every if()"),
)

BY_SYMBOL = {o.symbol: o for o in (*DEBUG_OPTIONS, *LATENCY_TRACERS)}


@dataclass
class Judged:
    active: list[str] = field(default_factory=list)  # symbols that cost now
    why: dict[str, str] = field(default_factory=dict)  # active: the boot parameter or note
    off: dict[str, str] = field(default_factory=dict)  # built in but off: why


def judge(options: tuple[KOption, ...], config: dict[str, str], cmd: Cmdline) -> Judged:
    """Which of OPTIONS are built in (=y) and active with this command line."""
    out = Judged()
    for o in options:
        if config.get(o.symbol) != "y":
            continue
        active, why = o.state(config, cmd) if o.state else (True, "")
        if active:
            out.active.append(o.symbol)
            if why:
                out.why[o.symbol] = why
        else:
            out.off[o.symbol] = why
    return out
