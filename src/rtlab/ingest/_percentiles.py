"""Percentiles of an imported histogram, reported as the probe reports them."""

from __future__ import annotations

import math
from fractions import Fraction

PERCENTILES = ("50", "90", "99", "99.9", "99.99")


def nearest_rank(
    buckets: list[list[int]], total: int, q: Fraction, lo: int | None, hi: int | None
) -> int | None:
    """The smallest bucket with at least ceil(q·total) samples at or below, as its midpoint
    clamped to [lo, hi]; hi when the rank falls among the overflowed samples (above every
    bucket). None without samples or extremes."""
    if not total or lo is None or hi is None:
        return None
    rank = min(max(math.ceil(q * total), 1), total)
    seen = 0
    for b_lo, b_hi, c in buckets:
        seen += c
        if seen >= rank:
            return min(max(b_lo + (b_hi - b_lo) // 2, lo), hi)
    return hi


def percentiles(
    buckets: list[list[int]], total: int, lo: int | None, hi: int | None
) -> dict[str, int | None]:
    """PERCENTILES by nearest rank over TOTAL samples (overflowed ones included)."""
    return {p: nearest_rank(buckets, total, Fraction(p) / 100, lo, hi) for p in PERCENTILES}
