"""The readiness audit: small checks over the facts, each with evidence, a fix and why."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar

from rtlab.system._cpus import format_cpulist
from rtlab.system._facts import Facts

OK, INFO, WARN, FAIL = "OK", "INFO", "WARN", "FAIL"
STATUSES = (OK, INFO, WARN, FAIL)


@dataclass(frozen=True)
class Finding:
    id: str
    status: str
    title: str
    evidence: str
    fix: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class Context:
    deadline_ns: int | None = None


class Check:
    """One question about the system: available() -> read() -> advice().

    read() returns the value judged and the evidence (file and value read);
    advice() returns the status and, unless OK, the fix.
    """

    id: ClassVar[str]
    title: ClassVar[str]
    why: ClassVar[str]
    missing: ClassVar[str] = "the facts this check needs were not readable"
    missing_fix: ClassVar[str] = ""

    def available(self, f: Facts) -> bool:
        return True

    def missing_for(self, f: Facts) -> str:
        """Why the check cannot judge this system (the evidence of its INFO finding)."""
        return self.missing

    def read(self, f: Facts) -> tuple[Any, str]:
        raise NotImplementedError

    def advice(self, value: Any, f: Facts, ctx: Context) -> tuple[str, str]:
        raise NotImplementedError

    def run(self, f: Facts, ctx: Context) -> Finding:
        if not self.available(f):
            return Finding(
                self.id, INFO, self.title, self.missing_for(f), self.missing_fix, self.why
            )
        value, evidence = self.read(f)
        status, fix = self.advice(value, f, ctx)
        return Finding(self.id, status, self.title, evidence, "" if status == OK else fix, self.why)


# Helpers shared by the check modules.


def cpus(values: list[int] | set[int] | None) -> str:
    return format_cpulist(values or []) or "none"


def rt_explicit(f: Facts) -> bool:
    """True when the real-time CPUs are known (isolated or given), not just every CPU."""
    return f.rt_cpus_source != "" and not f.rt_cpus_source.startswith("all online")


def dedicated(f: Facts) -> bool:
    """True when the real-time CPUs are kernel-isolated (isolcpus=, nohz_full=, an isolated
    cpuset partition): the audit takes them as meant for one busy real-time task each, and
    only then advises full dynticks and unthrottled real-time tasks. CPUs named by
    --rt-cpus alone are not."""
    rt = set(f.rt_cpus)
    return rt_explicit(f) and bool(rt) and rt <= set(f.isolated_cpus) | set(f.nohz_full_cpus)


def every_cpu(f: Facts) -> list[int]:
    """The CPUs a per-CPU check judges: the real-time ones, else every CPU the facts know of."""
    if f.rt_cpus:
        return f.rt_cpus
    known = {*f.governors, *f.idle_states, *f.thread_siblings}
    return sorted(set(f.cpus_online) | {int(c) for c in known if c.isdigit()})


def cpu_scope(f: Facts) -> str:
    """ "CPUs 3" or "CPUs 0-3 (all online: ...)" for evidence that names the CPUs judged."""
    text = f"CPUs {cpus(every_cpu(f))}"
    return text if rt_explicit(f) else f"{text} (all online: no real-time CPUs isolated or given)"


def housekeeping(f: Facts) -> list[int]:
    return [c for c in f.cpus_online if c not in f.rt_cpus] or f.cpus_online[:1]


def hexmask(values: list[int]) -> str:
    return format(sum(1 << c for c in values), "x")


def run_audit(f: Facts, ctx: Context | None = None) -> list[Finding]:
    from rtlab.system._checks import CHECKS

    ctx = ctx or Context()
    return [check.run(f, ctx) for check in CHECKS]


def audit_document(f: Facts, findings: list[Finding]) -> dict[str, Any]:
    """What `rtlab audit --json` prints and every experiment stores as audit.json."""
    return {"facts": f.to_dict(), "findings": [x.to_dict() for x in findings]}


def exit_status(findings: list[Finding]) -> int:
    return 1 if any(x.status == FAIL for x in findings) else 0
