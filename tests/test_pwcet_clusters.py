"""pWCET on clustered extremes: the extremal index, declustering, the tail-mixture and
stability checks, and the advice a refusal gives. Structure and invariants only: fixed
seeds, wide tolerances, no timing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rtlab.analysis import advice_text, fit_tail
from rtlab.analysis._pwcet_checks import stability_confidence, stability_gate
from rtlab.analysis._pwcet_clusters import (
    clustering_p,
    decluster,
    extremal_index,
    split,
)
from rtlab.analysis._pwcet_gates import ljung_box

BODY = stats.gamma(4.0, scale=5_000.0)
TAU = 0.01
U0 = float(BODY.ppf(1 - TAU))


def mar(n: int, a: float, seed: int) -> np.ndarray:
    """X_t = max(a X_{t-1}, (1 - a) Z_t), Z unit Frechet: unit Frechet marginal, extremal
    index 1 - a."""
    rng = np.random.default_rng(seed)
    z = (1 - a) / -np.log(rng.random(n))
    x = np.empty(n)
    prev = 1 / -np.log(rng.random())
    for i in range(n):
        prev = x[i] = max(a * prev, z[i])
    return x


def clustered(n: int, a: float, seed: int) -> np.ndarray:
    """The MAR series mapped onto a gamma body with a GPD(-0.1, 20 µs) tail above its 99th
    percentile (int64 ns): a known law with a known extremal index."""
    sf = -np.expm1(-1 / mar(n, a, seed))
    out = BODY.isf(np.clip(sf, TAU, 1.0))
    tail = sf < TAU
    out[tail] = U0 + stats.genpareto.isf(sf[tail] / TAU, -0.1, scale=20_000.0)
    return np.round(out).astype(np.int64)


def top_times(x: np.ndarray, k: int) -> np.ndarray:
    return np.sort(np.argsort(-x, kind="stable")[:k])


@pytest.mark.parametrize("a", [0.3, 0.5, 0.7])
def test_extremal_index_of_a_mar_series(a):
    x = mar(100_000, a, 11)
    t = top_times(x, 1000)
    assert extremal_index(t) == pytest.approx(1 - a, abs=0.15)
    c = decluster(t, x[t])
    assert c.exceedances == 1000 and c.count < 1000
    # ceil(theta N) clusters at most: fewer when gaps tie with the run length
    assert 0.9 * c.theta * 1000 <= c.count <= math.ceil(c.theta * 1000)
    assert clustering_p(t, x.size) < 0.01


def test_independent_times_are_not_clusters():
    rng = np.random.default_rng(2)
    t = np.sort(rng.choice(100_000, 1000, replace=False))
    assert extremal_index(t) > 0.85
    assert clustering_p(t, 100_000) > 0.01
    assert extremal_index(np.array([5])) == 1.0


def test_split_and_decluster_invariants():
    t = np.array([10, 11, 12, 40, 41, 90, 200, 203])
    v = np.array([5.0, 9.0, 7.0, 3.0, 4.0, 8.0, 6.0, 6.0])
    c = split(t, v, 2)  # gaps of more than 2 start a cluster: {10-12} {40,41} {90} {200} {203}
    assert c.count == 5 and c.exceedances == 8
    assert list(c.maxima) == [9.0, 4.0, 8.0, 6.0, 6.0]
    assert list(c.positions) == [11, 41, 90, 200, 203]
    c = split(t, v, 3)  # 200 and 203 join
    assert c.count == 4 and list(c.positions) == [11, 41, 90, 200]
    assert split(t, v, 0).count == t.size  # run length 0: every exceedance its own
    d = decluster(t, v)
    assert 1 <= d.count <= t.size and d.maxima.max() == v.max()
    assert np.all(np.diff(d.positions) > d.run)


def test_clustered_series_answered_with_its_extremal_index():
    """A MAR series with extremal index 0.5: the old independence gate refused it (its
    Ljung-Box test fails on the top 1 %); declustered, it is answered, and the interval
    holds the true quantile of the marginal."""
    x = clustered(100_000, 0.5, 1)
    top = top_times(x, 1000)
    assert ljung_box(x[top].astype(float), 10)[1] < 0.01  # what refused it before
    fit = fit_tail(x)
    e = fit.estimate(1e-6)
    assert e.refused is None and e.method == "pot", e.refused
    assert e.params["declustered"] is True
    assert 0.3 < e.params["extremal_index"] < 0.7
    assert e.params["clusters"] < e.params["exceedances"]
    assert e.params["run_length"] >= 1
    assert e.params["cluster_rate"] < e.params["rate"]
    truth = U0 + stats.genpareto.isf(1e-6 / TAU, -0.1, scale=20_000.0)
    assert e.lo_ns <= truth <= e.hi_ns
    gates = {(g.method, g.name): g for g in e.gates}
    clustering = gates[(None, "clustering")]
    assert clustering.passed and "declustered" in clustering.detail
    for name in ("mixture", "stability", "fit", "independence"):
        assert gates[("pot", name)].passed
    assert "burst maxima" in gates[("pot", "independence")].detail
    # the maximum of m activations: bursts make it smaller than m independent ones
    lo, hi, _ = fit.predict_max(1_000_000)
    model = fit.fits[0].model
    assert model.theta == e.params["extremal_index"] < 1
    model.theta = 1.0
    lo1, hi1, _ = fit.predict_max(1_000_000)
    assert lo < lo1 and hi < hi1


def test_iid_series_is_not_declustered():
    rng = np.random.default_rng(4)
    x = np.round(BODY.rvs(50_000, random_state=rng)).astype(np.int64)
    e = fit_tail(x).estimate(1e-6)
    assert e.refused is None
    assert e.params["declustered"] is False and e.params["extremal_index"] == 1.0
    assert e.params["clusters"] == e.params["exceedances"]
    clustering = next(g for g in e.gates if g.name == "clustering")
    assert clustering.passed and "no bursts" in clustering.detail


def test_stability_gate_sees_a_tail_that_changes():
    rng = np.random.default_rng(5)
    n, k = 200_000, 1200
    t = np.sort(rng.choice(n, k, replace=False))
    same = 100_000 + stats.genpareto.rvs(-0.1, scale=20_000, size=k, random_state=rng)
    g = stability_gate("pot", n, t, same, 100_000.0, 0)
    assert g.passed and g.name == "stability" and "halves and thirds" in g.detail
    changed = same.copy()
    late = t >= n // 2
    changed[late] = 100_000 + 5 * (changed[late] - 100_000)  # the tail five times longer
    g = stability_gate("pot", n, t, changed, 100_000.0, 0)
    assert not g.passed and g.detail.startswith("the return level is not stable")
    assert 0.9 < stability_confidence() < 1


def test_refusal_advice_for_bursts_and_in_time():
    """Too few bursts in a short run: the advice names the bursts and a run length."""
    x = clustered(3_000, 0.85, 3)
    e = fit_tail(x, method="pot").estimate(1e-9)
    assert e.refused.startswith("too few exceedances") and "bursts" in e.refused
    assert e.advice.startswith("too few bursts of extremes (extremal index")
    assert e.advice_activations > x.size
    assert e.advice.endswith(f"run at least {e.advice_activations:,} activations")
    text = advice_text(e.advice, e.advice_activations, 1000.0)
    assert text.startswith(e.advice) and text.endswith("at 1 kHz)")
    d = e.to_dict()
    assert d["advice"] == e.advice and d["advice_activations"] == e.advice_activations
    assert advice_text(None, None, 1000.0) is None
    assert advice_text("keep it steady", None, 1000.0) == "keep it steady"
    assert advice_text("x", 600_000, 1000.0) == "x (10 minutes at 1 kHz)"
