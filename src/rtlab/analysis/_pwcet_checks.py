"""Two checks of a peaks-over-threshold fit beyond its goodness of fit.

Mixture: two causes with different tails (a frequent moderate delay and a rare long one)
give exceedances whose logarithms have two modes, where a generalised Pareto tail has
one. The statistic is Silverman's critical bandwidth: the smallest Gaussian-kernel
bandwidth at which the density estimate of log(y + c) (y the excesses, c their median)
has a single mode. Its null distribution comes from the same parametric
bootstrap as the goodness of fit (samples of the fitted tail), so a p-value is the
share of those samples needing a bandwidth at least as wide. A rare cause far above
the rest shows better as a gap: the largest of the spacings of the log-excesses weighted
by their rank (alike under a Pareto tail), against the same samples. Each at ALPHA / 2;
a two-regime tail gets a refusal, never one law fitted across both.

Stability: the return level at a probability one decade beyond the run (0.1 / n) is
fitted again on each half and each third of the run (same threshold, same declustering
run length); within a split, each part's profile-likelihood interval must overlap every
other part's, at the confidence that makes the whole check a test at level ALPHA
(Bonferroni over the 4 pairs; two intervals of half-width z sd miss each other when the
estimates differ by more than 2 z sd, and the difference has sd sqrt(2) sd). Overlap
rather than "each estimate inside the other's interval": for a short tail the lower end
of a part's interval is held up by that part's own maximum, and a stable tail fitted on
another part can put its estimate below it.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from rtlab.analysis._pwcet_clusters import split
from rtlab.analysis._pwcet_fit import GPDModel, gpd_fit_many
from rtlab.analysis._pwcet_gates import ALPHA, Gate
from rtlab.units import format_ns

GRID = 512
_H_LO, _H_HI, _ITERS = 0.005, 3.0, 22
MIN_PART_CLUSTERS = 20


def _log_excess(y: np.ndarray) -> np.ndarray:
    """log(y + c) standardised per row, c the row's median: the logarithm spreads the far
    tail, where a second cause shows, and c keeps the excesses just above the threshold
    (ties at 0 included) from making modes of their own."""
    c = np.median(y, axis=1, keepdims=True) + 1e-12
    v = np.log(y + c)
    sd = v.std(axis=1, keepdims=True)
    return (v - v.mean(axis=1, keepdims=True)) / np.where(sd > 0, sd, 1.0)


def _binned(v: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(counts (B, GRID), grid start, bin width) per row, padded by the widest kernel."""
    lo = v.min(axis=1) - 3 * _H_HI
    hi = v.max(axis=1) + 3 * _H_HI
    w = (hi - lo) / (GRID - 1)
    b = np.clip(np.round((v - lo[:, None]) / w[:, None]).astype(np.int64), 0, GRID - 1)
    rows = np.repeat(np.arange(v.shape[0]), v.shape[1])
    counts = np.bincount(rows * GRID + b.ravel(), minlength=v.shape[0] * GRID)
    return counts.reshape(v.shape[0], GRID).astype(float), lo, w


def _smooth(ft: np.ndarray, h_bins: np.ndarray) -> np.ndarray:
    """Gaussian-kernel smoothing of binned counts (their FFT FT, zero-padded) per row."""
    f = np.fft.rfftfreq(2 * GRID)
    kern = np.exp(-2 * (math.pi * f[None, :] * h_bins[:, None]) ** 2)
    return np.fft.irfft(ft * kern, n=2 * GRID, axis=1)[:, :GRID]


def _modes(d: np.ndarray) -> np.ndarray:
    """Number of local maxima of each row (ignoring the numerical noise far out)."""
    floor = d.max(axis=1, keepdims=True) * 1e-4
    up = (d[:, 1:-1] > d[:, :-2]) & (d[:, 1:-1] >= d[:, 2:]) & (d[:, 1:-1] > floor)
    return up.sum(axis=1)


