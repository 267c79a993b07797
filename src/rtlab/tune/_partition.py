"""CPU partitioning with undo: a real-time and a housekeeping set of CPUs on the cpuset
hierarchy the machine really has (cgroup v1 cpusets or cgroup v2 partitions), every change
journalled (kind ``partition-<name>``) before it is made.

cgroup v1 (like partrt): ``<name>`` gets the real-time CPUs (``cpu_exclusive`` 1,
``sched_load_balance`` 0), ``<name>-hk`` the others, the root cpuset stops balancing
(``sched_load_balance`` 0) and every task the kernel lets go moves from the root cpuset to
the housekeeping set. cgroup v2: ``+cpuset`` in the root's ``cgroup.subtree_control``,
``<name>`` with ``cpuset.cpus`` = the real-time CPUs and ``cpuset.cpus.partition`` =
``isolated`` (``root`` when the kernel refuses it): the kernel itself takes those CPUs
away from every other cgroup, so no task moves. Both: interrupts and the unbound and
writeback workqueue masks off the real-time CPUs (through the tune plan's knobs).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.errors import UnsupportedError, UserError
from rtlab.system import format_cpulist
from rtlab.tune._apply import (
    ALREADY,
    CHANGED,
    FOREIGN,
    GONE,
    OURS,
    RESTORED,
    Changer,
    Outcome,
)
from rtlab.tune._cgroup import (
    PF_NO_SETAFFINITY,
    Hierarchy,
    find_hierarchy,
    members,
    mounts,
    online_cpus,
    task_info,
)
from rtlab.tune._journal import DONE, REFUSED, Entry, Journal, state_dir
from rtlab.tune._rootfs import LIVE_WRITABLE, RootFS, under
from rtlab.tune._schema import CONTROLLER, META, NAME_RE, parse_cpus

KIND = "partition-{}"
MOVE_PASSES = 3  # re-read the root's tasks: a task may fork while the others move
IRQ_CHECKS = ("irq.affinity", "irq.default_affinity", "workqueue.cpumask", "workqueue.writeback")

# Called with each new cgroup directory (tests: a fake kernel fills it).
MkdirHook = Callable[[Path], None] | None


@dataclass
class Partition:
    """An rtlab partition, as its journal describes it."""

    name: str
    version: int
    mount: str  # relative to the root
    rt: str  # the real-time cgroup, relative to the root
    hk: str | None  # v1: the housekeeping cpuset; v2: None (the rest of the root)
    rt_cpus: list[int]
    hk_cpus: list[int]
    root: Path
    journal: Journal
    mode: str = ""  # v2: "isolated" or "root"; v1: "exclusive"

    @property
    def hierarchy(self) -> Hierarchy:
        return Hierarchy(self.version, self.mount)

    def path(self, rel: str) -> Path:
        return self.root / rel

    @property
    def procs(self) -> str:
        """The real-time cgroup's cgroup.procs (whole processes), relative to the root."""
        return f"{self.rt}/cgroup.procs"

    def meta(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "mount": self.mount, "rt": self.rt,
                "hk": self.hk, "rt_cpus": format_cpulist(self.rt_cpus),
                "hk_cpus": format_cpulist(self.hk_cpus), "mode": self.mode}  # fmt: skip


@dataclass
class Created:
    partition: Partition
    outcomes: list[Outcome] = field(default_factory=list)
    moved: int = 0  # tasks moved to the housekeeping set
    per_cpu: int = 0  # per-CPU kernel threads the kernel does not let go (not tried)
    refused: dict[str, str] = field(default_factory=dict)  # "comm (tid)" -> the error
    gone: int = 0  # tasks that ended while the others moved
    state: str = ""  # what cpuset.cpus.partition reads (v2)
    irq_note: str = ""  # why IRQs/workqueues were not planned, when they were not

    def to_dict(self) -> dict[str, Any]:
        return {**self.partition.meta(), "state": self.state, "moved": self.moved,
                "per_cpu_kthreads": self.per_cpu, "refused": self.refused, "gone": self.gone,
                "irq_note": self.irq_note, "journal": str(self.partition.journal.path),
                "changes": [o.to_dict() for o in self.outcomes]}  # fmt: skip


class _Refused(Exception):
    """An essential change the kernel refused: the partition cannot be made here."""


