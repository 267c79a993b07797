"""rtlab tune: apply the audit's runtime fixes, journalled so that reset undoes them exactly."""

from __future__ import annotations

import os
import signal
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rtlab._output import json_text
from rtlab.cli._common import DURATION, console, line, lit, print_json, rich_table, visible
from rtlab.cli._system import rt_cpus_option, system_tree
from rtlab.errors import UnsupportedError, UserError
from rtlab.system import LIVE_ROOT, SysRoot, format_cpulist, read_facts
from rtlab.tune import (
    ALREADY,
    CHANGED,
    FOREIGN,
    GONE,
    OURS,
    REFUSED_NOW,
    RESTORED,
    Changer,
    Journal,
    Outcome,
    Plan,
    apply_plan,
    plan,
    tuning_summary,
)
from rtlab.tune._plan import not_made, root_label
from rtlab.tune._settings_run import KIND as SETTINGS
from rtlab.tune._settings_run import CaseSettings
from rtlab.units import format_ns

KIND = "tune"
DMA_LATENCY = "/dev/cpu_dma_latency"
STYLE = {
    CHANGED: "green",
    ALREADY: "cyan",
    REFUSED_NOW: "bold red",
    OURS: "green",
    RESTORED: "cyan",
    FOREIGN: "bold yellow",
    GONE: "yellow",
}


@click.group("tune")
def tune_group() -> None:
    """Apply the audit's runtime fixes with undo: plan, apply, status, reset.

    Every original value is journalled (under $RTLAB_STATE, else /var/lib/rtlab) before
    it is changed; `rtlab tune reset` puts back what is still rtlab's.
    """


def _plan_options(fn: Callable) -> Callable:
    for deco in reversed(
        [
            click.option("--rt-cpus", metavar="LIST", help="real-time CPUs (default: isolated)"),
            click.option(
                "--profile",
                type=click.Choice(["latency", "balanced"]),
                default="latency",
                show_default=True,
                help="how far to go (idle states, THP, minimum frequency)",
            ),
            click.option("--deadline", type=DURATION, help="latency requirement (idle states)"),
            click.option("--root", "root_dir", metavar="DIR", help="a captured or synthetic tree"),
            click.option("--only", metavar="ID,…", help="only the knobs of these audit checks"),
            click.option(
                "--allow-rt-unthrottled",
                is_flag=True,
                help="also set kernel.sched_rt_runtime_us=-1 (a runaway SCHED_FIFO task "
                "then keeps its CPU)",
            ),
            click.option("--json", "as_json", is_flag=True, help="JSON on stdout"),
        ]
    ):
        fn = deco(fn)
    return fn


def _make_plan(opts: dict[str, Any]) -> tuple[Any, Plan]:
    root = system_tree(opts["root_dir"], None) or LIVE_ROOT
    cpus = rt_cpus_option(opts["rt_cpus"], root)
    only = opts["only"].split(",") if opts["only"] is not None else None
    facts = read_facts(root, cpus)
    p = plan(
        root,
        facts,
        rt_cpus=cpus,
        profile=opts["profile"],
        deadline_ns=opts["deadline"],
        only=only,
        allow_rt_unthrottled=opts["allow_rt_unthrottled"],
    )
    return root, p


def _file(path: str) -> str:
    return "/" + path.lstrip("/")


def _val(text: str | None) -> str:
    return "-" if text is None else " ".join(text.split())


