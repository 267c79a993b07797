"""Name a setup (kernel build, boot parameters, tuning) by the facts that tell it apart."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rtlab.system._cpus import format_cpulist
from rtlab.system._virt import virt_label, virtualization_of

PREEMPT_NAMES = {
    "rt": "PREEMPT_RT",
    "full": "PREEMPT",
    "lazy": "PREEMPT_LAZY",
    "voluntary": "PREEMPT_VOLUNTARY",
    "none": "PREEMPT_NONE",
}


def _preempt(f: dict[str, Any]) -> str | None:
    model = f.get("preempt_model")
    if not model or model == "unknown":
        return None
    kind, _, current = model.partition(":")
    if kind == "dynamic":
        return f"PREEMPT_DYNAMIC({current})" if current else "PREEMPT_DYNAMIC"
    return PREEMPT_NAMES.get(model, model)


def _cpus(key: str, name: str) -> Callable[[dict[str, Any]], str | None]:
    def label(f: dict[str, Any]) -> str | None:
        v = f.get(key)
        return f"{name}={format_cpulist(v)}" if v else None

    return label


def _isolation(f: dict[str, Any]) -> str | None:
    cpus = f.get("isolated_cpus")
    if not cpus:
        return None
    source = {"cpuset partition": "cpuset", None: "isolcpus"}.get(
        f.get("isolation_source"), f.get("isolation_source")
    )
    return f"{source}={format_cpulist(cpus)}"


def _governor(f: dict[str, Any]) -> str | None:
    govs = sorted(set((f.get("governors") or {}).values()))
    return f"governor={'/'.join(govs)}" if govs else None


def _smt(f: dict[str, Any]) -> str | None:
    v = f.get("smt_active")
    return None if v is None else ("SMT on" if v else "SMT off")


def _plain(key: str, form: str = "{}") -> Callable[[dict[str, Any]], str | None]:
    def label(f: dict[str, Any]) -> str | None:
        v = f.get(key)
        return form.format(v) if v not in (None, "") else None

    return label


def _virtualization(f: dict[str, Any]) -> str | None:
    label = virt_label(virtualization_of(f))
    return None if label == "unknown" else label


UNTUNED = "untuned"

#: Boot parameters that name setups by their difference (e.g. `threadirqs` on one only): the
#: real-time ones the audit records (_facts.RT_PARAMS) except those named by a fact above.
NAMED_BY_FACT = {"isolcpus", "nohz_full", "rcu_nocbs", "preempt"}
#: Sysctls of the audit's facts: (fact, sysctl name); a setup differing by one is named
#: "kernel.sched_rt_runtime_us=900000".
SYSCTL_FACTS = (
    ("sched_rt_runtime_us", "kernel.sched_rt_runtime_us"),
    ("sched_rt_period_us", "kernel.sched_rt_period_us"),
    ("timer_migration", "kernel.timer_migration"),
    ("numa_balancing", "kernel.numa_balancing"),
    ("watchdog", "kernel.watchdog"),
    ("nmi_watchdog", "kernel.nmi_watchdog"),
    ("stat_interval_s", "vm.stat_interval"),
    ("dirty_writeback_centisecs", "vm.dirty_writeback_centisecs"),
)


def _boot_flags(f: dict[str, Any]) -> set[str] | None:
    """The real-time boot parameters as "name" or "name=value"; None when not recorded."""
    from rtlab.system._cmdline import split_cmdline
    from rtlab.system._facts import RT_PARAMS

    params = f.get("rt_params")
    pairs: list[tuple[str, str | None]]
    if isinstance(params, dict):
        pairs = [(k, v) for k, v in params.items() if isinstance(v, str)]
    elif isinstance(f.get("cmdline"), str):
        pairs = [(k, v) for k, v in split_cmdline(f["cmdline"]) if k in RT_PARAMS]
    else:
        return None
    return {k if not v else f"{k}={v}" for k, v in pairs if k not in NAMED_BY_FACT}


def _debug(f: dict[str, Any]) -> set[str] | None:
    opts = f.get("debug_options")
    if not isinstance(opts, list):
        return None
    return {o for o in opts if isinstance(o, str)}


def _differences(
    facts: list[dict[str, Any]], read: Callable[[dict[str, Any]], set[str] | None]
) -> list[list[str]]:
    """Per setup, what it has that not every other has, and "no X" for what the others
    have and it lacks; nothing when a setup did not record them."""
    sets = [read(f) for f in facts]
    out: list[list[str]] = [[] for _ in facts]
    if any(s is None for s in sets) or len(facts) < 2:
        return out
    known = [s for s in sets if s is not None]
    common = set.intersection(*known)
    every = set.union(*known)
    if common == every:
        return out
    for i, s in enumerate(known):
        mine = {x.partition("=")[0] for x in s}  # "mitigations=off" against "=auto": no "no"
        lacks = {x.partition("=")[0] for x in every - s} - mine
        out[i] = sorted(s - common) + [f"no {x}" for x in sorted(lacks)]
    return out


def _sysctl(fact: str, name: str) -> Callable[[dict[str, Any]], str | None]:
    return _plain(fact, name + "={}")


# Facts that name a setup when they differ between experiments, in label order.
SETUP_FACTS: list[tuple[str, Callable[[dict[str, Any]], str | None]]] = [
    ("preempt_model", _preempt),
    ("hz", _plain("hz", "HZ={}")),
    ("timer_mode", _plain("timer_mode")),
    ("isolated_cpus", _isolation),
    ("nohz_full_cpus", _cpus("nohz_full_cpus", "nohz_full")),
    ("rcu_nocbs_cpus", _cpus("rcu_nocbs_cpus", "rcu_nocbs")),
    ("smt_active", _smt),
    ("governors", _governor),
    ("tuning", lambda f: f.get("tuning") or UNTUNED),  # `rtlab run --tuned`
    ("virtualization", _virtualization),  # bare, kvm, tcg, another hypervisor
]
# Used only when the facts above do not tell the setups apart, with the boot flags and
# debug options that differ, before the release and host name.
SECOND_FACTS: list[tuple[str, Callable[[dict[str, Any]], str | None]]] = [
    (fact, _sysctl(fact, name)) for fact, name in SYSCTL_FACTS
]
# Used only when none of the above tell the setups apart.
FALLBACK_FACTS: list[tuple[str, Callable[[dict[str, Any]], str | None]]] = [
    ("kernel_release", _plain("kernel_release")),
    ("hostname", _plain("hostname")),
]


# Facts that name setups only when every side has them ("unknown" differs from nothing).
KNOWN_ON_ALL = {"virtualization", *(fact for fact, _ in SYSCTL_FACTS)}


def _parts(facts: list[dict[str, Any]], table: list) -> list[list[str]]:
    out: list[list[str]] = [[] for _ in facts]
    for key, label in table:
        texts = [label(f) for f in facts]
        if key in KNOWN_ON_ALL and None in texts:
            continue
        if len({json.dumps(t) for t in texts}) > 1:
            for i, t in enumerate(texts):
                if t:
                    out[i].append(t)
    return out


def setup_names(facts: list[dict[str, Any]], ids: list[str]) -> list[str]:
    """One name per setup from what differs, e.g. "PREEMPT_RT · HZ=1000 · isolcpus=3"."""
    parts = _parts(facts, SETUP_FACTS)
    names = [" · ".join(p) for p in parts]
    if len(set(names)) < len(names) or not all(names):
        # setups alike but for a sysctl, a boot flag such as threadirqs or a debug option
        more = _parts(facts, SECOND_FACTS)
        for read in (_boot_flags, _debug):
            for m, diff in zip(more, _differences(facts, read), strict=True):
                m.extend(diff)
        parts = [p + m for p, m in zip(parts, more, strict=True)]
        names = [" · ".join(p) for p in parts]
    if len(set(names)) < len(names) or not all(names):
        extra = _parts(facts, FALLBACK_FACTS)
        names = [" · ".join(p + e) for p, e in zip(parts, extra, strict=True)]
    if len(set(names)) < len(names) or not all(names):
        return list(ids)
    return names


def setup_description(facts: dict[str, Any]) -> str:
    """Everything that names one setup, for a single experiment."""
    texts = [label(facts) for _, label in SETUP_FACTS + FALLBACK_FACTS[:1]]
    return " · ".join(t for t in texts if t and t != UNTUNED) or "unknown system"
