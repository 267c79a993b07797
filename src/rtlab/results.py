"""Statistics of stored experiments: the bridge between the store and rtlab.analysis."""

from __future__ import annotations

import json
from typing import Any

from rtlab.analysis import CaseStats, document_case_stats, resolve_raw_file
from rtlab.store import CaseRecord, ExperimentRecord
from rtlab.system._setup import SETUP_FACTS, setup_description, setup_names  # noqa: F401

# Column order of every statistics table: key in CaseStats, header, is-a-duration.
COLUMNS: list[tuple[str, str, bool]] = [
    ("min", "min", True),
    ("mean", "avg", True),
    ("median", "median", True),
    ("p99", "p99", True),
    ("p999", "p99.9", True),
    ("max", "max", True),
    ("jitter", "jitter", True),
    ("stddev", "stddev", True),
    ("overruns", "overruns", False),
    ("deadline_misses", "misses", False),
]


def row_label(case: CaseRecord) -> str:
    """The swept value(s) that tell a case apart within its series."""
    if len(case.swept) == 1:
        return str(next(iter(case.swept.values())))
    return case.name


def case_stats(rec: ExperimentRecord, case: CaseRecord, deadline_ns: int | None) -> CaseStats:
    doc = rec.document(case)
    return document_case_stats(doc, (rec.path / case.document).parent, deadline_ns=deadline_ns)


def stats_rows(rec: ExperimentRecord, deadline_ns: int | None = None) -> list[dict[str, Any]]:
    """One row per finished case: series, case, swept values and the statistics."""
    deadline = deadline_ns if deadline_ns is not None else rec.manifest.get("deadline_ns")
    rows = []
    for case in rec.cases:
        if case.status != "done":
            continue
        stats = case_stats(rec, case, deadline)
        rows.append(
            {
                "experiment": rec.id,
                "series": case.series,
                "case": case.name,
                "label": row_label(case),
                "swept": case.swept,
                "index": case.index,
                **stats.to_dict(),
            }
        )
    return rows


def by_series(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["series"], []).append(row)
    return out


def case_samples(rec: ExperimentRecord, case: CaseRecord):
    """Raw samples of a case, one memory-mapped array per thread, or None without raw capture."""
    from rtlab.rawfile import open_samples

    base = (rec.path / case.document).parent
    paths = [resolve_raw_file(t, base) for t in rec.document(case)["threads"]]
    if not paths or None in paths:
        return None
    return [open_samples(p) for p in paths]


def setup_facts(rec: ExperimentRecord) -> dict[str, Any]:
    """The audit's facts (audit.json) when stored, else the fingerprint (system.json)."""
    try:
        facts = json.loads((rec.path / "audit.json").read_text()).get("facts")
    except (OSError, json.JSONDecodeError, AttributeError):
        facts = None
    return facts if isinstance(facts, dict) else rec.system()


def setup_labels(recs: list[ExperimentRecord]) -> list[str]:
    """Name each experiment by the system facts that differ between them (else by its id)."""
    return setup_names([setup_facts(r) for r in recs], [r.id for r in recs])


def setup_label(rec: ExperimentRecord) -> str:
    """What the system of one experiment was, e.g. "PREEMPT_RT · HZ=1000 · isolcpus=3"."""
    return setup_description(setup_facts(rec))
