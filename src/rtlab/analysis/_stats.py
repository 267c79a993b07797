"""Per-case summary statistics (`CaseStats`) and their estimate from a histogram."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from rtlab.analysis._hist import Histogram

# Order statistics reported, as exact fractions for the nearest-rank definition.
QUANTILES: dict[str, Fraction] = {
    "q1": Fraction(1, 4),
    "median": Fraction(1, 2),
    "q3": Fraction(3, 4),
    "p90": Fraction(9, 10),
    "p95": Fraction(95, 100),
    "p99": Fraction(99, 100),
    "p999": Fraction(999, 1000),
    "p9999": Fraction(9999, 10000),
}
#: Keys of `CaseStats.error_ns`: every statistic that a histogram only estimates.
ESTIMATED = (*QUANTILES, "iqr", "whisker_low", "whisker_high")


def nearest_rank(n: int, q: Fraction) -> int:
    """1-based nearest rank of quantile q among n values: max(1, ceil(q * n))."""
    return max(1, -((-q.numerator * n) // q.denominator))


def tukey_fences(q1: int, q3: int) -> tuple[int, int]:
    """Integer fences (lo, hi): integer data v is inside when lo <= v <= hi.

    The real fences are q1 - 1.5 IQR and q3 + 1.5 IQR; with integer data and integer
    quartiles, rounding them inwards to integers selects the same values.
    """
    spread = (3 * (q3 - q1)) // 2
    return q1 - spread, q3 + spread


@dataclass
class CaseStats:
    """Summary of one case, all times in ns.

    ``exact`` is True when computed from every sample; from a histogram, ``error_ns``
    gives for each estimated statistic the ± bound of its error (0.0 when exact),
    ``outliers`` and ``deadline_misses`` are rounded estimates and
    ``deadline_misses_bounds`` brackets the true miss count.
    """

    count: int
    min: float
    mean: float
    median: float
    p90: float
    p95: float
    p99: float
    p999: float
    p9999: float
    max: float
    jitter: float  # max - min, as in the published tables
    stddev: float  # sample standard deviation (n - 1), NaN below 2 samples
    variance: float  # ns², the square of stddev (exact integers over n(n - 1) from raw samples)
    q1: float
    q3: float
    iqr: float
    whisker_low: float  # Tukey: most extreme data within 1.5 IQR of the box
    whisker_high: float
    outliers: int  # samples beyond the whiskers
    overruns: int = 0
    deadline_ns: int | None = None
    deadline_misses: int | None = None  # samples > deadline_ns
    exact: bool = True
    error_ns: dict[str, float] = field(default_factory=dict)
    deadline_misses_bounds: tuple[int, int] | None = None

    @classmethod
    def empty(cls, *, overruns: int = 0, deadline_ns: int | None = None) -> CaseStats:
        """No samples: every statistic is NaN."""
        nan = math.nan
        return cls(
            count=0,
            min=nan,
            mean=nan,
            median=nan,
            p90=nan,
            p95=nan,
            p99=nan,
            p999=nan,
            p9999=nan,
            max=nan,
            jitter=nan,
            stddev=nan,
            variance=nan,
            q1=nan,
            q3=nan,
            iqr=nan,
            whisker_low=nan,
            whisker_high=nan,
            outliers=0,
            overruns=overruns,
            deadline_ns=deadline_ns,
            deadline_misses=None if deadline_ns is None else 0,
            error_ns=dict.fromkeys(ESTIMATED, 0.0),
            deadline_misses_bounds=None if deadline_ns is None else (0, 0),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict: Python numbers, NaN as None, bounds as a list."""
        return {k: _plain(v) for k, v in asdict(self).items()}


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _nan(v: float | None) -> float:
    return math.nan if v is None else float(v)


def _up(n: int) -> float:
    """n as a float no smaller than n (error bounds must not round down)."""
    f = float(n)
    return math.nextafter(f, math.inf) if f < n else f


def _count_above(lo: np.ndarray, hi: np.ndarray, cnt: np.ndarray, t: int) -> tuple[float, int, int]:
    """Samples > t: (proportional estimate, lower bound, upper bound)."""
    whole = lo > t
    straddle = (lo <= t) & (hi > t)
    sure = int(cnt[whole].sum())
    part = cnt[straddle]
    share = (hi[straddle] - t) / (hi[straddle] - lo[straddle] + 1)
    return sure + float((part * share).sum()), sure, sure + int(part.sum())


