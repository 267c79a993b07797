"""What every target offers, this machine included: the system tree the audit reads, the
probe's catalog, a check of the cases, one case run with its progress stream and its
documents brought back, and, where the target can, settings applied for a run
(`--tuned`, `--partition`). Callers never ask where a target is."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.errors import SettingError, UserError
from rtlab.probe import Catalog, ProbeOutcome, Refusal
from rtlab.probecall import ProbeCall
from rtlab.records import CaseRecord
from rtlab.system import Root, audit_system
from rtlab.system._approot import ProcessRoot
from rtlab.tune import setting_keys

if TYPE_CHECKING:
    from rtlab.experiment import Experiment

ProgressFn = Callable[[dict[str, Any]], None]
CheckFn = Callable[[ProbeCall], Refusal | None]
SayFn = Callable[[str], None]


class Target(ABC):
    """Where the cases of a run are measured."""

    #: What outputs call it ("local", a targets-file name, "vm-6.1.0-rt")
    name: str = "local"
    #: `--tuned` and `--partition` can be applied there
    applies_settings: bool = False

    @property
    @abstractmethod
    def root(self) -> Root:
        """The system tree its audit and experiment expansion read (CPUs, isolation)."""

    @property
    @abstractmethod
    def catalog(self) -> Catalog:
        """What its probe accepts."""

    @property
    def rt_cpus(self) -> list[int] | None:
        """Its real-time CPUs when its definition names them (targets.toml `rt_cpus`)."""
        return None

    @property
    def id_name(self) -> str | None:
        """What the ids of its experiments carry besides the experiment's name."""
        return None

    def record(self) -> dict[str, Any] | None:
        """What an experiment's manifest keeps of it (`--resume` opens it again)."""
        return None

    def processes_now(self) -> Root:
        """Its processes as they are now (they come and go), each one's /proc/PID/stat at
        least: the live tree here."""
        return self.root

    def process_root(self, pids: list[int]) -> ProcessRoot:
        """What the application audit of PIDS reads there: its root for the system, the
        processes' files read again after the window (here: the live files)."""
        return ProcessRoot(self.root, pids, lambda: self.root)

    @property
    def virtualization(self) -> dict[str, Any] | None:
        """What the host knows of the virtual machine it is (None: read from its files)."""
        return None

    def audit(self, deadline_ns: int | None) -> tuple[dict[str, Any], dict[str, Any]]:
        """Its fingerprint (system.json, with its name as the board's target) and audit
        (audit.json)."""
        system, audit = audit_system(self.root, deadline_ns, self.rt_cpus, self.virtualization)
        system["board"]["target"] = self.name
        return system, audit

    @abstractmethod
    def checker(self, calls: list[ProbeCall]) -> CheckFn:
        """A check of probe calls by its probe (CALLS: every one to be checked, so that a
        target can check them in one go)."""

    def place(self, exp: Experiment, partition: str | None, say: SayFn) -> None:
        """Put the cases where they are measured (`--partition NAME`, or a partition the
        cases' CPUs lie in); a target without partitions refuses a NAME."""
        if partition is not None:
            raise UserError(f"--partition acts on this system, not on target {self.name}")

    def tuned(self, exp: Experiment, say: SayFn) -> contextlib.AbstractContextManager[Any]:
        """`--tuned`: a context applying the tuning for the run and resetting it after,
        yielding what was done."""
        raise UserError(f"--tuned acts on this system, not on target {self.name}")

    def check_settings(self, cases: list[CaseRecord], trial: bool) -> None:
        """Refuse runtime settings (sysctl.*, tune's check IDs) the cases cannot have here:
        a target that cannot apply them refuses any; TRIAL: each value is also written
        once and put back (before the first case)."""
        for case in cases:
            keys = setting_keys(case.params)
            if keys:
                raise SettingError(
                    f"case {case.index} ({case.name}): {keys[0]}: experiment settings are "
                    f"applied on this system only (as `rtlab tune`), not on target {self.name}"
                )

    def case_settings(self, case: CaseRecord) -> contextlib.AbstractContextManager[Any]:
        """A context in which CASE's runtime settings are in effect, put back after it."""
        self.check_settings([case], trial=False)
        return contextlib.nullcontext()

    def recover_settings(self, say: SayFn) -> None:  # noqa: B027 (most hold none)
        """Put back runtime settings a killed run left in effect here."""

    @abstractmethod
    def run_case(
        self,
        case: CaseRecord,
        call: ProbeCall,
        document: Path,
        raw: Path | None,
        on_progress: ProgressFn | None = None,
    ) -> ProbeOutcome:
        """Measure CASE (as CALL) there; its document ends up at DOCUMENT (and its raw
        samples beside RAW). ^C or SIGTERM stops the probe: the outcome says interrupted."""

    def close(self) -> None:  # noqa: B027 (most targets hold nothing to close)
        """Leave nothing behind there."""

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
