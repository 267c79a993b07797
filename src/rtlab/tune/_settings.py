"""Runtime settings as experiment keys: what each key means, and the files it writes.

Two spellings (docs/experiments.md, "Settings as experiment variables"):

* ``sysctl.<dotted name>``: the file /proc/sys/<name with / for .>, e.g.
  ``sysctl.kernel.sched_rt_runtime_us`` is /proc/sys/kernel/sched_rt_runtime_us;
* the ID of an audit check that `rtlab tune` has a runtime knob of one file for
  (``sched.timer_migration``, ``mm.thp``, …, SINGLE below), and two per-CPU ones:
  ``cpu.governor`` (the governor of each CPU the case measures on) and
  ``cpu.idle_latency`` (an exit latency limit in µs: the idle states above it are
  disabled, the others enabled, on each CPU the case measures on).

kernel.sched_rt_runtime_us (either spelling) on a kernel with RT_GROUP_SCHED and a
cgroup v1 cpu hierarchy also sets the root cgroup's cpu.rt_runtime_us (_with_rt_group).

The value is one int or str. A case's settings become writes (path, value, compare) here;
_settings_run.py makes them through the journal around the case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rtlab.system import Root, parse_cpulist
from rtlab.tune import _knobs as k
from rtlab.tune import _knobs_cpu as kc
from rtlab.tune._apply import MAX_VALUE_BYTES, normalize
from rtlab.tune._cgroup import parse_mounts
from rtlab.tune._plan import KNOBS

SYSCTL_PREFIX = "sysctl."
MAX_SYSCTL_NAME = 255
# A sysctl name: dotted components of letters, digits, _ and - (an interface name with a
# dot in it, e.g. a VLAN eth0.100, cannot be spelled this way).
SYSCTL_NAME_RE = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)+")
CPU = "sys/devices/system/cpu"
RT_RUNTIME = "proc/sys/kernel/sched_rt_runtime_us"

# Audit check ID -> the knob of one file that fixes it (its path and how it compares).
SINGLE: dict[str, k.Sysctl] = {kn.check: kn for kn in KNOBS if isinstance(kn, k.Sysctl)}
GOVERNOR, IDLE = kc.Governor.check, kc.IdleStates.check
PER_CPU = (GOVERNOR, IDLE)
KNOB_KEYS = (*SINGLE, *PER_CPU)


@dataclass(frozen=True)
class SettingWrite:
    """One file a case setting writes: PATH (relative to the root) gets NEW."""

    key: str  # the experiment key as written
    path: str
    new: str
    compare: str


def is_setting_key(key: str) -> bool:
    """Whether KEY is a runtime setting (not a probe option or host key)."""
    return key.startswith(SYSCTL_PREFIX) or key in KNOB_KEYS


def setting_keys(params: dict[str, Any]) -> list[str]:
    """The setting keys of a case's params, in their order."""
    return [key for key in params if is_setting_key(key)]


def sysctl_path(key: str) -> str:
    """proc/sys/kernel/timer_migration for sysctl.kernel.timer_migration."""
    return "proc/sys/" + key.removeprefix(SYSCTL_PREFIX).replace(".", "/")


def key_error(key: str) -> str | None:
    """Why KEY is no setting key rtlab can write, or None."""
    if key in KNOB_KEYS:
        return None
    name = key.removeprefix(SYSCTL_PREFIX)
    if len(name) > MAX_SYSCTL_NAME or not SYSCTL_NAME_RE.fullmatch(name):
        return (
            "not a sysctl name (dotted words of letters, digits, _ and -, e.g. "
            "sysctl.kernel.sched_rt_runtime_us)"
        )
    return None


