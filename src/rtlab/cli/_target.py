"""--target on the commands that measure or read a system (`rtlab run`, `rtlab audit`)."""

from __future__ import annotations

from pathlib import Path

import click

from rtlab.cli._common import CommandFn
from rtlab.store import ExperimentRecord
from rtlab.targets import Target, reopen_target
from rtlab.targets import open_target as open_named


def target_options(f: CommandFn) -> CommandFn:
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
        help=(
            "measure there: ssh://[user@]host[:port], labgrid:PLACE, vm:KERNEL[?options] "
            "(a kernel booted in a virtual machine) or a named target"
        ),
    )(f)
    return f


def _opened(target: Target) -> Target:
    click.get_current_context().call_on_close(target.close)  # also on errors and ^C
    return target


def open_target(
    target: str | None,
    targets_path: str | None,
    accept_new_host_key: bool,
    farm_id: str | None = None,
) -> Target:
    """The target given by --target, connected and with the probe copied there; this
    machine without --target. Closed (its private directory removed) when the command
    ends."""
    if target is None and (targets_path or accept_new_host_key):
        raise click.UsageError("--targets and --accept-new-host-key go with --target")
    path = Path(targets_path) if targets_path else None
    return _opened(open_named(target, path, accept_new_host_key, farm_id))


def resume_target(rec: ExperimentRecord, target: str | None, accept_new_host_key: bool) -> Target:
    """The target an experiment was run on, connected again for `rtlab run --resume`."""
    if target is not None:
        raise click.UsageError("--resume continues on the target the experiment was run on")
    where = f"{rec.id}: experiment.json"
    return _opened(reopen_target(rec.manifest.target, where, accept_new_host_key))