def _print_plan(p: Plan) -> None:
    out = console()
    where = "this system" if p.live else p.root
    deadline = f"; deadline {format_ns(p.deadline_ns)}" if p.deadline_ns else ""
    out.print(
        line(
            ("Tuning plan", "bold"),
            f" for {where}: profile {p.profile}; real-time CPUs {format_cpulist(p.rt_cpus)} "
            f"({p.rt_source}); housekeeping CPUs {format_cpulist(p.housekeeping)}{deadline}",
        )
    )
    if p.writes:
        rows = [[w.check, _file(w.path), _val(w.current), w.new] for w in p.writes]
        out.print(rich_table(None, ["check", "file", "now", "new"], rows, right_from=99))
        whys = dict.fromkeys(f"{w.check}: {w.why}" for w in p.writes)
        for why in whys:
            out.print(line(f"  why {why}"))
    else:
        out.print(line("No runtime setting to write."))
    if p.tasks:
        out.print(line(("Tasks kept off the real-time CPUs", "bold"),
                       " (CPU affinity; changed on the live system only):"))  # fmt: skip
        rows = [[t.check, str(t.pid), t.comm, t.current, t.new] for t in p.tasks]
        out.print(rich_table(None, ["check", "pid", "name", "allowed now", "new"], rows, 99))
    if p.notes:
        out.print(line(("Not planned", "bold")))
        for n in p.notes:
            out.print(line(f"  {n.check} ({n.family}): {n.reason}"))
    _print_boot(p)
    for w in p.warnings:
        click.echo(f"rtlab: warning: {visible(w)}", err=True)


def _print_boot(p: Plan) -> None:
    b = p.boot
    if not b.changes:
        return
    out = console()
    out.print(line(("Boot-time changes", "bold"), " (printed, never written by rtlab):"))
    if b.cmdline:
        out.print(line("  kernel command line, add (replacing an earlier value of a parameter):"))
        out.print(line("    ", (b.cmdline, "bold")), soft_wrap=True)  # exact: never wrapped
    if b.kconfig:
        out.print(line("  kernel configuration:"))
        for opt in b.kconfig:
            out.print(line(f"    {opt}"), soft_wrap=True)
    if b.advice:
        out.print(line("  also:"))
        for a in b.advice:
            out.print(line(f"    {a.check}: {a.text}"))


def _outcome_rows(outs: list[Outcome]) -> list[list[Any]]:
    return [
        [lit(o.state, STYLE.get(o.state, "")), o.check, _target(o), _val(o.original),
         _val(o.new), _val(o.current) if o.current is not None else "-", o.detail]
        for o in outs
    ]  # fmt: skip


def _target(o: Outcome) -> str:
    return _file(o.target) if o.op in ("file", "mkdir") else o.target


HEADERS = ["state", "check", "file or task", "original", "rtlab's", "now", "detail"]


@tune_group.command("plan")
@_plan_options
def plan_cmd(**opts: Any) -> int:
    """Print the writes that would fix the audit's runtime findings; nothing is written.

    Also the boot-time changes (kernel command line, kernel configuration), which rtlab
    never writes. Exit status: 0, or 2 on bad input.
    """
    _, p = _make_plan(opts)
    if opts["as_json"]:
        print_json(p.to_dict())
    else:
        _print_plan(p)
    return 0


@tune_group.command("apply")
@_plan_options
@click.option("--dry-run", is_flag=True, help="print what would be written; write nothing")
def apply_cmd(dry_run: bool, **opts: Any) -> int:
    """Make the plan's writes, each original journalled (fsynced) before it is changed.

    Writes already in place are left alone, so applying twice changes nothing the second
    time. Exit status: 0 when every planned write was made or was already in place,
    1 when the kernel refused some (they are listed), 2 on bad input, 3 without root on
    the live system.
    """
    root, p = _make_plan(opts)
    if dry_run:
        if opts["as_json"]:
            print_json({"dry_run": True, "plan": p.to_dict()})
        else:
            _print_plan(p)
            console().print(line(("Dry run: nothing written.", "bold")))
        return 0
    if p.live and os.geteuid() != 0:
        raise UnsupportedError("rtlab tune apply changes kernel settings: run it as root")
    path = root.root if isinstance(root, SysRoot) else Path(p.root)
    journal = Journal.open_or_create(KIND, p.root)
    outs = apply_plan(p, Changer(path, journal))
    if not journal.entries:
        journal.remove()  # nothing changed: nothing to undo
    bad = not_made(outs)
    kept = journal.path if journal.entries else None
    for w in p.warnings:
        click.echo(f"rtlab: warning: {visible(w)}", err=True)
    if opts["as_json"]:
        print_json({
            "plan": p.to_dict(),
            "outcomes": [o.to_dict() for o in outs],
            "journal": str(kept) if kept else None,
            "summary": tuning_summary(outs),
            "not_made": len(bad),
        })  # fmt: skip
        return 1 if bad else 0
    out = console()
    if outs:
        out.print(rich_table("Applied", HEADERS, _outcome_rows(outs), right_from=99))
    counts = {s: sum(o.state == s for o in outs) for s in (CHANGED, ALREADY, REFUSED_NOW)}
    text = ", ".join(f"{n} {s}" for s, n in counts.items())
    out.print(line(f"{text}; {len(bad)} not made; {tuning_summary(outs)}"))
    if kept:
        out.print(line(f"journal: {kept} (undo with rtlab tune reset)"))
    _print_boot(p)
    return 1 if bad else 0


