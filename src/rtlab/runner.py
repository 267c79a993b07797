"""Run an experiment case by case with the probe, recording each case as it finishes."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rtlab.errors import UserError
from rtlab.experiment import Experiment
from rtlab.probe import run_probe
from rtlab.store import CaseRecord, ExperimentRecord, Store
from rtlab.system import collect_fingerprint


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


def new_record(store: Store, exp: Experiment, raw: bool) -> ExperimentRecord:
    cases = []
    for c in exp.cases:
        params = dict(c.params)
        if raw:
            params["raw"] = True
        cases.append(
            CaseRecord(
                c.index, c.series, c.name, c.swept, params, c.args, expected_s=c.expected_s
            ).to_dict()
        )
    manifest = {
        "name": exp.name,
        "description": exp.description,
        "source": exp.source,
        "scale": exp.scale,
        "deadline_ns": exp.deadline_ns,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "complete": False,
        "notes": exp.notes,
        "series": [
            {
                "name": s["name"],
                "description": s.get("description", ""),
                "swept": list(s.get("sweep", {}).keys()),
            }
            for s in exp.series
        ],
        "cases": cases,
    }
    return store.create(manifest, exp.text, collect_fingerprint())


def run_cases(
    store: Store, rec: ExperimentRecord, display: Display, probe_runner: Callable = run_probe
) -> RunResult:
    """Run every case not done yet. Stops at the first interruption, keeping what finished."""
    todo = [c for c in rec.cases if c.status != "done"]
    display.start(rec, todo)
    ran, interrupted = 0, False
    try:
        for case in todo:
            doc = rec.path / "cases" / f"{case.index:03d}.json"
            args = list(case.args)
            if case.params.get("raw"):
                args += ["--raw", str(rec.path / "cases" / f"{case.index:03d}.raw")]
            display.case_start(case)
            outcome = probe_runner(args, doc, lambda line, c=case: display.progress(c, line))
            if outcome.interrupted or outcome.document is None:
                case.status = "interrupted" if outcome.interrupted else "failed"
                if outcome.document:
                    outcome.document.unlink()  # an incomplete case is re-run on --resume
                for raw in (rec.path / "cases").glob(f"{case.index:03d}.raw*"):
                    raw.unlink()
                case.document = None
                rec.set_case(case)
                display.case_done(case, None)
                if outcome.interrupted:
                    interrupted = True
                    break
                raise UserError(
                    f"case {case.index} ({case.name}) failed: "
                    f"{outcome.stderr.strip() or 'no document written'}"
                )
            case.status = "done"
            case.document = f"cases/{doc.name}"
            rec.set_case(case)
            ran += 1
            display.case_done(case, doc)
    finally:
        display.stop()
        store.index(rec)
    return RunResult(rec, interrupted, ran)
