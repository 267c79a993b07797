"""The system tree and real-time CPUs that `rtlab audit` and `rtlab tune` read:
--root DIR (a captured or synthetic tree), --from FILE (a sysinfo document), --rt-cpus."""

from __future__ import annotations

from pathlib import Path

import click

from rtlab.errors import UserError
from rtlab.system import Root, SysRoot, format_cpulist, load_snapshot, parse_cpulist


def system_tree(root_dir: str | None, from_file: str | None) -> Root | None:
    """The tree of --root or --from, None when neither is given (the target's)."""
    if root_dir and from_file:
        raise click.UsageError("--root and --from exclude each other")
    if from_file:
        return load_snapshot(from_file)
    if root_dir:
        path = Path(root_dir)
        if not path.is_dir():
            raise UserError(f"--root {root_dir}: not a directory")
        if not (path / "proc").is_dir() and not (path / "sys").is_dir():
            raise UserError(f"--root {root_dir}: has neither proc/ nor sys/ (not a system tree)")
        return SysRoot(path)
    return None


def rt_cpus_option(text: str | None, root: Root) -> list[int] | None:
    if text is None:
        return None
    try:
        cpus = parse_cpulist(text)
    except UserError as e:
        raise UserError(f"--rt-cpus {text}: {e}") from None
    if not cpus:
        raise UserError(f"--rt-cpus {text!r}: no CPU given")
    online = parse_cpulist(root.read("sys/devices/system/cpu/online") or "")
    if online and not set(cpus) <= set(online):
        missing = format_cpulist(set(cpus) - set(online))
        raise UserError(
            f"--rt-cpus {text}: CPU {missing} not online (online: {format_cpulist(online)})"
        )
    return cpus
