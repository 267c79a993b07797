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
    partition: str | None = None  # the cpuset partition's cgroup ("/sys/fs/cgroup/cpuset/rt")

    def describe(self) -> str:
        cpus = format_cpulist(self.cpus)
        if self.kernel_isolated and self.partition:
            return f"CPU {cpus} (isolated by {self.source} {self.partition})"
        if self.kernel_isolated:
            return f"CPU {cpus} (isolated by {self.source})"
        return f"CPU {cpus} (the last CPU: no isolated CPU is configured; loads are kept off it)"


def _cpuset_isolated(root: Root) -> tuple[list[int], list[str]]:
    """CPUs and cgroups of cpuset partitions: valid isolated cgroup v2 partitions (two levels
    below the cgroup root; "isolated invalid (…)" is none), and cgroup v1 cpusets with
    cpu_exclusive 1 and sched_load_balance 0 below a root that does not balance either
    (`rtlab partition`, partrt)."""
    found: set[int] = set()
    where: list[str] = []
    dirs = [f"sys/fs/cgroup/{d}" for d in root.listdir("sys/fs/cgroup") or []]
    for d in list(dirs):
        dirs += [f"{d}/{e}" for e in root.listdir(d) or []]
    for d in dirs:
        if (root.read(f"{d}/cpuset.cpus.partition") or "").strip() == "isolated":
            found.update(cpulist_or_none(root.read(f"{d}/cpuset.cpus.effective") or "") or [])
            where.append(f"/{d}")
    v1 = "sys/fs/cgroup/cpuset"
    if root.read(f"{v1}/cpuset.sched_load_balance") == "0":
        for e in root.listdir(v1) or []:
            d = f"{v1}/{e}"
            if root.read(f"{d}/cpuset.cpu_exclusive") != "1":
                continue
            if root.read(f"{d}/cpuset.sched_load_balance") == "0":
                found.update(cpulist_or_none(root.read(f"{d}/cpuset.effective_cpus") or "") or [])
                where.append(f"/{d}")
    return sorted(found), where


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
    cpus, where = _cpuset_isolated(root)
    if cpus:
        return Isolation(cpus, "cpuset partition", True, ",".join(where))
    online = cpulist_or_none(root.read("sys/devices/system/cpu/online") or "0") or [0]
    return Isolation([online[-1]], "last CPU", False)
