"""Using a partition: what it holds now (show), joining it (partition run), and placing the
probe of `rtlab run` in it.

Where the probe goes (tested on this machine, cgroup v1): a task moved into a cpuset may
only use that cpuset's CPUs, and sched_setaffinity() outside them fails (EINVAL), so a
probe started inside the real-time set would keep its loads there too. Hence:

* cgroup v1: the probe starts in the housekeeping cpuset and each measuring thread writes
  its own thread ID into the real-time cpuset's ``tasks`` before it pins itself
  (``--thread-cgroup``; v1 places single threads). The main and writer threads and every
  load stay on the housekeeping CPUs.
* cgroup v2: tasks move as whole processes outside threaded subtrees, so the probe starts
  in the partition and each load process moves itself back to rtlab's own cgroup before it
  sets its CPUs (``--load-cgroup``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.errors import UnsupportedError, UserError
from rtlab.probecall import Option
from rtlab.records import CaseRecord
from rtlab.system import format_cpulist
from rtlab.tune._apply import FOREIGN
from rtlab.tune._cgroup import cgroup_of, cpulist, members, task_info, write_id
from rtlab.tune._journal import REFUSED
from rtlab.tune._partition import Partition, created_dirs, load, names, status
from rtlab.tune._rootfs import read_under

LIVE = Path("/")
MAX_LISTED = 50  # tasks listed by show (the count stays exact)
LOAD_CPUS = re.compile(r"@([0-9][0-9:-]*(?:,[0-9][0-9:-]*)*)")  # "@1-3,5" of "…@1-3,5,nice=5"


def show(p: Partition) -> dict[str, Any]:
    """The partition as it is now: its cgroups and CPUs, the tasks in it, the journal."""
    h = p.hierarchy
    exists = p.path(p.rt).is_dir()
    tasks_file = "tasks" if p.version == 1 else "cgroup.procs"
    rt_tasks = members(p.root, f"{p.rt}/{tasks_file}") if exists else []
    listed = []
    for tid in rt_tasks[:MAX_LISTED]:
        info = task_info(p.root, tid)
        listed.append({"id": tid, "comm": info[0] if info else None})
    if p.version == 2:
        state = _read(p, f"{p.rt}/cpuset.cpus.partition")
    else:
        excl = _read(p, f"{p.rt}/cpuset.cpu_exclusive")
        bal = _read(p, f"{p.rt}/cpuset.sched_load_balance")
        state = None if excl is None else f"cpu_exclusive {excl}, sched_load_balance {bal}"
    changes = status(p)
    counts: dict[str, int] = {}
    for o in changes:
        counts[o.state] = counts.get(o.state, 0) + 1
    refused = [e for e in p.journal.entries if e.state == REFUSED]
    hk_tasks = len(members(p.root, f"{p.hk}/tasks")) if p.hk and p.path(p.hk).is_dir() else None
    return {
        **p.meta(),
        "cgroup": f"cgroup v{p.version}",
        "root": str(p.root),
        "exists": exists,
        "rt_path": f"/{p.rt}",
        "hk_path": f"/{p.hk}" if p.hk else None,
        "cpus_effective": _read(p, f"{p.rt}/{h.effective_cpus}") if exists else None,
        "state": state,
        "tasks": len(rt_tasks),
        "tasks_listed": listed,
        "hk_tasks": hk_tasks,
        "journal": str(p.journal.path),
        "created_utc": p.journal.header.get("created_utc"),
        "changes": counts,
        "changed_by_others": [o.to_dict() for o in changes if o.state == FOREIGN],
        "refused": len(refused),
        "cgroups": [f"/{d}" for d in created_dirs(p)],
    }


def _read(p: Partition, rel: str) -> str | None:
    """A cgroup file of the partition, bounded, never through a link or from a FIFO."""
    text = read_under(p.root, rel)
    return None if text is None else text.strip()


def _live(p: Partition, what: str) -> None:
    if p.root != LIVE:
        raise UserError(f"{what}: partition {p.name!r} was made under {p.root}, not this system")
    if not p.path(p.rt).is_dir():
        raise UserError(f"{what}: /{p.rt} is gone; `rtlab partition undo --name {p.name}` "
                        "clears the journal")  # fmt: skip


def join(p: Partition) -> None:
    """Move the calling process (every thread of it) into the real-time cgroup."""
    _live(p, "partition run")
    try:
        write_id(p.path(p.procs), 0)  # 0: the writing process
    except OSError as e:
        why = e.strerror or str(e)
        raise UnsupportedError(f"partition run: cannot join /{p.procs} ({why})") from None


# --- rtlab run --partition ----------------------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """How the probe of one case runs in a partition."""

    partition: Partition
    start_in: str  # the cgroup.procs file (absolute) the probe process starts in
    options: tuple[Option, ...]  # what the probe is told

    def describe(self) -> str:
        p = self.partition
        cpus = format_cpulist(p.rt_cpus)
        if p.version == 1:
            return (f"partition {p.name} (cgroup v1 cpuset /{p.rt}, CPUs {cpus}): the probe "
                    f"starts in /{p.hk}, each measuring thread joins /{p.rt}; loads stay on "
                    f"the housekeeping CPUs {format_cpulist(p.hk_cpus)}")  # fmt: skip
        back = str(self.options[-1].value).rsplit("/", 1)[0]
        return (f"partition {p.name} (cgroup v2 /{p.rt}, CPUs {cpus}): the probe starts in "
                f"it, each load moves to {back} (housekeeping CPUs)")  # fmt: skip


def placement(p: Partition) -> Placement:
    _live(p, "--partition")
    if p.version == 1:
        assert p.hk is not None
        joins = Option("thread-cgroup", f"/{p.rt}/tasks", "partition")
        return Placement(p, f"/{p.hk}/cgroup.procs", (joins,))
    h = p.hierarchy
    own = (cgroup_of(LIVE, "self", h) or "/").strip("/")
    if own == p.rt[len(p.mount) :].strip("/"):
        own = ""  # rtlab itself runs in the partition: the loads go to the root cgroup
    back = Option("load-cgroup", "/" + h.rel(own, "cgroup.procs"), "partition")
    return Placement(p, f"/{p.procs}", (back,))


def _pinned(case: CaseRecord) -> list[int]:
    return cpulist(case.params.get("cpus_resolved"))


def _loads_on(case: CaseRecord, cpus: set[int]) -> list[str]:
    out = []
    for spec in case.call.loads if case.call is not None else []:
        m = LOAD_CPUS.search(spec)
        if m and set(cpulist(m.group(1))) & cpus:
            out.append(spec)
    return out


def place_cases(cases: list[CaseRecord], name: str | None, notes: list[str]) -> list[Placement]:
    """Mark the cases that run in a partition (params["partition"]); a note per partition.

    NAME given: every case, and a case that pins CPUs outside the partition's real-time
    CPUs, or a load onto them, is bad input. No NAME: the cases pinned inside an existing
    rtlab partition (e.g. cpus = "isolated" resolved to it) run there, the others as usual.
    """
    if name is not None:
        p = load(name)
        pl = placement(p)
        rt = set(p.rt_cpus)
        for c in cases:
            cpus = _pinned(c)
            if cpus and not set(cpus) <= rt:
                raise UserError(f"--partition {name}: case {c.index} ({c.series}: {c.name}) "
                                f"measures on CPUs {format_cpulist(cpus)}, not on the "
                                f"partition's real-time CPUs {format_cpulist(rt)}")  # fmt: skip
            _refuse_loads(c, rt, name)
            c.params["partition"] = name
        notes.append(f"measured in {pl.describe()}")
        return [pl]
    used = []
    for n in names():
        try:
            p = load(n)
            pl = placement(p)
        except UserError:
            continue  # a tree's partition, or one whose cgroup is gone
        rt = set(p.rt_cpus)
        mine = [c for c in cases if (cpus := _pinned(c)) and set(cpus) <= rt]
        for c in mine:
            if not c.params.get("partition"):
                _refuse_loads(c, rt, n)
                c.params["partition"] = n
        if mine:
            used.append(pl)
            notes.append(f"cases pinned to its CPUs measured in {pl.describe()}")
    return used


def _refuse_loads(case: CaseRecord, rt: set[int], name: str) -> None:
    bad = _loads_on(case, rt)
    if bad:
        raise UserError(f"partition {name}: case {case.index} ({case.series}: {case.name}) "
                        f"pins load {bad[0]!r} onto the real-time CPUs {format_cpulist(rt)}; "
                        "loads run on the housekeeping CPUs")  # fmt: skip
