"""What the measured system is: fingerprint, CPU isolation (audit and tuning come later)."""

from rtlab.system._cpus import format_cpulist, parse_cpulist
from rtlab.system._fingerprint import collect_fingerprint, preempt_model
from rtlab.system._isolation import Isolation, isolated_cpus
from rtlab.system._root import LIVE_ROOT, SysRoot

__all__ = [
    "LIVE_ROOT",
    "Isolation",
    "SysRoot",
    "collect_fingerprint",
    "format_cpulist",
    "isolated_cpus",
    "parse_cpulist",
    "preempt_model",
]
