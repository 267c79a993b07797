"""Streaming passes over int64 sample arrays: chunking and exact order statistics.

`select` finds exact order statistics from the pass-1 bucket histogram: it collects
the values of the buckets holding them (one pass) and selects with np.partition; a
bucket too full to collect is narrowed by sub-histograms over further passes.
`whiskers` finds the Tukey whisker ends and counts the samples beyond them.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator, Sequence

import numpy as np

from rtlab.analysis._hist import NBUCKETS, bucket_bounds, bucket_index

_SUBBITS = 16  # a narrowing pass splits an interval into at most 2^16 bins
_COLLECT_MIN = 1 << 20  # values collectable in one pass: max(2 * chunk, this)


def _page_release(a: np.ndarray, start: int, stop: int) -> None:
    """Best effort: unmap the pages of a[start:stop] from a read-only np.memmap."""
    mm = getattr(a, "_mmap", None)
    if not isinstance(a, np.memmap) or not isinstance(mm, mmap.mmap) or a.mode != "r":
        return
    if not hasattr(mm, "madvise") or not a.flags.c_contiguous:
        return
    try:
        base = np.frombuffer(mm, dtype=np.uint8).ctypes.data
        begin = a.ctypes.data - base + start * a.itemsize
        end = a.ctypes.data - base + stop * a.itemsize
        page = mmap.PAGESIZE
        begin = -(-begin // page) * page
        end = end // page * page
        if end > begin:
            mm.madvise(mmap.MADV_DONTNEED, begin, end - begin)
    except (AttributeError, OSError, ValueError, BufferError):
        pass


def chunks(arrays: Sequence[np.ndarray], chunk: int) -> Iterator[np.ndarray]:
    for a in arrays:
        for start in range(0, a.shape[0], chunk):
            stop = min(start + chunk, a.shape[0])
            c = a[start:stop]
            yield c if c.dtype == np.int64 else c.astype(np.int64)
            _page_release(a, start, stop)


class _Select:
    """Pending order statistics: rank r (1-based) within the closed interval [lo, hi]."""

    def __init__(self, lo: int, hi: int, count: int) -> None:
        self.lo, self.hi, self.count = lo, hi, count
        self.ranks: dict[str, int] = {}
        self.shift = 0
        self.parts: list[np.ndarray] = []

    def plan(self, collect: bool) -> None:
        """Collect the values (collect=True) or narrow with a sub-histogram."""
        self.parts = []
        self.shift = -1 if collect else max(0, (self.hi - self.lo).bit_length() - _SUBBITS)

    def feed(self, c: np.ndarray) -> None:
        v = c[(c >= self.lo) & (c <= self.hi)]
        if self.shift < 0:
            self.parts.append(v)
        else:  # uint64 difference: correct even when hi - lo exceeds int64
            off = np.subtract(v, self.lo).view(np.uint64) >> np.uint64(self.shift)
            nbins = ((self.hi - self.lo) >> self.shift) + 1
            self.parts.append(np.bincount(off.astype(np.int64), minlength=nbins))

    def resolve(self, out: dict[str, int]) -> list[_Select]:
        """Record resolved ranks into out; return narrower pending intervals."""
        if self.shift < 0:
            vals = np.concatenate(self.parts) if self.parts else np.empty(0, np.int64)
            kth = sorted({r - 1 for r in self.ranks.values()})
            part = np.partition(vals, kth)
            for key, r in self.ranks.items():
                out[key] = int(part[r - 1])
            return []
        counts = np.sum(self.parts, axis=0)
        cum = np.cumsum(counts)
        pending: dict[int, _Select] = {}
        for key, r in self.ranks.items():
            b = int(np.searchsorted(cum, r, side="left"))
            below = int(cum[b - 1]) if b else 0
            lo = self.lo + (b << self.shift)
            hi = min(self.hi, lo + (1 << self.shift) - 1)
            if lo == hi:
                out[key] = lo
                continue
            sel = pending.setdefault(b, _Select(lo, hi, int(counts[b])))
            sel.ranks[key] = r - below
        return list(pending.values())


def select(
    arrays: Sequence[np.ndarray],
    chunk: int,
    hist: np.ndarray,
    n: int,
    vmin: int,
    vmax: int,
    ranks: dict[str, int],
) -> dict[str, int]:
    """Exact order statistics for the given 1-based ranks (pass 2 and any narrowing)."""
    out: dict[str, int] = {}
    cum = np.cumsum(hist)
    by_bucket: dict[int, _Select] = {}
    for key, k in ranks.items():
        b = int(np.searchsorted(cum, k, side="left"))
        lower, upper = (int(x) for x in bucket_bounds(b))
        lo, hi = max(lower, vmin), min(upper, vmax)
        if b == 0:
            lo = vmin  # negative samples are binned at 0
        if lo == hi:
            out[key] = lo
            continue
        sel = by_bucket.setdefault(b, _Select(lo, hi, int(hist[b])))
        sel.ranks[key] = k - (int(cum[b - 1]) if b else 0)

    # pass 2: collect whole buckets, found through a lookup table on the bucket index
    budget = max(2 * chunk, _COLLECT_MIN)
    collect: dict[int, _Select] = {}
    pending: list[_Select] = []
    for b, sel in sorted(by_bucket.items(), key=lambda kv: kv[1].count):
        if sel.count <= budget:
            budget -= sel.count
            sel.plan(collect=True)
            collect[b] = sel
        else:
            pending.append(sel)
    if collect:
        lut = np.zeros(NBUCKETS + 1, dtype=bool)
        lut[list(collect)] = True
        idx_buf = np.empty(min(chunk, n), np.int64)
        f_buf = np.empty(min(chunk, n), np.float64)
        for c in chunks(arrays, chunk):
            idx = bucket_index(c, out=idx_buf[: c.size], scratch=f_buf[: c.size])
            wanted = lut[idx]
            vals, ids = c[wanted], idx[wanted]
            for b, sel in collect.items():
                sel.parts.append(vals[ids == b])
        for sel in collect.values():
            sel.resolve(out)

    # narrowing passes for buckets too full to collect (few distinct values, or huge)
    while pending:
        budget = max(2 * chunk, _COLLECT_MIN)
        for sel in sorted(pending, key=lambda s: s.count):
            sel.plan(collect=sel.count <= budget)
            budget -= sel.count if sel.shift < 0 else 0
        for c in chunks(arrays, chunk):
            for sel in pending:
                sel.feed(c)
        pending = [p for sel in pending for p in sel.resolve(out)]
    return out


def whiskers(
    arrays: Sequence[np.ndarray], chunk: int, hist: np.ndarray, lo_t: int, hi_t: int
) -> tuple[int | None, int | None, int]:
    """Pass 3: (lowest value >= lo_t, highest value <= hi_t, count outside [lo_t, hi_t]).

    A whisker search interval reaches from the fence to the far side of the nearest
    non-empty bucket wholly inside the fence, so it always holds data.
    """
    nonempty = np.flatnonzero(hist)
    b_hi, b_lo = (int(b) for b in bucket_index(np.array([hi_t, lo_t], dtype=np.int64)))
    inner = nonempty[nonempty < b_hi]
    # bucket 0 also holds the negative samples, so its lower bound is no bound
    hi_from = int(bucket_bounds(int(inner[-1]))[0]) if inner.size and inner[-1] > 0 else None
    inner = nonempty[nonempty > b_lo]
    lo_to = int(bucket_bounds(int(inner[0]))[1]) if inner.size else None
    w_lo: int | None = None
    w_hi: int | None = None
    outside = 0
    for c in chunks(arrays, chunk):
        outside += int(np.count_nonzero(c < lo_t)) + int(np.count_nonzero(c > hi_t))
        m = c <= hi_t if hi_from is None else (c >= hi_from) & (c <= hi_t)
        if m.any():
            x = int(c[m].max())
            w_hi = x if w_hi is None else max(w_hi, x)
        m = c >= lo_t if lo_to is None else (c >= lo_t) & (c <= lo_to)
        if m.any():
            x = int(c[m].min())
            w_lo = x if w_lo is None else min(w_lo, x)
    return w_lo, w_hi, outside
