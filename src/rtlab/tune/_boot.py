"""Boot-time fixes: the kernel command line and configuration the audit asks for.

rtlab never writes these (a boot loader entry or a kernel build is the user's to change);
`rtlab tune plan` prints them. Parameters are those of the kernel's
admin-guide/kernel-parameters.txt (isolcpus=[flags,]LIST, nohz_full=, rcu_nocbs=,
irqaffinity=, rcu_nocb_poll, threadirqs, skew_tick=1, preempt=, nosmt,
cpufreq.default_governor= since 5.9), given as the
audit's fixes give them; CPU lists of the same parameter are merged.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from rtlab.system import FAIL, OK, WARN, Facts, Finding, format_cpulist, parse_isolcpus
from rtlab.system._audit import housekeeping, rt_explicit
from rtlab.system._cmdline import cpulist_or_none
from rtlab.system._kconfig_fragment import kconfig_settings

CMDLINE, KCONFIG, ADVICE = "cmdline", "kconfig", "advice"
CPU_LIST_PARAMS = ("isolcpus", "nohz_full", "rcu_nocbs")
X86 = ("x86_64", "i386", "i486", "i586", "i686")


@dataclass(frozen=True)
class BootChange:
    kind: str  # CMDLINE (a parameter to add or replace), KCONFIG (a config line), ADVICE
    text: str
    check: str
    why: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Boot:
    """The boot-time changes: each with the check it fixes, and the merged results."""

    changes: list[BootChange] = field(default_factory=list)

    @property
    def cmdline(self) -> str:
        """The parameters to add to the kernel command line (replacing earlier values)."""
        params: dict[str, str | None] = {}
        for c in self.changes:
            if c.kind != CMDLINE:
                continue
            name, eq, value = c.text.partition("=")
            params[name] = _merge(name, params.get(name), value if eq else None)
        return " ".join(k if v is None else f"{k}={v}" for k, v in params.items())

    @property
    def kconfig(self) -> list[str]:
        return list(dict.fromkeys(c.text for c in self.changes if c.kind == KCONFIG))

    @property
    def advice(self) -> list[BootChange]:
        return [c for c in self.changes if c.kind == ADVICE]

    def to_dict(self) -> dict[str, Any]:
        return {
            "cmdline": self.cmdline,
            "kconfig": self.kconfig,
            "changes": [c.to_dict() for c in self.changes],
        }


def _merge(name: str, old: str | None, new: str | None) -> str | None:
    if old is None or new is None or name not in CPU_LIST_PARAMS:
        return new
    if name == "isolcpus":
        (f1, c1), (f2, c2) = parse_isolcpus(old), parse_isolcpus(new)
        flags = list(dict.fromkeys(f1 + f2))
        return ",".join([*flags, format_cpulist(set(c1) | set(c2))])
    cpus = set(cpulist_or_none(old) or []) | set(cpulist_or_none(new) or [])
    return format_cpulist(cpus)


def _release_at_least(release: str | None, version: tuple[int, int]) -> bool:
    """RELEASE ("6.1.0-18-amd64") is VERSION or later; an unknown release is taken as new."""
    m = re.match(r"(\d+)\.(\d+)", release or "")
    return m is None or (int(m[1]), int(m[2])) >= version


def boot_changes(facts: Facts, findings: dict[str, Finding], runnable: dict[str, bool],
                 *, with_info: bool) -> Boot:  # fmt: skip
    """The changes for every boot.*, kernel.*, timer.* (and SMT) finding that is not OK;
    INFO findings only WITH_INFO (the latency profile)."""
    boot = Boot()

    def due(check: str) -> Finding | None:
        x = findings.get(check)
        if x is None or not runnable.get(check) or x.status == OK:
            return None
        return x if with_info or x.status in (WARN, FAIL) else None

    def add(kind: str, text: str, x: Finding, why: str = "") -> None:
        boot.changes.append(BootChange(kind, text, x.id, why or x.why))

    rt = facts.rt_cpus if rt_explicit(facts) else facts.cpus_online[-1:]
    rts, hk = format_cpulist(rt), format_cpulist(housekeeping(facts))
    if x := due("boot.isolcpus"):
        for p in (f"isolcpus=managed_irq,domain,{rts}", f"rcu_nocbs={rts}"):
            add(CMDLINE, p, x)
    if (x := due("boot.isolcpus_flags")) and facts.isolated_cpus:
        add(CMDLINE, f"isolcpus=managed_irq,domain,{format_cpulist(facts.isolated_cpus)}", x)
    if x := due("boot.nohz_full"):  # only for one busy task per CPU: the user's call
        add(ADVICE, x.fix, x)
    if x := due("boot.rcu_nocbs"):
        add(CMDLINE, f"rcu_nocbs={rts}", x)
    if (x := due("boot.rcu_nocbs_nohz")) and facts.nohz_full_cpus:
        add(CMDLINE, f"rcu_nocbs={format_cpulist(facts.nohz_full_cpus)}", x)
    if x := due("boot.rcu_nocb_poll"):
        add(CMDLINE, "rcu_nocb_poll", x)
    if x := due("boot.irqaffinity"):
        add(CMDLINE, f"irqaffinity={hk}", x)
    if x := due("boot.threadirqs"):
        add(CMDLINE, "threadirqs", x)
    if x := due("boot.skew_tick"):
        add(CMDLINE, "skew_tick=1", x)
    if (x := due("boot.cstate_limit")) and (facts.arch or "x86_64") in X86:
        add(CMDLINE, "intel_idle.max_cstate=1", x)
        add(CMDLINE, "processor.max_cstate=1", x)
    if x := due("cpu.smt"):
        add(CMDLINE, "nosmt", x)
    if (x := due("cpu.governor")) and _release_at_least(facts.kernel_release, (5, 9)):
        add(CMDLINE, "cpufreq.default_governor=performance", x, "from boot on: " + x.why)
    weak_dynamic = facts.preempt_model.startswith("dynamic") and facts.preempt_model not in (
        "dynamic:full",
        "dynamic:lazy",
    )
    if (x := due("kernel.preempt")) and weak_dynamic:
        add(CMDLINE, "preempt=full", x, "until a PREEMPT_RT kernel is built: " + x.why)
    # the kernel configuration: the same settings as `rtlab audit --kconfig`
    due_findings = [x for x in findings.values() if due(x.id)]
    for line, check in kconfig_settings(facts, due_findings):
        add(KCONFIG, line, findings[check])
    for check in ("boot.tracing", "boot.tsc_reliable", "cpu.smt_sibling", "kernel.rt_group_sched"):
        if x := due(check):
            add(ADVICE, x.fix, x)
    return boot
