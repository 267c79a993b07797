"""The share of a case's samples at or below a bound B ("99.9 % of wake-ups within 100 µs"):
exact from raw samples, bracketed from histograms."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rtlab.analysis._document import _pooled, _raw_files, _threads
from rtlab.analysis._hist import Histogram
from rtlab.analysis._stats import count_above
from rtlab.rawfile import open_samples

#: Samples counted per numpy pass over a raw file (memory bound of `samples_above`).
BLOCK = 1 << 22


@dataclass(frozen=True)
class Share:
    """Samples at or below ``bound_ns``: ``below`` is the estimate, ``lo``..``hi`` the
    sure and the possible counts (equal when exact)."""

    bound_ns: int
    count: int
    below: float
    lo: int
    hi: int

    @property
    def exact(self) -> bool:
        return self.lo == self.hi

    @property
    def value(self) -> float:
        """The share in [0, 1]; NaN without samples."""
        return self.below / self.count if self.count else math.nan

    @property
    def range(self) -> tuple[float, float]:
        """(lowest, highest) share the data allow; NaN without samples."""
        if not self.count:
            return math.nan, math.nan
        return self.lo / self.count, self.hi / self.count

    def text(self) -> str:
        """ "99.95 %", "≈99.95 %" when estimated from histograms, "n/a" without an answer."""
        return share_text(self.value, self.exact)

    def to_dict(self) -> dict[str, Any]:
        lo, hi = self.range
        value = self.value
        return {
            "bound_ns": self.bound_ns,
            "share": None if math.isnan(value) else value,
            "exact": self.exact,
            "share_range": None if math.isnan(lo) else [lo, hi],
        }


def share_text(value: float, exact: bool = True) -> str:
    if math.isnan(value):
        return "n/a"
    shown = f"{100 * value:.6g} %"
    return shown if exact else f"≈{shown}"


def parse_below(text: str) -> int | None:
    """The bound of "below:100us" in ns; None when TEXT is not a "below:" statistic."""
    from rtlab.errors import UserError
    from rtlab.units import parse_duration_ns

    head, sep, bound = text.strip().partition(":")
    if head.strip().lower() != "below":
        return None
    if not sep:
        raise UserError(f"bad statistic {text.strip()!r}: expected below:BOUND, e.g. below:100us")
    return int(parse_duration_ns(bound.strip()))


def samples_above(arrays: Sequence[np.ndarray], bound_ns: int) -> int:
    """Samples above BOUND_NS in ARRAYS, read in blocks of `BLOCK` (memory-mapped files stay
    on disk)."""
    total = 0
    for a in arrays:
        for start in range(0, a.size, BLOCK):
            total += int(np.count_nonzero(a[start : start + BLOCK] > bound_ns))
    return total


def share_below(
    doc: Mapping[str, Any], doc_dir: str | Path, bound_ns: int, *, prefer_raw: bool = True
) -> Share:
    """The share of the samples of DOC (all its threads) at or below BOUND_NS.

    Exact from every thread's raw file; from the merged histograms a bucket straddling the
    bound adds its count times the fraction of its range below it (``lo``/``hi`` bracket
    the true count, exact when the bound falls on a bucket edge); with neither, only a
    bound outside [min, max] gives an answer.
    """
    bound_ns = int(bound_ns)
    threads = _threads(doc)
    n, vmin, vmax, _, _ = _pooled(threads)
    if n == 0:
        return Share(bound_ns, 0, 0.0, 0, 0)
    raws = _raw_files(threads, Path(doc_dir), prefer_raw)
    if raws is not None:
        arrays = [open_samples(p) for p in raws]
        count = sum(int(a.size) for a in arrays)
        below = count - samples_above(arrays, bound_ns)
        return Share(bound_ns, count, float(below), below, below)
    binned = [t for t in threads if int(t.get("count") or 0)]
    if all(t.get("histogram") is not None for t in binned):
        hist = Histogram.merge(Histogram.from_document_thread(t) for t in binned)
        if hist.total:
            est, sure, possible = count_above(hist, vmin, vmax, bound_ns)
            m = hist.total
            return Share(bound_ns, m, m - est, m - possible, m - sure)
    if vmax <= bound_ns:
        return Share(bound_ns, n, float(n), n, n)
    if vmin > bound_ns:
        return Share(bound_ns, n, 0.0, 0, 0)
    return Share(bound_ns, n, math.nan, 1, n - 1)  # the min is below, the max above