def _journal(root_dir: str | None) -> tuple[Journal | None, Path]:
    path = Journal.path_for(KIND)
    j = Journal.load(path)
    if j is not None and root_dir is not None:
        want = root_label(system_tree(root_dir, None) or LIVE_ROOT)
        if j.header.get("root") != want:
            raise UserError(
                f"--root {root_dir}: the journal {path} is for root {j.header.get('root')!r}"
            )
    return j, path


def _changer(j: Journal) -> Changer:
    root = j.header.get("root")
    if not isinstance(root, str) or not root.startswith("/"):
        raise UserError(f"{j.path}: the journal names no root directory")
    return Changer(Path(root), j)


@tune_group.command("status")
@click.option("--root", "root_dir", metavar="DIR", help="the tree the journal must be for")
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout")
def status_cmd(root_dir: str | None, as_json: bool) -> int:
    """What rtlab changed and where each change stands now (against the journal).

    "rtlab's" is still as rtlab wrote it; "changed by someone else" is flagged and reset
    will leave it alone. Exit status: 0, or 2 on bad input or a damaged journal.
    """
    j, path = _journal(root_dir)
    outs = _changer(j).status() if j else []
    sj = Journal.load(Journal.path_for(SETTINGS))
    settings = _changer(sj).status() if sj else []
    if as_json:
        print_json({
            "journal": str(path) if j else None,
            "root": j.header.get("root") if j else None,
            "changes": [o.to_dict() for o in outs],
            "settings": [o.to_dict() for o in settings],
        })  # fmt: skip
        return 0
    out = console()
    if sj is not None:
        out.print(line(("Experiment settings", "bold"), f": {len(settings)} change(s) of a case "
                       f"of `rtlab run` (running, or killed) journalled in {sj.path}"))  # fmt: skip
        if settings:
            out.print(rich_table(None, HEADERS, _outcome_rows(settings), right_from=99))
    if j is None:
        out.print(line(f"Nothing tuned: no journal at {path}."))
        return 0
    out.print(line(("Tuned", "bold"), f": {len(outs)} change(s) of root {j.header.get('root')}"
                   f" journalled in {path}"))  # fmt: skip
    if outs:
        out.print(rich_table(None, HEADERS, _outcome_rows(outs), right_from=99))
    return 0


