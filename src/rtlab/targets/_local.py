"""This machine as a target: the live system tree, the probe rtlab runs (`find_probe`),
and the settings only this machine can apply for a run: `--tuned` and partitions."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.probe import (
    Catalog,
    ProbeOutcome,
    check_call,
    find_probe,
    probe_catalog,
    run_probe,
)
from rtlab.probecall import Outputs, ProbeCall
from rtlab.records import CaseRecord
from rtlab.system import LIVE_ROOT, Root
from rtlab.targets._base import CheckFn, ProgressFn, SayFn, Target

if TYPE_CHECKING:
    from rtlab.experiment import Experiment
    from rtlab.tune._partition_use import Placement


class LocalTarget(Target):
    """Here: the probe runs as a child of rtlab."""

    name = "local"
    applies_settings = True

    def __init__(self, probe: Path | None = None) -> None:
        self._probe = probe
        self._placements: dict[str, Placement] = {}

    @property
    def probe(self) -> Path:
        if self._probe is None:
            self._probe = find_probe()
        return self._probe

    @property
    def root(self) -> Root:
        return LIVE_ROOT

    @property
    def catalog(self) -> Catalog:
        return probe_catalog(self.probe)

    def checker(self, calls: list[ProbeCall]) -> CheckFn:
        probe = self.probe
        return lambda call: check_call(call, probe)

    def place(self, exp: Experiment, partition: str | None, say: SayFn) -> None:
        from rtlab.tune._partition_use import place_cases

        place_cases(exp.cases, partition, exp.notes)

    def tuned(self, exp: Experiment, say: SayFn) -> contextlib.AbstractContextManager[Any]:
        from rtlab.tune._during import tuned

        return tuned(exp, say)

    def check_settings(self, cases: list[CaseRecord], trial: bool) -> None:
        from rtlab.tune._settings import writes
        from rtlab.tune._settings_run import CaseSettings, check_writes

        every = []
        for case in cases:
            ws = writes(case.params, self.root)
            check_writes(ws, Path("/"))
            every.append(ws)
        if trial:
            CaseSettings().trial(every)

    def case_settings(self, case: CaseRecord) -> contextlib.AbstractContextManager[Any]:
        from rtlab.tune._settings import writes
        from rtlab.tune._settings_run import CaseSettings

        return CaseSettings().applied(writes(case.params, self.root))

    def recover_settings(self, say: SayFn) -> None:
        from rtlab.tune._settings_run import CaseSettings

        CaseSettings().recover(say)

    def _placement(self, case: CaseRecord) -> Placement | None:
        """Where a case marked by place() starts (resumed cases too); UserError when its
        partition is gone."""
        name = case.params.get("partition")
        if not name:
            return None
        if name not in self._placements:
            from rtlab.tune._partition import load
            from rtlab.tune._partition_use import placement

            self._placements[name] = placement(load(name))
        return self._placements[name]

    def run_case(
        self,
        case: CaseRecord,
        call: ProbeCall,
        document: Path,
        raw: Path | None,
        on_progress: ProgressFn | None = None,
    ) -> ProbeOutcome:
        pl = self._placement(case)
        if pl is not None:
            call = call.adding(*pl.options)
        outputs = Outputs(str(document), None if raw is None else str(raw))
        start_in = pl.start_in if pl is not None else None
        return run_probe(call, outputs, on_progress, self.probe, cgroup=start_in)
