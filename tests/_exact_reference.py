"""The numpy implementation of the exact statistics that the compiled one replaced.

Kept, unchanged in what it computes, as the reference that tests/test_analysis_exact.py
compares `rtlab.analysis.stats_from_samples` with: pass 1 over chunks (count, min, max,
exact sum, per-chunk squared deviations combined with Chan's formula, bucket histogram),
pass 2 collecting the values of the buckets holding the order statistics (narrowing
too-full buckets by sub-histograms), pass 3 for the Tukey whiskers. Slow (about 60 times
a plain read of the samples); not used by rtlab itself.
"""

from __future__ import annotations

import math
import mmap
from collections.abc import Iterator, Sequence

import numpy as np

from rtlab.analysis._hist import NBUCKETS, bucket_bounds, bucket_index
from rtlab.analysis._stats import ESTIMATED, QUANTILES, CaseStats, nearest_rank, tukey_fences

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


_I64_SAFE = 1 << 62


def _exact_sum(c: np.ndarray, cmin: int, cmax: int) -> int:
    if max(abs(cmin), abs(cmax)) * c.size < _I64_SAFE:
        return int(c.sum(dtype=np.int64))
    # split v = hi * 2^32 + lo so neither partial sum can overflow int64
    return (int(np.right_shift(c, 32).sum()) << 32) + int(np.bitwise_and(c, 0xFFFFFFFF).sum())


def _chunk_m2(
    c: np.ndarray, csum: int, cmin: int, cmax: int, ibuf: np.ndarray, fbuf: np.ndarray
) -> float:
    """Sum of squared deviations from the chunk's mean, precise for any offset.

    Deviations are taken from the integer floor of the mean first (exact in int64),
    so large values with a small spread lose no precision in float64.
    """
    k = c.size
    pivot = csum // k
    if cmax - cmin < _I64_SAFE:
        np.subtract(c, pivot, out=ibuf)
        np.subtract(ibuf, (csum - pivot * k) / k, out=fbuf)
    else:
        np.subtract(c, csum / k, out=fbuf)
    return float(np.dot(fbuf, fbuf))


def reference_stats(
    samples: np.ndarray | Sequence[np.ndarray],
    *,
    overruns: int = 0,
    deadline_ns: int | None = None,
    chunk: int = 8_000_000,
) -> CaseStats:
    """The previous ``stats_from_samples``: exact statistics in numpy chunks."""
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    chunk = min(int(chunk), 1 << 30)
    arrays = [samples] if isinstance(samples, np.ndarray) else list(samples)
    arrays = [np.asarray(a).reshape(-1) if not isinstance(a, np.ndarray) else a for a in arrays]
    arrays = [a.reshape(-1) for a in arrays if a.size]

    n = 0
    total = 0
    vmin = vmax = 0
    m2 = 0.0
    misses = 0
    hist = np.zeros(NBUCKETS + 1, dtype=np.int64)
    if arrays:
        idx_buf = np.empty(min(chunk, max(a.size for a in arrays)), np.int64)
        f_buf = np.empty(idx_buf.size, np.float64)
    for c in chunks(arrays, chunk):
        k = c.size
        cmin, cmax = int(c.min()), int(c.max())
        csum = _exact_sum(c, cmin, cmax)
        cm2 = _chunk_m2(c, csum, cmin, cmax, idx_buf[:k], f_buf[:k])
        if n == 0:
            vmin, vmax, m2 = cmin, cmax, cm2
        else:
            vmin, vmax = min(vmin, cmin), max(vmax, cmax)
            # Chan et al.: M2 += M2_c + delta^2 n k / (n + k), delta from the exact sums
            num = csum * n - total * k
            m2 += cm2 + num * num / (k * n * (n + k))
        n += k
        total += csum
        if deadline_ns is not None:
            misses += int(np.count_nonzero(c > deadline_ns))
        hist += np.bincount(
            bucket_index(c, out=idx_buf[:k], scratch=f_buf[:k]), minlength=NBUCKETS + 1
        )

    if n == 0:
        return CaseStats.empty(overruns=overruns, deadline_ns=deadline_ns)
    ranks = {key: nearest_rank(n, q) for key, q in QUANTILES.items()}
    v = select(arrays, chunk, hist, n, vmin, vmax, ranks)
    q1, q3 = v["q1"], v["q3"]
    lo_t, hi_t = tukey_fences(q1, q3)
    if vmin >= lo_t and vmax <= hi_t:
        w_lo, w_hi, outliers = vmin, vmax, 0
    else:
        lo_t, hi_t = max(lo_t, vmin), min(hi_t, vmax)  # same selection, stays in int64
        found_lo, found_hi, outliers = whiskers(arrays, chunk, hist, lo_t, hi_t)
        w_lo = q1 if found_lo is None else found_lo
        w_hi = q3 if found_hi is None else found_hi

    return CaseStats(
        count=n,
        min=vmin,
        mean=total / n,
        median=v["median"],
        p90=v["p90"],
        p95=v["p95"],
        p99=v["p99"],
        p999=v["p999"],
        p9999=v["p9999"],
        max=vmax,
        jitter=vmax - vmin,
        stddev=math.sqrt(m2 / (n - 1)) if n > 1 else math.nan,
        variance=m2 / (n - 1) if n > 1 else math.nan,
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        whisker_low=w_lo,
        whisker_high=w_hi,
        outliers=outliers,
        overruns=int(overruns),
        deadline_ns=None if deadline_ns is None else int(deadline_ns),
        deadline_misses=None if deadline_ns is None else misses,
        exact=True,
        error_ns=dict.fromkeys(ESTIMATED, 0.0),
        deadline_misses_bounds=None if deadline_ns is None else (misses, misses),
    )
