"""Exact statistics over raw samples, in compiled passes at memory speed.

A pass (`Scanner.scan`, C, threads) computes count, min, max, the exact integer sum and
sum of squares, the deadline misses and a histogram over the probe's bucket index, and
splits chosen buckets into 1-ns sub-bins (coarser above 2^23 ns). The histogram locates
every wanted order statistic in one bucket; once that bucket, and those the Tukey
fences can fall into, are split, the quantiles, whiskers and outlier counts are exact
(`rtlab.analysis._select`). A pilot read of a few million samples guesses those buckets
so that the first pass splits them already (`rtlab.analysis._pilot`): typical data then
takes one pass, and a wrong guess one more. A read-only ``np.memmap`` is read in place,
never copied; its pages are dropped from the process as the passes go.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rtlab.analysis._pilot import predicted_cells
from rtlab.analysis._scan import Scanner
from rtlab.analysis._select import Cells, exact_order
from rtlab.analysis._stats import ESTIMATED, QUANTILES, CaseStats, nearest_rank


def sqrt_ratio(p: int, q: int) -> float:
    """sqrt(p / q) correctly rounded to float, for integers p >= 0, q > 0."""
    if p == 0:
        return 0.0
    # scale by 4^s so the integer square root has >= 55 significant bits, then round
    # once: a sticky low bit stands for an inexact remainder
    s = max(0, (112 - (p.bit_length() - q.bit_length())) // 2 + 1)
    num = p << (2 * s)
    r = math.isqrt(num // q)
    exact = r * r * q == num
    return math.ldexp(float(2 * r + (0 if exact else 1)), -(s + 1))


def stats_from_samples(
    samples: np.ndarray | Sequence[np.ndarray],
    *,
    overruns: int = 0,
    deadline_ns: int | None = None,
    chunk: int = 1 << 20,
) -> CaseStats:
    """Exact statistics of int64 samples (one array or several pooled), in ns.

    Works on ``np.memmap`` arrays of any length in one to three passes (a few more only
    when an order statistic lies above 2^23 ns in a crowded bucket) with memory bounded
    by the threads' ``chunk``-sample blocks. Percentiles and quartiles are nearest rank (the
    sorted value at index ceil(q n) - 1); the mean is the exact sum over n and the
    standard deviation (n - 1) the correctly rounded root of the exact variance.
    Arrays that are not native int64 are converted, whole, first.
    """
    if chunk < 1:
        raise ValueError("chunk must be >= 1")
    arrays = [samples] if isinstance(samples, np.ndarray) else list(samples)
    scanner = Scanner(arrays, block=chunk)
    guessed = predicted_cells(scanner)
    m, counts = scanner.scan(deadline_ns, guessed)
    n = m.count
    if n == 0:
        return CaseStats.empty(overruns=overruns, deadline_ns=deadline_ns)
    ranks = {key: nearest_rank(n, q) for key, q in QUANTILES.items()}
    cells = Cells(m.hist, m.min, m.max)
    cells.split(guessed, counts)
    order = exact_order(scanner, cells, ranks)
    v = order.values
    q1, q3 = v["q1"], v["q3"]
    misses = m.above
    return CaseStats(
        count=n,
        min=m.min,
        mean=m.sum / n,
        median=v["median"],
        p90=v["p90"],
        p95=v["p95"],
        p99=v["p99"],
        p999=v["p999"],
        p9999=v["p9999"],
        max=m.max,
        jitter=m.max - m.min,
        stddev=sqrt_ratio(n * m.sum_squares - m.sum * m.sum, n * (n - 1)) if n > 1 else math.nan,
        variance=(n * m.sum_squares - m.sum * m.sum) / (n * (n - 1)) if n > 1 else math.nan,
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        whisker_low=order.whisker_low,
        whisker_high=order.whisker_high,
        outliers=order.outliers,
        overruns=int(overruns),
        deadline_ns=None if deadline_ns is None else int(deadline_ns),
        deadline_misses=None if deadline_ns is None else misses,
        exact=True,
        error_ns=dict.fromkeys(ESTIMATED, 0.0),
        deadline_misses_bounds=None if deadline_ns is None else (misses, misses),
    )
