"""Run an experiment case by case with the probe, recording each case as it finishes."""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from rtlab._appaudit import case_app_audit
from rtlab.errors import InternalError, LostError, OutputError, SettingError
from rtlab.experiment import Experiment
from rtlab.probe import term_as_interrupt
from rtlab.probecall import Option, ProbeCall
from rtlab.progresslog import ProgressRecorder
from rtlab.records import CaseRecord, SeriesRecord, new_manifest
from rtlab.store import ExperimentRecord, Store, read_record, write_json_atomic
from rtlab.targets import Target


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
    target: Target,
    tuning: dict | None = None,
    label: str | None = None,
) -> ExperimentRecord:
    """Store EXP as a new experiment with the TARGET's fingerprint and audit (and the
    target itself, when it is not this machine); TUNING (`rtlab run --tuned`) names the
    tuning in effect, which names the setup, unless LABEL (`--label`) does."""
    cases = []
    for c in exp.cases:
        case = replace(c, params=dict(c.params))
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
    manifest.target = target.record()
    manifest.label = label
    system, audit = target.audit(exp.deadline_ns)
    if tuning is not None:
        system["tuning"] = audit["facts"]["tuning"] = tuning.get("summary", "untuned")
    exp_id = store.new_id(f"{exp.name} {target.id_name}") if target.id_name else None
    rec = store.create(manifest, exp.text, system, exp_id=exp_id)
    write_json_atomic(rec.path / "audit.json", audit)  # what `rtlab audit --json` prints
    return rec


def _discard(
    rec: ExperimentRecord, case: CaseRecord, status: str, reason: str | None = None
) -> None:
    """Forget a case that did not finish, so that --resume runs it again."""
    for path in (rec.path / "cases").glob(f"{case.slug}.*"):
        path.unlink()
    case.status, case.document, case.reason = status, None, reason
    rec.set_case(case)


def with_deadline(call: ProbeCall, deadline_ns: int | None) -> ProbeCall:
    """CALL told the experiment's deadline (the probe counts misses live), unless it gives
    the meter's own deadline or threshold."""
    if not deadline_ns or call.has("deadline", "threshold"):
        return call
    return call.adding(Option("deadline", f"{deadline_ns}ns", "deadline"))


def _both(first: Callable[[dict], None], second: Callable[[dict], None], line: dict) -> None:
    first(line)
    second(line)


def run_cases(store: Store, rec: ExperimentRecord, display: Display, target: Target) -> RunResult:
    """Run every case not done yet. Stops at the first interruption (^C, SIGTERM), keeping
    every case that finished. Holds the experiment's lock: a second run of the same
    experiment (two --resume at once) fails with a UserError naming the first."""
    with store.lock(rec):
        rec.manifest = read_record(rec.path).manifest  # as the previous holder left it
        return _run_locked(store, rec, display, target)


def _run_locked(store: Store, rec: ExperimentRecord, inner: Display, target: Target) -> RunResult:
    todo = [c for c in rec.cases if not c.done]
    display = ProgressRecorder(inner)  # results/<id>/progress.jsonl, for `rtlab watch`
    display.start(rec, todo)
    ran, interrupted = 0, False
    app_audit = None
    previous = signal.signal(signal.SIGTERM, term_as_interrupt)
    try:
        for case in todo:
            doc = rec.path / "cases" / f"{case.slug}.json"
            raw = doc.with_suffix(".raw") if case.params.get("raw") else None
            if case.call is None:
                raise InternalError(f"case {case.index} ({case.name}) has no probe call")
            call = with_deadline(case.call, rec.deadline_ns)
            display.case_start(case)
            app_audit = case_app_audit(target, case)  # app and attach cases: while it runs
            progress = functools.partial(display.progress, case)
            if app_audit is not None:
                progress = functools.partial(_both, progress, app_audit.progress)
            try:
                with target.case_settings(case):  # sysctl.* and tune keys, put back after
                    outcome = target.run_case(case, call, doc, raw, progress)
            except KeyboardInterrupt:
                outcome = None
            except SettingError as e:  # refused, or not put back: the run stops here
                _discard(rec, case, "failed", str(e))
                display.case_done(case, None)
                kept = sum(c.done for c in rec.cases)
                raise SettingError(
                    f"case {case.index} ({case.name}): {e}; the run stopped, {kept} of "
                    f"{len(rec.cases)} cases kept (rtlab run --resume {rec.id} continues)"
                ) from None
            except (LostError, OutputError) as e:  # this case failed, the others stay
                _discard(rec, case, "failed", str(e))
                display.case_done(case, None)
                kept = sum(c.done for c in rec.cases)
                raise type(e)(
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
            if app_audit is not None:
                app_audit.finish(doc)
            case.status, case.reason = "done", None
            case.document = f"cases/{doc.name}"
            rec.set_case(case)
            ran += 1
            display.case_done(case, doc)
    except KeyboardInterrupt:
        interrupted = True  # between two cases: every finished case is already recorded
    finally:
        if app_audit is not None:  # a case that did not finish stores none
            app_audit.abandon()
        signal.signal(signal.SIGTERM, previous)
        display.stop()
        store.index(rec)
    return RunResult(rec, interrupted, ran)
