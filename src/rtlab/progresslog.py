"""The progress file of a running experiment: what `rtlab run` writes, `rtlab watch` follows.

    results/<id>/progress.jsonl

While `rtlab run` runs a case, this file holds that case: a `case` line, then every
progress line of the probe as it comes, a `case_done` line when it ends, and an `end`
line when the run stops. At the next case the file is replaced (a new file renamed over
it), so it never grows beyond one case and a reader never sees a half-written header.
The format is in docs/result-format.md ("Progress file"). Writing it is best effort:
a full disk must not fail the measurement, whose record is the result document.

Reading it is bounded (docs/cli.md, "Limits"): only a regular file is followed (opened
non-blocking), a line is at most MAX_LINE_BYTES (a longer one is skipped), a poll reads at
most MAX_POLL_BYTES (the rest at the next), and a line's JSON has at most
MAX_LINE_VALUES values nested as rtlab._input allows. A damaged line is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from rtlab._input import load_json, open_regular
from rtlab.errors import UserError
from rtlab.records import CaseRecord, utc_now
from rtlab.store import ExperimentRecord

if TYPE_CHECKING:  # rtlab.runner imports this module
    from rtlab.runner import Display

PROGRESS_FILE = "progress.jsonl"
#: A progress line of the probe holds ~200 bytes per measuring thread.
MAX_LINE_BYTES = 1 << 20
MAX_LINE_VALUES = 1 << 16
MAX_POLL_BYTES = 16 << 20


class ProgressRecorder:
    """A runner Display that writes the progress file and passes everything on to INNER."""

    def __init__(self, inner: Display) -> None:
        self.inner = inner
        self.file: IO[str] | None = None
        self.rec: ExperimentRecord | None = None

    def _write(self, event: dict[str, Any]) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError, ValueError):  # best effort (see above)
                self.file.write(json.dumps(event, separators=(",", ":")) + "\n")
                self.file.flush()

    def _close(self) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
            self.file = None

    def start(self, rec: ExperimentRecord, todo: list[CaseRecord]) -> None:
        self.rec = rec
        self.inner.start(rec, todo)

    def case_start(self, case: CaseRecord) -> None:
        self._close()
        if self.rec is not None:
            path = self.rec.path / PROGRESS_FILE
            tmp = path.with_name(f".{PROGRESS_FILE}.{os.getpid()}")
            try:
                self.file = open(tmp, "w", encoding="utf-8")  # noqa: SIM115 (kept open)
                os.replace(tmp, path)
            except OSError:
                self._close()
                with contextlib.suppress(OSError):
                    tmp.unlink()
            self._write(
                {
                    "event": "case",
                    "id": self.rec.id,
                    "pid": os.getpid(),
                    "index": case.index,
                    "cases": len(self.rec.cases),
                    "series": case.series,
                    "name": case.name,
                    "deadline_ns": self.rec.deadline_ns,
                    "expected_s": case.expected_s,
                    "utc": utc_now(),
                }
            )
        self.inner.case_start(case)

    def progress(self, case: CaseRecord, line: dict) -> None:
        self._write({"event": "progress", "index": case.index, "probe": line})
        self.inner.progress(case, line)

    def case_done(self, case: CaseRecord, doc_path: Path | None) -> None:
        self._write({"event": "case_done", "index": case.index, "status": case.status})
        self.inner.case_done(case, doc_path)

    def stop(self) -> None:
        done = sum(c.done for c in self.rec.cases) if self.rec else 0
        total = len(self.rec.cases) if self.rec else 0
        self._write({"event": "end", "done": done, "cases": total, "utc": utc_now()})
        self._close()
        self.inner.stop()


# --- reading it ---------------------------------------------------------------------------


PID_LIMIT = 1 << 22  # PID_MAX_LIMIT (include/linux/threads.h): every PID is below it


def pid_alive(pid: Any) -> bool:
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 < pid < PID_LIMIT:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _events(lines: list[bytes]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if len(line) > MAX_LINE_BYTES:
            continue
        try:
            event = load_json(line.decode("utf-8", "replace"), MAX_LINE_VALUES)
        except UserError:
            continue  # display only: a damaged line is skipped
        if isinstance(event, dict) and isinstance(event.get("event"), str):
            yield event


class Follower:
    """Reads the events of a progress file as they are written, across its replacements."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file: IO[bytes] | None = None
        self.inode: int | None = None
        self.partial = b""
        self.skipping = False  # inside a line longer than MAX_LINE_BYTES
        self.at_end = False  # the last poll read to the end of the file

    def _open(self) -> bool:
        try:
            f = open_regular(self.path)  # never a FIFO: kept open while following
        except UserError:
            return False
        self.close()
        self.file, self.inode = f, os.fstat(f.fileno()).st_ino
        self.partial, self.skipping = b"", False
        return True

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def _drain(self) -> tuple[list[dict[str, Any]], bool]:
        """The events of at most MAX_POLL_BYTES more of the file, and whether its end was
        reached."""
        assert self.file is not None
        lines: list[bytes] = []
        got = 0
        while got < MAX_POLL_BYTES:
            try:
                chunk = self.file.read(min(1 << 20, MAX_POLL_BYTES - got))
            except OSError:
                chunk = b""
            if not chunk:
                return list(_events(lines)), True
            got += len(chunk)
            *complete, rest = (self.partial + chunk).split(b"\n")
            if complete and self.skipping:  # the end of a line too long to keep
                complete, self.skipping = complete[1:], False
            lines += complete
            self.partial = rest
            if len(rest) > MAX_LINE_BYTES:
                self.partial, self.skipping = b"", True
        return list(_events(lines)), False

    def poll(self) -> list[dict[str, Any]]:
        """The events written since the last call (those of a replaced file first), at
        most MAX_POLL_BYTES of them: the rest come at the next call."""
        self.at_end = True
        if self.file is None and not self._open():
            return []
        try:  # asked first: once the file is replaced, the old one is complete
            replaced = os.stat(self.path).st_ino != self.inode
        except OSError:
            replaced = False
        events, self.at_end = self._drain()
        if replaced and self.at_end and self._open():
            more, self.at_end = self._drain()
            events += more
        return events


