"""The tuning plan: the audit's runtime findings turned into writes, and applying them.

plan() runs the audit over the facts and asks every knob (in KNOBS order) what it would
write; knobs whose check is OK or could not run plan nothing and say why (`notes`).
Boot-time fixes are collected too, never written. apply_plan() makes the writes through
a Changer (journal first) and moves the tasks (live system only).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.system import (
    Context,
    Facts,
    Root,
    SysRoot,
    format_cpulist,
    parse_cpulist,
    read_facts,
    run_audit,
)
from rtlab.system._audit import housekeeping, rt_explicit
from rtlab.system._checks import CHECKS
from rtlab.tune import _knobs as k
from rtlab.tune import _knobs_cpu as kc
from rtlab.tune._apply import ALREADY, CHANGED, REFUSED_NOW, SKIPPED, Changer, Outcome, normalize
from rtlab.tune._boot import Boot, boot_changes
from rtlab.tune._journal import REFUSED, Journal
from rtlab.tune._knobs import PROFILES, Knob, Setting, TaskMove, Write

# The order writes are planned and made in.
KNOBS: list[Knob] = [
    kc.Governor(),
    kc.MinFrequency(),
    kc.IdleStates(),
    kc.IrqAffinity(),
    kc.DefaultIrqAffinity(),
    kc.WorkqueueMask(),
    kc.WritebackMask(),
    k.TimerMigration(),
    k.StatInterval(),
    k.DirtyWriteback(),
    k.WatchdogMask(),
    k.NmiWatchdog(),
    k.Thp(),
    k.ThpDefrag(),
    k.NumaBalancing(),
    k.Ksm(),
    k.RtThrottling(),
    kc.KernelThreads(),
    kc.UserTasks(),
]
TUNABLE = tuple(dict.fromkeys(kn.check for kn in KNOBS))


@dataclass(frozen=True)
class Note:
    """A knob that plans nothing here, and why."""

    check: str
    family: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


@dataclass
class Plan:
    root: str  # "/" or the absolute path of the tree
    live: bool
    profile: str
    rt_cpus: list[int]
    rt_source: str
    housekeeping: list[int]
    deadline_ns: int | None
    writes: list[Write] = field(default_factory=list)
    tasks: list[TaskMove] = field(default_factory=list)
    boot: Boot = field(default_factory=Boot)
    notes: list[Note] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "live": self.live,
            "profile": self.profile,
            "rt_cpus": format_cpulist(self.rt_cpus),
            "rt_cpus_source": self.rt_source,
            "housekeeping": format_cpulist(self.housekeeping),
            "deadline_ns": self.deadline_ns,
            "writes": [w.to_dict() for w in self.writes],
            "tasks": [t.to_dict() for t in self.tasks],
            "boot": self.boot.to_dict(),
            "not_planned": [n.to_dict() for n in self.notes],
            "warnings": self.warnings,
        }


def check_ids(ids: Iterable[str]) -> list[str]:
    """IDS as given to --only, each one a check tune has a knob for; UserError naming the
    first that is not."""
    known = {c.id for c in CHECKS}
    out = []
    for raw in ids:
        i = raw.strip()
        if not i:
            continue
        if i not in known:
            raise UserError(f"--only {i}: not an audit check ID (tunable: {', '.join(TUNABLE)})")
        if i not in TUNABLE:
            raise UserError(
                f"--only {i}: no runtime knob for this check (boot-time fixes are printed by "
                f"`rtlab tune plan`; tunable: {', '.join(TUNABLE)})"
            )
        out.append(i)
    if not out:
        raise UserError("--only: no check ID given")
    return out


def _root_of(root: Root | Path | str) -> Root:
    return SysRoot(Path(root)) if isinstance(root, Path | str) else root


def root_label(root: Root) -> str:
    """How the journal records ROOT: "/" or the tree's absolute path."""
    if isinstance(root, SysRoot):
        return "/" if root.live else str(root.root.resolve())
    return root.describe()


