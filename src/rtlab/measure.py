"""The course of `rtlab run`, wherever it measures: the experiment expanded for its target
and checked by the target's probe, the settings the target applies for the run
(`--tuned`, `--partition`), the record, the cases, and the report."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rtlab.errors import UserError
from rtlab.experiment import Experiment, load_experiment, validate_with_probe
from rtlab.probecall import Option
from rtlab.runner import Display, RunResult, new_record, run_cases
from rtlab.store import ExperimentRecord, Store, write_json_atomic
from rtlab.targets import Target

if TYPE_CHECKING:  # rtlab.report brings matplotlib: imported when a report is written
    from rtlab.report import Report

SayFn = Callable[[str], None]


@dataclass
class Settings:
    """What `rtlab run` is asked besides the experiment."""

    scale: float = 1.0
    deadline_ns: int | None = None  # overrides the experiment's
    explain_ns: int | None = None  # --explain: trace and explain samples above it
    raw: bool = False  # every sample kept
    tuned: bool = False  # the target applies its tuning for the run
    partition: str | None = None  # the target's partition the cases run in
    label: str | None = None  # --label: the name of the setup (records.check_label)


@dataclass
class Measured:
    """How a run went: the record, whether it was interrupted, and its report."""

    record: ExperimentRecord
    interrupted: bool
    ran: int
    report: Report | None = None  # the report written, if one was
    report_error: str | None = None  # why none was written


def plan(source: str, target: Target, settings: Settings, say: SayFn) -> Experiment:
    """The experiment SOURCE expanded on TARGET (its CPUs, its probe's options), with the
    settings, every case checked by the target's probe, each placed where it runs."""
    if (settings.tuned or settings.partition) and not target.applies_settings:
        what = "--tuned" if settings.tuned else "--partition"
        raise UserError(f"{what} acts on this system, not on target {target.name}")
    exp = load_experiment(source, settings.scale, target.root, target.catalog)
    if settings.deadline_ns is not None:
        exp.deadline_ns = settings.deadline_ns
    if settings.explain_ns is not None:
        explain_cases(exp, settings.explain_ns, say)
    validate_with_probe(exp, target.checker([c.call for c in exp.cases if c.call]))
    target.check_settings(exp.cases, trial=False)  # the files are there and writable
    target.place(exp, settings.partition, say)
    return exp


def explain_cases(exp: Experiment, threshold_ns: int, say: SayFn) -> None:
    """--explain: the cases whose meter can explain its samples trace their CPUs."""
    skipped = 0
    for c in exp.cases:
        meter = exp.catalog.meter(c.call.meter) if exp.catalog and c.call else None
        if c.call is None or meter is None or not meter.explainable:
            skipped += 1
        elif not c.call.has("explain"):
            value = f"{threshold_ns}ns"
            c.call = c.call.adding(Option("explain", value, "explain"))
            c.params["explain"] = value
    if skipped == len(exp.cases):
        can = ", ".join(m.name for m in exp.catalog.meters if m.explainable) if exp.catalog else ""
        raise UserError(f"--explain: no case of this experiment has a meter that can ({can})")
    if skipped:
        say(f"note: --explain: {skipped} case(s) of other meters are not explained")


def measure(
    store: Store,
    exp: Experiment,
    target: Target,
    settings: Settings,
    display: Display,
    say: SayFn,
) -> Measured:
    """Record EXP as a new experiment and run its cases on TARGET, with its tuning applied
    for the run when asked (reset after, also on ^C and errors); then the report. Runtime
    settings a killed run left are put back first; the cases' own are each tried once."""
    target.recover_settings(say)
    target.check_settings(exp.cases, trial=True)
    tuning = target.tuned(exp, say) if settings.tuned else contextlib.nullcontext(None)
    with tuning as done:
        rec = new_record(store, exp, settings.raw, target, tuning=done, label=settings.label)
        result = run_cases(store, rec, display, target)
    if done is not None:
        write_json_atomic(rec.path / "tuning.json", done)  # with how the reset went
    return _reported(result, settings.deadline_ns)


def resume(
    store: Store,
    rec: ExperimentRecord,
    target: Target,
    deadline_ns: int | None,
    display: Display,
    say: SayFn = lambda text: None,
) -> Measured:
    """Run the cases of REC not done yet, on the target it was run on (runtime settings a
    killed run left put back first, the cases' own checked and tried once)."""
    target.recover_settings(say)
    target.check_settings([c for c in rec.cases if not c.done], trial=True)
    return _reported(run_cases(store, rec, display, target), deadline_ns)


def _reported(result: RunResult, deadline_ns: int | None) -> Measured:
    """The report of a run that was not interrupted. The results are stored already: a
    report that cannot be written does not fail the run."""
    out = Measured(result.record, result.interrupted, result.ran)
    if result.interrupted:
        return out
    from rtlab.report import write_report

    rec = result.record
    try:
        out.report = write_report([rec], rec.path / "report.html", deadline_ns=deadline_ns)
    except UserError as e:
        out.report_error = str(e)
    return out
