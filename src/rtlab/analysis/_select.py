"""Exact order statistics from a bucket histogram and as few narrowing passes as needed.

`Cells` is what is known of the sorted samples: disjoint closed value intervals, each
inside one probe bucket, with the exact count of samples in it. An order statistic whose
rank falls in a cell one value wide is known exactly; otherwise that cell is split by
`Scanner.refine` into at most 2^16 sub-bins (1 ns wide for every bucket below 2^23 ns,
so one pass usually settles everything) and asked again.

`exact_order` settles the quantiles and, with them, the Tukey whiskers and outlier
counts. While the quartiles are still open it also splits, in the same pass, the cells
the fences can fall into, so typical data needs a single pass after the histogram.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rtlab.analysis._hist import bucket_bounds
from rtlab.analysis._scan import Interval, Scanner
from rtlab.analysis._stats import tukey_fences
from rtlab.errors import UserError

_SPECULATE_MAX = 64  # cells split ahead for the fences in one pass, at most


class Cells:
    """Non-empty cells ascending: lo, hi (inclusive, ns), count, bucket (int64 arrays)."""

    def __init__(self, hist: np.ndarray, vmin: int, vmax: int) -> None:
        idx = np.flatnonzero(hist)
        lower, upper = bucket_bounds(idx)
        # bucket 0 also holds the negative samples, the overflow bucket all >= 2^40
        self.lo = np.maximum(lower, vmin)
        self.hi = np.minimum(upper, vmax)
        self.lo[idx == 0] = vmin
        self.count = hist[idx].astype(np.int64)
        self.bucket = idx.astype(np.int64)
        self.n = int(self.count.sum())
        self.vmin, self.vmax = vmin, vmax
        self._cum = np.cumsum(self.count)

    def _cell(self, i: int) -> Interval:
        return Interval(int(self.lo[i]), int(self.hi[i]), int(self.bucket[i]))

    def order(self, k: int) -> int | Interval:
        """The k-th smallest sample (1-based), or the cell to split to know it."""
        if k == 1:
            return self.vmin
        if k == self.n:
            return self.vmax
        i = int(np.searchsorted(self._cum, k, side="left"))
        return int(self.lo[i]) if self.lo[i] == self.hi[i] else self._cell(i)

    def count_le(self, t: int) -> int | Interval:
        """Samples <= t, or the cell to split to know it."""
        if t < self.vmin:
            return 0
        if t >= self.vmax:
            return self.n
        i = int(np.searchsorted(self.lo, t, side="right")) - 1
        if i < 0:
            return 0
        return int(self._cum[i]) if self.hi[i] <= t else self._cell(i)

    def around(self, lo: int, hi: int, limit: int) -> list[Interval] | None:
        """The cells that values in [lo, hi] can fall into, plus the nearest cell on each
        side; None when there are more than LIMIT."""
        lo, hi = max(lo, self.vmin), min(hi, self.vmax)  # searchsorted needs int64
        if lo > hi:
            return []  # no sample there: the counts either side are known
        a = max(int(np.searchsorted(self.hi, lo, side="left")) - 1, 0)
        b = min(int(np.searchsorted(self.lo, hi, side="right")) + 1, self.lo.size)
        if b - a > limit:
            return None
        return [self._cell(i) for i in range(a, b) if self.lo[i] < self.hi[i]]

    def split(self, cells: Sequence[Interval], counts: Sequence[np.ndarray]) -> None:
        """Replace each cell by its non-empty sub-bins (clamped to [min, max]); a whole
        bucket counted before its extent was known may have no cell (then no samples)."""
        keep = np.ones(self.lo.size, dtype=bool)
        parts: list[tuple[np.ndarray, ...]] = []
        for cell, cnt in zip(cells, counts, strict=True):
            at = max(cell.lo, self.vmin)
            i = int(np.searchsorted(self.lo, at, side="left"))
            found = i < self.lo.size and self.lo[i] == at and self.bucket[i] == cell.bucket
            if int(cnt.sum()) != (int(self.count[i]) if found else 0):
                raise UserError("the samples changed while they were being read")
            if not found:
                continue
            keep[i] = False
            j = np.flatnonzero(cnt).astype(np.uint64)
            # offsets from cell.lo in uint64 (a cell can span 2^63); the sums fit int64
            base, span, shift = np.uint64(cell.lo % (1 << 64)), cell.hi - cell.lo, cell.shift
            first = j << np.uint64(shift)
            last = np.minimum(first + np.uint64((1 << shift) - 1), np.uint64(span))
            lo = np.maximum((first + base).view(np.int64), self.vmin)
            hi = np.minimum((last + base).view(np.int64), self.vmax)
            parts.append((lo, hi, cnt[j], np.full(j.size, cell.bucket, np.int64)))
        lo = np.concatenate([self.lo[keep], *(p[0] for p in parts)])
        order = np.argsort(lo, kind="stable")
        self.lo = lo[order]
        self.hi = np.concatenate([self.hi[keep], *(p[1] for p in parts)])[order]
        self.count = np.concatenate([self.count[keep], *(p[2] for p in parts)])[order]
        self.bucket = np.concatenate([self.bucket[keep], *(p[3] for p in parts)])[order]
        self._cum = np.cumsum(self.count)


@dataclass(frozen=True)
class Order:
    """Exact order statistics by key, and the Tukey whiskers and outliers they give."""

    values: dict[str, int]
    whisker_low: int  # smallest sample >= the low fence
    whisker_high: int  # largest sample <= the high fence
    outliers: int  # samples beyond the fences


def bounds(x: int | Interval) -> tuple[int, int]:
    """The values X can be: itself, or its interval."""
    return (x, x) if isinstance(x, int) else (x.lo, x.hi)


def fence_ranges(q1: tuple[int, int], q3: tuple[int, int]) -> list[tuple[int, int]]:
    """Where the low and high fences can lie, given that q1 <= q3, q1 in [a1, b1] and
    q3 in [a3, b3]: (lowest, highest) for each."""
    a1, b1 = q1
    a3, b3 = q3
    hi_min = a3 + (3 * (a3 - min(b1, a3))) // 2
    hi_max = b3 + (3 * (b3 - a1)) // 2
    lo_min = a1 - (3 * (b3 - a1)) // 2
    lo_max = b1 - (3 * (max(a3, b1) - b1)) // 2
    return [(lo_min - 1, lo_max), (hi_min, hi_max)]


def exact_order(scanner: Scanner, cells: Cells, ranks: dict[str, int]) -> Order:
    """Settle RANKS (1-based, by key; "q1" and "q3" among them) and the whiskers,
    splitting cells over as many passes as it takes (one for typical data)."""
    while True:
        need: dict[int, Interval] = {}
        got: dict[str, int | Interval] = {k: cells.order(r) for k, r in ranks.items()}
        values = {k: v for k, v in got.items() if isinstance(v, int)}
        for v in got.values():
            if isinstance(v, Interval):
                need[v.lo] = v
        q1, q3 = got["q1"], got["q3"]
        result = None
        if isinstance(q1, int) and isinstance(q3, int):
            result = _whiskers(cells, q1, q3, need)
        else:
            for lo, hi in fence_ranges(bounds(q1), bounds(q3)):
                for cell in cells.around(lo, hi, _SPECULATE_MAX) or []:
                    need[cell.lo] = cell
        if not need and result is not None:
            return Order(values, *result)
        wanted = list(need.values())
        cells.split(wanted, scanner.refine(wanted))


def _whiskers(
    cells: Cells, q1: int, q3: int, need: dict[int, Interval]
) -> tuple[int, int, int] | None:
    """(whisker_low, whisker_high, outliers), or None after adding the cells to split."""
    lo_f, hi_f = tukey_fences(q1, q3)
    below = cells.count_le(lo_f - 1)
    upto = cells.count_le(hi_f)
    w_lo = cells.order(below + 1) if isinstance(below, int) else below
    w_hi = cells.order(upto) if isinstance(upto, int) else upto
    for x in (w_lo, w_hi):
        if isinstance(x, Interval):
            need[x.lo] = x
    if isinstance(w_lo, int) and isinstance(w_hi, int):
        assert isinstance(below, int) and isinstance(upto, int)
        return w_lo, w_hi, below + cells.n - upto
    return None