def plan(
    root: Root | Path | str,
    facts: Facts | None = None,
    *,
    rt_cpus: list[int] | None = None,
    profile: str = k.LATENCY,
    deadline_ns: int | None = None,
    only: Iterable[str] | None = None,
    allow_rt_unthrottled: bool = False,
) -> Plan:
    """What `rtlab tune apply` would write under ROOT, from the audit of FACTS (read from
    ROOT with RT_CPUS when not given). ONLY keeps the knobs of those check IDs."""
    if profile not in PROFILES:
        raise UserError(f"--profile {profile}: not one of {', '.join(PROFILES)}")
    r = _root_of(root)
    if facts is None:
        facts = read_facts(r, rt_cpus)
    elif rt_cpus is not None and sorted(rt_cpus) != facts.rt_cpus:
        raise ValueError("the facts were read for other real-time CPUs")
    selected = set(check_ids(only)) if only is not None else None
    findings = {x.id: x for x in run_audit(facts, Context(deadline_ns=deadline_ns))}
    s = Setting(
        root=r,
        facts=facts,
        findings=findings,
        runnable={c.id: c.available(facts) for c in CHECKS},
        profile=profile,
        deadline_ns=deadline_ns,
        allow_rt_unthrottled=allow_rt_unthrottled,
        rt=facts.rt_cpus,
        housekeeping=housekeeping(facts),
        rt_explicit=rt_explicit(facts),
    )
    p = Plan(root_label(r), r.live, profile, facts.rt_cpus, facts.rt_cpus_source,
             s.housekeeping, deadline_ns)  # fmt: skip
    for knob in KNOBS:
        if selected is not None and knob.check not in selected:
            continue
        reason = knob.gate(s)
        if reason is None:
            writes, tasks = knob.writes(s), knob.tasks(s)
            p.writes += writes
            p.tasks += tasks
            if not writes and not tasks:
                reason = "nothing to change (already in place, or the files are not readable)"
        if reason is not None:
            p.notes.append(Note(knob.check, knob.family, reason))
    if selected is None:  # boot-time fixes belong to boot.* and kernel.* checks, never in ONLY
        p.boot = boot_changes(facts, findings, s.runnable, with_info=profile == k.LATENCY)
    p.warnings = s.warnings
    return p


def apply_plan(plan: Plan, changer: Changer) -> list[Outcome]:
    """Make PLAN's writes, then its task moves, through CHANGER; an outcome for each.

    A write refused before (its journal says so) is not tried again, so re-applying adds
    nothing to the journal. A write the kernel took but that reads back as another value
    is put back at once and reported refused ("the kernel holds …").
    """
    outs: list[Outcome] = []
    for w in plan.writes:
        earlier = _refused_before(changer.journal, w)
        if earlier is not None:
            outs.append(Outcome("file", w.path, SKIPPED, w.current, w.new, w.current, w.check,
                                w.why, f"refused before ({earlier}): not tried again"))  # fmt: skip
            continue
        o = changer.file(w.path, w.new, compare=w.compare, check=w.check, why=w.why)
        if o.state == CHANGED and normalize(w.compare, o.current) != normalize(w.compare, w.new):
            held = (o.current or "").strip()
            changer.put_back(w.path)
            o.state, o.detail = REFUSED_NOW, f"the kernel holds {held!r}: put back"
            o.current = changer.read(w.path)
        outs.append(o)
    for t in plan.tasks:
        outs.append(changer.affinity(t.pid, parse_cpulist(t.new), comm=t.comm, check=t.check,
                                     why=t.why))  # fmt: skip
    return outs


def _refused_before(journal: Journal, w: Write) -> str | None:
    for e in reversed(journal.entries):
        if e.op != "file" or e.get("path") != w.path or e.get("new") != w.new:
            continue
        if e.state == REFUSED:
            return str(e.result.get("error", "refused"))
        readback = e.result.get("readback")
        if readback is not None and normalize(w.compare, readback) != normalize(w.compare, w.new):
            return f"the kernel held {readback.strip()!r}"
        return None  # the newest attempt went through
    return None


def not_made(outcomes: list[Outcome]) -> list[Outcome]:
    """Planned changes that are not in effect: refused, or a file that was unreadable or
    refused before (a task that ended, or any task on a tree, is not counted)."""
    return [
        o
        for o in outcomes
        if o.state == REFUSED_NOW or (o.op == "file" and o.state not in (CHANGED, ALREADY))
    ]


def family(o: Outcome) -> str:
    """The knob family an outcome belongs to ("governor", "IRQs", …)."""
    for knob in KNOBS:
        if knob.owns(o.check, o.target):
            return knob.family
    return o.check


def tuning_summary(outcomes: list[Outcome]) -> str:
    """The setup name of a tuned run: "tuned: governor, idle states, IRQs" (the families
    whose changes are in effect, in plan order), or "untuned"."""
    fams = {family(o) for o in outcomes if o.state in (CHANGED, ALREADY)}
    ordered = [f for f in dict.fromkeys(kn.family for kn in KNOBS) if f in fams]
    return "tuned: " + ", ".join(ordered) if ordered else "untuned"
