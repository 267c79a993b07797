"""Extreme-value fits for pWCET: the generalised Pareto (GPD) and generalised extreme value
(GEV) distributions by maximum likelihood, their quantiles and tail probabilities, profile
likelihood intervals (for the GPD with a cut calibrated by a parametric bootstrap), and
the parametric bootstrap the goodness-of-fit gate needs.

Data are standardised before fitting (exceedances divided by a scale, maxima shifted and
divided) so that the optimisers see numbers near 1; callers get parameters in ns.

GPD fits use the one-dimensional profile of Grimshaw (1993) / Zhang and Stephens (2009):
with theta = xi / sigma, the MLE of xi given theta is mean(log1p(theta y)), so the
likelihood is maximised over theta alone, vectorised over many samples at once (the
bootstrap refits hundreds of samples in one pass). Shapes are kept in [-0.99, XI_MAX].
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import optimize, special

#: Largest shape fitted: at 1 the tail has no mean, which no running system's latencies
#: have (a fit pressed against it means the model is wrong; the shape gate refuses it).
XI_MAX = 1.0
XI_MIN = -0.99
_TINY = 1e-12
BOOT_CAL, K_CAL = 199, 2000  # samples and excesses per sample of `calibration`


# -- generalised Pareto -------------------------------------------------------------------


def gpd_loglik(y: np.ndarray, sigma: float, xi: float) -> float:
    """Log-likelihood of exceedances Y (> 0) under GPD(sigma, xi); -inf outside support."""
    if not sigma > 0:
        return -math.inf
    z = y / sigma
    if abs(xi) < 1e-9:
        return -y.size * math.log(sigma) - float(z.sum())
    t = xi * z
    if t.min() <= -1.0:
        return -math.inf
    return -y.size * math.log(sigma) - (1.0 + 1.0 / xi) * float(np.log1p(t).sum())


def gpd_quantile_profile_many(y: np.ndarray, x: float, a: float,
                              iters: int = 50) -> np.ndarray:  # fmt: skip
    """For each row of Y (B, k): the log-likelihood maximised over the shape with the
    excess exceeded with probability exp(-A) held at X (the profile of `GPDModel._profile`,
    vectorised over rows by golden-section search; -inf where X cannot be that quantile)."""
    y = np.atleast_2d(np.asarray(y, dtype=float))
    k, ymax = y.shape[1], y.max(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        edge = np.where(x < ymax, np.log1p(-x / ymax) / a + 1e-9, XI_MIN)
    lo, hi = np.maximum(edge, XI_MIN), np.full(ymax.shape, XI_MAX)

    def f(xi: np.ndarray) -> np.ndarray:
        small = np.abs(xi) < 1e-9
        xs = np.where(small, 1.0, xi)
        sigma = x / np.where(small, a * (1.0 + xi * a / 2.0), np.expm1(xi * a) / xs)
        t = xs[:, None] * y / sigma[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            ll = np.where(
                small,
                -k * np.log(sigma) - y.sum(axis=1) / sigma,
                -k * np.log(sigma) - (1.0 + 1.0 / xs) * np.log1p(t).sum(axis=1),
            )
        ok = (t.min(axis=1) > -1.0) & (sigma > 0) & (xi >= lo) & np.isfinite(ll)
        return np.where(ok, ll, -np.inf)

    _, best = _golden_max(f, lo, hi, iters)
    # as in _profile: a maximum pressed against the lower end of the search
    return np.maximum(best, f(np.maximum(edge, XI_MIN) + 1e-7))


def _golden_max(f: Callable[[np.ndarray], np.ndarray], lo: np.ndarray, hi: np.ndarray,
                iters: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Golden-section search for the maximum of F in [LO, HI], vectorised over rows:
    (the point, F there)."""
    g = (math.sqrt(5) - 1) / 2
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    fc, fd = f(c), f(d)
    for _ in range(iters):
        left = fc >= fd  # the maximum is in [lo, d]
        hi, lo = np.where(left, d, hi), np.where(left, lo, c)
        new_c = np.where(left, hi - g * (hi - lo), d)
        new_d = np.where(left, c, lo + g * (hi - lo))
        fnew = f(np.where(left, new_c, new_d))
        fc, fd = np.where(left, fnew, fd), np.where(left, fc, fnew)
        c, d = new_c, new_d
    return np.where(fc >= fd, c, d), np.maximum(fc, fd)