@tune_group.command("reset")
@click.option("--root", "root_dir", metavar="DIR", help="the tree the journal must be for")
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout")
def reset_cmd(root_dir: str | None, as_json: bool) -> int:
    """Put back every journalled value that is still rtlab's, newest first.

    Works after a crash in the middle of apply or of an earlier reset, and puts back the
    experiment settings (sysctl.* keys) of a case of an `rtlab run` that was killed
    (not those of a run still running). Values changed by
    someone else since are reported and left alone, and the journal is kept for them.
    Exit status: 0 when everything was restored (or there was nothing to restore) and
    the journal removed, 1 when something was not restored or the journal could not be
    removed (e.g. immutable; said so), 2 on bad input or a damaged journal.
    """
    j, path = _journal(root_dir)
    outs: list[Outcome] = CaseSettings().leftover() or []  # a killed run's, newest: first
    if j is None:
        Journal.clear_torn(path)
    else:
        changer = _changer(j)
        outs += changer.reset()
        for o in outs:
            if o.op == "file" and o.state == RESTORED:
                o.current = changer.read(o.target)  # what is there now, not what was
    left = [o for o in outs if o.state not in (RESTORED, GONE)]
    kept = j.remove_error if j is not None and not left else None
    if kept:
        click.echo(f"rtlab: everything restored, but the journal {visible(path)} could not be "
                   f"removed ({kept}): remove it by hand", err=True)  # fmt: skip
    if as_json:
        print_json({
            "journal": str(path) if j else None,
            "outcomes": [o.to_dict() for o in outs],
            "restored": not left,
            "journal_kept": j is not None and (bool(left) or kept is not None),
            "journal_error": kept,
        })  # fmt: skip
        return 1 if left or kept else 0
    out = console()
    if j is None and not outs:
        out.print(line(f"Nothing to reset: no journal at {path}."))
        return 0
    if outs:
        out.print(rich_table("Reset", HEADERS, _outcome_rows(outs), right_from=99))
    if left:
        out.print(line((f"{len(left)} change(s) not restored", "bold red"),
                       f"; the journal is kept: {path}"))  # fmt: skip
        return 1
    if kept:
        out.print(line(f"Everything restored ({len(outs)} change(s)); ",
                       (f"the journal could not be removed ({kept})", "bold red")))  # fmt: skip
        return 1
    out.print(line(f"Everything restored ({len(outs)} change(s)); journal removed."))
    return 0


@tune_group.command("hold-latency")
@click.argument("us", metavar="US", type=click.IntRange(0, 2_000_000_000))
@click.option("--json", "as_json", is_flag=True, help="one JSON line when held, one when released")
def hold_latency_cmd(us: int, as_json: bool) -> int:
    """Hold /dev/cpu_dma_latency at US microseconds until SIGINT or SIGTERM.

    While held, cpuidle picks no idle state whose exit latency exceeds US (0: none but
    polling). The kernel drops the request when this process ends, however it ends.
    Exit status: 0 when released by a signal, 2 on a bad US, 3 when the device cannot be
    opened (no PM QoS, or not root).
    """
    try:
        fd = os.open(DMA_LATENCY, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        raise UnsupportedError(f"{DMA_LATENCY}: {e.strerror or e}") from None
    # Handlers, not a blocked mask: library threads (BLAS) would take a blocked signal
    # with its default action. The handler's exception ends the wait wherever it is.
    previous = {s: signal.signal(s, _release) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            os.write(fd, struct.pack("=i", us))  # an s32, as the PM QoS interface takes it
        except OSError as e:
            raise UnsupportedError(f"{DMA_LATENCY}: {e.strerror or e}") from None
        effective = _effective(fd)
        _say(as_json, {"held_us": us, "effective_us": effective, "pid": os.getpid()},
             f"holding {DMA_LATENCY} at {us} µs (effective limit "
             f"{'?' if effective is None else effective} µs; PID {os.getpid()}); "
             "SIGINT or SIGTERM releases it")  # fmt: skip
        while True:
            signal.pause()
    except _Released as r:
        name = signal.Signals(r.signum).name
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(fd)  # the kernel drops the request
    _say(as_json, {"released": True, "signal": name}, f"released {DMA_LATENCY} ({name})")
    return 0


class _Released(Exception):  # a signal, not an error
    def __init__(self, signum: int) -> None:
        self.signum = signum


def _release(signum: int, frame: object) -> None:
    raise _Released(signum)


def _effective(fd: int) -> int | None:
    """The kernel's aggregated CPU latency limit (µs), read back from the device."""
    try:
        data = os.pread(fd, 4, 0)
    except OSError:
        return None
    return struct.unpack("=i", data)[0] if len(data) == 4 else None


def _say(as_json: bool, doc: dict[str, Any], text: str) -> None:
    click.echo(json_text(doc) if as_json else text)
