"""The two extreme-value methods behind pWCET, each with its automatic choice and its gates.

Peaks over threshold ("pot"): candidate thresholds leave K_MIN..K_MAX samples above them
(a geometric grid); a GPD is fitted above each. The chosen threshold is the lowest whose
shape estimate agrees with the estimate above every higher candidate with at least
1/STABLE_SPAN of its exceedances, within Z_STABLE standard errors of their difference (the
estimates are nested, so that difference has variance (1 + xi)^2 (1/k_high - 1/k_low)):
below it the shape drifts, which is the bias a too-low threshold brings. When the
goodness of fit alone rejects the GPD there (a bias the shape test missed, such as a
lighter body just below the threshold), the threshold moves up, at most HULL candidates,
and every gate is run again. The choice is itself uncertain, so the interval is the hull
of the intervals at the chosen threshold and the next HULL higher candidates
(bench/pwcet.py measures what that buys: without it, 90 % intervals covered the true
quantile in 0.69-0.85 of its synthetic runs).

Block maxima ("block-maxima"): blocks of B0 * 2^j consecutive activations (at most M_MAX
and at least M_MIN blocks); a GEV is fitted to the maxima of each size, and the smallest
block whose shape agrees with every larger block's (the same criterion over all larger
blocks, variances from the observed information) is chosen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rtlab.analysis._pwcet_checks import mixture_gate, stability_gate
from rtlab.analysis._pwcet_clusters import Clusters, decluster, split
from rtlab.analysis._pwcet_fit import (
    XI_MAX,
    XI_MIN,
    GEVModel,
    GPDModel,
    anderson_darling,
    gev_cdf,
    gev_fit,
    gev_isf,
    gev_loglik,
    gpd_fit_many,
    gpd_isf,
)
from rtlab.analysis._pwcet_gates import (
    Gate,
    count_gate,
    first_failure,
    fit_gate,
    independence_gate,
    reason,
    shape_gate,
)

POT, BM = "pot", "block-maxima"
K_MIN, K_MAX, K_STEPS = 50, 5000, 25
K_FIT = K_MIN  # fewest burst maxima a candidate threshold is fitted with, as exceedances
B0, M_MIN, M_MAX = 25, 30, 5000
Z_STABLE = 2.5
STABLE_SPAN = 4
HULL = 2
BOOT_POT, BOOT_BM = 199, 99
K_BOOT = 2000  # exceedances simulated per bootstrap sample at most


@dataclass
class MethodFit:
    method: str
    model: GPDModel | GEVModel | None
    hull: list[GPDModel] = field(default_factory=list)  # next higher thresholds: interval hull
    gates: list[Gate] = field(default_factory=list)
    refused: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


def _stable_choice(xi: np.ndarray, var: np.ndarray, span: float = math.inf) -> int:
    """Index of the first candidate (they run from most data to least) whose shape agrees
    within Z_STABLE standard errors of the difference with every later one that has at
    least 1/SPAN of its information (1/var). VAR[l] is the variance of candidate l's shape
    under the hypothesis being tested, that the model holds from candidate j on."""
    for j in range(xi.size):
        later = np.arange(j + 1, xi.size)
        later = later[var[j, later] <= span * var[j, j]]
        sd = np.sqrt(np.maximum(var[j, later] - var[j, j], 1e-12))
        if np.all(np.abs(xi[later] - xi[j]) <= Z_STABLE * sd):
            return j
    return xi.size - 1


def _gpd_cdf_rows(y: np.ndarray, sigma: np.ndarray, xi: np.ndarray) -> np.ndarray:
    s, x = sigma[:, None], xi[:, None]
    z = y / s
    small = np.abs(x) < 1e-9
    t = np.maximum(1.0 + np.where(small, 1.0, x) * z, 1e-300)
    with np.errstate(over="ignore", divide="ignore"):
        sf = np.where(small, np.exp(-z), np.exp(-np.log(t) / np.where(small, 1.0, x)))
    return 1.0 - np.clip(sf, 0.0, 1.0)


def pot_candidates(n: int) -> np.ndarray:
    """Exceedance counts of the candidate thresholds, most first."""
    kmax = min(K_MAX, n // 10)
    if kmax < K_MIN:
        return np.empty(0, np.int64)
    ks = np.unique(np.round(np.geomspace(K_MIN, kmax, K_STEPS)).astype(np.int64))
    return ks[::-1]


def _excesses(n: int, top_val: np.ndarray, top_idx: np.ndarray, k: int,
              clustered: bool) -> tuple[np.ndarray, Clusters]:  # fmt: skip
    """The excesses over the K-th largest sample that are fitted (every exceedance, or the
    maximum of each burst when CLUSTERED) and the clusters (one per exceedance if not)."""
    u = top_val[k]
    order = np.argsort(top_idx[:k], kind="stable")
    t, v = top_idx[:k][order], top_val[:k][order]
    c = decluster(t, v) if clustered else split(t, v, 0)
    return c.maxima - u, c


def fit_pot(n: int, top_val: np.ndarray, top_idx: np.ndarray, seed: int,
            clustered: bool = False) -> MethodFit:  # fmt: skip
    """TOP_VAL: the largest samples in descending order, TOP_IDX their positions in time.
    CLUSTERED: the extremes come in bursts; fit the maximum of each (Ferro-Segers
    declustering at each candidate threshold) and keep the extremal index as the bursts
    per exceedance at the chosen threshold: theta times the exceedance rate is the burst
    rate, so the bursts whose maximum exceeds x arrive at theta k/n G(x - u) per
    activation, G the tail fitted to the burst maxima (what the maximum of a run needs)."""
    out = MethodFit(POT, None)
    ks = pot_candidates(n)
    ks = ks[ks < top_val.size]
    what = "bursts" if clustered else "samples"
    fitted = [_excesses(n, top_val, top_idx, int(k), clustered) for k in ks]
    counts = [c.count for _, c in fitted]
    out.gates.append(count_gate("exceedances", POT, max(counts, default=0), K_MIN,
                                f"{what} above the lowest candidate threshold"))  # fmt: skip
    if not ks.size or not out.gates[-1].passed:
        out.refused = reason(out.gates[-1])
        return out
    xis, sigmas, lls, scales = [], [], [], []
    for y, c in fitted:
        scale = float(y.mean())
        if not scale > 0 or c.count < K_FIT:
            xis.append(np.nan)
            sigmas.append(np.nan)
            lls.append(np.nan)
            scales.append(np.nan)
            continue
        xi, sigma, ll = gpd_fit_many(y / scale)
        xis.append(float(xi[0]))
        sigmas.append(float(sigma[0]))
        lls.append(float(ll[0]))
        scales.append(scale)
    xi_a = np.array(xis)
    ok = np.isfinite(xi_a)
    if not ok.any():
        out.gates.append(Gate("threshold", POT, 0.0, None, False,
                              f"no usable threshold: the {what} above every candidate are "
                              "equal or too few"))  # fmt: skip
        out.refused = reason(out.gates[-1])
        return out
    idx = np.flatnonzero(ok)
    # var[j, l]: the variance of the shape above candidate l if the GPD holds from j on,
    # (1 + xi_j)^2 / k_l, with xi_j at least -0.5 (below, the MLE is irregular and its
    # variance formula would trust a handful of points near the end of the tail)
    c = (1 + np.maximum(xi_a[idx], -0.5)) ** 2
    kc = np.array(counts, dtype=float)[idx]
    var = c[:, None] / kc[None, :]
    chosen = int(_stable_choice(xi_a[idx], var, STABLE_SPAN))

    def model_at(j: int) -> GPDModel:
        k = int(ks[j])
        y, cl = fitted[j]
        theta = cl.count / k if clustered else 1.0
        return GPDModel(y / scales[j], scales[j], float(top_val[k]), k / n, sigmas[j], xis[j],
                        lls[j], theta, seed)  # fmt: skip

    # the lowest stable threshold first; when the goodness of fit alone rejects the GPD
    # there, that is the bias of a threshold still too low (the shape test missed it):
    # move up, at most HULL candidates (those the interval hull spans anyway)
    moved: list[dict[str, float]] = []
    for step in range(HULL + 1):
        jc = int(idx[chosen + step])
        model = model_at(jc)
        gates, boundary = _judge(model, fitted[jc][1], seed, clustered)
        last = step == HULL or chosen + step + 1 >= idx.size
        if gates[-1].name != "fit" or gates[-1].passed or last:
            break
        moved.append({"threshold_ns": model.threshold, "fit_p": gates[-1].p_value or 0.0})
    out.model = model
    out.hull = [model_at(int(j)) for j in idx[chosen + step + 1 : chosen + step + 1 + HULL]]
    k, u = int(ks[jc]), model.threshold
    cl = fitted[jc][1]
    out.params = {
        "distribution": "genpareto",
        "shape": model.xi,
        "scale_ns": model.sigma * model.scale,
        "threshold_ns": u,
        "exceedances": k,
        "rate": model.zeta,
        "declustered": clustered,
        "extremal_index": model.theta,
        "extremal_index_estimate": cl.theta if clustered else 1.0,
        "clusters": cl.count,
        "run_length": cl.run,
        "cluster_rate": cl.count / n,
        "candidates": int(ks.size),
        "hull_thresholds_ns": [h.threshold for h in out.hull],
        "unfit_thresholds": moved,
        "shapes": {int(kk): (None if not math.isfinite(x) else round(x, 4))
                   for kk, x in zip(ks, xi_a, strict=True)},
    }  # fmt: skip
    if boundary is not None:
        out.params["regime_boundary_ns"] = boundary
    out.gates += gates
    if all(g.passed for g in gates):
        out.gates.append(stability_gate(POT, n, top_idx[:k], top_val[:k], u, cl.run))
    fail = first_failure(out.gates)
    out.refused = None if fail is None else reason(fail)
    return out


def _judge(model: GPDModel, cl: Clusters, seed: int,
           clustered: bool) -> tuple[list[Gate], float | None]:  # fmt: skip
    """The gates of one threshold's fit, up to the first failure: mixture, shape,
    independence of its extremes, goodness of fit; and the regime boundary, if any."""
    # the null samples of the fitted tail: for the mixture and goodness-of-fit tests
    rng = np.random.default_rng(seed)
    kf = model.y.size
    kb = min(kf, K_BOOT)
    ysim = gpd_isf(rng.random((BOOT_POT, kb)), model.sigma, model.xi)
    yobs = model.y if kb == kf else rng.choice(model.y, kb, replace=False)
    gate, boundary = mixture_gate(POT, yobs, ysim, model.scale, model.threshold)
    gates = [gate]
    if not gate.passed:
        return gates, boundary
    gates.append(shape_gate(POT, model.xi, XI_MIN, XI_MAX, "generalised Pareto tail"))
    if not gates[-1].passed:
        return gates, boundary
    gates.append(independence_gate(POT, cl.maxima, "burst maxima" if clustered
                                   else "exceedances"))  # fmt: skip
    if not gates[-1].passed:
        return gates, boundary
    # goodness of fit: A^2 against its null with the parameters refitted to each sample
    a2 = float(anderson_darling(_gpd_cdf_rows(model.y[None, :], np.array([model.sigma]),
                                              np.array([model.xi])))[0])  # fmt: skip
    bxi, bsig, _ = gpd_fit_many(ysim)
    null = anderson_darling(_gpd_cdf_rows(ysim, bsig, bxi))
    gates.append(fit_gate(POT, a2, null, "generalised Pareto tail"))
    return gates, boundary


def _hessian_var_xi(x: np.ndarray, mu: float, sigma: float, xi: float) -> float:
    """Variance of the shape from the observed information of the GEV fit."""
    v = np.array([mu, math.log(sigma), xi])
    h = np.array([1e-4, 1e-4, 1e-4])

    def f(w: np.ndarray) -> float:
        return -gev_loglik(x, w[0], math.exp(w[1]), w[2])

    f0 = f(v)
    hess = np.empty((3, 3))
    for i in range(3):
        for j in range(i, 3):
            ei, ej = np.eye(3)[i] * h[i], np.eye(3)[j] * h[j]
            if i == j:
                val = (f(v + ei) - 2 * f0 + f(v - ei)) / (h[i] * h[i])
            else:
                val = (f(v + ei + ej) - f(v + ei - ej) - f(v - ei + ej) + f(v - ei - ej)) / (
                    4 * h[i] * h[j]
                )
            hess[i, j] = hess[j, i] = val
    try:
        cov = np.linalg.inv(hess)
    except np.linalg.LinAlgError:
        return math.inf
    var = float(cov[2, 2])
    return var if var > 0 and math.isfinite(var) else math.inf


def block_candidates(n: int) -> list[int]:
    b = max(B0, math.ceil(n / M_MAX))
    out = []
    while n // b >= M_MIN:
        out.append(b)
        b *= 2
    return out


def fit_bm(x: np.ndarray, seed: int, theta: float = 1.0) -> MethodFit:
    """Block maxima of X; THETA, the extremal index of clustered extremes, turns a block
    probability into a per-activation one (a block is worth block * theta activations)."""
    out = MethodFit(BM, None)
    n = x.size
    sizes = block_candidates(n)
    out.gates.append(count_gate("blocks", BM, n // sizes[0] if sizes else n // B0, M_MIN,
                                f"blocks of at least {B0} activations"))  # fmt: skip
    if not sizes:
        out.refused = reason(out.gates[-1])
        return out
    b0 = sizes[0]
    m0 = n // b0
    maxima = np.asarray(x[: m0 * b0]).reshape(m0, b0).max(axis=1).astype(float)
    fits: list[tuple[Any, ...] | None] = []
    for b in sizes:
        if b != b0:
            pairs = maxima.size // 2
            maxima = maxima[: 2 * pairs].reshape(pairs, 2).max(axis=1)
        shift, scale = float(maxima.mean()), float(maxima.std())
        if not scale > 0:
            fits.append(None)
            continue
        z = (maxima - shift) / scale
        mu, sigma, xi, ll = gev_fit(z)
        fits.append((b, maxima, shift, scale, mu, sigma, xi, ll, _hessian_var_xi(z, mu, sigma, xi)))
    good = [f for f in fits if f is not None and math.isfinite(f[8])]
    if not good:
        out.gates.append(
            Gate(
                "blocks",
                BM,
                0.0,
                None,
                False,
                "no usable block size: the block maxima are equal or cannot be fitted",
            )
        )
        out.refused = reason(out.gates[-1])
        return out
    v = np.array([f[8] for f in good])
    j = _stable_choice(np.array([f[6] for f in good]), np.broadcast_to(v, (v.size, v.size)))
    b, maxima, shift, scale, mu, sigma, xi, ll, _ = good[j]
    z = (maxima - shift) / scale
    model = GEVModel(z, shift, scale, b, mu, sigma, xi, ll, theta)
    out.model = model
    out.params = {
        "distribution": "genextreme",
        "shape": xi,
        "scale_ns": sigma * scale,
        "loc_ns": shift + mu * scale,
        "block": b,
        "blocks": int(maxima.size),
        "extremal_index": theta,
        "candidates": len(sizes),
        "shapes": {int(f[0]): round(f[6], 4) for f in good},
    }
    out.gates[0] = count_gate("blocks", BM, int(maxima.size), M_MIN, f"blocks of {b} activations")
    out.gates.append(shape_gate(BM, xi, XI_MIN, XI_MAX, "generalised extreme value distribution"))
    if not out.gates[-1].passed:
        out.refused = reason(out.gates[-1])
        return out
    out.gates.append(independence_gate(BM, maxima, "block maxima"))
    if not out.gates[-1].passed:
        out.refused = reason(out.gates[-1])
        return out
    a2 = float(anderson_darling(gev_cdf(z, mu, sigma, xi)[None, :])[0])
    rng = np.random.default_rng(seed + 1)
    null = np.empty(BOOT_BM)
    for i in range(BOOT_BM):
        zs = gev_isf(rng.random(z.size), mu, sigma, xi)
        m2, s2, x2, _ = gev_fit(zs, start=(mu, sigma, xi))
        null[i] = anderson_darling(gev_cdf(zs, m2, s2, x2)[None, :])[0]
    out.gates.append(fit_gate(BM, a2, null, "generalised extreme value distribution"))
    fail = first_failure(out.gates)
    out.refused = None if fail is None else reason(fail)
    return out
