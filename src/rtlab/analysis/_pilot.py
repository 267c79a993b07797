"""Where the order statistics will fall, guessed from a pilot sample before pass 1.

The exact statistics need a histogram pass and then a pass that splits the buckets
holding the order statistics into 1-ns sub-bins. Both passes compute every sample's
bucket, so splitting in the first pass those buckets a pilot predicts saves most of the
second: `predicted_cells` reads about `PILOT_SAMPLES` samples in `PILOT_RUNS` runs spread
over the case, and for each quantile takes every bucket its rank can fall into (a
`Z`-sigma binomial band around it in the pilot), and around the Tukey fences those that
the pilot's quartile bands allow. A wrong guess costs only the second pass it meant to
save: the results are the same either way.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from rtlab.analysis._hist import NBUCKETS, OVERFLOW_AT, bucket_bounds, bucket_index
from rtlab.analysis._scan import Interval, Scanner
from rtlab.analysis._select import fence_ranges
from rtlab.analysis._stats import QUANTILES

PILOT_MIN = 1 << 24  # samples in a case below which no pilot is read (two passes are cheap)
PILOT_SAMPLES = 1 << 22
PILOT_RUNS = 64
Z = 6.0  # the band around a rank, in binomial standard deviations of the pilot
MAX_BINS = 1 << 20  # 1-ns sub-bins counted in pass 1, at most (8 MiB per thread)


def _band(cum: np.ndarray, q: Fraction) -> tuple[int, int]:
    """First and last bucket the pilot's rank q m falls into, with the band around it."""
    m = int(cum[-1])
    mid, sd = float(q) * m, math.sqrt(m * float(q) * (1 - float(q)))
    lo = min(max(1, math.floor(mid - Z * sd) - 1), m)
    hi = min(max(1, math.ceil(mid + Z * sd) + 1), m)
    return int(np.searchsorted(cum, lo)), int(np.searchsorted(cum, hi))


def predicted_cells(scanner: Scanner) -> list[Interval]:
    """Whole buckets worth splitting in pass 1, ascending; [] for small cases. A band
    that would take the sub-bins over `MAX_BINS` is left to the second pass."""
    if scanner.count < PILOT_MIN:
        return []
    cum = np.cumsum(scanner.pilot(PILOT_SAMPLES, PILOT_RUNS))
    bands = {key: _band(cum, q) for key, q in QUANTILES.items()}
    lower, upper = bucket_bounds(np.arange(NBUCKETS + 1))
    quartiles = [(int(lower[bands[k][0]]), int(upper[bands[k][1]])) for k in ("q1", "q3")]
    for lo, hi in fence_ranges(*quartiles):
        ends = [min(max(v, 0), OVERFLOW_AT) for v in (lo, hi)]
        b0, b1 = (int(b) for b in bucket_index(np.array(ends, dtype=np.int64)))
        bands[f"fence {lo}"] = (b0 - 1, b1 + 1)  # and the nearest bucket either side
    wanted: set[int] = set()
    bins = 0
    for b0, b1 in bands.values():
        new = set(range(max(b0, 1), min(b1, NBUCKETS - 1) + 1)) - wanted
        # bucket 0 and the overflow are left out: their extents (the minimum, the
        # maximum) are not known yet; the others are at most 2^16 sub-bins each
        more = sum(Interval(int(lower[b]), int(upper[b]), b).bins for b in new)
        if bins + more <= MAX_BINS:
            wanted |= new
            bins += more
    return [Interval(int(lower[b]), int(upper[b]), b) for b in sorted(wanted)]
