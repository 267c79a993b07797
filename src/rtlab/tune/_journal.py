"""The journal of system changes: every original value is on disk before it is changed.

One journal per kind of change (``tune``, ``partition-<name>``) is one JSON-lines file
under the state directory (``$RTLAB_STATE``, else ``/var/lib/rtlab``), in ``tune/``:

    {"journal": 1, "kind": "tune", "root": "/", "created_utc": "…"}          header
    {"seq": 1, "op": "file", "path": "proc/sys/kernel/timer_migration",      intent, fsynced
     "original": "1\\n", "new": "0", "compare": "int", "check": "…", "why": "…"}
    {"seq": 1, "state": "done", "readback": "0\\n"}                            result
    {"seq": 2, "state": "refused", "error": "Input/output error"}

An intent line is written and fsynced before the change it describes, so a crash
between the two leaves an intent without a result: `reset` treats it like a done change
(the original is known; whether the change happened shows in the current value). A torn
last line (a crash while appending) is ignored. Operations (``op``): ``file`` (write a
text file under the root), ``affinity`` (a task's CPU affinity, live system only; the
task is identified by pid and start time), ``move`` (a task into another cgroup: ``to``
is the destination's tasks/cgroup.procs file, ``original`` the cgroup it came from) and
``mkdir`` (a directory created, removed on reset).
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

JOURNAL_SCHEMA = 1
STATE_ENV = "RTLAB_STATE"
DEFAULT_STATE = Path("/var/lib/rtlab")
PENDING, DONE, REFUSED = "pending", "done", "refused"


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

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def maybe_applied(self) -> bool:
        """Done, or in flight when apply died: reset must look at it."""
        return self.state in (DONE, PENDING)


class Journal:
    """An append-only journal file; load() to read one back, create() for a new one."""

    def __init__(self, path: Path, header: dict[str, Any], entries: list[Entry]) -> None:
        self.path = path
        self.header = header
        self.entries = entries

    # --- opening ------------------------------------------------------------------------

    @staticmethod
    def path_for(kind: str, where: Path | None = None) -> Path:
        return (where or state_dir()) / "tune" / f"{kind}.jsonl"

    @classmethod
    def load(cls, path: Path) -> Journal | None:
        """The journal at PATH, or None when there is none. UserError when damaged."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise UserError(f"{path}: cannot read the journal ({e})") from None
        lines = text.split("\n")
        records = []
        for i, ln in enumerate(lines):
            if not ln.strip():
                continue
            try:
                rec = json.loads(ln)
            except ValueError:
                if i >= len(lines) - 2:  # a torn last line: the append that a crash cut
                    break
                raise UserError(f"{path}:{i + 1}: damaged journal line") from None
            if not isinstance(rec, dict):
                raise UserError(f"{path}:{i + 1}: damaged journal line")
            records.append(rec)
        if not records or records[0].get("journal") != JOURNAL_SCHEMA:
            raise UserError(f"{path}: not an rtlab journal (schema {JOURNAL_SCHEMA})")
        header, entries, by_seq = records[0], [], {}
        for rec in records[1:]:
            seq = rec.get("seq")
            if not isinstance(seq, int):
                raise UserError(f"{path}: journal record without a sequence number")
            if "op" in rec:
                e = Entry(seq, str(rec["op"]), {k: v for k, v in rec.items() if k not in ("seq",)})
                entries.append(e)
                by_seq[seq] = e
            elif seq in by_seq:
                by_seq[seq].state = str(rec.get("state", PENDING))
                by_seq[seq].result = rec
        return cls(path, header, entries)

    @classmethod
    def open_or_create(cls, kind: str, root: str, where: Path | None = None) -> Journal:
        """The journal of KIND, created (with its header, fsynced) when there is none."""
        path = cls.path_for(kind, where)
        existing = cls.load(path)
        if existing is not None:
            if existing.header.get("root") != root:
                raise UserError(
                    f"{path}: a journal for root {existing.header.get('root')!r} is active: "
                    "reset it first"
                )
            return existing
        header = {
            "journal": JOURNAL_SCHEMA,
            "kind": kind,
            "root": root,
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"{path.parent}: cannot create the state directory ({e})") from None
        j = cls(path, header, [])
        j._append(header)
        _fsync_dir(path.parent)
        return j

    # --- writing ------------------------------------------------------------------------

    def _append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

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

    def remove(self) -> None:
        """After a complete reset: nothing left to undo."""
        self.path.unlink(missing_ok=True)

    # --- reading ------------------------------------------------------------------------

    def applied(self) -> Iterator[Entry]:
        """Entries that may have changed the system, newest first (the order of undo)."""
        return (e for e in reversed(self.entries) if e.maybe_applied)

    def latest(self, op: str, key: str, value: Any) -> Entry | None:
        """The newest applied entry of OP whose KEY is VALUE (e.g. the same file)."""
        return next((e for e in self.applied() if e.op == op and e.get(key) == value), None)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
