"""Crash injection for the tests: SIGKILL the process at a chosen write.

Two environment variables, read at each write (tests only; unset in normal use):

* ``RTLAB_TUNE_CRASH_AFTER=N``: after the Nth change made to the system (a file
  written, a directory made, a task moved), before its outcome is journalled.
* ``RTLAB_TUNE_CRASH_AT=N:PHASE``: at the Nth write of any kind this process makes
  (a journal line, a file, a directory made or removed, the journal removed), counted
  from 1. PHASE is ``before`` (nothing of it done), ``inside`` (the file opened, and
  in a tree truncated, no byte written), ``torn`` (half of its bytes written) or
  ``after`` (all of it done). A directory or unlink has no inside: ``inside`` and
  ``torn`` crash before it, like ``before``.

A test iterates N from 1 until the command ends without being killed: that covers every
write it makes. The count is per process (a forked child starts again from 0).
"""

from __future__ import annotations

import os
import signal

CRASH_ENV = "RTLAB_TUNE_CRASH_AFTER"
CRASH_AT_ENV = "RTLAB_TUNE_CRASH_AT"
PHASES = ("before", "inside", "torn", "after")

_count = [0, 0]  # [pid, writes begun by that pid]


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _wanted() -> tuple[int, str] | None:
    spec = os.environ.get(CRASH_AT_ENV)
    if not spec:
        return None
    n, _, phase = spec.partition(":")
    if not n.isdigit() or phase not in PHASES:
        return None
    return int(n), phase


def begin() -> int:
    """A write starts: its number (crashes here for ``N:before``)."""
    pid = os.getpid()
    if _count[0] != pid:
        _count[:] = [pid, 0]
    _count[1] += 1
    at(_count[1], "before")
    return _count[1]


def at(n: int, phase: str) -> None:
    """Crash when write N at PHASE is the one asked for."""
    if _wanted() == (n, phase):
        kill()


def torn(n: int) -> bool:
    """Whether write N is to be torn: the caller writes half of it, then kill()s."""
    return _wanted() == (n, "torn")


def atomic(n: int) -> None:
    """Before an operation that has no inside (mkdir, rmdir, unlink)."""
    at(n, "inside")
    at(n, "torn")


def after_changes(changes: int) -> None:
    """After the system change number CHANGES (RTLAB_TUNE_CRASH_AFTER)."""
    crash = os.environ.get(CRASH_ENV)
    if crash and crash.isdigit() and changes >= int(crash):
        kill()
