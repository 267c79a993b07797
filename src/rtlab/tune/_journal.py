"""The journal of system changes: every original value is on disk before it is changed.

One journal per kind of change (``tune``, ``settings``: the experiment settings of the
case running now, ``partition-<name>``) is one JSON-lines file
under the state directory (``$RTLAB_STATE``, else ``/var/lib/rtlab``), in ``tune/``:

    {"journal": 1, "kind": "tune", "root": "/", "created_utc": "…"}          header
    {"seq": 1, "op": "file", "path": "proc/sys/kernel/timer_migration",      intent, fsynced
     "original": "1\\n", "new": "0", "compare": "int", "check": "…", "why": "…"}
    {"seq": 1, "state": "done", "readback": "0\\n"}                            outcome
    {"seq": 2, "state": "refused", "error": "Input/output error"}
    {"seq": 1, "state": "undoing"}                                            reset begins

An intent line is written and fsynced before the change it describes, so a crash
between the two leaves an intent without an outcome: `reset` treats it like a done
change (the original is known; whether the change happened shows in the current value).
``undoing`` is written before reset restores a value, so a crash in the middle of that
write is recognised too. A line is appended with one write; a line cut short by a crash
(no newline at the end of the file) is ignored — also the first one, the header: a
journal that holds no whole line holds nothing — and cut off before the next append.
Operations (``op``): ``file`` (write a text file under the root), ``affinity`` (a
task's CPU affinity, live system only; the task is identified by pid and start time),
``move`` (a task into another cgroup: ``new`` is the destination's tasks/cgroup.procs
file, ``original`` that of the cgroup it came from), ``mkdir`` (a directory created,
removed on reset), and in partition journals ``partition`` and ``controller``.

A journal is input like any file: it is read only when it is a regular file (not a
link, FIFO or device) of at most MAX_JOURNAL_BYTES, with lines of at most
MAX_LINE_BYTES, each checked against the schema (_schema.py) before anything acts on it;
anything else is a one-line UserError (exit 2).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.tune import _crash
from rtlab.tune._rootfs import open_nofollow, read_fd
from rtlab.tune._schema import (
    DONE,
    JOURNAL_SCHEMA,
    META,
    PENDING,
    REFUSED,
    UNDOING,
    check_header,
    check_intent,
    check_outcome,
)

STATE_ENV = "RTLAB_STATE"
DEFAULT_STATE = Path("/var/lib/rtlab")
MAX_JOURNAL_BYTES = 16 << 20  # about 80,000 changes
MAX_LINE_BYTES = 64 << 10


def state_dir() -> Path:
    """Where journals live: $RTLAB_STATE, else /var/lib/rtlab."""
    env = os.environ.get(STATE_ENV)
    return Path(env) if env else DEFAULT_STATE


@dataclass
class Entry:
    """One change: its intent (what and the original) and, once known, its outcome."""

    seq: int
    op: str
    data: dict[str, Any]
    state: str = PENDING  # pending: intent on disk, outcome not (crash or in flight)
    result: dict[str, Any] = field(default_factory=dict)
    undoing: bool = False  # reset began to restore it (a crash may have cut that write)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def maybe_applied(self) -> bool:
        """Done, or in flight when apply died: reset must look at it."""
        return self.state in (DONE, PENDING)


def _say(e: OSError) -> str:
    return e.strerror or str(e)


class Journal:
    """An append-only journal file; load() to read one back, open_or_create() for a new
    one. HEADER is {} only while a journal that held nothing is being recreated."""

    def __init__(self, path: Path, header: dict[str, Any], entries: list[Entry],
                 end: int = 0, size: int = 0) -> None:  # fmt: skip
        self.path = path
        self.header = header
        self.entries = entries
        self._end = end  # the whole lines end here; a torn line after it is cut off
        self._size = size
        self.remove_error: str | None = None  # why remove() could not remove it
        self.write_error: str | None = None  # why an undoing record could not be written

    # --- opening ------------------------------------------------------------------------

    @staticmethod
    def path_for(kind: str, where: Path | None = None) -> Path:
        return (where or state_dir()) / "tune" / f"{kind}.jsonl"

    @classmethod
    def load(cls, path: Path) -> Journal | None:
        """The journal at PATH, or None when there is none (or it holds no whole line).
        UserError when it is damaged or not a journal."""
        j = cls._read(path)
        return j if j is not None and j.header else None

    @classmethod
    def _read(cls, path: Path) -> Journal | None:
        try:
            fd = open_nofollow(path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise UserError(f"{path}: cannot read the journal ({_say(e)})") from None
        try:
            if os.fstat(fd).st_size > MAX_JOURNAL_BYTES:
                raise UserError(f"{path}: larger than {MAX_JOURNAL_BYTES >> 20} MiB, not a journal")
            data = read_fd(fd, MAX_JOURNAL_BYTES)
        except OSError as e:
            raise UserError(f"{path}: cannot read the journal ({_say(e)})") from None
        finally:
            os.close(fd)
        return _parse(cls(path, {}, [], 0, len(data)), data)

    @classmethod
    def clear_torn(cls, path: Path) -> None:
        """Remove the journal at PATH when it holds no whole line (apply was killed while
        writing its header): there is nothing in it to undo."""
        j = cls._read(path)
        if j is not None and not j.header:
            j.remove()

    @classmethod
    def open_or_create(cls, kind: str, root: str, where: Path | None = None) -> Journal:
        """The journal of KIND, created (with its header, fsynced) when there is none."""
        path = cls.path_for(kind, where)
        j = cls._read(path)
        if j is not None and j.header:
            if j.header.get("root") != root:
                raise UserError(
                    f"{path}: a journal for root {j.header.get('root')!r} is active: reset it first"
                )
            return j
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            why = _say(e)
            raise UserError(f"{path.parent}: cannot create the state directory ({why})") from None
        j = j or cls(path, {}, [])
        header = {
            "journal": JOURNAL_SCHEMA,
            "kind": kind,
            "root": root,
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        j._append(header)
        j.header = header
        _fsync_dir(path.parent)
        return j

    # --- writing ------------------------------------------------------------------------

    def _append(self, record: dict[str, Any]) -> None:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
        try:
            line = (text + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: escaped instead
            line = (json.dumps(record, separators=(",", ":")) + "\n").encode("ascii")
        if len(line) > MAX_LINE_BYTES:
            raise UserError(f"{self.path}: a journal record longer than {MAX_LINE_BYTES} bytes")
        n = _crash.begin()
        try:
            fd = _open_append(self.path)
            try:
                if self._size != self._end:  # a line a crash cut short: cut it off
                    os.ftruncate(fd, self._end)
                _crash.at(n, "inside")
                if _crash.torn(n):
                    os.write(fd, line[: len(line) // 2])
                    _crash.kill()
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            raise UserError(f"{self.path}: cannot write the journal ({_say(e)})") from None
        self._end = self._size = self._end + len(line)
        _crash.at(n, "after")

    def intend(self, op: str, **data: Any) -> Entry:
        """Record a change before it is made (fsynced); its entry."""
        seq = max((e.seq for e in self.entries), default=0) + 1
        self._append({"seq": seq, "op": op, **data})
        e = Entry(seq, op, {"op": op, **data})
        self.entries.append(e)
        return e

    def outcome(self, entry: Entry, state: str, **detail: Any) -> None:
        self._append({"seq": entry.seq, "state": state, **detail})
        entry.state = state
        entry.result = {"seq": entry.seq, "state": state, **detail}

    def undoing(self, entry: Entry) -> None:
        """Record that ENTRY is about to be restored. A journal that cannot be written
        (immutable, disk full) does not stop a reset: the reason is kept in write_error."""
        try:
            self._append({"seq": entry.seq, "state": UNDOING})
        except UserError as e:
            self.write_error = str(e)
        entry.undoing = True

    def remove(self) -> bool:
        """After a complete reset: nothing left to undo. False (and remove_error) when the
        file cannot be removed (e.g. immutable)."""
        n = _crash.begin()
        _crash.atomic(n)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        except OSError as e:
            self.remove_error = _say(e)
            return False
        _crash.at(n, "after")
        return True

    # --- reading ------------------------------------------------------------------------

    def applied(self) -> Iterator[Entry]:
        """Entries that may have changed the system, newest first (the order of undo)."""
        return (e for e in reversed(self.entries) if e.maybe_applied)

    def latest(self, op: str, key: str, value: Any) -> Entry | None:
        """The newest applied entry of OP whose KEY is VALUE (e.g. the same file)."""
        return next((e for e in self.applied() if e.op == op and e.get(key) == value), None)


def _open_append(path: Path) -> int:
    flags = os.O_WRONLY | os.O_APPEND
    try:
        return open_nofollow(path, flags)
    except FileNotFoundError:
        return os.open(path, flags | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


def _parse(j: Journal, data: bytes) -> Journal:
    """J with the records of DATA (the file's bytes), each checked; UserError naming the
    first bad line."""
    path, kind = j.path, j.path.name.removesuffix(".jsonl")
    end = data.rfind(b"\n") + 1
    tail = data[end:]
    if tail and (len(tail) > MAX_LINE_BYTES or not tail.startswith(b"{")):
        raise UserError(f"{path}: damaged journal (it ends in something that is not a line)")
    j._end = end
    by_seq: dict[int, Entry] = {}
    meta: dict[str, Any] | None = None
    pos = lineno = 0
    while pos < end:
        nl = data.index(b"\n", pos)
        raw, pos, lineno = data[pos:nl], nl + 1, lineno + 1
        if len(raw) > MAX_LINE_BYTES:
            raise UserError(f"{path}:{lineno}: a line longer than {MAX_LINE_BYTES} bytes")
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (ValueError, RecursionError):
            raise UserError(f"{path}:{lineno}: damaged journal line") from None
        try:
            if not isinstance(rec, dict):
                raise ValueError("not a JSON object")
            if not j.header:
                check_header(rec, kind)
                j.header = rec
            elif "op" in rec:
                check_intent(rec, kind, j.header["root"] == "/", meta)
                meta = rec if rec["op"] == META else meta
                _add_intent(j, by_seq, rec)
            else:
                check_outcome(rec)
                _add_outcome(by_seq, rec)
        except ValueError as e:
            if not j.header:
                raise UserError(f"{path}: {e}") from None
            raise UserError(f"{path}:{lineno}: damaged journal record ({e})") from None
    return j


def _add_intent(j: Journal, by_seq: dict[int, Entry], rec: dict[str, Any]) -> None:
    seq = rec["seq"]
    if type(seq) is not int or seq <= max(by_seq, default=0):
        raise ValueError("its sequence number does not follow the one before")
    e = Entry(seq, rec["op"], {k: v for k, v in rec.items() if k != "seq"})
    j.entries.append(e)
    by_seq[seq] = e


def _add_outcome(by_seq: dict[int, Entry], rec: dict[str, Any]) -> None:
    e = by_seq.get(rec["seq"]) if type(rec["seq"]) is int else None
    if e is None:
        raise ValueError("the outcome of no intent before it")
    if rec["state"] == UNDOING:
        if not e.maybe_applied:
            raise ValueError("undoing a change that was refused")
        e.undoing = True
    elif e.state != PENDING:
        raise ValueError("a second outcome of one change")
    else:
        e.state, e.result = rec["state"], rec


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


__all__ = ["DONE", "PENDING", "REFUSED", "UNDOING", "Entry", "Journal", "state_dir"]