def need_root(root: Path, what: str) -> None:
    if root == Path("/") and os.geteuid() != 0:
        raise UnsupportedError(f"{what}: needs root (cgroup, IRQ and workqueue files)")


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name) or name.startswith("cpuset.") or name.startswith("cgroup."):
        raise UserError(f"--name {name!r}: use letters, digits, '_', '.', '-' (a cgroup name)")
    return name


def journal_path(name: str, where: Path | None = None) -> Path:
    return Journal.path_for(KIND.format(check_name(name)), where)


def names(where: Path | None = None) -> list[str]:
    """The partitions that have a journal in the state directory."""
    d = (where or state_dir()) / "tune"
    return sorted(p.stem[len("partition-") :] for p in d.glob("partition-*.jsonl"))


def load(name: str, where: Path | None = None) -> Partition:
    """The partition NAME from its journal (checked, see _schema.py); UserError when there
    is none or it is damaged."""
    path = journal_path(name, where)
    j = Journal.load(path)
    if j is None:
        raise UserError(f"no partition {name!r} (no journal {path}): create one with "
                        f"`rtlab partition create --rt CPUS --name {name}`")  # fmt: skip
    meta = next((e for e in reversed(j.entries) if e.op == META), None)
    if meta is None:
        raise UserError(f"{path}: not a partition journal (no {META!r} record)")
    p = Partition(meta["name"], meta["version"], meta["mount"], meta["rt"], meta["hk"],
                  parse_cpus(meta["rt_cpus"]), parse_cpus(meta["hk_cpus"]),
                  Path(j.header["root"]), j, meta["mode"])  # fmt: skip
    _check_mount(p, path)
    return p


def _check_mount(p: Partition, path: Path) -> None:
    """On the live root, a mount outside /proc and /sys is written only while it is a
    cgroup mount of the mount table."""
    if p.root != Path("/") or under(p.mount, LIVE_WRITABLE):
        return
    fs = "cgroup" if p.version == 1 else "cgroup2"
    if not any(point.strip("/") == p.mount and t == fs for point, t, _ in mounts(p.root)):
        raise UserError(f"{path}: /{p.mount} is not a {fs} mount (the journal's mount)")


def changer(p: Partition) -> Changer:
    """The Changer of partition P: its root, writable under its cgroup mount too."""
    return Changer(p.root, p.journal, (p.mount,))


# --- create -------------------------------------------------------------------------------


def _rt_cpus(text: str, online: list[int]) -> list[int]:
    try:
        rt = parse_cpus(text)
    except ValueError as e:
        raise UserError(f"--rt {text}: {e}") from None
    if not rt:
        raise UserError("--rt: no CPU given")
    offline = sorted(set(rt) - set(online))
    if offline:
        raise UserError(f"--rt {text}: CPU {format_cpulist(offline)} is not online "
                        f"(online: {format_cpulist(online)})")  # fmt: skip
    if set(rt) == set(online):
        raise UserError(f"--rt {text}: that is every online CPU; leave at least one for "
                        "housekeeping")  # fmt: skip
    return rt


def create(
    rt_text: str,
    name: str = "rt",
    root: Path = Path("/"),
    where: Path | None = None,
    after_mkdir: MkdirHook = None,
) -> Created:
    """Make partition NAME of the CPUs RT_TEXT under ROOT. Bad input: UserError; no cpuset
    controller or a refused essential change: UnsupportedError, after putting back what
    was done. AFTER_MKDIR (tests) is called with each new cgroup directory."""
    check_name(name)
    root = root.resolve()
    need_root(root, "partition create")
    h = find_hierarchy(root)
    if h is None:
        raise UnsupportedError(f"no cpuset controller under {root} (neither a cgroup v1 "
                               "cpuset mount nor cpuset in cgroup v2's controllers)")  # fmt: skip
    online = online_cpus(root)
    rt = _rt_cpus(rt_text, online)
    hk = sorted(set(online) - set(rt))
    path = journal_path(name, where)
    j = Journal.load(path)
    if j is not None and not j.entries:
        j.remove()  # a create killed before its first change: nothing to undo
    elif j is not None:
        raise UserError(f"partition {name!r} exists already (journal {path}): "
                        f"`rtlab partition undo --name {name}` first")  # fmt: skip
    hk_dir = h.rel(f"{name}-hk") if h.version == 1 else None
    with hierarchy_lock(root, h.mount):
        return _create_locked(root, h, name, rt, hk, hk_dir, where, after_mkdir)


