"""Fixture trees of cgroup v1 and v2 cpuset hierarchies, and the fake kernel behind them:
a new cgroup directory gets its interface files, rmdir removes them (as cgroupfs does)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rtlab.tune._rootfs import RootFS

PF_KTHREAD, PF_NO_SETAFFINITY = 0x00200000, 0x04000000
INTERRUPTS = "           CPU0       CPU1       CPU2       CPU3\n 10:  1  2  3  4   IO-APIC  eth0\n"
COMMON = {
    "sys/devices/system/cpu/online": "0-3\n",
    "proc/interrupts": INTERRUPTS,
    "proc/irq/10/smp_affinity_list": "0-3\n",
    "proc/irq/10/effective_affinity_list": "3\n",
    "proc/irq/default_smp_affinity": "f\n",
    "sys/devices/virtual/workqueue/cpumask": "f\n",
    "sys/bus/workqueue/devices/writeback/cpumask": "f\n",
}
V2 = {
    **COMMON,
    "proc/self/mountinfo": (
        "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
        "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
    ),
    "sys/fs/cgroup/cgroup.controllers": "cpuset cpu io memory pids\n",
    "sys/fs/cgroup/cgroup.subtree_control": "cpuset cpu memory pids\n",
    "sys/fs/cgroup/cgroup.procs": "1\n",
    "sys/fs/cgroup/cpuset.cpus.effective": "0-3\n",
}
V1 = {
    **COMMON,
    "proc/mounts": (
        "proc /proc proc rw 0 0\n"
        "cgroup /sys/fs/cgroup/cpuset cgroup rw,nosuid,relatime,cpuset 0 0\n"
    ),
    "sys/fs/cgroup/cpuset/cpuset.cpus": "0-3\n",
    "sys/fs/cgroup/cpuset/cpuset.mems": "0\n",
    "sys/fs/cgroup/cpuset/cpuset.effective_mems": "0\n",
    "sys/fs/cgroup/cpuset/cpuset.cpu_exclusive": "1\n",
    "sys/fs/cgroup/cpuset/cpuset.sched_load_balance": "1\n",
    "sys/fs/cgroup/cpuset/tasks": "",
    "sys/fs/cgroup/cpuset/cgroup.procs": "",
}
# What a real cgroupfs puts into a new cgroup (the parts rtlab reads or writes).
NEW_V2 = {"cgroup.procs": "", "cpuset.cpus": "\n", "cpuset.cpus.effective": "\n",
          "cpuset.cpus.partition": "member\n", "cpuset.mems": "\n"}  # fmt: skip
NEW_V1 = {"tasks": "", "cgroup.procs": "", "cpuset.cpus": "\n", "cpuset.mems": "\n",
          "cpuset.cpu_exclusive": "0\n", "cpuset.sched_load_balance": "1\n",
          "cpuset.effective_cpus": "\n"}  # fmt: skip


def kernel(new: dict[str, str]) -> Callable[[Path], None]:
    """The fake kernel: a new cgroup directory gets its interface files."""

    def made(d: Path) -> None:
        for name, text in new.items():
            (d / name).write_text(text)

    return made


def fake_rmdir(monkeypatch: pytest.MonkeyPatch) -> None:
    """rmdir of a cgroup in a tree removes its interface files, as cgroupfs does."""
    real = RootFS.rmdir

    def rmdir(self: RootFS, rel: str) -> None:
        d = self.root / rel
        if not self.live and "fs/cgroup" in rel and d.is_dir() and not d.is_symlink():
            for f in d.iterdir():
                if f.is_file() and not f.is_symlink():
                    f.unlink()
        real(self, rel)

    monkeypatch.setattr(RootFS, "rmdir", rmdir)


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every directory (None), by path under ROOT."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }
