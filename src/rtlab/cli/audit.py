"""rtlab audit: what in this system will hurt real-time behaviour, with evidence and the fix."""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.console import Console

from rtlab import __version__
from rtlab.cli._common import DURATION, console, line, lit, print_json, rich_table, visible
from rtlab.cli._system import rt_cpus_option, system_tree
from rtlab.cli._target import open_target
from rtlab.errors import UserError
from rtlab.system import (
    FAIL,
    INFO,
    LIVE_ROOT,
    OK,
    WARN,
    Context,
    Finding,
    SysRoot,
    audit_document,
    exit_status,
    format_cpulist,
    read_facts,
    run_audit,
)
from rtlab.system._app import MAX_WINDOW_S, MIN_WINDOW_S, pids_of, read_app_facts
from rtlab.system._capture import capture
from rtlab.system._checks_app import app_document, run_app_audit
from rtlab.system._kconfig_fragment import VARIANTS, kconfig_fragment, settings
from rtlab.targets import Target
from rtlab.units import format_ns

STYLE = {OK: "green", INFO: "cyan", WARN: "yellow", FAIL: "bold red"}


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
    help="audit there: ssh://[user@]host[:port], labgrid:PLACE, vm:KERNEL[?options], a name",
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
@click.option(
    "--pid",
    "pids",
    type=int,
    multiple=True,
    metavar="PID",
    help="audit this running application's threads instead (repeatable)",
)
@click.option("--comm", metavar="NAME", help="audit the applications named NAME (/proc/PID/comm)")
@click.option(
    "--window",
    type=DURATION,
    default="2s",
    show_default=True,
    help="with --pid/--comm: how long faults, switches and migrations are counted",
)
@click.option(
    "--irq",
    "irqs",
    type=int,
    multiple=True,
    metavar="N",
    help="with --pid/--comm: an IRQ of the device the application waits for (repeatable)",
)
@click.option("--json", "as_json", is_flag=True, help='JSON on stdout: {"facts", "findings"}')
@click.option(
    "--deadline",
    type=DURATION,
    help="latency requirement, e.g. 100us (preemption model, idle states)",
)
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
@click.option(
    "--kconfig-variant",
    type=click.Choice(VARIANTS),
    help="debug: also the latency tracers; production: the tracers removed (with --kconfig)",
)
def audit(
    root_dir: str | None,
    from_file: str | None,
    target_spec: str | None,
    targets_path: str | None,
    accept_new_host_key: bool,
    pids: tuple[int, ...],
    comm: str | None,
    window: int,
    irqs: tuple[int, ...],
    as_json: bool,
    deadline: int | None,
    rt_cpus: str | None,
    capture_dir: str | None,
    kconfig: str | None,
    kconfig_variant: str | None,
) -> int:
    """Check kernel, boot parameters and settings for real-time readiness.

    Each finding is OK, INFO, WARN or FAIL with the file and value read, the fix and why.
    --kconfig writes the kernel findings as a fragment for scripts/kconfig/merge_config.sh.
    --pid/--comm audit a running application's threads instead: policy, priority,
    affinity, locked memory, and faults, switches and migrations during --window.
    Exit status: 0 without FAIL findings, 1 with, 2 on bad input.
    """
    if pids or comm is not None:
        others = {
            "--from": from_file, "--capture": capture_dir, "--kconfig": kconfig,
            "--deadline": deadline, "--rt-cpus": rt_cpus,
        }  # fmt: skip
        if given := [k for k, v in others.items() if v is not None]:
            raise click.UsageError(f"--pid/--comm audit a running process: not with {given[0]}")
        if target_spec is not None and root_dir:
            raise click.UsageError("--target excludes --root")
        check_app_options(list(pids), comm, window, list(irqs))
        where = None if root_dir else open_target(target_spec, targets_path, accept_new_host_key)
        return audit_app(list(pids), comm, window, list(irqs), root_dir, where, as_json)
    if irqs:
        raise click.UsageError("--irq needs --pid or --comm")
    target = None
    if kconfig_variant is not None and kconfig is None:
        raise click.UsageError("--kconfig-variant needs --kconfig")
    if kconfig is not None:
        if capture_dir:
            raise click.UsageError("--kconfig and --capture exclude each other")
        if kconfig == "-" and as_json:
            raise click.UsageError("--kconfig - and --json both write to standard output")
        target = None if kconfig == "-" else _kconfig_target(kconfig)
    if target_spec is not None and (root_dir or from_file or capture_dir):
        raise click.UsageError("--target excludes --root, --from and --capture")
    where = open_target(target_spec, targets_path, accept_new_host_key)
    tree = system_tree(root_dir, from_file)
    root = tree if tree is not None else where.root
    cpus = rt_cpus_option(rt_cpus, root)
    if cpus is None and tree is None:
        cpus = where.rt_cpus  # the target's rt_cpus in targets.toml
    if capture_dir:
        if not isinstance(root, SysRoot):
            raise click.UsageError("--capture copies from a directory tree, not from --from")
        copied = capture(root, Path(capture_dir), cpus)
        click.echo(visible(f"{len(copied)} files from {root.describe()} copied into {capture_dir}"))
        return 0
    facts = read_facts(root, cpus)
    if tree is None and where.virtualization is not None:
        facts.virtualization = where.virtualization  # the host knows (accel, its kernel)
    findings = run_audit(facts, Context(deadline_ns=deadline))
    fragment = (
        ""
        if kconfig is None
        else kconfig_fragment(facts, findings, root.describe(), __version__, kconfig_variant)
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
    print_findings(out, findings)
    if target is not None:
        n = len(settings(fragment))
        out.print(line(f"kernel config fragment: {n} settings written to ", (str(target), "bold")))
    return exit_status(findings)


def print_findings(out: Console, findings: list[Finding]) -> None:
    """The findings' table, then what to change, most severe first, and the counts."""
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


def check_app_options(pids: list[int], comm: str | None, window_ns: int, irqs: list[int]) -> None:
    """UserError for a value of --pid, --comm, --window or --irq out of range."""
    window_s = window_ns / 1e9
    if not MIN_WINDOW_S <= window_s <= MAX_WINDOW_S:
        raise UserError(
            f"--window: {window_s:g} s is out of range ({MIN_WINDOW_S:g}..{MAX_WINDOW_S:g} s)"
        )
    if any(p <= 0 or p > 2**31 - 1 for p in pids):
        raise UserError(f"--pid {min(pids)}: not a process ID")
    if any(n < 0 for n in irqs):
        raise UserError(f"--irq {min(irqs)}: not an IRQ number")
    if comm is not None and (not comm or len(comm) > 64):
        raise UserError(f"--comm {comm!r}: empty or longer than 64 characters")


def audit_app(
    pids: list[int],
    comm: str | None,
    window_ns: int,
    irqs: list[int],
    root_dir: str | None,
    where: Target | None,
    as_json: bool,
) -> int:
    """`rtlab audit --pid/--comm`: the application's threads over the window, in the
    tree ROOT_DIR or on the target WHERE (this machine, a board, a virtual machine)."""
    window_s = window_ns / 1e9
    tree = system_tree(root_dir, None)
    base = tree if tree is not None else where.root if where is not None else LIVE_ROOT
    if comm is not None:
        found = pids_of(base, comm)
        if not found:
            raise UserError(f"--comm {comm}: no process of that name on {base.describe()}")
        pids = pids + [p for p in found if p not in pids]
    pids = list(dict.fromkeys(pids))
    if where is None or tree is not None:
        facts = read_app_facts(base, pids, window_s)
    else:
        proot = where.process_root(pids)
        facts = read_app_facts(proot, pids, window_s, wait=proot.wait)
    root = base
    findings = run_app_audit(facts, irqs)
    if as_json:
        print_json(app_document(facts, findings))
        return exit_status(findings)
    out = console()
    names = ", ".join(
        f"{p['comm']} ({p['pid']}, {p['threads']} thread{'s' * (p['threads'] != 1)})"
        for p in facts.processes
    )
    s = facts.system
    out.print(
        line(
            (root.describe(), "bold"),
            f": {s.kernel_release or '?'}, preemption {s.preempt_model}; {names}; "
            f"window {window_s:g} s",
        )
    )
    for note in facts.notes:
        out.print(line(("note: ", "bold"), note))
    print_findings(out, findings)
    return exit_status(findings)
