"""Changes through the journal: make one (journal first), tell its state, undo them all.

A value is compared the way the kernel prints it (``compare``):

* ``text``: the text without surrounding white space;
* ``int``: an integer;
* ``mask``: a hex CPU mask ("ff,ffffffff") as a set of CPUs;
* ``list``: a CPU list ("0-3,8") as a set of CPUs;
* ``choice``: the bracketed word of "always [madvise] never", else the text.

A change is rtlab's while the current value compares equal to what rtlab wrote; reset
restores only those (another value means someone changed it since: it is reported and
left alone). Restoring writes the original exactly as it was read, except a ``choice``
on the live system, which takes the bracketed word back.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.system import parse_cpumask
from rtlab.tune import _crash
from rtlab.tune._journal import DONE, PENDING, REFUSED, Entry, Journal
from rtlab.tune._rootfs import MAX_READ_BYTES, RootFS
from rtlab.tune._schema import COMPARE, parse_cpus

MAX_VALUE_BYTES = 8 << 10  # a kernel value tune changes (a mask of 8192 CPUs is 2.3 KB)
MAX_NOTE = 512  # characters of a check, reason or task name in the journal

# What became of one change.
CHANGED, ALREADY, REFUSED_NOW, SKIPPED = "changed", "already", "refused", "skipped"
# What a journalled change is now / what reset did with it.
OURS, RESTORED, FOREIGN, GONE, FAILED = (
    "rtlab's",
    "restored",
    "changed by someone else",
    "gone",
    "failed",
)


def normalize(compare: str, text: str | None) -> Any:
    """TEXT as COMPARE sees it; None when unreadable or unparsable."""
    if text is None or len(text) > MAX_VALUE_BYTES:
        return None
    t = text.strip()
    try:
        if compare == "int":
            return int(t)
        if compare == "mask":
            cpus = parse_cpumask(t)
            return None if cpus is None else frozenset(cpus)
        if compare == "list":
            return frozenset(parse_cpus(t))
    except ValueError:  # an unparsable value is "not this value"
        return None
    if compare == "choice" and "[" in t and "]" in t:
        return t[t.index("[") + 1 : t.index("]")]
    return t


@dataclass
class Outcome:
    """One change of apply, or one journalled change under status/reset."""

    op: str
    target: str  # the file, or "pid 123 (comm)"
    state: str  # CHANGED, ALREADY, REFUSED_NOW, SKIPPED / OURS, RESTORED, FOREIGN, GONE, FAILED
    original: str | None = None
    new: str | None = None
    current: str | None = None
    check: str = ""
    why: str = ""
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _task_start(pid: int) -> str | None:
    """A task's start time (field 22 of /proc/PID/stat): tells a reused PID apart."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
        return text[text.rindex(")") + 2 :].split()[19]
    except (OSError, ValueError, IndexError):
        return None


def _note(text: str) -> str:
    return text[:MAX_NOTE]