def _count_below(lo: np.ndarray, hi: np.ndarray, cnt: np.ndarray, t: int) -> tuple[float, int, int]:
    """Samples < t: (proportional estimate, lower bound, upper bound)."""
    whole = hi < t
    straddle = (lo < t) & (hi >= t)
    sure = int(cnt[whole].sum())
    part = cnt[straddle]
    share = (t - lo[straddle]) / (hi[straddle] - lo[straddle] + 1)
    return sure + float((part * share).sum()), sure, sure + int(part.sum())


def _buckets(hist: Histogram, minimum: int, maximum: int) -> tuple[np.ndarray, ...]:
    """(lower, upper, count) of the non-empty buckets, the overflow as a last bucket up to
    MAXIMUM (from ``overflow_at``, else from above the highest bucket)."""
    keep = hist.count > 0
    lower, upper, cnt = hist.lower[keep], hist.upper[keep], hist.count[keep]
    if hist.overflow:
        top = int(upper.max()) + 1 if upper.size else minimum
        if hist.overflow_at is not None:
            top = max(top, hist.overflow_at)
        ovf_lo = min(max(top, minimum), maximum)
        lower = np.append(lower, ovf_lo)
        upper = np.append(upper, maximum)
        cnt = np.append(cnt, hist.overflow)
    return lower, upper, cnt


def narrowed_ranges(hist: Histogram, minimum: int, maximum: int) -> tuple[np.ndarray, ...]:
    """(lo, hi, count) of the non-empty buckets, each range narrowed to [MINIMUM, MAXIMUM]
    (the first extended down to the minimum, the last up to the maximum): the ranges
    `stats_from_histogram` bounds its errors with."""
    lower, upper, cnt = _buckets(hist, int(minimum), int(maximum))
    lo = np.clip(lower, minimum, maximum)
    hi = np.clip(upper, minimum, maximum)
    lo[0] = minimum
    hi[-1] = maximum
    return lo, hi, cnt


def count_above(hist: Histogram, minimum: int, maximum: int, t: int) -> tuple[float, int, int]:
    """Samples of HIST above T: (proportional estimate, lower bound, upper bound)."""
    if hist.total == 0:
        return 0.0, 0, 0
    lo, hi, cnt = narrowed_ranges(hist, minimum, maximum)
    return _count_above(lo, hi, cnt, int(t))


