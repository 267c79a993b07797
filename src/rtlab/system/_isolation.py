"""Which CPU the "isolation" series measures on, and why."""

from __future__ import annotations

from dataclasses import dataclass

from rtlab.system._cmdline import Cmdline, cpulist_or_none
from rtlab.system._cpus import format_cpulist
from rtlab.system._root import LIVE_ROOT, Root


@dataclass(frozen=True)
class Isolation:
    cpus: list[int]  # CPUs to measure on
    source: str  # "isolcpus", "nohz_full", "cpuset partition", or "last CPU"
    kernel_isolated: bool  # False when the choice is only a convention (no isolation configured)

    def describe(self) -> str:
        cpus = format_cpulist(self.cpus)
        if self.kernel_isolated:
            return f"CPU {cpus} (isolated by {self.source})"
        return f"CPU {cpus} (the last CPU: no isolated CPU is configured; loads are kept off it)"


def _cpuset_isolated(root: Root) -> list[int]:
    """CPUs of isolated cgroup v2 cpuset partitions (two levels below the cgroup root)."""
    found: set[int] = set()
    dirs = [f"sys/fs/cgroup/{d}" for d in root.listdir("sys/fs/cgroup") or []]
    for d in list(dirs):
        dirs += [f"{d}/{e}" for e in root.listdir(d) or []]
    for d in dirs:
        if (root.read(f"{d}/cpuset.cpus.partition") or "").startswith("isolated"):
            found.update(cpulist_or_none(root.read(f"{d}/cpuset.cpus.effective") or "") or [])
    return sorted(found)


def isolated_cpus(root: Root = LIVE_ROOT) -> Isolation:
    """Isolated CPUs from isolcpus, nohz_full or an isolated cpuset partition; else the last CPU."""
    cmdline = Cmdline.parse(root.read("proc/cmdline"))
    iso = cmdline.isolcpus()
    if iso and iso[1]:
        return Isolation(iso[1], "isolcpus", True)
    sysfs = root.read("sys/devices/system/cpu/isolated")
    if sysfs and (cpus := cpulist_or_none(sysfs)):
        return Isolation(cpus, "isolcpus", True)
    nohz = cmdline.get("nohz_full") or root.read("sys/devices/system/cpu/nohz_full")
    if nohz and nohz != "(null)" and (cpus := cpulist_or_none(nohz)):
        return Isolation(cpus, "nohz_full", True)
    if cpus := _cpuset_isolated(root):
        return Isolation(cpus, "cpuset partition", True)
    online = cpulist_or_none(root.read("sys/devices/system/cpu/online") or "0") or [0]
    return Isolation([online[-1]], "last CPU", False)
