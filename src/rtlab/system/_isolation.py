"""Which CPU the "isolation" series measures on, and why."""

from __future__ import annotations

from dataclasses import dataclass

from rtlab.system._cpus import parse_cpulist
from rtlab.system._root import LIVE_ROOT, SysRoot


@dataclass(frozen=True)
class Isolation:
    cpus: list[int]  # CPUs to measure on
    source: str  # "isolcpus", "nohz_full", "cpuset partition", or "last CPU"
    kernel_isolated: bool  # False when the choice is only a convention (no isolation configured)

    def describe(self) -> str:
        cpus = ",".join(map(str, self.cpus))
        if self.kernel_isolated:
            return f"CPU {cpus} (isolated by {self.source})"
        return f"CPU {cpus} (the last CPU: no isolated CPU is configured; loads are kept off it)"


def _cmdline_param(cmdline: str, name: str) -> str | None:
    for word in cmdline.split():
        key, _, value = word.partition("=")
        if key == name:
            return value
    return None


def _isolcpus_list(value: str) -> str:
    # isolcpus=[flag,...,]cpu-list: flags are words (nohz, domain, managed_irq).
    parts = [p for p in value.split(",") if p and not p[0].isalpha()]
    return ",".join(parts)


def _cpuset_isolated(root: SysRoot) -> list[int]:
    base = root.path("sys/fs/cgroup")
    if not base.is_dir():
        return []
    found: set[int] = set()
    for part in base.rglob("cpuset.cpus.partition"):
        if (root.read(str(part.relative_to(root.root))) or "").startswith("isolated"):
            eff = root.read(str(part.with_name("cpuset.cpus.effective").relative_to(root.root)))
            found.update(parse_cpulist(eff or ""))
    return sorted(found)


def isolated_cpus(root: SysRoot = LIVE_ROOT) -> Isolation:
    """Isolated CPUs from isolcpus, nohz_full or an isolated cpuset partition; else the last CPU."""
    cmdline = root.read("proc/cmdline") or ""
    isolcpus = _cmdline_param(cmdline, "isolcpus")
    if isolcpus and (cpus := parse_cpulist(_isolcpus_list(isolcpus))):
        return Isolation(cpus, "isolcpus", True)
    sysfs = root.read("sys/devices/system/cpu/isolated")
    if sysfs and (cpus := parse_cpulist(sysfs)):
        return Isolation(cpus, "isolcpus", True)
    nohz = _cmdline_param(cmdline, "nohz_full") or root.read("sys/devices/system/cpu/nohz_full")
    if nohz and nohz != "(null)" and (cpus := parse_cpulist(nohz)):
        return Isolation(cpus, "nohz_full", True)
    if cpus := _cpuset_isolated(root):
        return Isolation(cpus, "cpuset partition", True)
    online = parse_cpulist(root.read("sys/devices/system/cpu/online") or "0")
    return Isolation([online[-1]], "last CPU", False)
