"""Latency histograms: the probe's log-linear geometry and the `Histogram` record."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rtlab.errors import UserError

# Probe geometry (probe/src/lib/hist.h): 0..255 exact, then 128 buckets per octave
# up to 2^40 ns; larger values overflow.
SUB_BITS = 8
SUB_COUNT = 1 << SUB_BITS  # 256 exact buckets
HALF = SUB_COUNT // 2  # 128 buckets per octave
MAX_EXP = 40
OVERFLOW_AT = 1 << MAX_EXP  # values >= this overflow
NBUCKETS = SUB_COUNT + (MAX_EXP - SUB_BITS) * HALF  # 4352; index NBUCKETS = overflow

_EXP_BIAS = 1023 + (SUB_BITS - 1)  # float64 exponent bias, plus the 7 bits kept


def bucket_index(
    values: np.ndarray, out: np.ndarray | None = None, scratch: np.ndarray | None = None
) -> np.ndarray:
    """Probe bucket index of every value (vectorized ``hist_index``), int64.

    Negative values map to bucket 0; values >= 2^40 map to ``NBUCKETS`` (overflow).
    ``out`` (int64) and ``scratch`` (float64) may be arrays of the same length, reused
    between calls to avoid allocating.
    """
    v = np.asarray(values)
    n = v.shape[0]
    x = np.clip(v, 0, OVERFLOW_AT, out=out if out is not None else np.empty(n, np.int64))
    # floor(log2 x) from the float64 exponent: exact because x <= 2^40 < 2^53
    f = scratch if scratch is not None else np.empty(n, np.float64)
    np.copyto(f, x, casting="unsafe")
    e = f.view(np.int64)
    np.right_shift(e, 52, out=e)
    np.subtract(e, _EXP_BIAS, out=e)
    np.maximum(e, 0, out=e)  # shift = max(floor(log2 x) - 7, 0); 0 for x < 256 (and x = 0)
    # index = 128 * shift + (x >> shift): equals x below 256 and hist_index above
    np.right_shift(x, e, out=x)
    np.left_shift(e, SUB_BITS - 1, out=e)
    np.add(x, e, out=x)
    return x


def bucket_bounds(index: np.ndarray | int) -> tuple[np.ndarray, np.ndarray]:
    """Inclusive (lower, upper) bounds of probe buckets (inverse of `bucket_index`).

    The overflow index ``NBUCKETS`` gets ``[2^40, 2^63 - 1]``.
    """
    i = np.asarray(index, dtype=np.int64)
    j = np.maximum(i - SUB_COUNT, 0)
    e = SUB_BITS + j // HALF
    width = np.where(i < SUB_COUNT, 1, np.left_shift(np.int64(1), e - (SUB_BITS - 1)))
    lower = np.where(i < SUB_COUNT, np.maximum(i, 0), (HALF + j % HALF) * width)
    upper = lower + width - 1
    ovf = i >= NBUCKETS
    lower = np.where(ovf, OVERFLOW_AT, lower)
    upper = np.where(ovf, np.iinfo(np.int64).max, upper)
    return lower, upper


@dataclass
class Histogram:
    """Non-empty buckets with inclusive int64 bounds in ns, ascending, plus an overflow count.

    Buckets normally do not overlap. `merge` of histograms with different geometry
    (e.g. probe log-linear buckets and cyclictest's 1-µs buckets) keeps every distinct
    (lower, upper) pair, so buckets may then overlap; statistics use each bucket's own
    bounds as they are and their error bounds then assume the overlap is harmless.
    ``overflow_at`` is 2^40 for probe histograms; when unknown, overflowed samples are
    only known to lie above the highest bucket.
    """

    lower: np.ndarray
    upper: np.ndarray
    count: np.ndarray
    overflow: int = 0
    overflow_at: int | None = None  # overflowed samples are >= this; None = unknown

    def __post_init__(self) -> None:
        self.lower = np.asarray(self.lower, dtype=np.int64).reshape(-1)
        self.upper = np.asarray(self.upper, dtype=np.int64).reshape(-1)
        self.count = np.asarray(self.count, dtype=np.int64).reshape(-1)
        self.overflow = int(self.overflow)
        self.overflow_at = None if self.overflow_at is None else int(self.overflow_at)
        if not (self.lower.shape == self.upper.shape == self.count.shape):
            raise ValueError("lower, upper and count must have the same length")
        if np.any(self.upper < self.lower) or np.any(self.count < 0) or self.overflow < 0:
            raise ValueError("histogram buckets need lower <= upper and counts >= 0")

    @property
    def total(self) -> int:
        """All samples, overflow included."""
        return int(self.count.sum()) + self.overflow

    @property
    def disjoint(self) -> bool:
        """True when no two buckets overlap (always so for a single probe histogram)."""
        return bool(np.all(self.lower[1:] > self.upper[:-1]))

    @classmethod
    def empty(cls) -> Histogram:
        return cls(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64))

    @classmethod
    def from_document_thread(cls, thread: Mapping[str, Any]) -> Histogram:
        """The ``histogram`` of one ``threads[i]`` object of a result document."""
        h = thread.get("histogram")
        if not isinstance(h, Mapping):
            raise UserError(f"thread {thread.get('index', '?')}: no histogram in the document")
        unit = h.get("unit", "ns")
        if unit != "ns":
            raise UserError(f"thread {thread.get('index', '?')}: histogram unit {unit!r} != ns")
        buckets = h.get("buckets") or []
        try:
            arr = np.asarray(buckets, dtype=np.int64).reshape(-1, 3)
            hist = cls(arr[:, 0], arr[:, 1], arr[:, 2], int(h.get("overflow") or 0))
        except (TypeError, ValueError) as e:
            raise UserError(f"thread {thread.get('index', '?')}: bad histogram: {e}") from None
        hist = hist._sorted()
        if hist.is_probe_geometry():
            hist.overflow_at = OVERFLOW_AT
        return hist

    @classmethod
    def from_samples(
        cls, samples: np.ndarray | Sequence[np.ndarray], chunk: int = 8_000_000
    ) -> Histogram:
        """Probe-geometry histogram of samples (vectorized, chunked; bounded memory)."""
        counts = np.zeros(NBUCKETS + 1, dtype=np.int64)
        arrays = [samples] if isinstance(samples, np.ndarray) else list(samples)
        for a in arrays:
            for start in range(0, len(a), chunk):
                c = np.asarray(a[start : start + chunk], dtype=np.int64)
                counts += np.bincount(bucket_index(c), minlength=NBUCKETS + 1)
        return cls.from_probe_counts(counts[:NBUCKETS], int(counts[NBUCKETS]))

    @classmethod
    def from_probe_counts(cls, counts: np.ndarray, overflow: int = 0) -> Histogram:
        """From a dense array of ``NBUCKETS`` probe bucket counts."""
        counts = np.asarray(counts, dtype=np.int64)
        idx = np.flatnonzero(counts)
        lower, upper = bucket_bounds(idx)
        return cls(lower, upper, counts[idx], overflow, OVERFLOW_AT)

    @staticmethod
    def merge(hists: Iterable[Histogram]) -> Histogram:
        """Bucket-wise union: counts of identical (lower, upper) pairs are summed.

        Buckets of different geometry are kept side by side, sorted by (lower, upper).
        """
        hs = list(hists)
        if not hs:
            return Histogram.empty()
        lower = np.concatenate([h.lower for h in hs])
        upper = np.concatenate([h.upper for h in hs])
        count = np.concatenate([h.count for h in hs])
        overflow = sum(h.overflow for h in hs)
        ats = [h.overflow_at for h in hs if h.overflow]
        at = None if not ats or None in ats else min(a for a in ats if a is not None)
        if lower.size == 0:
            return Histogram(lower, upper, count, overflow, at)
        order = np.lexsort((upper, lower))
        lower, upper, count = lower[order], upper[order], count[order]
        start = np.ones(lower.size, dtype=bool)
        start[1:] = (lower[1:] != lower[:-1]) | (upper[1:] != upper[:-1])
        first = np.flatnonzero(start)
        summed = np.add.reduceat(count, first)
        keep = summed > 0
        return Histogram(lower[first][keep], upper[first][keep], summed[keep], overflow, at)

    def is_probe_geometry(self) -> bool:
        """True when every bucket is exactly one of the probe's log-linear buckets."""
        if np.any(self.lower < 0) or np.any(self.upper >= OVERFLOW_AT):
            return False
        lower, upper = bucket_bounds(bucket_index(self.lower))
        return bool(np.array_equal(lower, self.lower) and np.array_equal(upper, self.upper))

    def to_document(self) -> dict[str, Any]:
        """The result document's ``histogram`` object."""
        return {
            "unit": "ns",
            "overflow": self.overflow,
            "buckets": [
                [int(lo), int(hi), int(c)]
                for lo, hi, c in zip(self.lower, self.upper, self.count, strict=True)
                if c
            ],
        }

    def _sorted(self) -> Histogram:
        if self.lower.size > 1 and np.any(np.diff(self.lower) < 0):
            return Histogram.merge([self])
        return self
