"""Statistics of stored experiments: the one bridge between the store and rtlab.analysis.

Every output that shows a case's statistics (show, compare, the report, the notebook API)
gets them from `case_stats`, and every comparison from `compare_records`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rtlab.analysis import (
    CaseStats,
    Comparison,
    Conditions,
    MeterView,
    PivotCase,
    Share,
    Side,
    TailFit,
    Threshold,
    compare_sides,
    document_case_stats,
    fit_tail,
    judge_conditions,
    meter_rows,
    refused_fit,
    resolve_raw_file,
    share_below,
)
from rtlab.records import CaseRecord
from rtlab.store import ExperimentRecord
from rtlab.system import virt_label
from rtlab.system._setup import setup_description, setup_names

if TYPE_CHECKING:
    from rtlab.monitor import MonitorRecord


def effective_deadline(rec: ExperimentRecord, deadline_ns: int | None) -> int | None:
    """The deadline given now, else the experiment's own."""
    return deadline_ns if deadline_ns is not None else rec.deadline_ns


def case_stats(
    rec: ExperimentRecord,
    case: CaseRecord,
    deadline_ns: int | None,
    doc: dict[str, Any] | None = None,
) -> CaseStats:
    doc = rec.document(case) if doc is None else doc
    return document_case_stats(doc, rec.document_path(case).parent, deadline_ns=deadline_ns)


def all_case_stats(rec: ExperimentRecord, deadline_ns: int | None = None) -> dict[int, CaseStats]:
    """Statistics of every finished case by index, for outputs that show them twice."""
    deadline = effective_deadline(rec, deadline_ns)
    return {case.index: case_stats(rec, case, deadline) for case in rec.done_cases}


def stats_rows(
    rec: ExperimentRecord,
    deadline_ns: int | None = None,
    stats: dict[int, CaseStats] | None = None,
) -> list[dict[str, Any]]:
    """One row per finished case: series, case, swept values and the statistics (STATS:
    computed already, by all_case_stats with the same deadline)."""
    stats = all_case_stats(rec, deadline_ns) if stats is None else stats
    return [
        {
            "experiment": rec.id,
            "series": case.series,
            "case": case.name,
            "label": case.label,
            "swept": case.swept,
            "index": case.index,
            **stats[case.index].to_dict(),
        }
        for case in rec.done_cases
    ]


def view_rows(
    case: CaseRecord, doc: dict[str, Any], stats: CaseStats
) -> tuple[MeterView, list[dict[str, Any]]] | None:
    """The rows of one case in its meter's view (see rtlab.analysis.VIEWS), each with the
    case's series and label and, for a view of cases, its latency statistics."""
    found = meter_rows(doc)
    if found is None:
        return None
    view, rows = found
    head = {"series": case.series, "case": case.name, "label": case.label}
    latency = {k: getattr(stats, k) for k in view.latency}
    return view, [{**head, **latency, **r} for r in rows]


def meter_tables(
    rec: ExperimentRecord,
    deadline_ns: int | None = None,
    stats: dict[int, CaseStats] | None = None,
) -> list[tuple[MeterView, list[dict[str, Any]]]]:
    """One table per meter that has a view, in the order the meters first appear (STATS
    as for stats_rows)."""
    dl = effective_deadline(rec, deadline_ns)
    out: dict[str, tuple[MeterView, list[dict[str, Any]]]] = {}
    for case in rec.done_cases:
        doc = rec.document(case)
        st = stats[case.index] if stats is not None else case_stats(rec, case, dl, doc)
        found = view_rows(case, doc, st)
        if found is not None:
            view, rows = found
            out.setdefault(view.meter, (view, []))[1].extend(rows)
    return list(out.values())


