"""Clustered extremes for pWCET: the extremal index and runs declustering.

Latencies on real machines are late in bursts: one disturbance (an interrupt storm, a
lock held for a while) delays several successive activations. Extreme value theory keeps
such data: the exceedances of a high threshold are grouped into clusters, the largest of
each cluster is fitted (the cluster maxima are nearly independent), and the extremal
index theta (1 / the mean cluster size, in the limit) says how much the bursts shorten
the waiting time for the maximum of a run: P(max of m <= x) = P(X <= x)^(m theta).

theta is estimated by the intervals estimator of Ferro and Segers (2003, JRSS B 65,
545-556), which uses the times between successive exceedances only; the clusters follow
their declustering scheme: with N exceedances, C = ceil(theta N), the gaps longer than
the C-th longest separate the clusters. That gap is the run length of runs
declustering, chosen from the data rather than by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Clusters:
    """The exceedances of one threshold grouped into bursts (time order)."""

    theta: float  # extremal index estimate, in (0, 1]
    run: int  # run length (activations): a gap longer than this starts a new cluster
    exceedances: int  # N
    positions: np.ndarray  # time index of each cluster's maximum
    maxima: np.ndarray  # each cluster's maximum

    @property
    def count(self) -> int:
        return int(self.maxima.size)


def extremal_index(times: np.ndarray) -> float:
    """Ferro-Segers intervals estimate of theta from the sorted exceedance TIMES
    (activation indices), capped to (0, 1]. 1 with fewer than 3 exceedances."""
    if times.size < 3:
        return 1.0
    t = np.diff(times).astype(float)
    if t.max() <= 2:
        num, den = t.sum() ** 2, t.size * float(np.dot(t, t))
    else:
        num, den = (t - 1).sum() ** 2, t.size * float(np.dot(t - 1, t - 2))
    if not den > 0:
        return 1.0
    return float(min(1.0, max(2.0 * num / den, 1.0 / times.size)))


def clustering_p(times: np.ndarray, n: int, seed: int = 0, draws: int = 199) -> float:
    """P-value of an extremal index as low as that of TIMES (sorted exceedance positions
    among N activations) if the exceedances fell at independent random times: a Monte
    Carlo test of no clustering, as many positions drawn at random DRAWS times."""
    k = int(times.size)
    if k < 3:
        return 1.0
    obs = extremal_index(times)
    rng = np.random.default_rng(seed)
    null = np.array([extremal_index(np.unique(rng.integers(0, n, k))) for _ in range(draws)])
    return float((1 + np.count_nonzero(null <= obs)) / (draws + 1))


def split(times: np.ndarray, values: np.ndarray, run: int) -> Clusters:
    """Runs declustering of exceedances at TIMES (sorted) with VALUES with run length RUN:
    a gap of more than RUN activations between two exceedances starts a new cluster."""
    if times.size == 0:
        return Clusters(1.0, run, 0, times, values)
    new = np.concatenate([[True], np.diff(times) > run])
    starts = np.flatnonzero(new)
    label = np.cumsum(new) - 1
    # the position of each cluster's maximum (first one on ties)
    order = np.lexsort((times, -values.astype(float), label))
    first = order[np.searchsorted(label[order], np.arange(starts.size))]
    theta = starts.size / times.size
    return Clusters(theta, run, int(times.size), times[first], values[first])


def decluster(times: np.ndarray, values: np.ndarray) -> Clusters:
    """Ferro-Segers declustering of the exceedances at TIMES (sorted) with VALUES: theta
    from the intervals estimator, then the gaps longer than the C-th longest, C =
    ceil(theta N), separate clusters (at most C of them, fewer when gaps tie with that
    one, the run length). The returned theta is the intervals estimate."""
    n = int(times.size)
    theta = extremal_index(times)
    c = min(n, max(1, math.ceil(theta * n)))
    if c >= n or n < 3:
        out = split(times, values, 0)
    else:
        gaps = np.sort(np.diff(times))[::-1]
        out = split(times, values, int(gaps[c - 1]))
    return Clusters(theta, out.run, n, out.positions, out.maxima)


def bursts_text(c: Clusters, n: int) -> str:
    """What the bursts look like: 'extremal index θ=0.31 (3.2 exceedances per burst), a
    burst every ~420 activations, run length 12'."""
    every = n / max(c.count, 1)
    return (
        f"extremal index θ={c.theta:.2f} ({c.exceedances / max(c.count, 1):.1f} exceedances "
        f"per burst), {c.count} bursts: one every ~{every:,.0f} activations, run length "
        f"{c.run}"
    )
