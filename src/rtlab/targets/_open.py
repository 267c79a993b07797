"""Opening the target a command names: this machine when it names none."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.targets._base import Target
from rtlab.targets._local import LocalTarget
from rtlab.targets._spec import VM, TargetSpec, parse_target


def open_target(
    text: str | None,
    file: Path | None = None,
    accept_new_host_key: bool = False,
    farm: str | None = None,
) -> Target:
    """The target TEXT names (an URL, or a name from FILE), connected; this machine when
    TEXT is None."""
    if text is None:
        return LocalTarget()
    return _open(parse_target(text, file), accept_new_host_key, farm)


def reopen_target(recorded: Any, where: str, accept_new_host_key: bool = False) -> Target:
    """The target an experiment's manifest recorded (`rtlab run --resume`)."""
    if not recorded:
        return LocalTarget()
    if not isinstance(recorded, dict):
        raise UserError(f"{where}: 'target' is not a target")
    spec = TargetSpec.from_dict(recorded.get("spec"), f"{where} target")
    farm = recorded.get("farm") if isinstance(recorded.get("farm"), str) else None
    return _open(spec, accept_new_host_key, farm)


def _open(spec: TargetSpec, accept_new_host_key: bool, farm: str | None) -> Target:
    if spec.kind == VM:
        from rtlab.targets._vm import VmTarget  # boots the kernel, then is an SSH target

        return VmTarget(spec, accept_new_host_key, farm)
    from rtlab.targets._remote import Remote  # only here: it brings the SSH layer

    return Remote(spec, accept_new_host_key, farm)
