"""rtlab audit: what in this system will hurt real-time behaviour, with evidence and the fix."""

from __future__ import annotations

import os
from pathlib import Path

import click

from rtlab import __version__
from rtlab.cli._common import DURATION, console, line, lit, print_json, rich_table, visible
from rtlab.cli._target import open_target
from rtlab.errors import UserError
from rtlab.system import (
    FAIL,
    INFO,
    LIVE_ROOT,
    OK,
    WARN,
    Context,
    Root,
    SysRoot,
    audit_document,
    exit_status,
    format_cpulist,
    load_snapshot,
    parse_cpulist,
    read_facts,
    run_audit,
)
from rtlab.system._capture import capture
from rtlab.system._kconfig_fragment import kconfig_fragment, settings
from rtlab.units import format_ns

STYLE = {OK: "green", INFO: "cyan", WARN: "yellow", FAIL: "bold red"}


def _root(root_dir: str | None, from_file: str | None) -> Root:
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
    return LIVE_ROOT


def _rt_cpus(text: str | None, root: Root) -> list[int] | None:
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


def _kconfig_target(text: str) -> Path:
    """The fragment's path, refused (one line, exit 2) before any work when it cannot be written."""
    path = Path(text)
    if path.is_dir():
        raise UserError(f"--kconfig {text}: is a directory")
    if path.exists() and not path.is_file():
        raise UserError(f"--kconfig {text}: not a regular file")
    if path.exists() and not os.access(path, os.W_OK):
        raise UserError(f"--kconfig {text}: not writable")
    parent = path.parent
    if not parent.is_dir():
        raise UserError(f"--kconfig {text}: no such directory {parent}")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"--kconfig {text}: cannot create files in {parent}")
    return path


def _write_atomic(path: Path, text: str) -> None:
    """Write beside PATH, then rename: readers never see half a fragment."""
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UserError(f"--kconfig {path}: cannot write ({e.strerror or e})") from None


@click.command()
@click.option("--root", "root_dir", metavar="DIR", help="audit a captured or synthetic / tree")
@click.option(
    "--from", "from_file", metavar="FILE", help="audit a document of `rtlab-probe sysinfo --json`"
)
@click.option(
    "--target",
    "target_spec",
    metavar="TARGET",
    help="audit there: ssh://[user@]host[:port], labgrid:PLACE or a named target",
)
@click.option(
    "--targets",
    "targets_path",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="where named targets are defined [default: ~/.config/rtlab/targets.toml]",
)
@click.option(
    "--accept-new-host-key",
    is_flag=True,
    help="a target not in known_hosts yet: record its host key (a changed key is refused)",
)
@click.option("--json", "as_json", is_flag=True, help='JSON on stdout: {"facts", "findings"}')
@click.option("--deadline", type=DURATION, help="latency requirement, e.g. 100us (idle states)")
@click.option("--rt-cpus", metavar="LIST", help="the real-time CPUs (default: the isolated ones)")
@click.option(
    "--capture",
    "capture_dir",
    metavar="DIR",
    help="copy the files the audit reads into DIR (a fixture tree) instead of auditing",
)
@click.option(
    "--kconfig",
    metavar="FILE",
    help="write a kernel config fragment for the kernel findings to FILE (- for stdout)",
)
def audit(
    root_dir: str | None,
    from_file: str | None,
    target_spec: str | None,
    targets_path: str | None,
    accept_new_host_key: bool,
    as_json: bool,
    deadline: int | None,
    rt_cpus: str | None,
    capture_dir: str | None,
    kconfig: str | None,
) -> int:
    """Check kernel, boot parameters and settings for real-time readiness.

    Each finding is OK, INFO, WARN or FAIL with the file and value read, the fix and why.
    --kconfig writes the kernel findings as a fragment for scripts/kconfig/merge_config.sh.
    Exit status: 0 without FAIL findings, 1 with, 2 on bad input.
    """
    target = None
    if kconfig is not None:
        if capture_dir:
            raise click.UsageError("--kconfig and --capture exclude each other")
        if kconfig == "-" and as_json:
            raise click.UsageError("--kconfig - and --json both write to standard output")
        target = None if kconfig == "-" else _kconfig_target(kconfig)
    if target_spec is not None and (root_dir or from_file or capture_dir):
        raise click.UsageError("--target excludes --root, --from and --capture")
    remote = open_target(target_spec, targets_path, accept_new_host_key)
    root = remote.root if remote is not None else _root(root_dir, from_file)
    cpus = _rt_cpus(rt_cpus, root)
    if cpus is None and remote is not None:
        cpus = remote.rt_cpus  # the target's rt_cpus in targets.toml
    if capture_dir:
        if not isinstance(root, SysRoot):
            raise click.UsageError("--capture copies from a directory tree, not from --from")
        copied = capture(root, Path(capture_dir), cpus)
        click.echo(visible(f"{len(copied)} files from {root.describe()} copied into {capture_dir}"))
        return 0
    facts = read_facts(root, cpus)
    findings = run_audit(facts, Context(deadline_ns=deadline))
    fragment = (
        "" if kconfig is None else kconfig_fragment(facts, findings, root.describe(), __version__)
    )
    if kconfig == "-":
        click.echo(fragment, nl=False)
        return exit_status(findings)
    if target is not None:
        _write_atomic(target, fragment)
    if as_json:
        print_json(audit_document(facts, findings))
        return exit_status(findings)
    out = console()
    out.print(
        line(
            (root.describe(), "bold"),
            f": {facts.kernel_release or '?'}, "
            f"preemption {facts.preempt_model}, HZ={facts.hz or '?'}, "
            f"{facts.timer_mode or 'tick mode ?'}; real-time CPUs "
            f"{format_cpulist(facts.rt_cpus) or '?'} ({facts.rt_cpus_source})"
            + (f"; deadline {format_ns(deadline)}" if deadline else ""),
        )
    )
    rows = [[lit(x.status, STYLE[x.status]), x.id, x.title, x.evidence] for x in findings]
    out.print(rich_table(None, ["status", "check", "what", "evidence"], rows, right_from=99))
    todo = [x for x in findings if x.status != OK and x.fix]
    if todo:
        out.print()
        out.print(line(("What to change", "bold")))
    for x in sorted(todo, key=lambda x: (-[OK, INFO, WARN, FAIL].index(x.status), x.id)):
        out.print(line((x.status, STYLE[x.status]), f" {x.id}: {x.fix}"))
        out.print(line(f"     why: {x.why}"))
    counts = {s: sum(x.status == s for x in findings) for s in (FAIL, WARN, INFO, OK)}
    out.print("\n" + ", ".join(f"{n} {s}" for s, n in counts.items()))
    if target is not None:
        n = len(settings(fragment))
        out.print(line(f"kernel config fragment: {n} settings written to ", (str(target), "bold")))
    return exit_status(findings)
