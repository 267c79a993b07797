"""rtlab watch: a live view of an experiment that `rtlab run` is running (here, perhaps
started in another terminal), from the progress file it writes."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.table import Table

from rtlab.cli._common import (
    console,
    line,
    lit,
    print_json_line,
    results_option,
    store_from,
    visible,
)
from rtlab.errors import UserError
from rtlab.progresslog import (
    PROGRESS_FILE,
    CaseView,
    Follower,
    WatchState,
    running_experiments,
)
from rtlab.store import ExperimentRecord, Store, read_record
from rtlab.units import format_ns

#: Seconds between two looks at the progress file (the probe writes 4 lines a second).
POLL_S = 0.25
#: Plain and JSON output: at most one snapshot per case per this much probe time.
SNAPSHOT_NS = 1_000_000_000


def thread_rows(probe: dict[str, Any], deadline_ns: int | None) -> list[dict[str, Any]]:
    """Per measuring thread: CPU, current/min/average/maximum latency, samples, deadline
    misses and the busy % of its CPU, from one progress line of the probe."""
    busy = probe.get("cpu_busy_pct")
    if not isinstance(busy, dict):
        busy = {}
    rows = []
    threads = probe.get("threads")
    for i, t in enumerate(threads if isinstance(threads, list) else []):
        if not isinstance(t, dict):
            continue
        cpu, count, mx = _int(t.get("cpu")), _int(t.get("count")) or 0, _int(t.get("max_ns"))
        misses = _int(t.get("misses"))
        if misses is None and deadline_ns is not None:  # a maximum above it: how many unknown
            misses = 0 if count == 0 or (mx is not None and mx <= deadline_ns) else None
        pct = busy.get(str(cpu)) if cpu is not None else probe.get("cpu_busy_pct_all")
        rows.append(
            {
                "thread": i,
                "cpu": cpu,
                "count": count,
                "last_ns": _int(t.get("last_ns")),
                "min_ns": _int(t.get("min_ns")),
                "mean_ns": _int(t.get("mean_ns")),
                "max_ns": mx,
                "misses": misses,
                "cpu_busy_pct": _num(pct),
            }
        )
    return rows


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _int(v: Any) -> int | None:
    """An int64 of a progress line, else None (a 400-digit number is no count or ns)."""
    ok = isinstance(v, int) and not isinstance(v, bool) and INT64_MIN <= v <= INT64_MAX
    return v if ok else None


def _num(v: Any) -> float | None:
    """A finite number of a progress line, else None."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def _phase(probe: dict[str, Any]) -> str | None:
    """The probe's phase ("settle", "measure"), a short string or None."""
    phase = probe.get("phase")
    return phase[:32] if isinstance(phase, str) else None


def _ns(v: int | None) -> str:
    return "-" if v is None else format_ns(v)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} %"


def _loads(rec: ExperimentRecord | None, index: int) -> list[str]:
    if rec is None or not 0 <= index < len(rec.cases):
        return []
    call = rec.cases[index].call
    return call.loads if call is not None else []


class View:
    """How the events are shown: a live table, plain lines or JSON lines."""

    def __init__(self, rec: ExperimentRecord | None) -> None:
        self.rec = rec
        self.last_ns: int | None = None

    def event(self, e: dict[str, Any], state: WatchState) -> None: ...
    def refresh(self, state: WatchState) -> None: ...
    def close(self, state: WatchState, how: str) -> None: ...
    def abort(self) -> None: ...

    def due(self, probe: dict[str, Any]) -> bool:
        """Plain and JSON output: the first, last and about one snapshot a second."""
        elapsed = _int(probe.get("elapsed_ns")) or 0
        if probe.get("phase") != "measure" or self.last_ns is None:
            self.last_ns = elapsed
            return True
        if elapsed - self.last_ns >= SNAPSHOT_NS:
            self.last_ns = elapsed
            return True
        return False


class JsonView(View):
    def _put(self, data: dict[str, Any]) -> None:
        print_json_line(data)

    def event(self, e: dict[str, Any], state: WatchState) -> None:
        c = state.case
        if c is None:
            return
        head = {"id": c.id, "index": c.index}
        kind = e["event"]
        if kind == "case":
            self.last_ns = None
            self._put(
                {
                    "event": "case",
                    **head,
                    "cases": c.cases,
                    "series": c.series,
                    "name": c.name,
                    "deadline_ns": c.deadline_ns,
                    "loads": _loads(self.rec, c.index),
                    "target": _where(self.rec).removeprefix(" on ") or None,
                }
            )
        elif kind == "progress" and self.due(c.probe):
            self._put(
                {
                    "event": "progress",
                    **head,
                    "phase": _phase(c.probe),
                    "elapsed_ns": _int(c.probe.get("elapsed_ns")),
                    "threads": thread_rows(c.probe, c.deadline_ns),
                    "cpu_busy_pct_all": _num(c.probe.get("cpu_busy_pct_all")),
                }
            )
        elif kind == "case_done":
            self._put({"event": "case_done", **head, "status": c.status})

    def close(self, state: WatchState, how: str) -> None:
        c = state.case
        self._put(
            {
                "event": "end",
                "id": c.id if c else None,
                "how": how,
                "done": _int(state.end.get("done")),
                "cases": c.cases if c else None,
            }
        )