@dataclass
class CaseView:
    """What a watcher knows of the running case."""

    id: str
    index: int
    cases: int
    series: str
    name: str
    deadline_ns: int | None
    pid: int | None
    probe: dict[str, Any] = field(default_factory=dict)  # the latest progress line
    status: str | None = None  # set by case_done


@dataclass
class WatchState:
    case: CaseView | None = None
    ended: bool = False
    end: dict[str, Any] = field(default_factory=dict)

    def apply(self, event: dict[str, Any]) -> None:
        kind = event["event"]
        if kind == "case":
            self.case = CaseView(
                id=str(event.get("id", "")),
                index=_int(event.get("index")) or 0,
                cases=_int(event.get("cases")) or 0,
                series=str(event.get("series", "")),
                name=str(event.get("name", "")),
                deadline_ns=_int(event.get("deadline_ns")),
                pid=_int(event.get("pid")),
            )
            self.ended, self.end = False, {}
        elif kind == "progress" and self.case and isinstance(event.get("probe"), dict):
            self.case.probe = event["probe"]
        elif kind == "case_done" and self.case:
            self.case.status = str(event.get("status"))
        elif kind == "end":
            self.ended, self.end = True, event

    @property
    def running(self) -> bool:
        """No `end` line yet, and the rtlab run that writes the file is alive."""
        return not self.ended and self.case is not None and pid_alive(self.case.pid)


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def read_state(path: Path) -> WatchState:
    """The state a progress file describes now."""
    state = WatchState()
    f = Follower(path)
    try:
        while True:
            for event in f.poll():
                state.apply(event)
            if f.at_end:
                break
    finally:
        f.close()
    return state


def _is_live(path: Path) -> bool:
    """The run writing PATH is alive and has not ended: its first line names a live
    PID and its last line is not `end` (only the two ends of the file are read)."""
    try:
        f = open_regular(path)
    except UserError:
        return False
    with f:
        head = list(_events(f.read(1 << 16).split(b"\n")[:1]))
        if not head or head[0]["event"] != "case" or not pid_alive(head[0].get("pid")):
            return False
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - 4096))
        tail = f.read(4096).splitlines()
    last = list(_events(tail[-1:]))
    return not (last and last[0]["event"] == "end")


def running_experiments(root: Path) -> list[Path]:
    """Directories under ROOT whose progress file a live `rtlab run` is writing, the most
    recently written first."""
    found = []
    with contextlib.suppress(OSError):
        for d in root.iterdir():
            p = d / PROGRESS_FILE
            if d.name.startswith(".") or not p.is_file():
                continue
            with contextlib.suppress(OSError):
                if _is_live(p):
                    found.append((p.stat().st_mtime_ns, d))
    return [d for _, d in sorted(found, reverse=True)]
