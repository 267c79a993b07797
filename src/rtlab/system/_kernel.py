"""The kernel build: configuration and preemption model."""

from __future__ import annotations

import re

from rtlab.system._root import Root

MODELS = ("none", "voluntary", "full", "lazy")
_CONFIG_MODELS = (
    ("CONFIG_PREEMPT_LAZY", "lazy"),
    ("CONFIG_PREEMPT", "full"),
    ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
    ("CONFIG_PREEMPT_NONE", "none"),
)


def kernel_config(root: Root, release: str) -> tuple[dict[str, str] | None, str | None]:
    """CONFIG_* values and the file they came from (/proc/config.gz or /boot/config-<release>)."""
    source = "/proc/config.gz"
    text = root.read_gz("proc/config.gz")
    if text is None and release:
        source = f"/boot/config-{release}"
        text = root.read(f"boot/config-{release}")
    if text is None:
        return None, None
    config: dict[str, str] = {}
    for line in text.splitlines():
        m = re.match(r"^(CONFIG_\w+)=(.*)$", line)
        if m:
            config[m.group(1)] = m.group(2).strip('"')
    return config, source


def _current_dynamic(
    debugfs: str | None, boot_param: str | None, config: dict[str, str] | None
) -> str:
    """The model a PREEMPT_DYNAMIC kernel runs now: debugfs "(full)", preempt=, or the default."""
    if debugfs and (m := re.search(r"\((\w+)\)", debugfs)):
        return m.group(1)
    if boot_param in MODELS:
        return boot_param
    for key, model in _CONFIG_MODELS:
        if config and config.get(key) == "y":
            return model
    return "unknown"


def preempt_model(
    version: str,
    config: dict[str, str] | None,
    realtime: str | None,
    debugfs: str | None = None,
    boot_param: str | None = None,
) -> str:
    """none, voluntary, full, lazy, rt or dynamic:<current>; "unknown" without evidence.

    Evidence, strongest first: /sys/kernel/realtime and the kernel config, then the
    version string (uname -v). For PREEMPT_DYNAMIC the current model comes from
    /sys/kernel/debug/sched/preempt, else the preempt= boot parameter, else the
    config default.
    """
    if realtime == "1" or (config and config.get("CONFIG_PREEMPT_RT") == "y"):
        return "rt"
    if config:
        if config.get("CONFIG_PREEMPT_DYNAMIC") == "y":
            return "dynamic:" + _current_dynamic(debugfs, boot_param, config)
        for key, model in _CONFIG_MODELS:
            if config.get(key) == "y":
                return model
    words = version.split()
    if "PREEMPT_RT" in words:
        return "rt"
    if "PREEMPT_DYNAMIC" in words:
        return "dynamic:" + _current_dynamic(debugfs, boot_param, None)
    if "PREEMPT_LAZY" in words:
        return "lazy"
    if "PREEMPT" in words:
        return "full"
    return "unknown"
