"""The cpuset hierarchy this machine really has: cgroup v1 cpusets or the cgroup v2 cpuset
controller, found from the mount table under an injectable root.

cgroup v1 (Documentation/admin-guide/cgroup-v1/cpusets.rst): a cpuset is a directory
with ``cpuset.cpus``, ``cpuset.mems``, ``cpuset.cpu_exclusive``,
``cpuset.sched_load_balance``; ``tasks`` holds thread IDs (one thread moves per write),
``cgroup.procs`` process IDs (the whole thread group moves). cgroup v2
(Documentation/admin-guide/cgroup-v2.rst): the controller must be listed in the parent's
``cgroup.subtree_control``; a child becomes a partition through
``cpuset.cpus.partition`` (``member``, ``root``, ``isolated``; read back as
``isolated invalid (<reason>)`` when the kernel cannot honour it); only ``cgroup.procs``
moves tasks (whole processes) outside threaded subtrees.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rtlab.errors import UserError
from rtlab.system import format_cpulist
from rtlab.tune._rootfs import check_rel, open_nofollow, read_under
from rtlab.tune._schema import parse_cpus

PF_KTHREAD = 0x00200000
PF_NO_SETAFFINITY = 0x04000000  # per-CPU kernel threads: the kernel refuses to move them


@dataclass(frozen=True)
class Hierarchy:
    """The mounted cpuset hierarchy: VERSION 1 or 2, MOUNT relative to the root."""

    version: int
    mount: str  # e.g. "sys/fs/cgroup/cpuset" (v1) or "sys/fs/cgroup" (v2)

    # File names that differ between the versions.
    @property
    def effective_cpus(self) -> str:
        return "cpuset.effective_cpus" if self.version == 1 else "cpuset.cpus.effective"

    @property
    def effective_mems(self) -> str:
        return "cpuset.effective_mems" if self.version == 1 else "cpuset.mems.effective"

    def rel(self, *parts: str) -> str:
        return "/".join([self.mount, *(p for p in parts if p)])

    def describe(self) -> str:
        return f"cgroup v{self.version} cpuset at /{self.mount}"


def _unescape(field: str) -> str:
    """Mount points in the mount table escape space, tab, newline and backslash as \\ooo."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _read(root: Path, rel: str) -> str | None:
    """ROOT/REL's text (bounded, a regular file inside ROOT), or None."""
    return read_under(root, rel)


def mounts(root: Path) -> list[tuple[str, str, list[str]]]:
    """(mount point, file system type, options) of every mount, from proc/self/mountinfo
    (super options included) or else proc/mounts."""
    return parse_mounts(_read(root, "proc/self/mountinfo"), lambda: _read(root, "proc/mounts"))


def parse_mounts(
    info: str | None, proc_mounts: Callable[[], str | None]
) -> list[tuple[str, str, list[str]]]:
    """(mount point, file system type, options) of every mount in the text of INFO
    (proc/self/mountinfo), or else in that of PROC_MOUNTS()."""
    out: list[tuple[str, str, list[str]]] = []
    if info:
        for line in info.splitlines():
            left, sep, right = line.partition(" - ")
            f, r = left.split(), right.split()
            if sep and len(f) >= 6 and len(r) >= 3:
                opts = f[5].split(",") + r[2].split(",")
                out.append((_unescape(f[4]), r[0], opts))
        return out
    for line in (proc_mounts() or "").splitlines():
        f = line.split()
        if len(f) >= 4:
            out.append((_unescape(f[1]), f[2], f[3].split(",")))
    return out


def find_hierarchy(root: Path) -> Hierarchy | None:
    """The hierarchy that has the cpuset controller, or None (no cpuset controller here).
    A v1 cpuset mount wins: a controller bound to v1 is absent from v2."""
    v2 = None
    for point, fstype, opts in mounts(root):
        rel = point.strip("/")
        try:
            check_rel(rel)
        except ValueError:
            continue  # "/" itself, or a mount point rtlab would not write under
        if fstype == "cgroup" and "cpuset" in opts:
            return Hierarchy(1, rel)
        if fstype == "cgroup2" and v2 is None:
            controllers = (_read(root, f"{rel}/cgroup.controllers") or "").split()
            if "cpuset" in controllers:
                v2 = Hierarchy(2, rel)
    return v2


def cgroup_of(root: Path, pid: int | str, h: Hierarchy) -> str | None:
    """The cgroup of task PID in hierarchy H ("/" or "/rt"), from proc/PID/cgroup."""
    for line in (_read(root, f"proc/{pid}/cgroup") or "").splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if h.version == 2 and hid == "0" and controllers == "":
            return path
        if h.version == 1 and "cpuset" in controllers.split(","):
            return path
    return None


def members(root: Path, rel: str) -> list[int]:
    """The IDs listed in a tasks or cgroup.procs file."""
    return [int(x) for x in (_read(root, rel) or "").split() if x.isdigit()]


def task_info(root: Path, tid: int) -> tuple[str, int] | None:
    """(comm, flags) of a task from proc/TID/stat; None when it is gone."""
    text = _read(root, f"proc/{tid}/stat")
    if not text or ")" not in text:
        return None
    head, _, rest = text.rpartition(")")
    f = rest.split()
    try:
        return head.split("(", 1)[1], int(f[6])
    except (IndexError, ValueError):
        return None


def online_cpus(root: Path) -> list[int]:
    """The online CPUs (UserError when the file does not hold a CPU list)."""
    text = _read(root, "sys/devices/system/cpu/online") or ""
    try:
        return parse_cpus(text)
    except ValueError as e:
        raise UserError(f"{root}/sys/devices/system/cpu/online: {e}") from None


def cpulist(text: str | None) -> list[int]:
    """A CPU list as the kernel prints it; [] for nothing or garbage."""
    try:
        return parse_cpus((text or "").strip())
    except ValueError:  # a value we cannot read is no CPUs
        return []


def format_cpumask(cpus: list[int] | set[int]) -> str:
    """CPUS as the kernel's hex mask: 32-bit groups, most significant first ("1,00000003")."""
    value = sum(1 << c for c in set(cpus))
    digits = f"{value:x}"
    groups = []
    while digits:
        groups.append(digits[-8:])
        digits = digits[:-8]
    if not groups:
        return "0"
    groups.reverse()
    return ",".join([groups[0]] + [g.rjust(8, "0") for g in groups[1:]])


def write_id(path: str | os.PathLike[str], task: int) -> None:
    """Write one task ID into a tasks/cgroup.procs file (0: the calling task); the file
    must be a regular file, not a symbolic link (OSError otherwise)."""
    fd = open_nofollow(path, os.O_WRONLY)
    try:
        os.write(fd, str(task).encode())
    finally:
        os.close(fd)


__all__ = [
    "PF_KTHREAD",
    "PF_NO_SETAFFINITY",
    "Hierarchy",
    "cgroup_of",
    "cpulist",
    "find_hierarchy",
    "format_cpulist",
    "format_cpumask",
    "members",
    "mounts",
    "online_cpus",
    "task_info",
    "write_id",
]