@contextlib.contextmanager
def hierarchy_lock(root: Path, mount: str) -> Iterator[None]:
    """One create or undo at a time on a hierarchy, whatever the state directory: an
    exclusive flock on the mount's directory (released when the process ends)."""
    try:
        fd = RootFS(root).open_dir(mount)
    except OSError:
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _create_locked(
    root: Path,
    h: Hierarchy,
    name: str,
    rt: list[int],
    hk: list[int],
    hk_dir: str | None,
    where: Path | None,
    after_mkdir: MkdirHook,
) -> Created:
    fs = RootFS(root)
    for d in (h.rel(name), hk_dir):
        try:
            there = fs.kind_of(d) if d else None
        except OSError as e:
            raise UserError(f"/{d}: {e.strerror or e}") from None
        if there is not None:
            raise UserError(f"/{d} exists already and is not rtlab's: choose another --name")
    journal = Journal.open_or_create(KIND.format(name), "/" if root == Path("/") else str(root),
                                     where)  # fmt: skip
    part = Partition(name, h.version, h.mount, h.rel(name), hk_dir, rt, hk, root, journal,
                     "exclusive" if h.version == 1 else "isolated")  # fmt: skip
    meta = journal.intend(META, **part.meta())
    journal.outcome(meta, DONE)
    ch = changer(part)
    res = Created(part)
    try:
        if h.version == 1:
            _create_v1(ch, part, res, after_mkdir)
        else:
            _create_v2(ch, part, res, after_mkdir)
    except _Refused as e:
        _, complete = _undo_locked(part)  # the lock is held already
        rest = "put back" if complete else "not all put back: see `rtlab partition show`"
        raise UnsupportedError(f"partition {name!r}: {e} ({rest})") from None
    _irqs_and_workqueues(ch, part, res)
    return res


def _need(out: Outcome, what: str) -> Outcome:
    if out.state not in (CHANGED, ALREADY):
        raise _Refused(f"{what}: {out.detail or out.state}")
    return out


def _mkdir(ch: Changer, rel: str, res: Created, hook: MkdirHook) -> None:
    out = ch.mkdir(rel, why="the partition's cgroup")
    res.outcomes.append(out)
    if out.state != CHANGED:  # made meanwhile by someone else (another create): not ours
        raise _Refused(f"mkdir /{rel}: {out.detail or 'exists already'}")
    if hook is not None:
        hook(ch.path(rel))


def _set(ch: Changer, res: Created, rel: str, new: str, compare: str, why: str) -> Outcome:
    out = ch.file(rel, new, compare=compare, why=why)
    res.outcomes.append(out)
    return _need(out, f"{new} > /{rel}")


def _create_v1(ch: Changer, p: Partition, res: Created, hook: MkdirHook) -> None:
    h = p.hierarchy
    mems = (ch.read(h.rel(h.effective_mems)) or ch.read(h.rel("cpuset.mems")) or "0").strip()
    rt, hk = format_cpulist(p.rt_cpus), format_cpulist(p.hk_cpus)
    _mkdir(ch, p.rt, res, hook)
    _set(ch, res, f"{p.rt}/cpuset.cpus", rt, "list", "the real-time CPUs")
    _set(ch, res, f"{p.rt}/cpuset.mems", mems, "list", "every memory node")
    _set(ch, res, f"{p.rt}/cpuset.cpu_exclusive", "1", "int", "no other cpuset gets them")
    _set(ch, res, f"{p.rt}/cpuset.sched_load_balance", "0", "int", "no load balancing there")
    assert p.hk is not None
    _mkdir(ch, p.hk, res, hook)
    _set(ch, res, f"{p.hk}/cpuset.cpus", hk, "list", "the housekeeping CPUs")
    _set(ch, res, f"{p.hk}/cpuset.mems", mems, "list", "every memory node")
    # With the root balancing all CPUs the children's flags would not matter (cpusets.rst 1.7).
    _set(ch, res, h.rel("cpuset.sched_load_balance"), "0", "int", "balance per child cpuset")
    _move_tasks(ch, h.rel("tasks"), f"{p.hk}/tasks", res)


