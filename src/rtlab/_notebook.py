"""Notebook API: rtlab.load("results/ID") -> Experiment."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.errors import UserError
from rtlab.records import CaseRecord
from rtlab.store import ExperimentRecord, Store

if TYPE_CHECKING:  # imported when used: pandas is an optional extra
    import numpy as np
    import pandas as pd


class Experiment:
    """A stored experiment: its cases, their statistics and raw samples."""

    def __init__(self, record: ExperimentRecord) -> None:
        self.record = record

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def cases(self) -> list[CaseRecord]:
        return self.record.done_cases

    @property
    def system(self) -> dict[str, Any]:
        return self.record.system()

    def document(self, case: CaseRecord | int | str) -> dict[str, Any]:
        return self.record.document(self._case(case))

    def stats(self, deadline_ns: int | None = None) -> list[dict[str, Any]]:
        """One row per case: series, case, swept values and every statistic (ns)."""
        from rtlab.results import stats_rows

        return stats_rows(self.record, deadline_ns)

    def samples(self, case: CaseRecord | int | str) -> np.ndarray:
        """Raw samples (ns, numpy int64) of a case captured with raw = true."""
        import numpy as np

        from rtlab.results import case_samples

        c = self._case(case)
        samples = case_samples(self.record, c)
        if samples is None:
            raise UserError(
                f"{self.id}: case {c.index} ({c.name}) has no raw samples (run with --raw)"
            )
        return samples[0] if len(samples) == 1 else np.concatenate(samples)

    def to_pandas(self, deadline_ns: int | None = None) -> pd.DataFrame:
        try:
            import pandas as pd
        except ImportError as e:
            raise UserError("to_pandas() needs pandas: pip install 'rtlab[pandas]'") from e
        return pd.DataFrame(self.stats(deadline_ns))

    def _case(self, case: CaseRecord | int | str) -> CaseRecord:
        if isinstance(case, CaseRecord):
            return case
        for c in self.cases:
            if case in (c.index, c.name, f"{c.series}/{c.name}"):
                return c
        raise UserError(f"{self.id}: no finished case {case!r}")

    def __repr__(self) -> str:
        return f"<rtlab.Experiment {self.id}: {len(self.cases)} cases>"


def load(path: str | Path) -> Experiment:
    """Open a stored experiment by directory (results/ID) or by ID in ./results."""
    path = Path(path)
    store = Store(path.parent if (path / "experiment.json").exists() else "results")
    return Experiment(store.open(str(path)))
