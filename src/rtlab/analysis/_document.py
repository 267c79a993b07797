"""Statistics of a probe result document (schema 2): per thread, or pooled into one case."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rtlab.analysis._hist import Histogram
from rtlab.analysis._raw import stats_from_samples
from rtlab.analysis._stats import ESTIMATED, CaseStats, stats_from_histogram
from rtlab.errors import UserError
from rtlab.rawfile import open_samples


def _threads(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    threads = doc.get("threads") if isinstance(doc, Mapping) else None
    if not isinstance(threads, list) or not all(isinstance(t, Mapping) for t in threads):
        raise UserError("result document has no valid 'threads' list")
    return threads


def resolve_raw_file(thread: Mapping[str, Any], doc_dir: Path) -> Path | None:
    """The thread's raw-sample file, or None when it has none or it cannot be found.

    A relative ``raw_file`` is taken relative to the document's directory; when the
    named file does not exist, ``doc_dir / basename`` is tried (result directories get
    copied or moved after the run).
    """
    name = thread.get("raw_file")
    if not isinstance(name, str) or not name:
        return None
    p = Path(name)
    for candidate in (p if p.is_absolute() else doc_dir / p, doc_dir / p.name):
        if candidate.is_file():
            return candidate
    return None


def _raw_files(
    threads: Sequence[Mapping[str, Any]], doc_dir: Path, prefer_raw: bool
) -> list[Path] | None:
    """Raw files of all threads when every one is present and complete, else None."""
    if not prefer_raw or not threads:
        return None
    paths = []
    for t in threads:
        p = resolve_raw_file(t, doc_dir)
        if p is None or int(t.get("raw_lost") or 0) > 0:
            return None
        paths.append(p)
    return paths


def _num(t: Mapping[str, Any], key: str) -> float:
    v = t.get(key)
    return math.nan if v is None else float(v)


def _pooled(threads: Sequence[Mapping[str, Any]]) -> tuple[int, int, int, float, float]:
    """(count, min, max, mean, stddev) pooled over threads from their exact moments."""
    live = [t for t in threads if int(t.get("count") or 0) > 0]
    n = sum(int(t["count"]) for t in live)
    if n == 0:
        return 0, 0, 0, math.nan, math.nan
    try:
        vmin = min(int(t["min_ns"]) for t in live)
        vmax = max(int(t["max_ns"]) for t in live)
    except (KeyError, TypeError, ValueError):
        raise UserError("result document: a thread with samples lacks min_ns/max_ns") from None
    counts = np.array([int(t["count"]) for t in live], dtype=np.float64)
    means = np.array([_num(t, "mean_ns") for t in live])
    sds = np.array([_num(t, "stddev_ns") if int(t["count"]) > 1 else 0.0 for t in live])
    mean = float(np.dot(counts, means) / n)
    if n < 2:
        return n, vmin, vmax, mean, math.nan
    m2 = float(np.dot(counts - 1, sds * sds) + np.dot(counts, (means - mean) ** 2))
    return n, vmin, vmax, mean, math.sqrt(max(m2, 0.0) / (n - 1))


def _summary_only(
    count: int,
    vmin: int,
    vmax: int,
    mean: float,
    stddev: float,
    overruns: int,
    deadline_ns: int | None,
) -> CaseStats:
    """Samples without a histogram: the exact count, min, max, mean and stddev only.

    Order statistics are NaN (their ``error_ns`` too), outliers 0 (unknown); deadline
    misses are known only when the deadline is outside [min, max], and otherwise
    bracketed by ``deadline_misses_bounds`` (the max misses it, the min does not).
    """
    misses: int | None = None
    bounds: tuple[int, int] | None = None
    if deadline_ns is not None:
        d = int(deadline_ns)
        sure = count if vmin > d else int(vmax > d)
        possible = 0 if vmax <= d else count if vmin > d else count - 1
        bounds = (sure, possible)
        misses = sure if sure == possible else None
    nan = math.nan
    return CaseStats(
        count=count,
        min=vmin,
        mean=mean,
        **dict.fromkeys(("median", "p90", "p95", "p99", "p999", "p9999"), nan),
        max=vmax,
        jitter=vmax - vmin,
        stddev=stddev,
        variance=stddev**2,
        **dict.fromkeys(("q1", "q3", "iqr", "whisker_low", "whisker_high"), nan),
        outliers=0,
        overruns=overruns,
        deadline_ns=None if deadline_ns is None else int(deadline_ns),
        deadline_misses=misses,
        exact=False,
        error_ns=dict.fromkeys(ESTIMATED, nan),
        deadline_misses_bounds=bounds,
    )


def _from_threads(
    threads: Sequence[Mapping[str, Any]],
    doc_dir: Path,
    deadline_ns: int | None,
    prefer_raw: bool,
    chunk: int,
) -> CaseStats:
    overruns = sum(int(t.get("overruns") or 0) for t in threads)
    raws = _raw_files(threads, doc_dir, prefer_raw)
    if raws is not None:
        return stats_from_samples(
            [open_samples(p) for p in raws],
            overruns=overruns,
            deadline_ns=deadline_ns,
            chunk=chunk,
        )
    n, vmin, vmax, mean, stddev = _pooled(threads)
    # A thread without samples needs no histogram; one with samples but none (cyclictest
    # --json without -h) leaves only the exact summary for the whole case.
    binned = [t for t in threads if t.get("histogram") is not None or int(t.get("count") or 0)]
    if any(t.get("histogram") is None for t in binned):
        return _summary_only(n, vmin, vmax, mean, stddev, overruns, deadline_ns)
    hist = Histogram.merge(Histogram.from_document_thread(t) for t in binned)
    if hist.total == 0:
        if n:
            return _summary_only(n, vmin, vmax, mean, stddev, overruns, deadline_ns)
        return CaseStats.empty(overruns=overruns, deadline_ns=deadline_ns)
    return stats_from_histogram(
        hist,
        minimum=vmin,
        maximum=vmax,
        mean=mean,
        stddev=stddev,
        overruns=overruns,
        deadline_ns=deadline_ns,
    )


def document_case_stats(
    doc: Mapping[str, Any],
    doc_dir: str | Path,
    *,
    deadline_ns: int | None = None,
    prefer_raw: bool = True,
    chunk: int = 1 << 20,
) -> CaseStats:
    """One case's statistics from one result document, pooling all its threads.

    With ``prefer_raw`` and every thread's raw file present (and nothing ``raw_lost``),
    the statistics are exact over all samples; otherwise they come from the merged
    histograms with min/max over threads, the count-weighted mean, the pooled
    standard deviation and the overruns summed. When a thread with samples has no
    histogram (an imported cyclictest --json run without -h), or the histograms are
    empty although the threads have samples, only count, min, max, jitter, mean and
    stddev are known: every order statistic is NaN (see `_summary_only`).
    """
    return _from_threads(_threads(doc), Path(doc_dir), deadline_ns, prefer_raw, chunk)


def per_thread_stats(
    doc: Mapping[str, Any],
    doc_dir: str | Path,
    *,
    deadline_ns: int | None = None,
    prefer_raw: bool = True,
    chunk: int = 1 << 20,
) -> list[CaseStats]:
    """Statistics of each thread of a result document, in document order."""
    return [
        _from_threads([t], Path(doc_dir), deadline_ns, prefer_raw, chunk) for t in _threads(doc)
    ]
