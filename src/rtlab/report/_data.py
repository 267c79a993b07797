"""What a report shows, gathered once from stored experiments: statistics, histograms,
per-second series, worst samples, box-plot outliers and the explained spikes of every
finished case."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rtlab.analysis import (
    DEFAULT_RATE_HZ,
    CaseStats,
    Histogram,
    MeterView,
    TailFit,
    bucket_index,
    explanation,
)
from rtlab.errors import UserError
from rtlab.records import CaseRecord
from rtlab.results import (
    CaseConditions,
    case_samples,
    case_stats,
    case_tail,
    effective_deadline,
    experiment_conditions,
    setup_labels,
    view_rows,
)
from rtlab.store import ExperimentRecord

#: Outlier dots drawn per box at most (a log axis cannot show more apart).
MAX_DOTS = 60
#: The swept key that counts load processes (x axis of box plots, load tables).
LOAD_KEY = "forkcopy"
AUDIT_FILE = "audit.json"
SEVERITY_ORDER = {"FAIL": 0, "WARN": 1, "INFO": 2, "OK": 3}


@dataclass
class ThreadData:
    """One measuring thread of a case: its histogram, per-second series and worst samples."""

    index: int
    cpu: int | None
    count: int
    max_ns: int | None
    hist: Histogram
    sec_min: np.ndarray  # per-second min/mean/max in ns, NaN for an empty second
    sec_mean: np.ndarray
    sec_max: np.ndarray
    sec_count: np.ndarray
    worst: list[dict[str, int]]


@dataclass
class CaseData:
    case: CaseRecord
    label: str  # swept value(s) telling the case apart within its series
    stats: CaseStats
    threads: list[ThreadData]
    complete: bool  # the probe document says the run was not cut short
    elapsed_ns: int
    start_utc: str | None
    outliers: np.ndarray  # ns, one dot each
    outlier_source: str  # "raw" or "histogram"
    outlier_note: str  # how the dots were chosen, for text alternatives
    meter_view: tuple[MeterView, list[dict[str, Any]]] | None = None  # see analysis.VIEWS
    explain: dict[str, Any] | None = None  # the probe's --explain: None when not asked
    spikes: list[dict[str, Any]] = field(default_factory=list)  # late samples, worst first
    tail: TailFit | None = None  # the pWCET fit: with a deadline or --pwcet, else None

    @property
    def series(self) -> str:
        return self.case.series

    @property
    def name(self) -> str:
        return self.case.name

    @property
    def hist(self) -> Histogram:
        return Histogram.merge(t.hist for t in self.threads)

    def load_value(self) -> int | None:
        v = self.case.swept.get(LOAD_KEY)
        if v is None and len(self.case.swept) == 1:
            v = next(iter(self.case.swept.values()))
        return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass
class SeriesData:
    name: str
    description: str
    swept: list[str]
    cases: list[CaseData]

    @property
    def x_key(self) -> str | None:
        if LOAD_KEY in self.swept:
            return LOAD_KEY
        return self.swept[0] if len(self.swept) == 1 else None


@dataclass
class ExperimentData:
    rec: ExperimentRecord
    setup: str  # name of the setup: what differs from the other experiments
    deadline_ns: int | None
    system: dict[str, Any]
    series: list[SeriesData]
    pending: list[CaseRecord]  # cases not finished (status other than done)
    audit: dict[str, Any] | None = None
    cut_short: list[CaseData] = field(default_factory=list)  # documents marked incomplete
    pwcet_p: float | None = None  # the probability asked for (report --pwcet)
    rate_hz: float = DEFAULT_RATE_HZ  # activations per second for "once per ..."
    conditions: list[CaseConditions] = field(default_factory=list)  # of the finished cases

    @property
    def id(self) -> str:
        return self.rec.id

    @property
    def incomplete(self) -> bool:
        return bool(self.pending or self.cut_short)

    def cases(self) -> list[CaseData]:
        return [c for s in self.series for c in s.cases]

    def verdict_rows(self) -> list[dict[str, Any]]:
        """(series, case, max) of every case with samples: what the verdict looks at."""
        return [
            {"series": c.series, "case": c.name, "max": c.stats.max}
            for c in self.cases()
            if c.stats.count
        ]


def _floats(values: Any, n: int | None = None) -> np.ndarray:
    arr = np.array([math.nan if v is None else float(v) for v in (values or [])], dtype=float)
    return arr if n is None else arr[:n]


def _thread(t: dict[str, Any]) -> ThreadData:
    s = t.get("series") or {}
    count = np.asarray(s.get("count") or [], dtype=np.int64)
    n = min(len(count), len(s.get("min_ns") or []), len(s.get("max_ns") or []))
    return ThreadData(
        index=int(t.get("index") or 0),
        cpu=t.get("cpu"),
        count=int(t.get("count") or 0),
        max_ns=t.get("max_ns"),
        # an imported summary (cyclictest --json without -h, rtla top) has no histogram
        hist=Histogram.from_document_thread(t) if t.get("histogram") else Histogram.empty(),
        sec_min=_floats(s.get("min_ns"), n),
        sec_mean=_floats(s.get("mean_ns"), n),
        sec_max=_floats(s.get("max_ns"), n),
        sec_count=count[:n],
        worst=[w for w in t.get("worst") or [] if isinstance(w, dict) and "latency_ns" in w],
    )


def _thin(values: np.ndarray) -> tuple[np.ndarray, bool]:
    """At most about MAX_DOTS dots: beyond that, one per probe histogram bucket (0.78 %
    wide), then per 2, 4, ... adjacent buckets, keeping the largest value of each."""
    values = np.unique(values)
    if values.size <= MAX_DOTS:
        return values, False
    idx = bucket_index(values)
    shift = 0
    while True:
        groups = idx >> shift
        last = np.flatnonzero(np.append(groups[1:] != groups[:-1], True))
        if last.size <= MAX_DOTS:
            return values[last], True
        shift += 1


def _raw_outliers(arrays: list[np.ndarray], st: CaseStats) -> tuple[np.ndarray, str]:
    lo, hi = st.whisker_low, st.whisker_high
    parts, chunk = [], 8_000_000
    for a in arrays:
        for start in range(0, len(a), chunk):
            c = np.asarray(a[start : start + chunk])
            parts.append(c[(c < lo) | (c > hi)])
    found = np.concatenate(parts) if parts else np.empty(0, np.int64)
    dots, thinned = _thin(found)
    note = f"outliers from the raw samples: {found.size} beyond the whiskers"
    if thinned:
        note += f", drawn as {dots.size} dots (the largest of each group of neighbours)"
    return dots, note


def _hist_outliers(
    threads: list[ThreadData], hist: Histogram, st: CaseStats
) -> tuple[np.ndarray, str]:
    lo, hi = st.whisker_low, st.whisker_high
    if hist.lower.size:
        mid = np.clip(hist.lower + (hist.upper - hist.lower) // 2, st.min, st.max)
    else:
        mid = np.empty(0, np.int64)
    beyond = (mid < lo) | (mid > hi)
    worst = np.array(
        sorted({int(w["latency_ns"]) for t in threads for w in t.worst}), dtype=np.int64
    )
    worst = worst[(worst < lo) | (worst > hi)]
    # an exact worst sample replaces the midpoint of the bucket that holds it
    taken = np.isin(bucket_index(mid), bucket_index(worst)) if worst.size else False
    dots = np.concatenate([mid[beyond & ~taken], worst])
    dots, thinned = _thin(dots)
    note = (
        f"no raw samples: outliers drawn from the histogram, one dot per bucket beyond the "
        f"whiskers at its midpoint ({int(beyond.sum())} buckets), plus the {worst.size} "
        "worst samples the probe kept"
        + (f", thinned to {dots.size} dots (the largest of neighbours)" if thinned else "")
    )
    return dots, note


def _case(
    rec: ExperimentRecord,
    case: CaseRecord,
    deadline_ns: int | None,
    tails: bool = False,
    doc: dict[str, Any] | None = None,
) -> CaseData:
    doc = rec.document(case) if doc is None else doc
    st = case_stats(rec, case, deadline_ns, doc)
    threads = [_thread(t) for t in doc.get("threads") or []]
    hist = Histogram.merge(t.hist for t in threads)
    if st.count == 0:
        dots, source, note = np.empty(0, np.int64), "histogram", "no samples"
    elif st.exact and (arrays := case_samples(rec, case)) is not None:
        dots, note = _raw_outliers(arrays, st)
        source = "raw"
    else:
        dots, note = _hist_outliers(threads, hist, st)
        source = "histogram"
    explain, spikes = explanation(doc)
    return CaseData(
        case=case,
        label=case.label,
        stats=st,
        threads=threads,
        complete=bool(doc.get("complete", True)),
        elapsed_ns=int(doc.get("elapsed_ns") or 0),
        start_utc=doc.get("start_utc"),
        outliers=dots,
        outlier_source=source,
        outlier_note=note,
        meter_view=view_rows(case, doc, st),
        explain=explain,
        spikes=spikes,
        tail=case_tail(rec, case) if tails and st.count else None,
    )


def load_audit(path: Path) -> dict[str, Any] | None:
    """results/<id>/audit.json: {"facts": {...}, "findings": [...]}, or None when absent."""
    f = path / AUDIT_FILE
    if not f.exists():
        return None
    try:
        data = json.loads(f.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{f}: unreadable ({e})") from None
    findings = data.get("findings") if isinstance(data, dict) else None
    if not isinstance(findings, list) or not all(isinstance(x, dict) for x in findings):
        raise UserError(f"{f}: no 'findings' list of objects")
    for x in findings:
        status = str(x.get("status", "")).upper()
        if status not in SEVERITY_ORDER:
            raise UserError(f"{f}: finding {x.get('id')!r} has status {x.get('status')!r}")
        x["status"] = status
    ordered = sorted(enumerate(findings), key=lambda p: (SEVERITY_ORDER[p[1]["status"]], p[0]))
    facts = data.get("facts")
    return {"facts": facts if isinstance(facts, dict) else {}, "findings": [x for _, x in ordered]}


def collect(
    recs: list[ExperimentRecord],
    deadline_ns: int | None = None,
    pwcet_p: float | None = None,
    rate_hz: float = DEFAULT_RATE_HZ,
) -> list[ExperimentData]:
    """Everything a report or a plot needs from RECS, read once.

    ``deadline_ns`` None takes each experiment's own deadline (given at run time). With
    ``pwcet_p``, or a deadline in effect and raw samples in some case of the experiment,
    each case's tail is fitted (pWCET) for the verdict and the exceedance plot.
    """
    labels = setup_labels(recs) if len(recs) > 1 else [r.manifest.label or r.id for r in recs]
    out = []
    for rec, label in zip(recs, labels, strict=True):
        dl = effective_deadline(rec, deadline_ns)
        series: dict[str, SeriesData] = {}
        pending = []
        docs = {c.index: rec.document(c) for c in rec.done_cases}
        raw = any(t.get("raw_file") for d in docs.values() for t in d.get("threads") or [])
        tails = pwcet_p is not None or (dl is not None and raw)
        for case in rec.cases:
            if case.series not in series:
                m = rec.series_record(case.series)
                series[case.series] = SeriesData(
                    case.series, m.description, m.swept or list(case.swept), []
                )
            if not case.done:
                pending.append(case)
                continue
            series[case.series].cases.append(_case(rec, case, dl, tails, docs[case.index]))
        data = ExperimentData(
            rec=rec,
            setup=label,
            deadline_ns=dl,
            system=rec.system(),
            series=list(series.values()),
            pending=pending,
            audit=load_audit(rec.path),
            pwcet_p=pwcet_p,
            rate_hz=rate_hz,
            conditions=experiment_conditions(rec, docs),
        )
        data.cut_short = [c for c in data.cases() if not c.complete]
        out.append(data)
    return out
