"""The machine's tracefs for the tests: mounted at /sys/kernel/tracing as the probe mounts
it (`tracefs_open()` in probe/src/lib/tracefs.c, which leaves it mounted), and unmounted
at the end of the session when it was not mounted at its start."""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

TRACEFS = Path("/sys/kernel/tracing")
MNT_DETACH = 2  # <sys/mount.h>: unmount lazily, once no file of it is open
MAX_STACKED = 8  # a bound on mounts stacked at one place, unmounted one by one

_libc = ctypes.CDLL(None, use_errno=True)


def mounted(path: Path = TRACEFS) -> bool:
    """Whether a tracefs is mounted at PATH in this mount namespace."""
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) > 2 and fields[2] == "tracefs" and fields[1] == str(path):
                return True
    return False


def in_kernel() -> bool:
    """Whether this kernel has tracefs at all (CONFIG_TRACING)."""
    with open("/proc/filesystems") as f:
        return any(line.split()[-1:] == ["tracefs"] for line in f)


def _check(rc: int, path: Path) -> None:
    if rc:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), str(path))


def mount(path: Path = TRACEFS) -> None:
    """Mount tracefs at PATH, as `tracefs_open()` of the probe does."""
    _check(_libc.mount(b"nodev", os.fsencode(path), b"tracefs", 0, None), path)


def umount(path: Path = TRACEFS) -> None:
    """Unmount every tracefs at PATH; lazily if a file of it is still open."""
    for _ in range(MAX_STACKED):
        if not mounted(path):
            return
        if _libc.umount2(os.fsencode(path), 0):
            if ctypes.get_errno() != errno.EBUSY:
                _check(-1, path)
            _check(_libc.umount2(os.fsencode(path), MNT_DETACH), path)