def value_error(key: str, value: Any) -> str | None:
    """Why VALUE cannot be the value of setting KEY, or None."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        names: dict[type, str] = {list: "array", dict: "table"}
        kind = names.get(type(value), type(value).__name__)
        return f"must be an int or a str, not {kind}"
    text = str(value)
    if not text.strip():
        return "must not be empty"
    if len(text.encode("utf-8")) > MAX_VALUE_BYTES:
        return f"must be at most {MAX_VALUE_BYTES} bytes"
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in text):
        return "must not contain a control character (a newline would be a second write)"
    if key == IDLE and (not isinstance(value, int) or value < 0):
        return "must be an int >= 0 (the exit latency limit in µs)"
    return None


def _compare(value: Any, knob_compare: str | None = None) -> str:
    if knob_compare is not None:
        return knob_compare
    return "int" if isinstance(value, int) else "text"


def _cpus(params: dict[str, Any], root: Root) -> list[int]:
    """The CPUs a per-CPU setting acts on: those the case measures on, else all online."""
    pinned = params.get("cpus_resolved")
    text = pinned if isinstance(pinned, str) and pinned else root.read(f"{CPU}/online") or "0"
    return parse_cpulist(text.strip())


def writes(params: dict[str, Any], root: Root) -> list[SettingWrite]:
    """The files the settings of a case (its PARAMS) write, in key order. The idle
    states are those ROOT lists now; a CPU without cpufreq or cpuidle yields a write of
    a missing file (refused as such by check_writes)."""
    out: list[SettingWrite] = []
    for key in setting_keys(params):
        value = params[key]
        if key in SINGLE:
            kn = SINGLE[key]
            out += _with_rt_group(SettingWrite(key, kn.path, str(value), kn.compare), root)
        elif key == GOVERNOR:
            for c in _cpus(params, root):
                out.append(SettingWrite(key, f"{CPU}/cpu{c}/cpufreq/scaling_governor",
                                        str(value), "text"))  # fmt: skip
        elif key == IDLE:
            out += _idle_writes(key, int(value), _cpus(params, root), root)
        else:
            w = SettingWrite(key, sysctl_path(key), str(value), _compare(value))
            out += _with_rt_group(w, root)
    return out


def rt_group_file(root: Root) -> str | None:
    """The root cgroup's cpu.rt_runtime_us of a cgroup v1 cpu hierarchy (the kernel has
    RT_GROUP_SCHED), or None."""
    info = root.read("proc/self/mountinfo")
    for point, fstype, opts in parse_mounts(info, lambda: root.read("proc/mounts")):
        rel = point.strip("/")
        if fstype == "cgroup" and "cpu" in opts and rel:
            f = f"{rel}/cpu.rt_runtime_us"
            if root.read(f) is not None:
                return f
    return None


def _with_rt_group(w: SettingWrite, root: Root) -> list[SettingWrite]:
    """W, and for kernel.sched_rt_runtime_us under RT_GROUP_SCHED with a cgroup v1 cpu
    hierarchy, the root cgroup's cpu.rt_runtime_us set to the same value: the root group
    throttles the tasks in it by its own runtime, and the kernel refuses (EINVAL) a global
    runtime below it. Lowered, the group goes first; raised, second (so each write, and
    each restore in the reverse order, keeps the group within the global value). -1
    (throttling off) leaves the group alone."""
    if w.path != RT_RUNTIME or normalize("int", w.new) in (None, -1):
        return [w]
    group = rt_group_file(root)
    if group is None:
        return [w]
    g = SettingWrite(w.key, group, w.new, "int")
    now = normalize("int", root.read(RT_RUNTIME))
    lowering = now is None or now == -1 or int(w.new) < now
    return [g, w] if lowering else [w, g]


def _idle_writes(key: str, limit_us: int, cpus: list[int], root: Root) -> list[SettingWrite]:
    """stateK/disable of each CPU: 1 above LIMIT_US of exit latency, else 0."""
    out = []
    for c in cpus:
        base = f"{CPU}/cpu{c}/cpuidle"
        states = sorted(s for s in root.listdir(base) or [] if re.fullmatch(r"state\d+", s))
        if not states:
            out.append(SettingWrite(key, f"{base}/state0/disable", "0", "int"))  # missing
        for st in states:
            try:
                lat = int((root.read(f"{base}/{st}/latency") or "0").strip())
            except ValueError:
                lat = 0
            new = "1" if lat > limit_us else "0"
            out.append(SettingWrite(key, f"{base}/{st}/disable", new, "int"))
    return out