def _theta_profile(y: np.ndarray, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(xi(theta), profile log-lik) for samples Y (B, k) at thetas (B,)."""
    k = y.shape[1]
    small = np.abs(theta) < 1e-12
    th = np.where(small, 1e-12, theta)
    xi = np.log1p(th[:, None] * y).mean(axis=1)
    ratio = np.where(small, y.mean(axis=1), xi / th)  # sigma
    with np.errstate(invalid="ignore", divide="ignore"):
        ll = -k * (np.log(ratio) + xi + 1.0)
    ll = np.where((ratio > 0) & np.isfinite(ll), ll, -np.inf)
    return xi, ll


def gpd_fit_many(y: np.ndarray, iters: int = 40) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MLE of the GPD for each row of Y (B, k), exceedances > 0: (xi, sigma, loglik).

    A grid over t = theta * max(y) in (-1, T] finds the best bracket, golden-section
    search refines it. Shapes outside [XI_MIN, XI_MAX] are excluded.
    """
    y = np.atleast_2d(np.asarray(y, dtype=float))
    ymax = y.max(axis=1)
    ymean = y.mean(axis=1)
    rows = np.arange(y.shape[0])

    def f(t: np.ndarray) -> np.ndarray:
        xi, ll = _theta_profile(y, t / ymax)
        return np.where((xi >= XI_MIN) & (xi <= XI_MAX), ll, -np.inf)

    # t = theta * max(y) in (-1, top]: dense near -1 (short tails), log-spaced above 0
    top = np.maximum(1e3 * ymax / ymean, 10.0)
    neg = np.unique(
        np.concatenate([-1 + np.geomspace(1e-7, 1, 30)[:-1], np.linspace(-0.45, -0.02, 10)])
    )
    pos = np.geomspace(1e-3, 1.0, 33)
    tgrid = np.concatenate(
        [np.broadcast_to(neg, (y.shape[0], neg.size)), np.zeros((y.shape[0], 1)),
         pos[None, :] * top[:, None]],
        axis=1,
    )  # fmt: skip
    lls = np.stack([f(tgrid[:, j]) for j in range(tgrid.shape[1])], axis=1)
    best = np.argmax(lls, axis=1)
    lo = tgrid[rows, np.maximum(best - 1, 0)]
    hi = tgrid[rows, np.minimum(best + 1, tgrid.shape[1] - 1)]
    t, ft = _golden_max(f, lo, hi, iters)  # refined within the best bracket
    t = np.where(lls[rows, best] > ft, tgrid[rows, best], t)
    xi, ll = _theta_profile(y, t / ymax)
    small = np.abs(t) < 1e-12
    sigma = np.where(small, ymean, xi / np.where(small, 1.0, t / ymax))
    return xi, sigma, ll


def gpd_sf(y: np.ndarray | float, sigma: float, xi: float) -> np.ndarray:
    """P(Y > y) of the GPD (y >= 0)."""
    y = np.asarray(y, dtype=float)
    if abs(xi) < 1e-9:
        return np.exp(-y / sigma)
    t = np.maximum(1.0 + xi * y / sigma, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(t > 0, np.exp(-np.log(np.where(t > 0, t, 1.0)) / xi), 0.0)


def gpd_isf(q: np.ndarray | float, sigma: float, xi: float) -> np.ndarray:
    """y with P(Y > y) = q (0 < q <= 1)."""
    lq = -np.log(np.asarray(q, dtype=float))
    return sigma * _expm1_over(xi, lq)


def _expm1_over(xi: float, a: np.ndarray | float) -> np.ndarray:
    """(exp(xi a) - 1) / xi, continuous at xi = 0 (where it is a)."""
    a = np.asarray(a, dtype=float)
    if abs(xi) < 1e-9:
        return a * (1.0 + xi * a / 2.0)
    return np.expm1(xi * a) / xi


# -- generalised extreme value ------------------------------------------------------------


def gev_loglik(x: np.ndarray, mu: float, sigma: float, xi: float) -> float:
    if not sigma > 0:
        return -math.inf
    z = (x - mu) / sigma
    if abs(xi) < 1e-9:
        return -x.size * math.log(sigma) - float(z.sum()) - float(np.exp(-z).sum())
    t = 1.0 + xi * z
    if t.min() <= 0:
        return -math.inf
    lt = np.log(t)
    return (
        -x.size * math.log(sigma)
        - (1.0 + 1.0 / xi) * float(lt.sum())
        - float(np.exp(-lt / xi).sum())
    )


def _lmoment_start(x: np.ndarray) -> tuple[float, float, float]:
    """Hosking's (1985) L-moment estimates of (mu, sigma, xi): a start for the MLE."""
    s = np.sort(x)
    n = s.size
    i = np.arange(n)
    b0 = s.mean()
    b1 = float((i * s).sum()) / (n * (n - 1))
    b2 = float((i * (i - 1) * s).sum()) / (n * (n - 1) * (n - 2))
    l1, l2, l3 = b0, 2 * b1 - b0, 6 * b2 - 6 * b1 + b0
    if not l2 > 0:
        return float(l1), float(max(s.std(), 1e-9)), 0.0
    t3 = l3 / l2
    c = 2.0 / (3.0 + t3) - math.log(2) / math.log(3)
    k = 7.8590 * c + 2.9554 * c * c  # Hosking's k = -xi
    k = min(max(k, -0.9), 0.9)
    if abs(k) < 1e-6:
        sigma = l2 / math.log(2)
        mu = l1 - 0.5772156649 * sigma
    else:
        g = math.gamma(1 + k)
        sigma = l2 * k / ((1 - 2.0**-k) * g)
        mu = l1 - sigma * (1 - g) / k
    return float(mu), float(max(sigma, 1e-9)), float(-k)


def gev_fit(x: np.ndarray, start: tuple[float, float, float] | None = None) -> tuple:
    """MLE (mu, sigma, xi, loglik) of standardised maxima X, by Nelder-Mead from the
    L-moment estimates (or START)."""
    mu0, s0, xi0 = start if start is not None else _lmoment_start(x)
    xi0 = min(max(xi0, XI_MIN + 0.01), XI_MAX - 0.01)

    def nll(v: np.ndarray) -> float:
        mu, ls, xi = v
        if not XI_MIN <= xi <= XI_MAX:
            return 1e300
        ll = gev_loglik(x, mu, math.exp(ls), xi)
        return -ll if math.isfinite(ll) else 1e300

    v0 = np.array([mu0, math.log(s0), xi0])
    if nll(v0) >= 1e300:  # the start misses the support: Gumbel from moments
        sd = float(x.std()) or 1.0
        v0 = np.array([float(x.mean()) - 0.45 * sd, math.log(0.78 * sd), 0.0])
    res = optimize.minimize(
        nll, v0, method="Nelder-Mead", options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 4000}
    )
    mu, ls, xi = res.x
    return float(mu), float(math.exp(ls)), float(xi), float(-res.fun)


def gev_cdf(x: np.ndarray | float, mu: float, sigma: float, xi: float) -> np.ndarray:
    z = (np.asarray(x, dtype=float) - mu) / sigma
    if abs(xi) < 1e-9:
        return np.exp(-np.exp(-z))
    t = 1.0 + xi * z
    with np.errstate(divide="ignore", over="ignore"):
        inner = np.where(t > 0, np.exp(-np.log(np.where(t > 0, t, 1.0)) / xi), 0.0)
    below = (t <= 0) & (xi > 0)
    return np.where(below, 0.0, np.where(t <= 0, 1.0, np.exp(-inner)))


def gev_isf(q: np.ndarray | float, mu: float, sigma: float, xi: float) -> np.ndarray:
    """x with P(M > x) = q."""
    lq = -np.log(-np.log1p(-np.asarray(q, dtype=float)))  # -log(y_q), y_q = -log(1 - q)
    return mu + sigma * _expm1_over(xi, lq)


def block_q(p: float, block: float) -> float:
    """P(max of BLOCK activations > x) for per-activation P(X > x) = p (independence)."""
    return float(-np.expm1(block * np.log1p(-p)))


def per_activation(q_block: np.ndarray | float, block: float) -> np.ndarray:
    """Inverse of block_q: per-activation probability from a block exceedance probability."""
    return -np.expm1(np.log1p(-np.asarray(q_block, dtype=float)) / block)


# -- goodness of fit ----------------------------------------------------------------------


def anderson_darling(u: np.ndarray) -> np.ndarray:
    """A^2 of probability-transformed samples, each row of U (B, k) sorted or not."""
    u = np.sort(np.clip(np.atleast_2d(u), 1e-300, 1 - 1e-16), axis=1)
    k = u.shape[1]
    i = np.arange(1, k + 1)
    s = ((2 * i - 1) * (np.log(u) + np.log1p(-u[:, ::-1]))).sum(axis=1)
    return -k - s / k


# -- profile likelihood -------------------------------------------------------------------


def _chi2_cut(confidence: float) -> float:
    return float(special.chdtri(1, 1 - confidence))


@dataclass
class GPDModel:
    """A GPD fitted to the exceedances Y over THRESHOLD (standardised by SCALE, ns)."""

    y: np.ndarray  # exceedances / scale
    scale: float  # ns per standardised unit
    threshold: float  # ns
    zeta: float  # k / n: P(X > threshold)
    sigma: float  # standardised
    xi: float
    loglik: float
    theta: float = 1.0  # extremal index: Y are cluster maxima when below 1
    seed: int = 0  # of the parametric bootstrap behind `calibration`
    _cal: dict[tuple[float, float], float] = field(default_factory=dict, repr=False, compare=False)

    def isf(self, p: np.ndarray | float) -> np.ndarray:
        """Latency (ns) exceeded with per-activation probability P (< zeta)."""
        return self.threshold + self.scale * gpd_isf(np.asarray(p) / self.zeta, self.sigma, self.xi)

    def sf(self, x_ns: np.ndarray | float) -> np.ndarray:
        """Per-activation P(X > x) for x above the threshold."""
        y = (np.asarray(x_ns, dtype=float) - self.threshold) / self.scale
        return self.zeta * gpd_sf(np.maximum(y, 0.0), self.sigma, self.xi)

    def _profile(self, x: float, p: float) -> float:
        """max over xi of the log-likelihood with the quantile at P fixed at X (standardised,
        above the threshold)."""
        a = math.log(self.zeta / p)  # > 0
        y, ymax = self.y, float(self.y.max())
        lo = XI_MIN
        if x < ymax:  # the support must reach ymax: x > ymax (1 - exp(xi a))
            lo = max(lo, math.log1p(-x / ymax) / a + 1e-9)
        if lo >= XI_MAX:
            return -math.inf

        def nll(xi: float) -> float:
            sigma = x / float(_expm1_over(xi, a))
            ll = gpd_loglik(y, sigma, xi)
            return -ll if math.isfinite(ll) else 1e300

        res = optimize.minimize_scalar(
            nll, bounds=(lo, XI_MAX), method="bounded", options={"xatol": 1e-6}
        )
        best = -float(res.fun)
        # the bounded search can miss a maximum pressed against its lower end
        edge = -nll(lo + 1e-7)
        return max(best, edge)

    def calibration(self, p: float, confidence: float) -> float:
        """How much wider the likelihood-ratio cut of the quantile at P must be than the
        chi-squared one to hold CONFIDENCE: the CONFIDENCE quantile of the statistic under
        the fitted tail (BOOT_CAL seeded samples of as many excesses, at most K_CAL, each
        refitted, the statistic taken at the fitted quantile) over chi2_1's. The statistic
        of a quantile far beyond the data has a longer upper tail than chi2_1 in small
        samples (shape -0.1, p / zeta = 1e-7: above chi2_1's 90 % point in 12.6 % of
        samples of 75 excesses, 11.9 % of 175), so the uncorrected interval is too short
        there (a bootstrap-calibrated likelihood-ratio interval)."""
        key = (float(p), float(confidence))
        if key not in self._cal:
            rng = np.random.default_rng(self.seed + 11)
            kb = min(self.y.size, K_CAL)
            ysim = gpd_isf(rng.random((BOOT_CAL, kb)), self.sigma, self.xi)
            _, _, ll = gpd_fit_many(ysim)
            x = float(gpd_isf(p / self.zeta, self.sigma, self.xi))
            w = 2.0 * (ll - gpd_quantile_profile_many(ysim, x, math.log(self.zeta / p)))
            w = np.where(np.isfinite(w), np.maximum(w, 0.0), np.inf)
            self._cal[key] = max(float(np.quantile(w, confidence)), 1e-12) / _chi2_cut(confidence)
        return self._cal[key]

    def interval(self, p: float, confidence: float, factor: float = 1.0) -> tuple[float, float]:
        """Profile-likelihood interval (ns) of the quantile at P; FACTOR scales the
        chi-squared cut (`calibration`)."""
        cut = _chi2_cut(confidence) / 2 * factor
        x_hat = float(gpd_isf(p / self.zeta, self.sigma, self.xi))

        def g(s: float) -> float:
            return self.loglik - self._profile(math.exp(s), p) - cut

        s0 = math.log(x_hat)
        lo = _root_out(g, s0, -0.25, floor=s0 - 40)
        hi = _root_out(g, s0, +0.25, floor=s0 + 40)
        return (
            self.threshold if lo is None else self.threshold + self.scale * math.exp(lo),
            math.inf if hi is None else self.threshold + self.scale * math.exp(hi),
        )

    def sf_interval(self, x_ns: float, confidence: float,
                    factor: float = 1.0) -> tuple[float, float, float]:  # fmt: skip
        """(estimate, lo, hi) of the per-activation P(X > x_ns), x_ns above the threshold:
        the profile likelihood of the same constraint, solved for the probability."""
        x = (x_ns - self.threshold) / self.scale
        p_hat = float(self.sf(x_ns))
        cut = _chi2_cut(confidence) / 2 * factor
        top = math.log(self.zeta) - 1e-9

        def g(lp: float) -> float:
            return self.loglik - self._profile(x, math.exp(lp)) - cut

        lp0 = math.log(p_hat) if p_hat > 1e-300 else None
        if lp0 is None:  # the fitted tail ends below x: search up from tiny probabilities
            lp0 = _first_inside(g, -690.0, top)
            if lp0 is None:
                return 0.0, 0.0, 0.0
            lo = None
        else:
            lp0 = min(lp0, top)
            lo = _root_out(g, lp0, -1.0, floor=-690.0)
        hi = _root_out(g, lp0, +0.5, floor=top)
        return (
            p_hat,
            0.0 if lo is None else math.exp(lo),
            self.zeta if hi is None else math.exp(hi),
        )


@dataclass
class GEVModel:
    """A GEV fitted to block maxima (standardised: (m - shift) / scale)."""

    x: np.ndarray
    shift: float
    scale: float
    block: int  # activations per block
    mu: float
    sigma: float
    xi: float
    loglik: float
    theta: float = 1.0  # extremal index: P(block max <= x) = P(X <= x)^(block theta)

    @property
    def span(self) -> float:
        """Independent activations a block is worth."""
        return self.block * self.theta

    def isf(self, p: np.ndarray | float) -> np.ndarray:
        q = -np.expm1(self.span * np.log1p(-np.asarray(p, dtype=float)))
        return self.shift + self.scale * gev_isf(q, self.mu, self.sigma, self.xi)

    def sf(self, x_ns: np.ndarray | float) -> np.ndarray:
        z = (np.asarray(x_ns, dtype=float) - self.shift) / self.scale
        g = np.clip(gev_cdf(z, self.mu, self.sigma, self.xi), 1e-300, 1.0)
        return -np.expm1(np.log(g) / self.span)

    def _profile(self, x: float, q: float) -> float:
        """max over (sigma, xi) of the log-likelihood with the block quantile at Q = X."""
        a = -math.log(-math.log1p(-q))

        def nll(v: np.ndarray) -> float:
            ls, xi = v
            if not XI_MIN <= xi <= XI_MAX:
                return 1e300
            sigma = math.exp(ls)
            mu = x - sigma * float(_expm1_over(xi, a))
            ll = gev_loglik(self.x, mu, sigma, xi)
            return -ll if math.isfinite(ll) else 1e300

        best = None
        for xi0 in (self.xi, self.xi - 0.2, self.xi + 0.2):
            v0 = np.array([math.log(self.sigma), xi0])
            if nll(v0) >= 1e300:
                continue
            res = optimize.minimize(
                nll, v0, method="Nelder-Mead", options={"xatol": 1e-6, "fatol": 1e-8}
            )
            if best is None or res.fun < best:
                best = float(res.fun)
            if xi0 == self.xi and best < 1e299:
                break
        return -math.inf if best is None or best >= 1e299 else -best

    def interval(self, p: float, confidence: float) -> tuple[float, float]:
        q = block_q(p, self.span)
        cut = _chi2_cut(confidence) / 2
        x_hat = float(gev_isf(q, self.mu, self.sigma, self.xi))
        # search in x directly: standardised maxima are near 0..10
        step = max(0.05 * self.sigma, 1e-3)

        def g(x: float) -> float:
            return self.loglik - self._profile(x, q) - cut

        lo = _root_out(g, x_hat, -step, floor=x_hat - 1e4 * self.sigma, grow=1.6)
        hi = _root_out(g, x_hat, +step, floor=x_hat + 1e6 * self.sigma, grow=1.6)
        return (
            -math.inf if lo is None else self.shift + self.scale * lo,
            math.inf if hi is None else self.shift + self.scale * hi,
        )

    def sf_interval(self, x_ns: float, confidence: float) -> tuple[float, float, float]:
        x = (x_ns - self.shift) / self.scale
        p_hat = float(self.sf(x_ns))
        cut = _chi2_cut(confidence) / 2

        def g(lq: float) -> float:
            return self.loglik - self._profile(x, math.exp(lq)) - cut

        q_hat = block_q(p_hat, self.span) if p_hat > 0 else 0.0
        top = math.log(0.999)
        if q_hat > 1e-300:
            lq0 = min(math.log(q_hat), top)
            lo = _root_out(g, lq0, -1.0, floor=-690.0)
        else:
            inside = _first_inside(g, -690.0, top)
            if inside is None:
                return 0.0, 0.0, 0.0
            lq0, lo = inside, None
        hi = _root_out(g, lq0, +0.5, floor=top)

        def back(lq: float) -> float:
            return float(per_activation(math.exp(lq), self.span))

        return p_hat, 0.0 if lo is None else back(lo), back(top) if hi is None else back(hi)


def _root_out(
    g: Callable[[float], float], s0: float, step: float, floor: float, grow: float = 1.5
) -> float | None:
    """Walk from S0 (g < 0) by STEP, growing, until g > 0, then solve g = 0; None when
    g stays below 0 up to FLOOR (the interval is unbounded on that side)."""
    a, ga = s0, g(s0)
    if not ga < 0:
        return s0
    d = step
    for _ in range(80):
        b = a + d
        if (step > 0 and b >= floor) or (step < 0 and b <= floor):
            b = floor
        gb = g(b)
        if gb > 0 or not math.isfinite(gb):
            if not math.isfinite(gb):  # outside the support: bisect to the finite edge
                lo_, hi_ = a, b
                for _ in range(60):
                    mid = (lo_ + hi_) / 2
                    gm = g(mid)
                    if math.isfinite(gm) and gm <= 0:
                        lo_ = mid
                    elif math.isfinite(gm):
                        hi_ = mid
                        break
                    else:
                        hi_ = mid
                if not math.isfinite(g(hi_)):
                    return hi_
                a, b = lo_, hi_
            return optimize.brentq(g, min(a, b), max(a, b), xtol=1e-6)
        if b == floor:
            return None
        a, ga = b, gb
        d *= grow
    return None


def _first_inside(g: Callable[[float], float], lo: float, hi: float) -> float | None:
    """A point in [lo, hi] where g < 0 (inside the interval), scanning a coarse grid."""
    for s in np.linspace(hi, lo, 60):
        v = g(float(s))
        if math.isfinite(v) and v < 0:
            return float(s)
    return None