class PlainView(View):
    def event(self, e: dict[str, Any], state: WatchState) -> None:
        c = state.case
        if c is None:
            return
        kind = e["event"]
        if kind == "case":
            self.last_ns = None
            loads = _loads(self.rec, c.index)
            click.echo(
                visible(
                    f"{c.id}{_where(self.rec)} [{c.index + 1}/{c.cases}] {c.series}: {c.name}"
                    + (f"  load {' '.join(loads)}" if loads else "")
                )
            )
        elif kind == "progress" and self.due(c.probe):
            elapsed = (_int(c.probe.get("elapsed_ns")) or 0) / 1e9
            for r in thread_rows(c.probe, c.deadline_ns):
                phase = visible(_phase(c.probe) or "?")
                click.echo(f"  {phase:7} {elapsed:6.1f}s {_plain_row(r)}")
        elif kind == "case_done":
            click.echo(visible(f"  {c.status}"))

    def close(self, state: WatchState, how: str) -> None:
        click.echo(visible(_end_line(state, how)))


def _plain_row(r: dict[str, Any]) -> str:
    cpu = "any" if r["cpu"] is None else r["cpu"]
    misses = "-" if r["misses"] is None else r["misses"]
    return (
        f"T{r['thread']} cpu {cpu}  cur {_ns(r['last_ns'])}  avg {_ns(r['mean_ns'])}"
        f"  max {_ns(r['max_ns'])}  samples {r['count']}  misses {misses}"
        f"  cpu busy {_pct(r['cpu_busy_pct'])}"
    )


def _end_line(state: WatchState, how: str) -> str:
    c = state.case
    name = c.id if c else "?"
    if how == "ended":
        done, total = _int(state.end.get("done")), c.cases if c else "?"
        return f"{name}: the run ended, {'?' if done is None else done} of {total} cases done"
    return f"{name}: the run stopped without finishing its progress file (killed?)"


class LiveView(View):
    """A table per thread, redrawn a few times a second on the terminal."""

    def __init__(self, rec: ExperimentRecord | None) -> None:
        super().__init__(rec)
        self.out = console()
        self.live = Live(console=self.out, refresh_per_second=4, transient=False)
        self.live.start()

    def refresh(self, state: WatchState) -> None:
        c = state.case
        if c is not None:
            self.live.update(self._render(c))

    def _render(self, c: CaseView) -> Group:
        p = c.probe
        elapsed = (_int(p.get("elapsed_ns")) or 0) / 1e9
        head = line(
            (c.id, "bold"),
            _where(self.rec),
            f"  case {c.index + 1} of {c.cases}  ",
            (f"{c.series}: {c.name}", "bold"),
            f"  {_phase(p) or 'starting'} {elapsed:.1f} s",
            f"  deadline {format_ns(c.deadline_ns)}" if c.deadline_ns else "",
        )
        table = Table(header_style="bold", box=None, padding=(0, 2))
        for i, h in enumerate(
            ["thread", "CPU", "current", "average", "maximum", "samples", "misses", "CPU busy"]
        ):
            table.add_column(h, justify="left" if i == 0 else "right")
        for r in thread_rows(p, c.deadline_ns):
            over = c.deadline_ns is not None and (r["max_ns"] or 0) > c.deadline_ns
            table.add_row(
                f"T{r['thread']}",
                "any" if r["cpu"] is None else str(r["cpu"]),
                _ns(r["last_ns"]),
                _ns(r["mean_ns"]),
                lit(_ns(r["max_ns"]), "bold red" if over else ""),
                f"{r['count']:,}",
                "-" if r["misses"] is None else f"{r['misses']:,}",
                _pct(r["cpu_busy_pct"]),
            )
        loads = _loads(self.rec, c.index)
        foot = line(
            f"all CPUs busy {_pct(_num(p.get('cpu_busy_pct_all')))}",
            f"  load {' '.join(loads)}" if loads else "  no load",
            f"  ({c.status})" if c.status else "",
        )
        return Group(head, table, foot)

    def abort(self) -> None:
        self.live.stop()

    def close(self, state: WatchState, how: str) -> None:
        self.refresh(state)
        self.live.stop()
        self.out.print(lit(_end_line(state, how)))