def by_series(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        out.setdefault(row["series"], []).append(row)
    return out


def case_samples(rec: ExperimentRecord, case: CaseRecord) -> list[np.ndarray] | None:
    """Raw samples of a case, one memory-mapped array per thread, or None without raw capture."""
    from rtlab.rawfile import open_samples

    base = rec.document_path(case).parent
    threads = rec.document(case)["threads"]
    paths = [p for t in threads if (p := resolve_raw_file(t, base)) is not None]
    if not paths or len(paths) < len(threads):
        return None
    return [open_samples(p) for p in paths]


def case_below(rec: ExperimentRecord, case: CaseRecord, bound_ns: int) -> Share:
    """The share of CASE's samples at or below BOUND_NS (exact from raw samples)."""
    return share_below(rec.document(case), rec.document_path(case).parent, bound_ns)


#: Why a case without raw samples gets no pWCET (docs/pwcet.md, "Histograms").
NO_RAW = (
    "no raw samples: pWCET needs them in time order for its stationarity and independence "
    "gates, which a histogram cannot give (rerun with --raw)"
)


def case_tail(rec: ExperimentRecord, case: CaseRecord, confidence: float = 0.9) -> TailFit:
    """The extreme-value fit of a case's raw samples (its threads one after the other), or a
    fit that refuses and says why (no raw samples, samples lost)."""
    from rtlab.rawfile import open_samples

    threads = rec.document(case).get("threads") or []
    base = rec.document_path(case).parent
    paths = [p for t in threads if (p := resolve_raw_file(t, base)) is not None]
    if not paths or len(paths) < len(threads):
        return refused_fit(NO_RAW, confidence)
    lost = sum(int(t.get("raw_lost") or 0) for t in threads)
    if lost:
        return refused_fit(f"{lost} raw samples were lost: the time order has gaps", confidence)
    return fit_tail([open_samples(p) for p in paths], confidence=confidence)


def record_side(rec: ExperimentRecord, setup: str, deadline_ns: int | None) -> Side:
    """REC as one side of a comparison."""
    dl = effective_deadline(rec, deadline_ns)
    cache: dict[int, CaseStats] = {}

    def stats(case: CaseRecord) -> CaseStats:
        if case.index not in cache:
            cache[case.index] = case_stats(rec, case, dl)
        return cache[case.index]

    def samples(case: CaseRecord) -> list[np.ndarray] | None:
        return case_samples(rec, case) if stats(case).exact else None

    return Side(
        rec.id,
        setup,
        rec.done_cases,
        stats,
        samples,
        lambda case: case_tail(rec, case),
        lambda case, bound_ns: case_below(rec, case, bound_ns),
    )


def compare_records(
    recs: Sequence[ExperimentRecord],
    deadline_ns: int | None = None,
    thresholds: Sequence[Threshold] = (),
    pwcet: Sequence[float] = (),
    below: Sequence[int] = (),
) -> Comparison:
    """RECS after the first against the first, case by case (with the pWCET at each
    probability of PWCET)."""
    labels = setup_labels(list(recs))
    return compare_sides(
        [record_side(r, label, deadline_ns) for r, label in zip(recs, labels, strict=True)],
        thresholds,
        pwcet=pwcet,
        below=below,
    )


def pivot_cases(
    recs: Sequence[ExperimentRecord], deadline_ns: int | None = None
) -> list[PivotCase]:
    """Every finished case of RECS as a pivot sees it, each experiment named by
    `setup_labels`."""
    out = []
    for rec, setup in zip(recs, setup_labels(list(recs)), strict=True):
        dl = effective_deadline(rec, deadline_ns)
        for case in rec.done_cases:
            out.append(
                PivotCase(
                    rec.id,
                    setup,
                    case.series,
                    case.name,
                    {**case.params, **case.swept},
                    case_stats(rec, case, dl),
                    functools.partial(case_below, rec, case),
                )
            )
    return out


def setup_facts(rec: ExperimentRecord | MonitorRecord) -> dict[str, Any]:
    """The audit's facts (audit.json) when stored, else the fingerprint (system.json), of
    an experiment or a monitor."""
    try:
        facts = json.loads((rec.path / "audit.json").read_bytes()).get("facts")
    except (OSError, ValueError, AttributeError, RecursionError):
        facts = None
    return facts if isinstance(facts, dict) else rec.system()


def setup_labels(recs: list[ExperimentRecord]) -> list[str]:
    """Name each experiment by its label (`--label`), else by the system facts that differ
    between them (else by its id); experiments run on distinct targets (a farm's boards) by
    target name first. A label given to several experiments gets each one's id added."""
    names = _fact_names(recs)
    labels = [r.manifest.label for r in recs]
    return [
        n if not lab else lab if labels.count(lab) == 1 else f"{lab} ({r.id})"
        for n, lab, r in zip(names, labels, recs, strict=True)
    ]


def _fact_names(recs: list[ExperimentRecord]) -> list[str]:
    names = setup_names([setup_facts(r) for r in recs], [r.id for r in recs])
    boards = [b for r in recs if isinstance(b := (r.manifest.target or {}).get("name"), str) and b]
    if len(boards) == len(recs) and len(set(boards)) == len(boards):
        return [
            b if n == r.id else f"{b} · {n}" for b, n, r in zip(boards, names, recs, strict=True)
        ]
    return names


def setup_label(rec: ExperimentRecord) -> str:
    """What the system of one experiment was, e.g. "PREEMPT_RT · HZ=1000 · isolcpus=3",
    after its label when it has one."""
    described = setup_description(setup_facts(rec))
    return f"{rec.manifest.label} ({described})" if rec.manifest.label else described


def mixed_virtualization(recs: Sequence[ExperimentRecord]) -> str | None:
    """Why RECS are not compared on latency when they ran under different virtualization
    (bare metal, a hypervisor, emulation), else None; "unknown" (not recorded) differs from
    nothing."""
    labels = [virt_label(r.manifest.virtualization) for r in recs]
    if len({x for x in labels if x != "unknown"}) < 2:
        return None
    sides = ", ".join(f"{r.id}: {x}" for r, x in zip(recs, labels, strict=True))
    return (
        f"the experiments ran under different virtualization ({sides}): a latency measured "
        "under a hypervisor or emulation includes it, so no verdict is given on their latencies"
    )


@dataclass
class CaseConditions:
    """The conditions judged of one finished case (rtlab.analysis.judge_conditions)."""

    index: int
    series: str
    case: str  # the case's name
    conditions: Conditions

    @property
    def where(self) -> str:
        return f"{self.series} / {self.case}"


def isolated_cpus_of(system: dict[str, Any]) -> tuple[set[int], set[int]]:
    """(isolated, nohz_full) CPUs from an experiment's fingerprint (system.json): isolcpus,
    nohz_full or an isolated cpuset partition, and nohz_full alone."""

    def cpus(key: str) -> set[int]:
        v = system.get(key)
        return {c for c in v if isinstance(c, int)} if isinstance(v, list) else set()

    nohz = cpus("nohz_full_cpus")
    return cpus("isolated_cpus") | nohz, nohz


def case_conditions(
    rec: ExperimentRecord,
    case: CaseRecord,
    doc: dict[str, Any] | None = None,
    system: dict[str, Any] | None = None,
) -> CaseConditions:
    """CASE's conditions; a case run in an `rtlab partition` has its pinned CPUs isolated."""
    doc = rec.document(case) if doc is None else doc
    isolated, nohz = isolated_cpus_of(rec.system() if system is None else system)
    if case.params.get("partition"):
        threads = doc.get("threads")
        for t in threads if isinstance(threads, list) else []:
            if isinstance(t, dict) and type(t.get("cpu")) is int:
                isolated.add(t["cpu"])
    return CaseConditions(case.index, case.series, case.name, judge_conditions(doc, isolated, nohz))


def experiment_conditions(
    rec: ExperimentRecord, docs: dict[int, dict[str, Any]] | None = None
) -> list[CaseConditions]:
    """The conditions of every finished case of REC (DOCS: its documents by case index,
    when read already)."""
    system = rec.system()
    return [case_conditions(rec, c, (docs or {}).get(c.index), system) for c in rec.done_cases]