def stats_from_histogram(
    hist: Histogram,
    *,
    minimum: int,
    maximum: int,
    mean: float,
    stddev: float | None,
    overruns: int = 0,
    deadline_ns: int | None = None,
) -> CaseStats:
    """Statistics of one case from its histogram and its exact min/max/mean/stddev.

    Percentiles and quartiles are nearest-rank on the cumulative bucket counts,
    reported as the bucket midpoint ``lower + (upper - lower) // 2`` clamped to
    [min, max] (the probe's own definition). Every bucket's range is first narrowed to
    [min, max] (the first bucket extended down to min, which keeps negative samples
    binned at 0 covered; overflow is a last bucket up to max, from ``overflow_at`` or
    else from above the highest bucket); ``error_ns`` is the largest distance from the
    reported value to that range.

    Deadline misses (samples > deadline) are exact when no bucket straddles the
    deadline; otherwise the straddling bucket adds its count times the fraction of its
    range above the deadline, and ``deadline_misses_bounds`` gives the sure and the
    possible counts. Outliers are counted the same way against the integer Tukey
    fences from the estimated quartiles. A whisker beyond min/max is the midpoint of the
    in-fence part of the bucket straddling its fence; its ``error_ns`` covers both the
    fence's own uncertainty (from the quartiles' errors) and the bucket widths.
    All error bounds hold for disjoint buckets (see `Histogram.merge`).
    """
    n = hist.total
    if n == 0:
        return CaseStats.empty(overruns=overruns, deadline_ns=deadline_ns)
    minimum, maximum = int(minimum), int(maximum)
    lower, upper, cnt = _buckets(hist, minimum, maximum)
    lo, hi = narrowed_ranges(hist, minimum, maximum)[:2]
    mid = np.clip(lower + (upper - lower) // 2, minimum, maximum)
    cum = np.cumsum(cnt)

    values: dict[str, int] = {}
    error: dict[str, float] = {}
    ierr: dict[str, int] = {}  # the same bounds as exact integers
    for key, q in QUANTILES.items():
        b = int(np.searchsorted(cum, nearest_rank(n, q), side="left"))
        v = int(mid[b])
        values[key] = v
        ierr[key] = max(v - int(lo[b]), int(hi[b]) - v)
        error[key] = _up(ierr[key])
    q1, q3 = values["q1"], values["q3"]
    ierr["iqr"] = ierr["q1"] + ierr["q3"]
    error["iqr"] = _up(ierr["iqr"])

    # Tukey fences from the estimated quartiles; the true ones lie within fe_* of them
    lo_f, hi_f = tukey_fences(q1, q3)
    fe_lo = ierr["q1"] + (3 * ierr["iqr"] + 1) // 2
    fe_hi = ierr["q3"] + (3 * ierr["iqr"] + 1) // 2
    lo_t, hi_t = max(lo_f, minimum), min(hi_f, maximum)  # same selection, stays in int64

    def clamp(t: int) -> int:
        return min(max(t, minimum), maximum)

    out_hi = _count_above(lo, hi, cnt, hi_t)[0] if hi_t < maximum else 0.0
    if maximum <= hi_f - fe_hi:
        w_hi, error["whisker_high"] = maximum, 0.0
    else:
        inside = np.flatnonzero(hi <= clamp(hi_f - fe_hi))  # surely within the fence
        floor_ = int(lo[inside[-1]]) if inside.size else minimum
        ceil_ = min(hi_f + fe_hi, maximum)
        if maximum <= hi_t:
            w_hi = maximum
        else:  # midpoint of the in-fence part of the bucket straddling the fence
            b = int(np.flatnonzero(lo <= hi_t)[-1])
            w_hi = int(lo[b]) + (min(int(hi[b]), hi_t) - int(lo[b])) // 2
        w_hi = max(min(max(w_hi, floor_), ceil_), q3)  # never inside the box
        error["whisker_high"] = _up(max(w_hi - floor_, ceil_ - w_hi))

    out_lo = _count_below(lo, hi, cnt, lo_t)[0] if lo_t > minimum else 0.0
    if minimum >= lo_f + fe_lo:
        w_lo, error["whisker_low"] = minimum, 0.0
    else:
        inside = np.flatnonzero(lo >= clamp(lo_f + fe_lo))
        floor_ = max(lo_f - fe_lo, minimum)
        ceil_ = int(hi[inside[0]]) if inside.size else maximum
        if minimum >= lo_t:
            w_lo = minimum
        else:
            b = int(np.flatnonzero(hi >= lo_t)[0])
            bottom = max(int(lo[b]), lo_t)
            w_lo = bottom + (int(hi[b]) - bottom) // 2
        w_lo = min(max(min(w_lo, ceil_), floor_), q1)
        error["whisker_low"] = _up(max(w_lo - floor_, ceil_ - w_lo))

    misses: int | None = None
    bounds: tuple[int, int] | None = None
    if deadline_ns is not None:
        est, sure, possible = _count_above(lo, hi, cnt, int(deadline_ns))
        misses, bounds = round(est), (sure, possible)

    return CaseStats(
        count=n,
        min=minimum,
        mean=_nan(mean),
        median=values["median"],
        p90=values["p90"],
        p95=values["p95"],
        p99=values["p99"],
        p999=values["p999"],
        p9999=values["p9999"],
        max=maximum,
        jitter=maximum - minimum,
        stddev=_nan(stddev),
        variance=_nan(stddev) ** 2,
        q1=q1,
        q3=q3,
        iqr=q3 - q1,
        whisker_low=w_lo,
        whisker_high=w_hi,
        outliers=round(out_lo + out_hi),
        overruns=int(overruns),
        deadline_ns=None if deadline_ns is None else int(deadline_ns),
        deadline_misses=misses,
        exact=False,
        error_ns=error,
        deadline_misses_bounds=bounds,
    )
