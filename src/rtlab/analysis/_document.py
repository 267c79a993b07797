"""Statistics of a probe result document (schema 1): per thread, or pooled into one case."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rtlab.analysis._hist import Histogram
from rtlab.analysis._raw import stats_from_samples
from rtlab.analysis._stats import CaseStats, stats_from_histogram
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
        if p is None or int(t.get("lost") or 0) > 0:
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
    hist = Histogram.merge(Histogram.from_document_thread(t) for t in threads)
    _, vmin, vmax, mean, stddev = _pooled(threads)
    if hist.total == 0:
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
    chunk: int = 8_000_000,
) -> CaseStats:
    """One case's statistics from one result document, pooling all its threads.

    With ``prefer_raw`` and every thread's raw file present (and nothing ``lost``),
    the statistics are exact over all samples; otherwise they come from the merged
    histograms with min/max over threads, the count-weighted mean, the pooled
    standard deviation and the overruns summed.
    """
    return _from_threads(_threads(doc), Path(doc_dir), deadline_ns, prefer_raw, chunk)


def per_thread_stats(
    doc: Mapping[str, Any],
    doc_dir: str | Path,
    *,
    deadline_ns: int | None = None,
    prefer_raw: bool = True,
    chunk: int = 8_000_000,
) -> list[CaseStats]:
    """Statistics of each thread of a result document, in document order."""
    return [
        _from_threads([t], Path(doc_dir), deadline_ns, prefer_raw, chunk) for t in _threads(doc)
    ]
