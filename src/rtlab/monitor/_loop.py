"""The monitor's loop: window after window, a row each, gaps marked, metrics kept.

Each window is one probe run on the target (as one case of `rtlab run`, so it dies with
rtlab and comes back through the same target interface from this machine, SSH, labgrid
or a VM). Consecutive windows are a probe start apart (milliseconds, kept in the rows'
times); time not measured for longer than GAP_MIN_S — rtlab stopped or killed, the board
rebooted, the target's connection lost — is a `gap` row, written before the first
window after it, from the last window's end to that window's start (both the target's
clock).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rtlab.errors import InternalError, LostError, UnsupportedError, UserError
from rtlab.monitor._record import MonitorRecord, parse_utc, utc_text
from rtlab.monitor._window import interval_row, window_call
from rtlab.probe import load_document, term_as_interrupt
from rtlab.records import CaseRecord
from rtlab.targets import Target

#: Unmeasured time between two windows above which a gap row is written (s).
GAP_MIN_S = 1.0
#: Shortest window worth a probe run (a last window shorter than this is not run) (s).
MIN_WINDOW_S = 0.5
#: Seconds between attempts to reach a lost target again (at most).
RECONNECT_S = 30.0

SayFn = Callable[[str], None]


class Sink:
    """Where each new row goes besides the file (the metrics)."""

    def add(self, row: dict[str, Any]) -> None: ...


@dataclass
class MonitorResult:
    intervals: int = 0  # windows measured by this run
    gaps: int = 0
    interrupted: bool = False
    reconnects: int = 0
    messages: list[str] = field(default_factory=list)


def boot_id(target: Target) -> str | None:
    with contextlib.suppress(Exception):  # evidence only: a target without it says None
        return target.root.read("proc/sys/kernel/random/boot_id") or None
    return None


def last_times(rows: list[dict[str, Any]]) -> tuple[int, str | None, str | None]:
    """(the next seq, the last window's end, the boot ID of the last start) of ROWS."""
    seq, end, boot = 0, None, None
    for r in rows:
        if r["kind"] == "interval":
            seq = max(seq, int(r.get("seq") or 0) + 1)
            end = r.get("end_utc") if isinstance(r.get("end_utc"), str) else end
        elif r["kind"] == "start":
            boot = r.get("boot_id") if isinstance(r.get("boot_id"), str) else None
    return seq, end, boot


class MonitorLoop:
    #: Seconds between attempts to reach a lost target again.
    reconnect_s = RECONNECT_S

    def __init__(
        self,
        rec: MonitorRecord,
        target: Target,
        reopen: Callable[[], Target] | None,
        sink: Sink,
        say: SayFn,
    ) -> None:
        self.rec, self.target, self.reopen, self.sink, self.say = rec, target, reopen, sink, say
        self.settings = rec.manifest.settings
        self.doc = rec.path / ".window.json"

    def run(self, rows: list[dict[str, Any]]) -> MonitorResult:
        """Measure until the monitor's end (never without one) or ^C/SIGTERM; ROWS: those
        stored already."""
        out = MonitorResult()
        self.seq, self.last_end, last_boot = last_times(rows)
        self.boot = boot = boot_id(self.target)
        start = {
            "kind": "start",
            "utc": utc_text(time.time()),
            "pid": os.getpid(),
            "boot_id": boot,
            "target": self.target.name,
        }
        self.rec.append(start)
        self.gap_reason: str | None = None
        opened = self.target
        if self.last_end is not None:
            rebooted = boot is not None and last_boot is not None and boot != last_boot
            self.gap_reason = "rebooted" if rebooted else "not running"
        previous = signal.signal(signal.SIGTERM, term_as_interrupt)
        try:
            self._loop(out)
        except KeyboardInterrupt:
            out.interrupted = True
        finally:
            signal.signal(signal.SIGTERM, previous)
            with contextlib.suppress(OSError):
                self.doc.unlink()
            if self.target is not opened:  # reached again here: closed here
                self.target.close()
        return out

    def _end(self) -> float | None:
        end = self.rec.manifest.end_utc
        return None if end is None else parse_utc(end)

    def _loop(self, out: MonitorResult) -> None:
        window_s = self.settings.window_ns / 1e9
        while True:
            end = self._end()
            left = window_s if end is None else min(window_s, end - time.time())
            if left < MIN_WINDOW_S:
                return
            try:
                row, interrupted = self._window(int(left * 1e9) if left < window_s else None)
            except LostError as e:
                if self._lost(str(e), out):
                    continue
                return
            self._append(row, out)
            if interrupted:
                out.interrupted = True
                return

    def _window(self, window_ns: int | None) -> tuple[dict[str, Any], bool]:
        call = window_call(self.settings, window_ns)
        case = CaseRecord(self.seq, "monitor", f"window {self.seq}", {}, call=call)
        last: dict[str, Any] = {}

        def progress(line: dict[str, Any]) -> None:
            last.update(line)

        with contextlib.suppress(OSError):
            self.doc.unlink()
        outcome = self.target.run_case(case, call, self.doc, None, progress)
        if outcome.document is None:
            reason = outcome.stderr.strip() or "no document written"
            if outcome.interrupted:
                raise KeyboardInterrupt
            raise InternalError(f"window {self.seq}: the probe failed: {reason}")
        doc = load_document(outcome.document)
        misses = {
            i: t["misses"]
            for i, t in enumerate(last.get("threads") or [])
            if isinstance(t, dict) and isinstance(t.get("misses"), int)
        }
        s = self.settings
        row = interval_row(self.seq, doc, misses, s.le_ns, s.explain_max)
        return row, outcome.interrupted

    def _append(self, row: dict[str, Any], out: MonitorResult) -> None:
        start = row.get("start_utc")
        if self.last_end is not None and isinstance(start, str):
            unmeasured = parse_utc(start) - parse_utc(self.last_end)
            if unmeasured > GAP_MIN_S or self.gap_reason is not None:
                gap = {
                    "kind": "gap",
                    "start_utc": self.last_end,
                    "end_utc": start,
                    "seconds": round(max(unmeasured, 0.0), 3),
                    "reason": self.gap_reason or "between windows",
                }
                self.rec.append(gap)
                self.sink.add(gap)
                out.gaps += 1
        self.gap_reason = None
        self.rec.append(row)
        self.sink.add(row)
        self.seq += 1
        out.intervals += 1
        if isinstance(row.get("end_utc"), str):
            self.last_end = row["end_utc"]

    def _lost(self, why: str, out: MonitorResult) -> bool:
        """The target went away (a reboot, the network): reach it again, until the
        monitor's end (False: it ended first)."""
        if self.reopen is None:
            raise LostError(why)
        self.say(f"target lost ({why}); trying again every {self.reconnect_s:.0f} s")
        self.gap_reason = f"target lost: {why}"
        with contextlib.suppress(Exception):
            self.target.close()
        while True:
            end = self._end()
            if end is not None and time.time() >= end:
                return False
            wait = self.reconnect_s if end is None else min(self.reconnect_s, end - time.time())
            time.sleep(max(0.0, wait))
            try:
                self.target = self.reopen()
            except (UnsupportedError, UserError, OSError) as e:
                self.say(f"target still unreachable: {e}")
                continue
            out.reconnects += 1
            boot = boot_id(self.target)
            if boot is not None and boot != self.boot:
                self.gap_reason = f"{self.gap_reason}; rebooted"
            self.boot = boot
            self.rec.append(
                {
                    "kind": "start",
                    "utc": utc_text(time.time()),
                    "pid": os.getpid(),
                    "boot_id": boot,
                    "target": self.target.name,
                }
            )
            self.say("target reached again")
            return True