def critical_bandwidth(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(h_crit in standard deviations of log(y + c), the antimode at h slightly below it,
    in the same units, NaN when none) for each row of excesses Y (B, k)."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    v = _log_excess(y)
    counts, lo, w = _binned(v)
    ft = np.fft.rfft(counts, n=2 * GRID, axis=1)
    a = np.full(y.shape[0], math.log(_H_LO))
    b = np.full(y.shape[0], math.log(_H_HI))
    for _ in range(_ITERS):  # the number of modes falls as the bandwidth grows
        mid = (a + b) / 2
        one = _modes(_smooth(ft, np.exp(mid) / w)) <= 1
        b = np.where(one, mid, b)
        a = np.where(one, a, mid)
    d = _smooth(ft, np.exp(a) / w)
    anti = np.full(y.shape[0], np.nan)
    for r in range(d.shape[0]):
        peaks = np.flatnonzero((d[r, 1:-1] > d[r, :-2]) & (d[r, 1:-1] >= d[r, 2:])) + 1
        peaks = peaks[d[r, peaks] > d[r].max() * 1e-4]
        if peaks.size >= 2:  # the lowest point between the two highest modes
            p1, p2 = np.sort(peaks[np.argsort(d[r, peaks])[-2:]])
            anti[r] = lo[r] + w[r] * (p1 + int(np.argmin(d[r, p1 : p2 + 1])))
    return np.exp(b), anti


def largest_gap(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(max over the top half of the ranks i of i (v_(i) - v_(i+1)), divided by their
    mean; the excess at the middle of that gap) per row of excesses Y (B, k), v_(i) the
    i-th largest log(y + c). Under a Pareto tail the weighted spacings are alike (the
    Hill estimator averages them); a rare cause far above the rest leaves one huge gap."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    c = np.median(y, axis=1, keepdims=True) + 1e-12
    v = -np.sort(-np.log(y + c), axis=1)
    m = max(2, y.shape[1] // 2)
    i = np.arange(1, m + 1)
    s = i * (v[:, :m] - v[:, 1 : m + 1])
    j = np.argmax(s, axis=1)
    rows = np.arange(y.shape[0])
    mid = np.exp((v[rows, j] + v[rows, j + 1]) / 2) - c[:, 0]
    return s[rows, j] / np.maximum(s.mean(axis=1), 1e-300), mid


def mixture_gate(method: str, y: np.ndarray, null_y: np.ndarray, scale: float,
                 threshold: float) -> tuple[Gate, float | None]:  # fmt: skip
    """The mixture gate on excesses Y (standardised by SCALE over THRESHOLD, ns) against
    samples NULL_Y of the fitted tail, and the boundary (ns) between the two regimes when
    it fails. Two statistics, each against its bootstrap null at level ALPHA / 2: the
    critical bandwidth (two modes) and the largest weighted gap (a group far out)."""
    h, anti = critical_bandwidth(y[None, :])
    hn, _ = critical_bandwidth(null_y)
    p_bw = float((1 + np.count_nonzero(hn >= h[0])) / (hn.size + 1))
    g, mid = largest_gap(y[None, :])
    gn, _ = largest_gap(null_y)
    p_gap = float((1 + np.count_nonzero(gn >= g[0])) / (gn.size + 1))
    p = min(1.0, 2 * min(p_bw, p_gap))
    ok = p > ALPHA
    measured = (
        f"critical bandwidth {h[0]:.3g} sd of the log-excesses for one mode, p={p_bw:.2g}; "
        f"largest weighted gap {g[0]:.3g} times the mean, p={p_gap:.2g}; both against "
        f"{hn.size} samples of the fitted tail, Bonferroni p={p:.2g}"
        + ("" if ok else f" <= {ALPHA}")
    )
    boundary = None
    if not ok:
        if p_gap <= p_bw:
            at = float(mid[0])
        elif math.isfinite(anti[0]):
            c = float(np.median(y)) + 1e-12
            logs = np.log(y + c)
            at = math.exp(float(anti[0]) * float(logs.std()) + float(logs.mean())) - c
        else:
            at = math.nan
        if math.isfinite(at):
            boundary = threshold + scale * max(at, 0.0)
            measured += f"; the regimes part near {format_ns(boundary)}"
    detail = measured if ok else f"two tail regimes: one law cannot fit both ({measured})"
    return Gate("mixture", method, float(min(p_bw, p_gap)), p, ok, detail), boundary


@dataclass(frozen=True)
class Part:
    first: int  # activation index where the part starts
    size: int  # activations
    estimate: float  # ns
    lo: float
    hi: float


def stability_confidence(pairs: int = 4) -> float:
    """Confidence of the intervals compared, so that P(any pair misses) <= ALPHA."""
    z = float(stats.norm.isf(ALPHA / pairs / 2)) / math.sqrt(2)
    return 1 - 2 * float(stats.norm.sf(z))


def stability_gate(method: str, n: int, times: np.ndarray, values: np.ndarray,
                   threshold: float, run: int) -> Gate:  # fmt: skip
    """Return level at 0.1 / N on each half and third of the run (exceedances of THRESHOLD
    at TIMES with VALUES, declustered with run length RUN): each part's interval overlaps
    every other part's of the same split."""
    p = 0.1 / n
    conf = stability_confidence()
    order = np.argsort(times, kind="stable")
    t, v = times[order], values[order].astype(float)
    splits: list[list[Part]] = []
    for parts in (2, 3):
        bounds = np.linspace(0, n, parts + 1).astype(np.int64)
        got = []
        for a, b in itertools.pairwise(bounds):
            sel = (t >= a) & (t < b)
            c = split(t[sel], v[sel], run)
            y = c.maxima - threshold
            if c.count < MIN_PART_CLUSTERS or not y.mean() > 0:
                break
            scale = float(y.mean())
            xi, sig, ll = (float(q[0]) for q in gpd_fit_many(y / scale))
            m = GPDModel(y / scale, scale, threshold, int(sel.sum()) / int(b - a), sig, xi, ll)
            if not p < m.zeta:
                break
            lo, hi = m.interval(p, conf)
            got.append(Part(int(a), int(b - a), float(m.isf(p)), lo, hi))
        else:
            splits.append(got)
    worst, where = 0.0, ""
    for got in splits:
        for i, one in enumerate(got):
            for other in got[i + 1 :]:
                lo_p, hi_p = (one, other) if one.hi < other.lo else (other, one)
                gap = hi_p.lo - lo_p.hi  # > 0: the intervals miss each other
                rel = gap / max(min(lo_p.hi - lo_p.lo, hi_p.hi - hi_p.lo), 1e-9)
                if gap > 0 and rel > worst:
                    worst = rel
                    where = (
                        f"of the {len(got)} parts, the one from activation {lo_p.first}: "
                        f"{lo_p.estimate / 1e3:.4g} µs [{lo_p.lo / 1e3:.4g}, {lo_p.hi / 1e3:.4g}], "
                        f"the one from {hi_p.first}: {hi_p.estimate / 1e3:.4g} µs "
                        f"[{hi_p.lo / 1e3:.4g}, {hi_p.hi / 1e3:.4g}]"
                    )
    ok = not where
    names = {2: "halves", 3: "thirds"}
    done = " and ".join(names[len(g)] for g in splits) or "no part (too few bursts in each)"
    measured = f"return level at p={p:.2g} on the {done}, {conf:.2%} intervals: " + (
        "each overlaps the others" if ok else where
    )
    detail = measured if ok else f"the return level is not stable over the run ({measured})"
    return Gate("stability", method, worst, None, ok, detail)
