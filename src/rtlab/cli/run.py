"""rtlab run: run an experiment (a preset or a TOML file) and store every case."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Group
from rich.live import Live
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from rtlab.cli._common import (
    DURATION,
    console,
    line,
    print_json,
    results_option,
    scale_option,
    store_from,
    verdict,
    verdict_fields,
    visible,
    warn_store,
)
from rtlab.cli._target import open_target, resume_target, target_options
from rtlab.errors import UserError
from rtlab.experiment import Experiment, preset_names
from rtlab.measure import Measured, Settings, measure, plan, resume
from rtlab.probecall import probe_argv
from rtlab.records import CaseRecord, check_label
from rtlab.results import effective_deadline, experiment_conditions, stats_rows
from rtlab.runner import Display
from rtlab.store import ExperimentRecord, Store
from rtlab.units import format_ns

if TYPE_CHECKING:  # rtlab.report brings matplotlib: imported when a report is written
    from rtlab.report import Report

THROUGHPUT = "throughput"


class RichDisplay(Display):
    """Overall progress with ETA, the current case, live per-thread min/avg/max."""

    def __init__(self) -> None:
        self.console = console(err=True)
        self.bars = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
        )
        self.live: Live | None = None
        self.threads = Table.grid(padding=(0, 2))
        self.case_base = 0.0

    def start(self, rec: ExperimentRecord, todo: list[CaseRecord]) -> None:
        self.total = sum(c.expected_s for c in todo) or 1.0
        self.task = self.bars.add_task(visible(f"{rec.id}: {len(todo)} cases"), total=self.total)
        self.case_task = self.bars.add_task("", total=1.0)
        self.live = Live(
            Group(self.bars, self.threads),
            console=self.console,
            refresh_per_second=4,
            transient=False,
        )
        self.live.start()

    def case_start(self, case: CaseRecord) -> None:
        self.case_started = time.monotonic()
        self.expected = case.expected_s or 1.0
        self.bars.update(
            self.case_task,
            description=visible(f"  {case.series}: {case.name}"),
            completed=0,
            total=self.expected,
        )
        self._threads([])

    def _threads(self, threads: list[dict]) -> None:
        grid = Table.grid(padding=(0, 2))
        for i, t in enumerate(threads):
            if t.get("count"):
                grid.add_row(
                    f"  T{i}",
                    f"{t['count']:>9} cycles",
                    "min " + format_ns(t["min_ns"]),
                    "avg " + format_ns(t["mean_ns"]),
                    "max " + format_ns(t["max_ns"]),
                )
        if self.live:
            self.live.update(Group(self.bars, grid))

    def progress(self, case: CaseRecord, line: dict) -> None:
        done = min(time.monotonic() - self.case_started, self.expected)
        self.bars.update(self.case_task, completed=done)
        self.bars.update(self.task, completed=self.case_base + done)
        self._threads(line.get("threads", []))

    def case_done(self, case: CaseRecord, doc_path: Path | None) -> None:
        self.case_base += case.expected_s
        self.bars.update(self.task, completed=self.case_base)

    def stop(self) -> None:
        if self.live:
            self.live.stop()


class PlainDisplay(Display):
    """One line per case, for logs and CI (no terminal)."""

    def start(self, rec: ExperimentRecord, todo: list[CaseRecord]) -> None:
        self.n, self.i = len(todo), 0
        click.echo(
            visible(f"{rec.id}: {self.n} cases, about {sum(c.expected_s for c in todo):.0f} s"),
            err=True,
        )

    def case_start(self, case: CaseRecord) -> None:
        self.i += 1
        self.last: dict = {}
        click.echo(visible(f"[{self.i}/{self.n}] {case.series}: {case.name} ..."), err=True)

    def progress(self, case: CaseRecord, line: dict) -> None:
        self.last = line

    def case_done(self, case: CaseRecord, doc_path: Path | None) -> None:
        threads = [t for t in self.last.get("threads", []) if t.get("count")]
        if threads:
            mx = max(t["max_ns"] for t in threads)
            click.echo(
                f"    {case.status}: {sum(t['count'] for t in threads)} samples, "
                f"max {format_ns(mx)}",
                err=True,
            )
        else:
            click.echo(f"    {case.status}", err=True)


@click.command()
@click.argument("experiment", required=False)
@scale_option
@click.option(
    "--deadline", type=DURATION, help="latency requirement, e.g. 100us; exit 1 if exceeded"
)
@click.option("--raw", is_flag=True, help="capture every sample (exact statistics, rank tests)")
@click.option(
    "--explain",
    type=DURATION,
    metavar="DUR",
    help="trace the measured CPUs and explain samples above DUR (see `rtlab explain`)",
)
@click.option("--resume", "resume_id", metavar="ID", help="continue an interrupted experiment")
@click.option(
    "--tuned",
    is_flag=True,
    help="apply `rtlab tune` for the run and reset it afterwards (also on ^C and errors)",
)
@click.option(
    "--partition",
    is_flag=False,
    flag_value="rt",
    metavar="[NAME]",
    help="measure in `rtlab partition` NAME (default rt): every case on its real-time CPUs",
)
@click.option(
    "--label",
    metavar="NAME",
    help="name the setup in every table and figure (default: what differs between setups)",
)
@target_options
@results_option
@click.option("--out", "out_dir", hidden=True, type=click.Path(file_okay=False))
@click.option(
    "--check", "check_only", is_flag=True, help="validate and list the cases, run nothing"
)
@click.option(
    "--json", "as_json", is_flag=True, help="JSON on stdout: the stored id, cases, verdict"
)
def run(
    experiment: str | None,
    scale: float,
    deadline: int | None,
    raw: bool,
    explain: int | None,
    resume_id: str | None,
    tuned: bool,
    partition: str | None,
    label: str | None,
    target: str | None,
    targets_path: str | None,
    accept_new_host_key: bool,
    farm_id: str | None,
    results_dir: str,
    out_dir: str | None,
    check_only: bool,
    as_json: bool,
) -> int:
    """Run EXPERIMENT: a preset (standard, quick, policies, stress, kernel-vs-user,
    mechanisms, response, noise, throughput, ...) or a TOML file. `throughput` is the
    suite of `rtlab bench throughput` with its defaults.

    Every case is checked before anything runs. Finished cases are kept when
    the run is interrupted; --resume ID continues it. With a deadline (--deadline
    or the experiment's own) the exit status is 1 when any case's maximum exceeds it.
    Progress goes to stderr.
    """
    store = store_from(out_dir or results_dir)
    display = RichDisplay() if sys.stderr.isatty() else PlainDisplay()
    if resume_id:
        if experiment:
            raise click.UsageError("give an EXPERIMENT or --resume ID, not both")
        if tuned:
            raise click.UsageError("--tuned applies to a new run, not to --resume")
        if partition:
            raise click.UsageError("--partition: resumed cases keep the partition they had")
        if label is not None:
            raise click.UsageError("--label names a new run, not --resume")
        rec = store.open(resume_id)
        if rec.complete:
            click.echo(f"{visible(rec.id)} is already complete", err=True)
            return _finish(rec, deadline, as_json, None, 0)
        where = resume_target(rec, target, accept_new_host_key)
        done = resume(store, rec, where, deadline, display, _say)
    else:
        if not experiment and partition:
            raise click.UsageError("missing EXPERIMENT (put it before --partition [NAME])")
        if not experiment:
            raise click.UsageError(f"missing EXPERIMENT (presets: {', '.join(preset_names())})")
        if experiment == THROUGHPUT and not Path(experiment).exists():
            # the throughput suite runs workloads, not probe cases: `rtlab bench throughput`
            from rtlab.cli.bench import throughput_cmd

            if target:
                raise click.UsageError("--target: the throughput suite runs on this system only")

            return click.get_current_context().invoke(
                throughput_cmd, scale=scale, results_dir=out_dir or results_dir, as_json=as_json
            )
        settings = Settings(
            scale,
            deadline,
            explain,
            raw,
            tuned,
            partition,
            None if label is None else check_label(label),
        )
        where = open_target(target, targets_path, accept_new_host_key, farm_id)
        exp = plan(experiment, where, settings, _say)
        if check_only:
            _print_check(exp, as_json)
            return 0
        done = measure(store, exp, where, settings, display, _say)
    return _outcome(store, done, deadline, as_json)


def _say(text: str) -> None:
    click.echo(visible(text), err=True)


def _outcome(store: Store, done: Measured, deadline: int | None, as_json: bool) -> int:
    """What the run did, the report written, the verdict; 130 when interrupted."""
    rec = done.record
    warn_store(store)
    if done.interrupted:
        click.echo(
            f"interrupted: {sum(c.done for c in rec.cases)} of "
            f"{len(rec.cases)} cases kept; continue with: rtlab run --resume {visible(rec.id)}",
            err=True,
        )
        if as_json:
            print_json(_summary(rec, None, done.ran, interrupted=True))
        return 130
    click.echo(f"{visible(rec.id)}: {done.ran} cases run, results in {visible(rec.path)}", err=True)
    if done.report is not None:
        click.echo(f"report: {visible(done.report.html)}", err=True)
    else:
        click.echo(f"rtlab: no report written: {visible(done.report_error)}", err=True)
    if not rec.complete:
        raise UserError(f"{rec.id}: some cases did not finish")
    return _finish(rec, deadline, as_json, done.report, done.ran)


def _summary(rec: ExperimentRecord, report: Path | None, ran: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": rec.id,
        "path": str(rec.path),
        "cases": len(rec.cases),
        "done": sum(c.done for c in rec.cases),
        "ran": ran,
        "complete": rec.complete,
        "report": None if report is None else str(report),
        **extra,
    }


def _finish(
    rec: ExperimentRecord, deadline: int | None, as_json: bool, written: Report | None, ran: int
) -> int:
    """The verdict against the deadline in effect: exit 1 when it is exceeded, 6 when a
    case's conditions were not met. The statistics come from the report just WRITTEN, or
    are computed when there is none."""
    dl = effective_deadline(rec, deadline)
    if dl is None:
        rows = []
    elif written is not None:
        rows = written.experiments[0].verdict_rows()
    else:
        rows = stats_rows(rec, dl)
    virt = rec.manifest.virtualization
    conditions = (
        written.experiments[0].conditions if written is not None else experiment_conditions(rec)
    )
    status, verdict_line = verdict(rows, dl, virt, conditions)
    if as_json:
        report = None if written is None else written.html
        fields = verdict_fields(status, dl, virt, conditions)
        print_json(_summary(rec, report, ran, interrupted=False, deadline_ns=dl, **fields))
    elif verdict_line is not None:
        console(err=True).print(verdict_line)
    return status


def _print_check(exp: Experiment, as_json: bool) -> None:
    total = sum(c.expected_s for c in exp.cases)
    if as_json:
        print_json(
            {
                "cases": [
                    {"index": c.index, "series": c.series, "name": c.name, "args": _argv(c)}
                    for c in exp.cases
                ],
                "expected_s": total,
            }
        )
        return
    out = console()
    for c in exp.cases:
        out.print(line(f"{c.index:3d} {c.series}: {c.name}  rtlab-probe {' '.join(_argv(c))}"))
    click.echo(f"{len(exp.cases)} cases, about {total:.0f} s")


def _argv(case: CaseRecord) -> list[str]:
    return probe_argv(case.call) if case.call is not None else []
