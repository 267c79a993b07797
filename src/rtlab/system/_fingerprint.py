"""The system fingerprint stored with every experiment (system.json)."""

from __future__ import annotations

import os
import platform
import re

from rtlab.system._cpus import parse_cpulist
from rtlab.system._isolation import isolated_cpus
from rtlab.system._root import LIVE_ROOT, SysRoot


def kernel_config(root: SysRoot, release: str) -> dict[str, str] | None:
    """CONFIG_* values from /proc/config.gz or /boot/config-<release>, if readable."""
    text = root.read_gz("proc/config.gz") or root.read(f"boot/config-{release}")
    if text is None:
        return None
    config: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^(CONFIG_\w+)=(.*)$", line)
        if m:
            config[m.group(1)] = m.group(2).strip('"')
    return config


def preempt_model(version: str, config: dict[str, str] | None, realtime: str | None) -> str:
    """none, voluntary, full, lazy, rt or dynamic (from config, /sys/kernel/realtime, uname -v)."""
    if realtime == "1" or (config and config.get("CONFIG_PREEMPT_RT") == "y"):
        return "rt"
    if config:
        if config.get("CONFIG_PREEMPT_DYNAMIC") == "y":
            return "dynamic"
        for key, model in (
            ("CONFIG_PREEMPT_LAZY", "lazy"),
            ("CONFIG_PREEMPT", "full"),
            ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
            ("CONFIG_PREEMPT_NONE", "none"),
        ):
            if config.get(key) == "y":
                return model
    words = version.split()
    if "PREEMPT_RT" in words:
        return "rt"
    if "PREEMPT_DYNAMIC" in words:
        return "dynamic"
    if "PREEMPT_LAZY" in words:
        return "lazy"
    if "PREEMPT" in words:
        return "full"
    return "unknown"


def _hz(config: dict[str, str] | None) -> int | None:
    if config and config.get("CONFIG_HZ", "").isdigit():
        return int(config["CONFIG_HZ"])
    return None


def _timer_mode(config: dict[str, str] | None) -> str | None:
    if not config:
        return None
    for key, mode in (
        ("CONFIG_NO_HZ_FULL", "NO_HZ_FULL"),
        ("CONFIG_NO_HZ_IDLE", "NO_HZ_IDLE"),
        ("CONFIG_HZ_PERIODIC", "HZ_PERIODIC"),
    ):
        if config.get(key) == "y":
            return mode
    return None


def collect_fingerprint(root: SysRoot = LIVE_ROOT) -> dict:
    """Facts about the system a result depends on; every file read through ROOT."""
    live = root.root == LIVE_ROOT.root
    uname = platform.uname()
    release = root.read("proc/sys/kernel/osrelease") or (uname.release if live else "")
    version = root.read("proc/sys/kernel/version") or (uname.version if live else "")
    config = kernel_config(root, release)
    realtime = root.read("sys/kernel/realtime")
    online = parse_cpulist(root.read("sys/devices/system/cpu/online") or "")
    iso = isolated_cpus(root)
    return {
        "schema": 1,
        "hostname": root.read("proc/sys/kernel/hostname") or (uname.node if live else None),
        "kernel_release": release,
        "kernel_version": version,
        "machine": uname.machine if live else None,
        "cmdline": root.read("proc/cmdline"),
        "cpus_online": online,
        "cpu_count": len(online) or (os.cpu_count() if live else None),
        "realtime": realtime == "1",
        "preempt_model": preempt_model(version, config, realtime),
        "hz": _hz(config),
        "timer_mode": _timer_mode(config),
        "kernel_config_found": config is not None,
        "isolated_cpus": iso.cpus if iso.kernel_isolated else [],
        "isolation_source": iso.source if iso.kernel_isolated else None,
    }
