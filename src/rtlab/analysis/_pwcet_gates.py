"""The gates a pWCET estimate must pass before any number is given: enough samples,
stationarity (no trend over the run, the two halves agree), independence of the extremes
(Ljung-Box) and the goodness of fit of the tail (Anderson-Darling, its null distribution
from a seeded parametric bootstrap with the parameters fitted again to every sample).

Every test runs at level ALPHA; a test that fails gives the refusal its reason.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

#: Level of every gate's test: below this p-value the gate fails.
ALPHA = 0.01
#: Fewest samples any estimate is attempted from.
MIN_SAMPLES = 1000


@dataclass(frozen=True)
class Gate:
    """One test an estimate must pass."""

    name: str  # samples, trend, trend-rate, halves, halves-rate, independence, exceedances, ...
    method: str | None  # None: before either method; else "pot" or "block-maxima"
    statistic: float
    p_value: float | None  # None for a count checked against a minimum
    passed: bool
    detail: str  # what was tested and what came out, one line

    def __post_init__(self) -> None:  # plain Python numbers, whatever numpy handed over
        object.__setattr__(self, "statistic", float(self.statistic))
        object.__setattr__(self, "passed", bool(self.passed))
        if self.p_value is not None:
            object.__setattr__(self, "p_value", float(self.p_value))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _p(p: float) -> str:
    return f"p={p:.2g}"


def _said(ok: bool, measured: str, failure: str) -> str:
    """The measurement when the gate passes; the conclusion, then the measurement, when not."""
    return measured if ok else f"{failure} ({measured})"


def count_gate(name: str, method: str | None, have: int, need: int, what: str) -> Gate:
    ok = have >= need
    label = {"samples": "too few samples", "exceedances": "too few exceedances",
             "blocks": "too few blocks"}.get(name, f"too few {name}")  # fmt: skip
    return Gate(name, method, float(have), None, ok,
                _said(ok, f"{have} {what}, at least {need} needed", label))  # fmt: skip


def ljung_box(x: np.ndarray, lags: int) -> tuple[float, float]:
    """Ljung-Box Q over LAGS lags of the ranks of X (robust to heavy tails) and its p-value."""
    n = x.size
    r = stats.rankdata(x)
    r = r - r.mean()
    denom = float(np.dot(r, r))
    if n < 3 or denom == 0:
        return 0.0, 1.0
    h = np.arange(1, lags + 1)
    acf = np.array([float(np.dot(r[:-k], r[k:])) / denom for k in h])
    q = float(n * (n + 2) * np.sum(acf * acf / (n - h)))
    return q, float(stats.chi2.sf(q, lags))


def independence_gate(method: str | None, series: np.ndarray, what: str) -> Gate:
    lags = int(min(10, max(1, series.size // 5)))
    q, p = ljung_box(series, lags)
    ok = p >= ALPHA
    measured = (
        f"Ljung-Box Q={q:.3g} over {lags} lags of the ranks of the {what} in time order, "
        + _p(p)
        + ("" if ok else f" < {ALPHA}")
    )
    return Gate(
        "independence",
        method,
        q,
        p,
        ok,
        _said(ok, measured, "not independent: successive extremes are correlated"),
    )


def _segments(n: int) -> int:
    return int(min(100, max(10, n // 500)))


def stationarity_gates(
    x: np.ndarray, top_idx: np.ndarray, u: float, what: str = "samples"
) -> list[Gate]:
    """Independence of the tail, trend over the run and agreement of the two halves.

    X: the samples in time order; TOP_IDX: indices (time order) of the samples above U,
    the top ~1 % that stands for the tail here (or of the maxima of its bursts, WHAT
    "burst maxima", when they were declustered). Independence comes first: the trend and
    halves tests assume it, and dependent data fail them for the wrong reason.
    """
    n = x.size
    above = f"above {u / 1e3:.4g} µs"
    out = [independence_gate(None, x[top_idx], f"{what} {above}")]
    s = _segments(n)
    bounds = np.linspace(0, n, s + 1).astype(np.int64)
    seg_max = np.maximum.reduceat(x, bounds[:-1]).astype(float)
    seg_of = np.searchsorted(bounds, top_idx, side="right") - 1
    seg_count = np.bincount(seg_of, minlength=s)[:s].astype(float)
    t = np.arange(s)
    for name, series, label in (
        ("trend", seg_max, "maxima"),
        ("trend-rate", seg_count, f"counts of {what} {above}"),
    ):
        if np.ptp(series) == 0:
            tau, p = 0.0, 1.0
        else:
            res = stats.kendalltau(t, series)
            tau, p = float(res.statistic), float(res.pvalue)
        ok = p >= ALPHA
        measured = f"Kendall τ={tau:.2f} of the {label} of {s} segments against time, {_p(p)}" + (
            "" if ok else f" < {ALPHA}"
        )
        trend = "rises" if tau > 0 else "falls"
        out.append(
            Gate(
                name,
                None,
                tau,
                p,
                ok,
                _said(ok, measured, f"not stationary: the tail {trend} over the run"),
            )
        )
    half = n // 2
    first = top_idx < half
    k, k1 = top_idx.size, int(first.sum())
    bt = stats.binomtest(k1, k, half / n)
    ok = bt.pvalue >= ALPHA
    measured = (
        f"{k1} {what} {above} in the first half, {k - k1} in the second, binomial "
        + _p(bt.pvalue)
        + ("" if ok else f" < {ALPHA}")
    )
    out.append(Gate("halves-rate", None, float(k1), float(bt.pvalue), ok,
                    _said(ok, measured, "not stationary: the two halves differ")))  # fmt: skip
    a, b = x[top_idx[first]], x[top_idx[~first]]
    if a.size >= 5 and b.size >= 5:
        ks = stats.ks_2samp(a, b)
        stat, p = float(ks.statistic), float(ks.pvalue)
    else:
        stat, p = 0.0, 1.0
    ok = p >= ALPHA
    measured = (
        f"Kolmogorov-Smirnov D={stat:.3f} between the {what} {above} of the two halves, "
        + _p(p)
        + ("" if ok else f" < {ALPHA}")
    )
    out.append(
        Gate(
            "halves",
            None,
            stat,
            p,
            ok,
            _said(ok, measured, "not stationary: the tails of the two halves differ"),
        )
    )
    return out


def fit_gate(method: str, a2: float, null: np.ndarray, what: str) -> Gate:
    """Anderson-Darling A^2 of the fit against its bootstrap null distribution NULL.

    The bootstrap p-value (1 + #{null >= A^2}) / (B + 1) is at least 1 / (B + 1), so the
    gate fails at p <= ALPHA: with 99 refits, when A^2 exceeds all of them."""
    null = null[np.isfinite(null)]
    p = float((1 + np.count_nonzero(null >= a2)) / (null.size + 1))
    ok = p > ALPHA
    measured = (
        f"Anderson-Darling A²={a2:.3g} of the fitted {what}, {_p(p)}"
        + ("" if ok else f" <= {ALPHA}")
        + f", parametric bootstrap of {null.size} refits"
    )
    return Gate("fit", method, float(a2), p, ok,
                _said(ok, measured, f"the {what} does not fit the tail"))  # fmt: skip


def shape_gate(method: str, xi: float, lo: float, hi: float, what: str) -> Gate:
    """A fitted shape pressed against the limits of the fit is no regular MLE."""
    ok = lo + 0.01 < xi < hi - 0.01
    measured = f"fitted shape ξ={xi:.3g}" + ("" if ok else f", at the limit {lo}..{hi}")
    return Gate("shape", method, float(xi), None, ok,
                _said(ok, measured, f"no regular fit of the {what}"))  # fmt: skip


def first_failure(gates: list[Gate]) -> Gate | None:
    return next((g for g in gates if not g.passed), None)


def reason(g: Gate) -> str:
    """The refusal text of a failing gate."""
    return g.detail
