"""Probabilistic worst-case latency (pWCET) from raw samples, by extreme value theory.

``pwcet(samples_ns, 1e-9)`` estimates the latency exceeded with probability 1e-9 per
activation, with a profile-likelihood confidence interval, when the samples pass every
gate (docs/pwcet.md); otherwise it refuses and says why, and gives no number.

The samples must be in time order (a raw-sample file is): the stationarity and
independence gates read that order. Several arrays (threads) are taken one after the other.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from rtlab.analysis._pwcet_advice import Advice, for_extrapolation, for_gate
from rtlab.analysis._pwcet_clusters import (
    Clusters,
    bursts_text,
    clustering_p,
    decluster,
    extremal_index,
)
from rtlab.analysis._pwcet_fit import (
    GEVModel,
    GPDModel,
    gev_cdf,
    gev_fit,
    gev_isf,
    gpd_fit_many,
    gpd_isf,
)
from rtlab.analysis._pwcet_gates import (
    ALPHA,
    MIN_SAMPLES,
    Gate,
    count_gate,
    first_failure,
    reason,
)
from rtlab.analysis._pwcet_gates import stationarity_gates as _stationarity
from rtlab.analysis._pwcet_methods import BM, POT, MethodFit, fit_bm, fit_pot, pot_candidates
from rtlab.errors import InternalError, UserError

METHODS = ("auto", POT, BM)
METHOD_NAMES = {POT: "peaks over threshold", BM: "block maxima"}


@dataclass(frozen=True)
class Estimate:
    """The latency exceeded with probability ``p`` per activation, or a refusal.

    ``value_ns`` and the interval ``lo_ns``..``hi_ns`` (at ``confidence``) are None when
    ``refused`` gives the reason, and ``advice`` what would help (with
    ``advice_activations``, the length of run that would, when a longer run is what helps).
    ``method`` is "pot" or "block-maxima" (None when auto refused), ``params`` the fitted
    distribution and how its threshold or block was chosen (with the extremal index and
    the declustering of bursts of extremes), ``gates`` every test run (shared ones first,
    method None).
    """

    p: float
    confidence: float
    value_ns: float | None
    lo_ns: float | None
    hi_ns: float | None
    method: str | None
    params: dict[str, Any]
    gates: tuple[Gate, ...]
    refused: str | None
    samples: int
    fit: TailFit | None = field(default=None, repr=False, compare=False)
    advice: str | None = None
    advice_activations: int | None = None

    def at(self, p: float) -> Estimate:
        """The same fit (same gates, same choices) at another probability."""
        if self.fit is None:
            raise ValueError("this estimate keeps no fit")
        return self.fit.estimate(p)

    def to_dict(self) -> dict[str, Any]:
        return {
            "p": self.p,
            "confidence": self.confidence,
            "value_ns": self.value_ns,
            "lo_ns": self.lo_ns,
            "hi_ns": self.hi_ns,
            "method": self.method,
            "params": self.params,
            "gates": [g.to_dict() for g in self.gates],
            "refused": self.refused,
            "advice": self.advice,
            "advice_activations": self.advice_activations,
            "samples": self.samples,
        }


@dataclass(frozen=True)
class Exceedance:
    """P(latency > x_ns) per activation: ``prob`` and its interval, or a refusal."""

    x_ns: float
    confidence: float
    prob: float | None
    lo: float | None
    hi: float | None
    method: str | None  # "pot", "block-maxima" or "empirical" (x below the threshold)
    refused: str | None
    advice: str | None = None
    advice_activations: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in
                ("x_ns", "confidence", "prob", "lo", "hi", "method", "refused", "advice",
                 "advice_activations")}  # fmt: skip


class TailFit:
    """The gates and fits of one set of samples, asked for estimates at any probability."""

    def __init__(
        self,
        samples: np.ndarray,
        method: str,
        confidence: float,
        seed: int,
        gates: list[Gate],
        fits: list[MethodFit],
        refused: str | None,
        refusing: Gate | None = None,
        bursts: Clusters | None = None,
        advice: Advice | None = None,
    ) -> None:
        self.samples = samples
        self.n = int(samples.size)
        self.method = method
        self.confidence = confidence
        self.seed = seed
        self.gates = gates
        self.fits = fits
        self.refused = refused
        self.bursts = bursts  # the declustered top 1 %, None when the extremes did not cluster
        self._advice = advice
        if advice is None and refusing is not None:
            self._advice = for_gate(refusing, self.n, bursts, {})

    def _fit_advice(self, f: MethodFit) -> Advice | None:
        g = next((g for g in f.gates if not g.passed), None)
        return None if g is None else for_gate(g, self.n, self.bursts, f.params)

    def advice(self) -> Advice | None:
        """What would help when every question is refused (None when it answers)."""
        if self._advice is not None or self.refused is not None:
            return self._advice
        live = [f for f in self.fits if f.refused is None]
        if live or not self.fits:
            return None
        pot = next((f for f in self.fits if f.method == POT), self.fits[0])
        return self._fit_advice(pot)

    def all_gates(self) -> tuple[Gate, ...]:
        return tuple(self.gates) + tuple(g for f in self.fits for g in f.gates)

    def _refusal(self, p: float, why: str, fit: MethodFit | None = None,
                 advice: Advice | None = None) -> Estimate:  # fmt: skip
        return Estimate(p, self.confidence, None, None, None,
                        None if fit is None else fit.method,
                        {} if fit is None else fit.params, self.all_gates(), why, self.n,
                        self, None if advice is None else advice.text,
                        None if advice is None else advice.activations)  # fmt: skip

    def _at(self, f: MethodFit, p: float) -> tuple[float, float, float] | str:
        m = _fitted(f)
        if isinstance(m, GPDModel) and p >= m.zeta:
            return (
                f"p={p:.3g} is not beyond the threshold ({m.zeta:.3g} of the samples exceed "
                "it): the empirical percentile answers it"
            )
        value = float(m.isf(p))
        lo, hi = _interval(m, p, self.confidence)
        for h in f.hull:  # the next higher thresholds on the grid: their intervals too
            if p < h.zeta:
                hlo, hhi = _interval(h, p, self.confidence)
                lo, hi = min(lo, hlo), max(hi, hhi)
        if not math.isfinite(hi):
            return (
                f"no finite upper end of the {self.confidence:.0%} interval at p={p:.3g}: "
                "the samples cannot support an extrapolation that far"
            )
        return value, max(lo, 0.0), hi

    def estimate(self, p: float) -> Estimate:
        p = _check_p(p)
        if self.refused is not None:
            return self._refusal(p, self.refused, advice=self._advice)
        ok: dict[str, tuple[float, float, float]] = {}
        why: dict[str, str] = {}
        for f in self.fits:
            r = f.refused if f.refused is not None else self._at(f, p)
            if isinstance(r, str):
                why[f.method] = r
            else:
                ok[f.method] = r
        if not ok:
            adv = self.advice()
            if adv is None and any(w.startswith("no finite upper end") for w in why.values()):
                adv = for_extrapolation(self.n)
            if len(self.fits) == 1:
                return self._refusal(p, why[self.fits[0].method], self.fits[0], adv)
            return self._refusal(
                p, "; ".join(f"{METHOD_NAMES[k]}: {v}" for k, v in why.items()), advice=adv
            )
        if len(ok) == 2:
            (v1, lo1, hi1), (v2, lo2, hi2) = ok[POT], ok[BM]
            if max(lo1, lo2) > min(hi1, hi2):
                return self._refusal(
                    p,
                    f"the methods disagree at p={p:.3g}: peaks over threshold "
                    f"{v1:.4g} ns [{lo1:.4g}, {hi1:.4g}], block maxima {v2:.4g} ns "
                    f"[{lo2:.4g}, {hi2:.4g}]: the intervals do not overlap",
                    advice=for_extrapolation(self.n),
                )
        chosen = POT if POT in ok else BM
        value, lo, hi = ok[chosen]
        f = next(f for f in self.fits if f.method == chosen)
        return Estimate(p, self.confidence, value, lo, hi, chosen, f.params, self.all_gates(),
                        None, self.n, self)  # fmt: skip

    def exceedance(self, x_ns: float) -> Exceedance:
        """P(latency > X_NS) per activation with its interval (the reported method; below
        the threshold the empirical fraction with a Clopper-Pearson interval)."""
        conf = self.confidence
        adv = self.advice()
        text, acts = (None, None) if adv is None else (adv.text, adv.activations)
        if self.refused is not None:
            return Exceedance(x_ns, conf, None, None, None, None, self.refused, text, acts)
        live = [f for f in self.fits if f.refused is None]
        if not live:
            why = "; ".join(f"{METHOD_NAMES[f.method]}: {f.refused}" for f in self.fits)
            return Exceedance(x_ns, conf, None, None, None, None, why, text, acts)
        f = next((f for f in live if f.method == POT), live[0])
        m = _fitted(f)
        if isinstance(m, GPDModel) and x_ns <= m.threshold:
            k = int(np.count_nonzero(np.asarray(self.samples) > x_ns))
            ci = stats.binomtest(k, self.n).proportion_ci(confidence_level=conf, method="exact")
            return Exceedance(x_ns, conf, k / self.n, ci.low, ci.high, "empirical", None)
        prob, lo, hi = _sf_interval(m, float(x_ns), conf)
        for h in f.hull:
            if x_ns > h.threshold:
                _, hlo, hhi = _sf_interval(h, float(x_ns), conf)
                lo, hi = min(lo, hlo), max(hi, hhi)
        if len(live) == 2:  # as for estimates: both methods must agree
            other, olo, ohi = _fitted(live[1]).sf_interval(float(x_ns), conf)
            if max(lo, olo) > min(hi, ohi):
                ext = for_extrapolation(self.n)
                return Exceedance(x_ns, conf, None, None, None, None,
                                  f"the methods disagree on P(latency > {x_ns:.4g} ns): peaks "
                                  f"over threshold {prob:.3g} [{lo:.3g}, {hi:.3g}], block "
                                  f"maxima {other:.3g} [{olo:.3g}, {ohi:.3g}]", ext.text,
                                  ext.activations)  # fmt: skip
        return Exceedance(x_ns, conf, prob, lo, hi, f.method, None)

    def predict_max(self, m: int, draws: int = 200) -> tuple[float, float, str] | str:
        """Interval (ns) holding the largest of the next M activations with the fit's
        confidence: the predictive distribution over parametric-bootstrap refits (so it
        carries the uncertainty of the parameters as well as the randomness of a maximum),
        with the extremal index: P(max <= x) = P(X <= x)^(M theta) when extremes come in
        bursts. A refusal (str) when no estimate would be given at p = 1/M."""
        est = self.estimate(1.0 / m)
        if est.refused is not None:
            return est.refused
        assert est.value_ns is not None and est.method is not None  # not refused
        model = _fitted(next(f for f in self.fits if f.method == est.method))
        rng = np.random.default_rng(self.seed + 7)
        sf = (
            _draws_pot(model, self.n, draws, rng)
            if isinstance(model, GPDModel)
            else _draws_bm(model, draws, rng)
        )
        a = (1 - self.confidence) / 2
        span = m * model.theta  # independent activations the next M are worth

        def cdf(x: float) -> float:  # P(max of m <= x), averaged over the draws
            s = np.clip(sf(x), 0.0, 1.0)
            return float(np.mean(np.exp(span * np.log1p(-np.minimum(s, 1 - 1e-16)))))

        lo = _solve_up(cdf, a, est.value_ns)
        hi = _solve_up(cdf, 1 - a, est.value_ns)
        return lo, hi, est.method


SurvivalFn = Callable[[float], np.ndarray]


def _interval(m: GPDModel | GEVModel, p: float, conf: float) -> tuple[float, float]:
    """The profile-likelihood interval of the quantile at P; for a GPD tail with the cut
    calibrated by its parametric bootstrap (`GPDModel.calibration`)."""
    if isinstance(m, GPDModel):
        return m.interval(p, conf, m.calibration(p, conf))
    return m.interval(p, conf)


def _sf_interval(m: GPDModel | GEVModel, x_ns: float, conf: float) -> tuple[float, float, float]:
    """`_interval` read the other way: P(X > x_ns) with its interval, for a GPD tail
    calibrated at the estimated probability (at the end of the fitted tail, when x_ns is
    beyond it, at 1e-12 of the exceedance rate)."""
    if isinstance(m, GPDModel):
        p = min(max(float(m.sf(x_ns)), m.zeta * 1e-12), m.zeta * 0.5)
        return m.sf_interval(x_ns, conf, m.calibration(p, conf))
    return m.sf_interval(x_ns, conf)


def _fitted(f: MethodFit) -> GPDModel | GEVModel:
    """The model of a fit that was not refused."""
    if f.model is None:
        raise InternalError(f"pWCET: the {f.method} fit has no model (refused: {f.refused})")
    return f.model


def _draws_pot(model: GPDModel, n: int, draws: int, rng: np.random.Generator) -> SurvivalFn:
    k = model.y.size
    ysim = gpd_isf(rng.random((draws, k)), model.sigma, model.xi)
    bxi, bsig, _ = gpd_fit_many(ysim)
    zeta = rng.binomial(n, model.zeta, size=draws) / n

    def sf(x: float) -> np.ndarray:
        y = max(x - model.threshold, 0.0) / model.scale
        small = np.abs(bxi) < 1e-9
        t = np.maximum(1 + np.where(small, 1.0, bxi) * y / bsig, 0.0)
        with np.errstate(divide="ignore", over="ignore"):
            power = np.exp(-np.log(np.maximum(t, 1e-300)) / np.where(small, 1.0, bxi))
        tail = np.where(small, np.exp(-y / bsig), np.where(t > 0, power, 0.0))
        return zeta * tail

    return sf


def _draws_bm(model: GEVModel, draws: int, rng: np.random.Generator) -> SurvivalFn:
    params = []
    for _ in range(draws):
        zs = gev_isf(rng.random(model.x.size), model.mu, model.sigma, model.xi)
        params.append(gev_fit(zs, start=(model.mu, model.sigma, model.xi))[:3])

    def sf(x: float) -> np.ndarray:
        z = (x - model.shift) / model.scale
        g = np.array([float(gev_cdf(z, *pr)) for pr in params])
        return -np.expm1(np.log(np.clip(g, 1e-300, 1.0)) / model.span)

    return sf


def _solve_up(cdf: Callable[[float], float], target: float, start: float) -> float:
    """x with cdf(x) = target (cdf increasing), bracketing geometrically from START."""
    lo = hi = max(start, 1.0)
    while cdf(lo) > target and lo > 1e-3:
        lo /= 2
    while cdf(hi) < target and hi < 1e15:
        hi *= 2
    for _ in range(80):
        mid = math.sqrt(lo * hi)
        if cdf(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-6:
            break
    return math.sqrt(lo * hi)


def _check_p(p: float) -> float:
    p = float(p)
    if not 0 < p < 1:
        raise UserError(f"pWCET probability {p!r} is not between 0 and 1")
    return p


def _samples(samples_ns: np.ndarray | Sequence[np.ndarray]) -> np.ndarray:
    arrays = [samples_ns] if isinstance(samples_ns, np.ndarray) else list(samples_ns)
    arrays = [np.asarray(a).reshape(-1) for a in arrays]
    x = arrays[0] if len(arrays) == 1 else np.concatenate(arrays) if arrays else np.empty(0)
    if x.dtype.kind not in "iuf":
        raise UserError("pWCET needs numeric samples (ns)")
    if x.dtype.kind == "f" and x.size and not np.isfinite(x).all():
        raise UserError("pWCET samples contain NaN or infinite values")
    return x


def _top(x: np.ndarray, k: int, chunk: int = 8_000_000) -> np.ndarray:
    """Positions of the K largest samples, largest first, in chunks: memory bounded by the
    chunk, not by the (memory-mapped) array."""
    cand = []
    for start in range(0, x.size, chunk):
        c = np.asarray(x[start : start + chunk])
        keep = min(k, c.size)
        cand.append(start + np.argpartition(c, c.size - keep)[c.size - keep :])
    idx = np.concatenate(cand)
    idx = idx[np.argpartition(x[idx], idx.size - k)[idx.size - k :]]
    return idx[np.argsort(-x[idx].astype(float), kind="stable")]


def fit_tail(
    samples_ns: np.ndarray | Sequence[np.ndarray],
    *,
    method: str = "auto",
    confidence: float = 0.9,
    seed: int = 0,
) -> TailFit:
    """Run the gates and fit the tail of SAMPLES_NS (time order) once; ask the result for
    estimates (`TailFit.estimate`), tail probabilities and predicted maxima."""
    if method not in METHODS:
        raise UserError(f"unknown pWCET method {method!r} (one of {', '.join(METHODS)})")
    if not 0 < confidence < 1:
        raise UserError(f"confidence {confidence!r} is not between 0 and 1")
    x = _samples(samples_ns)
    n = int(x.size)
    gates = [count_gate("samples", None, n, MIN_SAMPLES, "samples")]
    if n < MIN_SAMPLES:
        return TailFit(x, method, confidence, seed, gates, [], reason(gates[0]), gates[0])
    kh = int(min(2000, max(20, n // 100)))
    kp = int(pot_candidates(n).max(initial=0))
    ktop = min(max(kh, kp) + 1, n - 1)
    idx = _top(x, ktop)
    top_val = x[idx].astype(float)
    hidx = np.sort(idx[:kh])
    u = float(top_val[kh])
    gates += _stationarity(x, hidx, u)
    theta_p = clustering_p(hidx, n)
    bursts = None
    if not gates[1].passed or theta_p < ALPHA:  # bursts? decluster, test what remains
        bursts = _bursts(x, hidx)
    if bursts is not None:
        clustering = _clustering_gate(gates[1], bursts, n, theta_p)
        gates = [gates[0], clustering, *_stationarity(x, bursts.positions, u, "burst maxima")]
    else:
        theta = extremal_index(hidx)
        gates.insert(1, Gate("clustering", None, theta, theta_p, True,
                             f"extremal index θ={theta:.2f} of the samples above "
                             f"{u / 1e3:.4g} µs, p={theta_p:.2g} against random times: "
                             "no bursts to decluster"))  # fmt: skip
    fail = first_failure(gates)
    if fail is not None:
        return TailFit(x, method, confidence, seed, gates, [], reason(fail), fail, bursts)
    fits = []
    if method in ("auto", POT):
        fits.append(fit_pot(n, top_val, idx, seed, clustered=bursts is not None))
        # extremes that looked independent in the top 1 % but not above the chosen threshold
        if bursts is None and _failed(fits[0], "independence"):
            bursts = decluster(hidx, x[hidx])
            fits[0] = fit_pot(n, top_val, idx, seed, clustered=True)
    if method in ("auto", BM):
        fits.append(fit_bm(x, seed, 1.0 if bursts is None else bursts.theta))
    # a tail with two regimes, or one that changes over the run, is refused by both methods
    tailwide = next((g for f in fits for g in f.gates
                     if g.name in ("mixture", "stability") and not g.passed), None)  # fmt: skip
    if tailwide is not None:
        params = next(f.params for f in fits if tailwide in f.gates)
        return TailFit(x, method, confidence, seed, gates, fits, reason(tailwide), None, bursts,
                       for_gate(tailwide, n, bursts, params))  # fmt: skip
    return TailFit(x, method, confidence, seed, gates, fits, None, None, bursts)


def _failed(f: MethodFit, name: str) -> bool:
    return any(g.name == name and not g.passed for g in f.gates)


def _bursts(x: np.ndarray, hidx: np.ndarray) -> Clusters | None:
    """The top-1 % exceedances declustered, or None when they do not cluster (theta 1)."""
    c = decluster(hidx, x[hidx])
    return c if c.count < c.exceedances else None


def _clustering_gate(independence: Gate, bursts: Clusters, n: int, theta_p: float) -> Gate:
    """What the clustering test and the independence test of the top 1 % found: bursts,
    which are declustered (the independence gate then runs on their maxima)."""
    lb = independence.detail.split(" (", 1)[-1].rstrip(")")
    return Gate("clustering", None, bursts.theta, theta_p, True,
                f"the extremes come in bursts (p={theta_p:.2g} for the extremal index "
                f"against random times; {lb}): declustered, {bursts_text(bursts, n)}")  # fmt: skip


def refused_fit(why: str, confidence: float = 0.9) -> TailFit:
    """A fit that refuses every question with WHY (e.g. no raw samples)."""
    return TailFit(np.empty(0, np.int64), "auto", confidence, 0, [], [], why)


def pwcet(
    samples_ns: np.ndarray | Sequence[np.ndarray],
    p: float,
    *,
    method: str = "auto",
    confidence: float = 0.9,
    seed: int = 0,
) -> Estimate:
    """The latency (ns) exceeded with probability P per activation, with its interval.

    ``method``: "pot" (peaks over threshold, generalised Pareto), "block-maxima"
    (generalised extreme value) or "auto" (both; the one whose gates pass, peaks over
    threshold when both do; a refusal when both pass and their intervals do not
    overlap). The same samples and seed give the same estimate.
    """
    _check_p(p)
    return fit_tail(samples_ns, method=method, confidence=confidence, seed=seed).estimate(p)
