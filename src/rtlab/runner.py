"""Run an experiment case by case with the probe, recording each case as it finishes."""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rtlab.errors import InternalError, LostError
from rtlab.experiment import Experiment
from rtlab.probe import run_probe
from rtlab.progresslog import ProgressRecorder
from rtlab.records import CaseRecord, SeriesRecord, new_manifest
from rtlab.store import ExperimentRecord, Store, read_record, write_json_atomic
from rtlab.system import audit_system

if TYPE_CHECKING:
    from rtlab.targets import Remote


@dataclass
class RunResult:
    record: ExperimentRecord
    interrupted: bool
    ran: int


class Display:
    """What the runner tells the user; the CLI provides a rich implementation."""

    def start(self, rec: ExperimentRecord, todo: list[CaseRecord]) -> None: ...
    def case_start(self, case: CaseRecord) -> None: ...
    def progress(self, case: CaseRecord, line: dict) -> None: ...
    def case_done(self, case: CaseRecord, doc_path: Path | None) -> None: ...
    def stop(self) -> None: ...


def new_record(
    store: Store,
    exp: Experiment,
    raw: bool,
    tuning: dict | None = None,
    target: Remote | None = None,
) -> ExperimentRecord:
    """Store EXP as a new experiment with this system's fingerprint and audit; TUNING
    (`rtlab run --tuned`) names the tuning in effect, which names the setup. On a TARGET
    (`rtlab run --target`) the fingerprint and audit are the target's, and it is recorded."""
    cases = []
    for c in exp.cases:
        case = replace(c, params=dict(c.params), args=list(c.args))
        if raw:
            case.params["raw"] = True
        cases.append(case)
    manifest = new_manifest(
        name=exp.name,
        description=exp.description,
        source=exp.source,
        scale=exp.scale,
        deadline_ns=exp.deadline_ns,
        notes=exp.notes,
        series=[
            SeriesRecord(s["name"], s.get("description", ""), list(s.get("sweep", {})))
            for s in exp.series
        ],
        cases=cases,
    )
    if target is not None:
        manifest.target = target.record()
        system, audit = target.audit(exp.deadline_ns)
    else:
        system, audit = audit_system(deadline_ns=exp.deadline_ns)
    if tuning is not None:
        system["tuning"] = audit["facts"]["tuning"] = tuning.get("summary", "untuned")
    exp_id = store.new_id(f"{exp.name} {target.name}") if target is not None else None
    rec = store.create(manifest, exp.text, system, exp_id=exp_id)
    write_json_atomic(rec.path / "audit.json", audit)  # what `rtlab audit --json` prints
    return rec


def _term_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _discard(
    rec: ExperimentRecord, case: CaseRecord, status: str, reason: str | None = None
) -> None:
    """Forget a case that did not finish, so that --resume runs it again."""
    for path in (rec.path / "cases").glob(f"{case.slug}.*"):
        path.unlink()
    case.status, case.document, case.reason = status, None, reason
    rec.set_case(case)


def run_cases(
    store: Store, rec: ExperimentRecord, display: Display, probe_runner: Callable = run_probe
) -> RunResult:
    """Run every case not done yet. Stops at the first interruption (^C, SIGTERM), keeping
    every case that finished. Holds the experiment's lock: a second run of the same
    experiment (two --resume at once) fails with a UserError naming the first."""
    with store.lock(rec):
        rec.manifest = read_record(rec.path).manifest  # as the previous holder left it
        return _run_locked(store, rec, display, probe_runner)


def _run_locked(
    store: Store, rec: ExperimentRecord, display: Display, probe_runner: Callable
) -> RunResult:
    todo = [c for c in rec.cases if not c.done]
    display = ProgressRecorder(display)  # results/<id>/progress.jsonl, for `rtlab watch`
    display.start(rec, todo)
    ran, interrupted = 0, False
    previous = signal.signal(signal.SIGTERM, _term_as_interrupt)
    try:
        for case in todo:
            doc = rec.path / "cases" / f"{case.slug}.json"
            args = list(case.args)
            given = {a.partition("=")[0] for a in args}
            if rec.deadline_ns and not given & {"--deadline", "--threshold"}:
                args += ["--deadline", f"{rec.deadline_ns}ns"]  # the probe counts misses live
            if case.params.get("raw"):
                args += ["--raw", str(rec.path / "cases" / f"{case.slug}.raw")]
            display.case_start(case)
            try:
                outcome = probe_runner(args, doc, lambda line, c=case: display.progress(c, line))
            except KeyboardInterrupt:
                outcome = None
            except LostError as e:  # the target went away: this case failed, the others stay
                _discard(rec, case, "failed", str(e))
                display.case_done(case, None)
                kept = sum(c.done for c in rec.cases)
                raise LostError(
                    f"case {case.index} ({case.name}) failed: {e}; {kept} of {len(rec.cases)} "
                    f"cases kept, continue with: rtlab run --resume {rec.id}"
                ) from None
            if outcome is None or outcome.interrupted:
                _discard(rec, case, "interrupted")
                display.case_done(case, None)
                interrupted = True
                break
            if outcome.document is None:
                _discard(rec, case, "failed")
                display.case_done(case, None)
                reason = outcome.stderr.strip() or "no document written"
                raise InternalError(f"case {case.index} ({case.name}) failed: {reason}")
            case.status, case.reason = "done", None
            case.document = f"cases/{doc.name}"
            rec.set_case(case)
            ran += 1
            display.case_done(case, doc)
    except KeyboardInterrupt:
        interrupted = True  # between two cases: every finished case is already recorded
    finally:
        signal.signal(signal.SIGTERM, previous)
        display.stop()
        store.index(rec)
    return RunResult(rec, interrupted, ran)