def _runs_on(rec: ExperimentRecord | None, spec: Any) -> bool:
    """REC was started with `rtlab run --target` SPEC (by its name or its URL)."""
    t = rec.manifest.target if rec is not None else None
    return isinstance(t, dict) and (t.get("name") == spec.name or t.get("url") == spec.url)


def _where(rec: ExperimentRecord | None) -> str:
    t = rec.manifest.target if rec is not None else None
    return f" on {t.get('name')}" if isinstance(t, dict) and t.get("name") else ""


def _read(path: Path) -> ExperimentRecord | None:
    try:
        return read_record(path)
    except UserError:
        return None


def _pick(
    store: Store, exp_id: str | None, target: str | None
) -> tuple[Path, ExperimentRecord | None]:
    """The progress file to follow and its experiment."""
    spec = None
    if target is not None:
        from rtlab.targets import parse_target  # only here: it brings the SSH layer

        spec = parse_target(target)
    if exp_id:
        rec = store.open(exp_id)
        path = rec.path / PROGRESS_FILE
        if spec is not None and not _runs_on(rec, spec):
            raise UserError(f"{rec.id} was not run on target {spec.name}")
        if not path.is_file():
            raise UserError(
                f"{rec.id}: nothing to watch (it has not been run by `rtlab run` here: "
                "no progress file)"
            )
        return path, rec
    running = [(d, _read(d)) for d in running_experiments(store.root)]
    if spec is not None:
        running = [(d, rec) for d, rec in running if _runs_on(rec, spec)]
    if not running:
        where = f" on target {spec.name}" if spec is not None else ""
        raise UserError(
            f"no experiment is running{where} in {store.root}/ "
            "(rtlab watch ID shows how a stored one ended; rtlab list lists them)"
        )
    if len(running) > 1:
        others = ", ".join(d.name + _where(rec) for d, rec in running[1:])
        click.echo(visible(f"note: also running: {others} (rtlab watch ID)"), err=True)
    return running[0][0] / PROGRESS_FILE, running[0][1]


@click.command()
@click.argument("exp_id", metavar="[ID]", required=False)
@results_option
@click.option(
    "--target",
    metavar="TARGET",
    help="the experiment `rtlab run --target TARGET` is running (ssh://…, labgrid:…, vm:…, a name)",
)
@click.option(
    "--json", "as_json", is_flag=True, help="JSON lines on stdout instead of the live view"
)
def watch(exp_id: str | None, results_dir: str, target: str | None, as_json: bool) -> int:
    """Live view of a running experiment (ID, else the one running in the results
    directory, or on --target): per thread its CPU, current, average and maximum
    latency, samples, deadline misses and how busy its CPU is (the load's achieved
    CPU %).

    It follows results/<id>/progress.jsonl, which `rtlab run` writes, so the run may
    have been started in another terminal. On a terminal the view is redrawn a few
    times a second; otherwise (or with --json) about one line per thread and second is
    printed. Ends when the run ends. Exit status 0; 2 when nothing is running (no ID)
    or ID has no progress file.
    """
    store = store_from(results_dir)
    path, rec = _pick(store, exp_id, target)
    if as_json:
        view: View = JsonView(rec)
    elif sys.stdout.isatty():
        view = LiveView(rec)
    else:
        view = PlainView(rec)
    follower, state, how = Follower(path), WatchState(), "ended"
    try:
        how = _follow(follower, state, view)
    except BaseException:
        view.abort()
        raise
    finally:
        follower.close()
    view.close(state, how)
    return 0


#: How long a progress file may stay empty (replaced, its first line not yet written).
EMPTY_S = 5.0


def _follow(follower: Follower, state: WatchState, view: View) -> str:
    """Show the events until the run ends ("ended") or its rtlab is gone ("stopped")."""
    empty = 0.0
    while True:
        for e in follower.poll():
            state.apply(e)
            view.event(e, state)
        view.refresh(state)
        if state.ended:
            return "ended"
        if state.case is None and empty < EMPTY_S:
            empty += POLL_S
        elif not state.running:
            while True:  # what it wrote before it stopped, to the end
                for e in follower.poll():
                    state.apply(e)
                    view.event(e, state)
                if follower.at_end:
                    break
            return "ended" if state.ended else "stopped"
        if follower.at_end:
            time.sleep(POLL_S)
