"""rtlab partition: real-time and housekeeping CPU sets on cpusets (cgroup v1 or v2), undone
through their journal."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click

from rtlab.cli._common import console, line, print_json, rich_table, visible
from rtlab.errors import UserError
from rtlab.system import format_cpulist
from rtlab.tune import Journal
from rtlab.tune._apply import CHANGED, GONE, RESTORED, Outcome
from rtlab.tune._partition import IRQ_CHECKS, Created, check_name, create, journal_path, load
from rtlab.tune._partition import undo_changes as _undo
from rtlab.tune._partition_use import join, show

NAME = click.option("--name", default="rt", show_default=True, help="the partition's name")


@click.group("partition")
def partition_group() -> None:
    """Split the CPUs into a real-time and a housekeeping set (cpusets; journalled).

    create makes the sets and moves every task, IRQ and workqueue it can off the
    real-time CPUs; run starts a command inside the real-time set; show tells where it
    stands; undo puts everything back. The journal is
    $RTLAB_STATE/tune/partition-NAME.jsonl (default /var/lib/rtlab).
    """


@partition_group.command("create")
@click.option(
    "--rt", "rt_cpus", required=True, metavar="CPUS", help="the real-time CPUs, e.g. 3 or 2-3"
)
@NAME
@click.option(
    "--root", "root_dir", metavar="DIR", help="a / tree to work on instead of this system"
)
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout")
def create_cmd(rt_cpus: str, name: str, root_dir: str | None, as_json: bool) -> int:
    """Make partition NAME: the CPUS for real-time work, the others for housekeeping.

    cgroup v1: cpusets NAME (cpu_exclusive, no load balancing) and NAME-hk; every task
    the kernel lets go moves from the root cpuset to NAME-hk. cgroup v2: cgroup NAME as an
    isolated partition (root where isolated is refused). Both: IRQs and workqueue masks
    off CPUS. Exit status: 0, 2 bad input (CPUs not online, every CPU, a partition of that
    name), 3 no cpuset controller or a change the kernel refuses (then put back).
    """
    root = Path(root_dir) if root_dir else Path("/")
    if root_dir and not root.is_dir():
        raise UserError(f"--root {root_dir}: not a directory")
    res = create(rt_cpus, name, root)
    if as_json:
        print_json(res.to_dict())
        return 0
    _print_created(res)
    return 0


def _print_created(res: Created) -> None:
    p, out = res.partition, console()
    out.print(line(("partition " + p.name, "bold"), f": {p.hierarchy.describe()}"))
    how = f"partition {res.state}" if p.version == 2 else "cpu_exclusive, no load balancing"
    out.print(line(f"  real-time CPUs {format_cpulist(p.rt_cpus)} in /{p.rt} ({how})"))
    hk = f"  housekeeping CPUs {format_cpulist(p.hk_cpus)}"
    if p.version == 1:
        refused = f", {len(res.refused)} refused" if res.refused else ""
        out.print(line(f"{hk} in /{p.hk}: {res.moved} tasks moved, {res.per_cpu} per-CPU "
                       f"kernel threads stay{refused}, {res.gone} ended meanwhile"))  # fmt: skip
        for who, why in list(res.refused.items())[:10]:
            out.print(line(f"    refused: {who}: {why}"))
    else:
        out.print(line(f"{hk}: the rest of the root cgroup (the kernel moves nothing else there)"))
    irq = [o for o in res.outcomes if o.check in IRQ_CHECKS]
    moved = sum(o.state == CHANGED for o in irq)
    refused_irq = [o.target for o in irq if o.state not in (CHANGED, "already")]
    text = f"  IRQs and workqueue masks: {moved} moved off the real-time CPUs"
    if refused_irq:
        text += f", refused: {', '.join(_short(t) for t in refused_irq)}"
    out.print(line(text))
    if res.irq_note:
        out.print(line(f"    ({res.irq_note})"))
    out.print(line(f"  journal: {p.journal.path} (undo: rtlab partition undo --name {p.name})"))


def _short(target: str) -> str:
    parts = target.split("/")
    return f"IRQ {parts[2]}" if target.startswith("proc/irq/") and parts[2].isdigit() else target


@partition_group.command("show")
@NAME
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout")
def show_cmd(name: str, as_json: bool) -> int:
    """The partition: its cgroups and CPUs, the tasks in it, the cgroup version, and the
    journal's changes (still rtlab's, changed by someone else, refused). Exit 2 when there
    is no partition NAME."""
    info = show(load(check_name(name)))
    if as_json:
        print_json(info)
        return 0
    out = console()
    state = f", {info['state']}" if info["state"] else ""
    out.print(line((f"partition {info['name']}", "bold"),
                   f": {info['cgroup']} at /{info['mount']}, real-time CPUs {info['rt_cpus']} "
                   f"(effective {info['cpus_effective'] or '-'}{state})"))  # fmt: skip
    if not info["exists"]:
        out.print(line((f"  {info['rt_path']} is gone", "bold red"), "; undo clears the journal"))
    listed = ", ".join(f"{t['comm']} ({t['id']})" for t in info["tasks_listed"])
    out.print(
        line(f"  {info['rt_path']}: {info['tasks']} task(s)" + (f": {listed}" if listed else ""))
    )
    if info["hk_path"]:
        out.print(line(f"  {info['hk_path']}: {info['hk_tasks']} task(s) on the housekeeping "
                       f"CPUs {info['hk_cpus']}"))  # fmt: skip
    else:
        out.print(line(f"  housekeeping CPUs {info['hk_cpus']}: the rest of the root cgroup"))
    counts = ", ".join(f"{n} {s}" for s, n in sorted(info["changes"].items())) or "none"
    out.print(line(f"  journal {info['journal']} ({info['created_utc']}): changes {counts}; "
                   f"{info['refused']} refused by the kernel"))  # fmt: skip
    for o in info["changed_by_others"]:
        now = "moved elsewhere since" if o["op"] == "move" else f"now {o['current']!r}"
        out.print(line(("  changed by someone else: ", "yellow"), f"{o['target']}: {now}"))
    return 0


@partition_group.command(
    "run", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False}
)
@NAME
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- CMD [ARGS]...")
def run_cmd(name: str, command: tuple[str, ...]) -> int:
    """Run CMD inside the real-time set of partition NAME (rtlab moves itself there, then
    becomes CMD). Exit status: CMD's, or 2 when CMD is missing or not found."""
    if not command:
        raise UserError("partition run: no command given (rtlab partition run -- CMD ...)")
    exe = shutil.which(command[0])
    if exe is None:
        raise UserError(f"partition run: {command[0]!r}: command not found")
    join(load(check_name(name)))
    try:
        os.execv(exe, list(command))
    except OSError as e:
        raise UserError(f"partition run: {command[0]!r}: {e.strerror or e}") from None
    return 0  # not reached


