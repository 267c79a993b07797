"""Exact statistics over raw samples, streamed in chunks with bounded memory.

Pass 1 computes count, min, max, the exact sum, the sum of squared deviations (per
chunk, combined with Chan's formula) and a histogram over the probe's bucket index.
That locates every wanted order statistic in one bucket; pass 2 collects only the
values of those buckets and selects the exact k-th with np.partition (a bucket too
full to collect is narrowed by sub-histograms over further passes instead). Pass 3,
only when some sample lies beyond a Tukey fence, counts the outliers and finds the
whisker ends. Input arrays are never copied whole; chunks of an ``np.memmap`` opened
read-only are dropped from the process's resident set once processed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rtlab.analysis._hist import NBUCKETS, bucket_index
from rtlab.analysis._stats import ESTIMATED, QUANTILES, CaseStats, nearest_rank, tukey_fences
from rtlab.analysis._stream import chunks, select, whiskers

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


def stats_from_samples(
    samples: np.ndarray | Sequence[np.ndarray],
    *,
    overruns: int = 0,
    deadline_ns: int | None = None,
    chunk: int = 8_000_000,
) -> CaseStats:
    """Exact statistics of int64 samples (one array or several pooled), in ns.

    Works on ``np.memmap`` arrays of any length in two or three streaming passes and
    memory bounded by a few ``chunk``-sized arrays. Percentiles and quartiles are
    nearest rank (the sorted value at index ceil(q n) - 1); stddev uses n - 1.
    """
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
        p99=v["p99"],
        p999=v["p999"],
        p9999=v["p9999"],
        max=vmax,
        jitter=vmax - vmin,
        stddev=math.sqrt(m2 / (n - 1)) if n > 1 else math.nan,
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