class Changer:
    """Makes changes under ROOT ("/" or a fake tree), each journalled before it is made,
    every file reached through a RootFS: confined to ROOT, written on the live root only
    under /proc, /sys and WRITABLE (a partition's cgroup mount)."""

    def __init__(self, root: Path, journal: Journal, writable: Iterable[str] = ()) -> None:
        self.root = Path(root)
        self.journal = journal
        self.fs = RootFS(self.root, writable)
        self.live = self.fs.live
        self.changes = 0

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def read(self, rel: str, limit: int = MAX_READ_BYTES) -> str | None:
        try:
            return self.fs.read(rel, limit)
        except OSError:
            return None

    def _value(self, rel: str) -> tuple[str | None, str]:
        """(the value of REL, "") or (None, why it cannot be read)."""
        try:
            return self.fs.read(rel, MAX_VALUE_BYTES), ""
        except OSError as e:
            return None, e.strerror or str(e)

    def _write(self, rel: str, text: str) -> None:
        self.fs.write(rel, text)

    def _attempt(
        self, entry: Entry, out: Outcome, change: Any, readback: str | None = None
    ) -> Outcome:
        """Make CHANGE (journalled as ENTRY already) and record how it went in both; with
        READBACK, the file's value after the change is recorded too."""
        try:
            change()
        except OSError as e:
            self.journal.outcome(entry, REFUSED, error=e.strerror or str(e))
            out.state, out.detail = REFUSED_NOW, e.strerror or str(e)
            return out
        self._made()
        detail = {}
        if readback is not None:
            out.current = detail["readback"] = self._value(readback)[0]
        self.journal.outcome(entry, DONE, **detail)
        out.state = CHANGED
        return out

    def _made(self) -> None:
        self.changes += 1
        _crash.after_changes(self.changes)  # the crash tests: no outcome line

    def file(self, rel: str, new: str, *, compare: str, check: str = "", why: str = "") -> Outcome:
        """Write NEW to ROOT/REL unless it already holds it."""
        assert compare in COMPARE, compare
        current, why_not = self._value(rel)
        out = Outcome("file", rel, ALREADY, current, new, current, check, why)
        if current is None:
            out.state, out.detail = SKIPPED, f"not readable ({why_not})"
            return out
        if normalize(compare, current) == normalize(compare, new):
            return out
        entry = self.journal.intend(
            "file", path=rel, original=current, new=new, compare=compare, check=_note(check),
            why=_note(why),
        )  # fmt: skip
        return self._attempt(entry, out, lambda: self._write(rel, new), readback=rel)

    def put_back(self, rel: str) -> None:
        """Write back at once the original of REL's newest change (the kernel took the
        write but holds another value); status and reset show where it stands."""
        e = self.journal.latest("file", "path", rel)
        if e is None:
            return
        self.journal.undoing(e)
        try:
            self._write(rel, self._restorable(e))
        except OSError:
            return  # still the kernel's value: reset tries again

    def affinity(self, pid: int, cpus: list[int], *, comm: str = "", check: str = "",
                 why: str = "") -> Outcome:  # fmt: skip
        """Move task PID to CPUS (the live system only)."""
        target = f"pid {pid} ({comm})" if comm else f"pid {pid}"
        out = Outcome("affinity", target, SKIPPED, check=check, why=why)
        if not self.live:
            out.detail = "task affinities change on the live system only"
            return out
        start = _task_start(pid)
        try:
            original = sorted(os.sched_getaffinity(pid))
        except OSError as e:
            out.detail = e.strerror or str(e)
            return out
        out.original, out.new = _cpus(original), _cpus(cpus)
        if set(original) == set(cpus):
            out.state = ALREADY
            return out
        entry = self.journal.intend(
            "affinity", pid=pid, start=start, comm=_note(comm), original=out.original,
            new=out.new, compare="list", check=_note(check), why=_note(why),
        )  # fmt: skip
        return self._attempt(entry, out, lambda: os.sched_setaffinity(pid, cpus))

    def mkdir(self, rel: str, *, check: str = "", why: str = "") -> Outcome:
        """Create the directory ROOT/REL (a cgroup); reset removes it."""
        out = Outcome("mkdir", rel, ALREADY, check=check, why=why)
        try:
            there = self.fs.kind_of(rel)
        except OSError as e:
            out.state, out.detail = REFUSED_NOW, e.strerror or str(e)
            return out
        if there == "dir":
            return out
        entry = self.journal.intend("mkdir", path=rel, check=_note(check), why=_note(why))
        return self._attempt(entry, out, lambda: self.fs.mkdir(rel))

    def move(self, pid: int, to: str, origin: str, *, comm: str = "", check: str = "",
             why: str = "") -> Outcome:  # fmt: skip
        """Write PID into the cgroup file TO (tasks or cgroup.procs); ORIGIN is that file of
        the cgroup it is in now, where reset puts it back."""
        target = f"pid {pid} ({comm})" if comm else f"pid {pid}"
        out = Outcome("move", target, SKIPPED, origin, to, check=check, why=why)
        start = _task_start(pid) if self.live else None
        entry = self.journal.intend("move", pid=pid, start=start, comm=_note(comm),
                                    original=origin, new=to, check=_note(check),
                                    why=_note(why))  # fmt: skip
        return self._attempt(entry, out, lambda: self._write(to, str(pid)))

    # --- state and undo -----------------------------------------------------------------

    def state_of(self, e: Entry) -> Outcome:
        """Where a journalled change stands now: OURS, RESTORED (the original is back),
        FOREIGN (another value) or GONE (the file or task no longer exists)."""
        out = Outcome(e.op, e.get("path") or f"pid {e.get('pid')}", OURS, e.get("original"),
                      e.get("new"), None, e.get("check", ""), e.get("why", ""))  # fmt: skip
        if e.op == "file":
            self._file_state(e, out)
        elif e.op == "affinity":
            pid = int(e["pid"])
            out.target = f"pid {pid} ({e.get('comm', '')})"
            if not self.live or _task_start(pid) != e.get("start"):
                out.state = GONE
                return out
            try:
                cur = frozenset(os.sched_getaffinity(pid))
            except OSError:
                out.state = GONE
                return out
            out.current = _cpus(sorted(cur))
            out.state = (
                OURS if cur == normalize("list", e["new"])
                else RESTORED if cur == normalize("list", e["original"]) else FOREIGN
            )  # fmt: skip
        elif e.op == "mkdir":
            try:
                there = self.fs.kind_of(e["path"])
            except OSError as err:
                out.state, out.detail = FAILED, err.strerror or str(err)
                return out
            out.state = OURS if there == "dir" else RESTORED if there is None else FOREIGN
        elif e.op == "move":
            pid = int(e["pid"])
            out.target = f"pid {pid} ({e.get('comm', '')})"
            if self.live and _task_start(pid) != e.get("start"):
                out.state = GONE
                return out
            members = (self.read(e["new"]) or "").split()
            out.state = OURS if str(pid) in members else FOREIGN
        return out

    def _file_state(self, e: Entry, out: Outcome) -> None:
        """A file change's state. A change in flight when a crash came (an intent without
        its outcome, or a restore begun) is rtlab's while the file holds a value cut short
        (a beginning of what was being written) or no valid value at all."""
        cur, why_not = self._value(e["path"])
        out.current = cur
        if cur is None:
            out.state, out.detail = GONE, f"not readable ({why_not})"
            return
        compare, now = e["compare"], normalize(e["compare"], cur)
        writing = [e["new"]] if e.state == PENDING else []
        writing += [self._restorable(e)] if e.undoing else []
        if cur == e["original"]:
            out.state = RESTORED
        elif now is not None and now == normalize(compare, e["new"]):
            out.state = OURS
        elif writing and (now is None or any(w.startswith(cur) for w in writing)):
            out.state, out.detail = OURS, "cut short by a crash"
        elif now is not None and now == normalize(compare, e["original"]):
            out.state = RESTORED
        else:
            out.state = FOREIGN

    def undo(self, e: Entry) -> Outcome:
        """Put back what E changed, when it is still rtlab's."""
        out = self.state_of(e)
        if out.state != OURS:
            if out.state == GONE and e.op == "file":
                out.state = FAILED
            return out
        try:
            if e.op == "file":
                self.journal.undoing(e)
                self._write(e["path"], self._restorable(e))
            elif e.op == "affinity":
                os.sched_setaffinity(int(e["pid"]), parse_cpus(e["original"]))
            elif e.op == "mkdir":
                self.fs.rmdir(e["path"])
            elif e.op == "move":
                self._write(e["original"], str(e["pid"]))
        except OSError as e2:
            if e.op == "move" and self.live and _task_start(int(e["pid"])) is None:
                out.state = GONE  # the task ended meanwhile
                return out
            out.state, out.detail = FAILED, e2.strerror or str(e2)
            return out
        out.state = RESTORED
        return out

    def _restorable(self, e: Entry) -> str:
        original = e["original"]
        if e["compare"] == "choice" and self.live:
            return str(normalize("choice", original))
        return original

    def reset(self) -> list[Outcome]:
        """Undo every journalled change, newest first; remove the journal when all are
        back (or gone). The outcomes, in the order undone."""
        outs = [self.undo(e) for e in self.journal.applied()]
        if all(o.state in (RESTORED, GONE) for o in outs):
            self.journal.remove()
        return outs

    def status(self) -> list[Outcome]:
        return [self.state_of(e) for e in reversed(list(self.journal.applied()))]


def _cpus(cpus: list[int]) -> str:
    from rtlab.system import format_cpulist

    return format_cpulist(cpus)