def _move_tasks(ch: Changer, src: str, dst: str, res: Created) -> None:
    """Every task of SRC that the kernel lets go into DST, journalled one by one."""
    seen: set[int] = set()
    for _ in range(MOVE_PASSES):
        todo = [t for t in members(ch.root, src) if t not in seen]
        if not todo:
            return
        for tid in todo:
            seen.add(tid)
            info = task_info(ch.root, tid)
            if info is None:
                res.gone += 1
                continue
            comm, flags = info
            if flags & PF_NO_SETAFFINITY:
                res.per_cpu += 1  # per-CPU kernel thread: the kernel refuses, no need to ask
                continue
            out = ch.move(tid, dst, src, comm=comm, why="to the housekeeping CPUs")
            if out.state == CHANGED:
                res.moved += 1
            elif out.detail == "No such process":
                res.gone += 1
            else:
                res.refused[f"{comm} ({tid})"] = out.detail


def _create_v2(ch: Changer, p: Partition, res: Created, hook: MkdirHook) -> None:
    h = p.hierarchy
    control = h.rel("cgroup.subtree_control")
    if "cpuset" not in (ch.read(control) or "").split():
        res.outcomes.append(_enable_cpuset(ch, control))
    _mkdir(ch, p.rt, res, hook)
    _set(ch, res, f"{p.rt}/cpuset.cpus", format_cpulist(p.rt_cpus), "list", "the real-time CPUs")
    rel = f"{p.rt}/cpuset.cpus.partition"
    out = ch.file(rel, "isolated", compare="text", why="a partition without load balancing")
    if out.state not in (CHANGED, ALREADY):  # kernels before 5.15 know only "root"
        res.outcomes.append(out)
        out = ch.file(rel, "root", compare="text", why="a partition (no isolated mode here)")
        p.mode = "root"
        p.journal.outcome(p.journal.intend(META, **p.meta()), DONE)  # the newest record counts
    res.outcomes.append(_need(out, f"isolated/root > /{rel}"))
    res.state = (ch.read(rel) or "").strip()
    if "invalid" in res.state or res.state not in ("isolated", "root"):
        raise _Refused(f"the kernel reads the partition as {res.state!r}")


def _enable_cpuset(ch: Changer, control: str) -> Outcome:
    """Write "+cpuset" into the parent's cgroup.subtree_control (undo: "-cpuset")."""
    out = Outcome(CONTROLLER, control, CHANGED, ch.read(control), "+cpuset")
    entry = ch.journal.intend(CONTROLLER, path=control, controller="cpuset",
                              original=out.original, new="+cpuset")  # fmt: skip
    try:
        ch.fs.write(control, "+cpuset")
    except OSError as e:
        ch.journal.outcome(entry, REFUSED, error=e.strerror or str(e))
        out.state, out.detail = "refused", e.strerror or str(e)
        raise _Refused(f"+cpuset > /{control}: {out.detail}") from None
    ch._made()  # the crash tests count this change too
    out.current = ch.read(control)
    ch.journal.outcome(entry, DONE, readback=out.current)
    return out


def _irqs_and_workqueues(ch: Changer, p: Partition, res: Created) -> None:
    """Interrupts and the unbound/writeback workqueue masks off the real-time CPUs, planned
    by the tune knobs of those audit checks and made through this partition's journal."""
    from rtlab.system import SysRoot
    from rtlab.tune import apply_plan, plan

    try:
        pl = plan(SysRoot(ch.root), rt_cpus=p.rt_cpus, only=IRQ_CHECKS)
    except UserError as e:
        res.irq_note = f"IRQs and workqueues not planned: {e}"
        return
    res.outcomes += apply_plan(pl, ch)
    if not pl.writes:
        res.irq_note = "; ".join(f"{n.check}: {n.reason}" for n in pl.notes)


# --- state and undo -----------------------------------------------------------------------


def created_dirs(p: Partition) -> list[str]:
    return [str(e["path"]) for e in p.journal.entries if e.op == "mkdir" and e.maybe_applied]


def _inside(path: str, dirs: list[str]) -> bool:
    return any(path.startswith(d + "/") for d in dirs)


