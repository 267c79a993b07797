"""--target on the commands that measure or read a system (`rtlab run`, `rtlab audit`)."""

from __future__ import annotations

from pathlib import Path

import click

from rtlab.errors import UserError
from rtlab.store import ExperimentRecord
from rtlab.targets import Remote, TargetSpec, parse_target


def target_options(f):
    """--target TARGET, --targets FILE, --accept-new-host-key (and the farm's hidden --farm)."""
    f = click.option("--farm", "farm_id", hidden=True)(f)
    f = click.option(
        "--accept-new-host-key",
        is_flag=True,
        help="a target not in known_hosts yet: record its host key (a changed key is refused)",
    )(f)
    f = click.option(
        "--targets",
        "targets_path",
        metavar="FILE",
        type=click.Path(dir_okay=False),
        help="where named targets are defined [default: ~/.config/rtlab/targets.toml]",
    )(f)
    f = click.option(
        "--target",
        metavar="TARGET",
        help="measure there: ssh://[user@]host[:port], labgrid:PLACE or a named target",
    )(f)
    return f


def _opened(remote: Remote) -> Remote:
    click.get_current_context().call_on_close(remote.close)  # also on errors and ^C
    return remote


def open_target(
    target: str | None,
    targets_path: str | None,
    accept_new_host_key: bool,
    farm_id: str | None = None,
) -> Remote | None:
    """The target given by --target, connected and with the probe copied there; None for
    this system. Closed (its private directory removed) when the command ends."""
    if target is None:
        if targets_path or accept_new_host_key:
            raise click.UsageError("--targets and --accept-new-host-key go with --target")
        return None
    spec = parse_target(target, Path(targets_path) if targets_path else None)
    return _opened(Remote(spec, accept_new_host_key, farm_id))


def resume_target(
    rec: ExperimentRecord, target: str | None, accept_new_host_key: bool
) -> Remote | None:
    """The target an experiment was run on, connected again for `rtlab run --resume`."""
    if target is not None:
        raise click.UsageError("--resume continues on the target the experiment was run on")
    recorded = rec.manifest.target
    if not recorded:
        return None
    if not isinstance(recorded, dict):
        raise UserError(f"{rec.id}: experiment.json: 'target' is not a target")
    spec = TargetSpec.from_dict(recorded.get("spec"), f"{rec.id}: experiment.json target")
    farm = recorded.get("farm") if isinstance(recorded.get("farm"), str) else None
    return _opened(Remote(spec, accept_new_host_key, farm))
