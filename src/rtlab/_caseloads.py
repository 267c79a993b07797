"""The loads of a case: its `forkcopy`, `load` and `loads` keys as the probe's --load
specs, kept off the measured CPUs when the case asks (`isolate_loads`)."""

from __future__ import annotations

import re
from typing import Any

from rtlab.system import format_cpulist
from rtlab.system._cpus import cpulist_or_none

# ",policy=P" / ",nice=N" at the end of a load spec: "@CPUS" goes before them.
_SCHED_SUFFIX = re.compile(r"(,(?:policy|nice)=[^,@]*)+$")


def load_specs(p: dict[str, Any]) -> list[str]:
    """The 'load' key (unless "" or "none") and then the 'loads' list."""
    one = p.get("load", "")
    return ([one] if one not in ("", "none") else []) + list(p.get("loads", []))


def case_loads(
    p: dict[str, Any], cpus: str | None, kernel_isolated: bool, online: list[int]
) -> list[tuple[str, str]]:
    """(key, --load spec) of every load the case keys give, in order."""
    load_cpus = ""
    measuring = (
        cpulist_or_none(cpus) if cpus and p.get("isolate_loads") and not kernel_isolated else None
    )
    if measuring:  # (a bad list is the probe's to refuse, as --cpus)
        rest = sorted(set(online) - set(measuring))
        load_cpus = f"@{format_cpulist(rest)}" if rest else ""
    out = []
    if p.get("forkcopy"):
        out.append(("forkcopy", f"forkcopy:{p['forkcopy']}:{p.get('forkcopy_size', '1M')}"))
    if p.get("load", "") not in ("", "none"):
        out.append(("load", p["load"]))
    out += [("loads", spec) for spec in p.get("loads", [])]
    return [(key, pin_load(spec, load_cpus)) for key, spec in out]


def pin_load(spec: str, load_cpus: str) -> str:
    """SPEC kept on LOAD_CPUS ("@1-3") unless it names its own CPUs."""
    if not load_cpus or "@" in spec:
        return spec
    m = _SCHED_SUFFIX.search(spec)
    return spec[: m.start()] + load_cpus + spec[m.start() :] if m else spec + load_cpus