def _controller_state(ch: Changer, e: Entry) -> Outcome:
    cur = ch.read(e["path"])
    out = Outcome(CONTROLLER, e["path"], OURS, e.get("original"), e.get("new"), cur)
    if cur is None:
        out.state = GONE
    elif not {"cpuset", "+cpuset"} & set(cur.split()):  # the kernel prints "cpuset"
        out.state = RESTORED
    return out


def _undo_controller(ch: Changer, e: Entry) -> Outcome:
    out = _controller_state(ch, e)
    if out.state != OURS:
        return out
    try:
        ch.fs.write(e["path"], "-cpuset")
    except OSError as err:
        out.state, out.detail = "failed", err.strerror or str(err)
        return out
    out.state, out.current = RESTORED, ch.read(e["path"])
    return out


def sweep(ch: Changer, p: Partition) -> tuple[int, list[str]]:
    """Tasks that entered our cgroups after create (children of moved tasks, `partition
    run`, the probe): back to the root of the hierarchy, where everything came from."""
    h, moved, failed = p.hierarchy, 0, []
    name = "tasks" if p.version == 1 else "cgroup.procs"
    dest = h.rel(name)
    for d in reversed(created_dirs(p)):
        for tid in members(p.root, f"{d}/{name}"):
            try:
                ch.fs.write(dest, str(tid))
                moved += 1
            except OSError as e:
                if task_info(p.root, tid) is not None:
                    failed.append(f"{tid}: {e.strerror or e}")
    return moved, failed


def undo_changes(p: Partition) -> tuple[list[Outcome], bool]:
    """Put back every journalled change, newest first; the journal is removed when all are
    back (or gone). Files inside a cgroup rtlab created go with its rmdir."""
    need_root(p.root, "partition undo")
    with hierarchy_lock(p.root, p.mount):
        return _undo_locked(p)


def _undo_locked(p: Partition) -> tuple[list[Outcome], bool]:
    ch = changer(p)
    dirs = created_dirs(p)
    outs: list[Outcome] = []
    inner: list[tuple[Entry, int]] = []
    foreign: list[tuple[Entry, Outcome]] = []
    swept = False
    for e in p.journal.applied():
        if e.op == META:
            continue
        if not swept and (e.op in ("mkdir", CONTROLLER) or _inside(e.get("path", ""), dirs)):
            n, failed = sweep(ch, p)
            swept = True
            if n or failed:
                outs.append(Outcome("sweep", "tasks that joined later", RESTORED if not failed
                                    else "failed", new=f"{n} moved to the root",
                                    detail="; ".join(failed)))  # fmt: skip
        if e.op == "file" and _inside(e["path"], dirs):
            inner.append((e, len(outs)))
            outs.append(Outcome("file", e["path"], "failed", e.get("original"), e.get("new")))
            continue
        if e.op == CONTROLLER:
            outs.append(_undo_controller(ch, e))
            continue
        out = ch.undo(e)
        if e.op == "move" and out.state == FOREIGN:
            foreign.append((e, out))
        outs.append(out)
    for e, out in foreign:  # after the sweep, which brings back what entered our cgroups
        if e["pid"] in members(p.root, e["original"]):
            out.state = RESTORED  # back where it was (a move that never happened, or swept)
        elif _absent(ch, e["new"]):
            out.state, out.detail = GONE, "moved elsewhere by someone else; our cgroup is gone"
        else:
            out.detail = "moved elsewhere by someone else since: left alone"
    for e, i in inner:  # settled by the rmdir of their cgroup, which came after them
        gone = all(_absent(ch, d) for d in dirs if e["path"].startswith(d + "/"))
        outs[i].state = RESTORED if gone else "failed"
        outs[i].detail = "removed with its cgroup" if gone else "its cgroup is still there"
    complete = all(o.state in (RESTORED, GONE) for o in outs)
    if complete:
        p.journal.remove()
    return outs, complete


def _absent(ch: Changer, rel: str) -> bool:
    try:
        return ch.fs.kind_of(rel) is None
    except OSError:
        return False  # it leads out of the root: not ours to judge


def status(p: Partition) -> list[Outcome]:
    """Where every journalled change stands now, oldest first."""
    ch = changer(p)
    out = []
    for e in reversed(list(p.journal.applied())):
        if e.op == META:
            continue
        out.append(_controller_state(ch, e) if e.op == CONTROLLER else ch.state_of(e))
    return out