@partition_group.command("undo")
@NAME
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout")
def undo_cmd(name: str, as_json: bool) -> int:
    """Put back what create changed, newest first: tasks to the cgroup they came from, IRQ
    and workqueue masks, the cgroups removed. Works after a crash in the middle of
    create or of an earlier undo. Exit status: 0 when everything is back (or there was
    nothing) and the journal removed, 1 when something is not back or the journal could
    not be removed (e.g. immutable; said so), 2 for a damaged journal."""
    path = journal_path(check_name(name))
    j = Journal.load(path)
    if j is None or not j.entries:  # none, or create was killed before its first change
        if j is None:
            Journal.clear_torn(path)
        else:
            j.remove()
        if as_json:
            print_json({"journal": None, "outcomes": [], "restored": True})
        else:
            console().print(line(f"Nothing to undo: no partition {name!r} ({path})."))
        return 0
    part = load(name)
    outs, complete = _undo(part)
    left = [o for o in outs if o.state not in (RESTORED, GONE)]
    kept = part.journal.remove_error if complete else None
    if kept:
        click.echo(f"rtlab: everything put back, but the journal {visible(path)} could not "
                   f"be removed ({kept}): remove it by hand", err=True)  # fmt: skip
    if as_json:
        print_json({"journal": str(path), "outcomes": [o.to_dict() for o in outs],
                    "restored": complete, "journal_kept": not complete or kept is not None,
                    "journal_error": kept})  # fmt: skip
        return 0 if complete and not kept else 1
    out = console()
    tally: dict[str, int] = {}
    for o in outs:
        tally[f"{o.op} {o.state}"] = tally.get(f"{o.op} {o.state}", 0) + 1
    out.print(line(f"partition {name}: " + ", ".join(f"{n} {k}" for k, n in sorted(tally.items()))))
    if left:
        out.print(rich_table("not put back", ["change", "target", "state", "detail"],
                             [_row(o) for o in left], right_from=99))  # fmt: skip
        out.print(line((f"{len(left)} change(s) not put back", "bold red"),
                       f"; the journal is kept: {visible(path)}"))  # fmt: skip
        return 1
    if kept:
        out.print(line(f"Everything put back ({len(outs)} change(s)); ",
                       (f"the journal could not be removed ({kept})", "bold red")))  # fmt: skip
        return 1
    out.print(line(f"Everything put back ({len(outs)} change(s)); journal removed."))
    return 0


def _row(o: Outcome) -> list[str]:
    return [o.op, o.target, o.state, o.detail or f"now {o.current!r}"]
