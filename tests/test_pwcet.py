"""pWCET (rtlab.analysis.pwcet): estimates on known tails, a refusal for each broken gate,
reproducibility, monotonicity in p, operational terms and the --fail-if grammar.

Fits take about a second each, so the data sets are small and fitted once per module.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from rtlab.analysis import (
    fit_tail,
    once_per,
    p_text,
    parse_fail_if,
    parse_probability,
    parse_rate,
    period_text,
    pwcet,
    refused_fit,
)
from rtlab.errors import UserError

TAU, U_SCALE = 0.01, 20_000.0


def known_tail(xi: float, n: int, seed: int) -> tuple[np.ndarray, float]:
    """N samples: a gamma body (mean 20 µs) below its 99th percentile u0, u0 + GPD(xi,
    20 µs) above; and u0."""
    rng = np.random.default_rng(seed)
    body = stats.gamma(4.0, scale=5_000.0)
    u0 = float(body.ppf(1 - TAU))
    tail = rng.random(n) < TAU
    x = np.empty(n)
    x[~tail] = body.ppf(rng.random(int((~tail).sum())) * (1 - TAU))
    x[tail] = u0 + stats.genpareto.ppf(rng.random(int(tail.sum())), xi, scale=U_SCALE)
    return np.round(x).astype(np.int64), u0


def true_quantile(xi: float, u0: float, p: float) -> float:
    return u0 + float(stats.genpareto.isf(p / TAU, xi, scale=U_SCALE))


@pytest.fixture(scope="module")
def known():
    x, u0 = known_tail(-0.1, 50_000, 7)
    return x, u0, fit_tail(x)


def test_estimate_on_a_known_tail(known):
    x, u0, fit = known
    e = fit.estimate(1e-9)
    assert e.refused is None
    assert e.method == "pot"
    assert e.lo_ns <= e.value_ns <= e.hi_ns
    truth = true_quantile(-0.1, u0, 1e-9)
    assert 0.7 * truth < e.value_ns < 1.3 * truth
    assert e.params["distribution"] == "genpareto"
    assert e.params["threshold_ns"] > np.percentile(x, 90)  # chosen in the tail, reported
    assert e.samples == x.size and e.p == 1e-9 and e.confidence == 0.9
    assert all(g.passed for g in e.gates)
    names = {(g.method, g.name) for g in e.gates}
    for name in ("samples", "independence", "trend", "trend-rate", "halves", "halves-rate"):
        assert (None, name) in names
    for method in ("pot", "block-maxima"):
        for name in ("independence", "fit"):
            assert (method, name) in names
    d = e.to_dict()
    assert d["value_ns"] == e.value_ns and len(d["gates"]) == len(e.gates)
    assert all(g["p_value"] is None or 0 <= g["p_value"] <= 1 for g in d["gates"])


def test_exceedance_inverts_the_quantile(known):
    x, _, fit = known
    e = fit.estimate(1e-7)
    exc = fit.exceedance(e.value_ns)
    assert exc.method == "pot"
    assert exc.prob == pytest.approx(1e-7, rel=1e-6)
    assert exc.lo <= exc.prob <= exc.hi
    low = fit.exceedance(float(np.median(x)))  # below the threshold: the count itself
    assert low.method == "empirical"
    assert low.prob == np.count_nonzero(x > np.median(x)) / x.size
    assert low.lo <= low.prob <= low.hi


def test_block_maxima_alone(known):
    x, _, _ = known
    e = pwcet(x, 1e-9, method="block-maxima")
    assert e.refused is None and e.method == "block-maxima"
    assert e.params["distribution"] == "genextreme"
    assert e.params["blocks"] >= 30 and e.params["block"] * e.params["blocks"] <= x.size
    assert e.lo_ns <= e.value_ns <= e.hi_ns
    assert {g.method for g in e.gates} == {None, "block-maxima"}


def test_same_seed_same_estimate(known):
    x, _, fit = known
    a = pwcet(x, 1e-9, seed=0)
    b = fit.estimate(1e-9)  # the fixture's fit, same default seed
    assert a == b  # every field, gates and their bootstrap p-values included
    c = pwcet(x, 1e-9, seed=5)
    assert c.value_ns == a.value_ns  # the fit itself does not depend on the seed
    seeded = ("fit", "mixture")  # their null distributions are seeded bootstraps
    assert [g.p_value for g in c.gates if g.name not in seeded] == [
        g.p_value for g in a.gates if g.name not in seeded
    ]


@settings(max_examples=20, deadline=None)
@given(st.floats(-12, -4), st.floats(0.05, 3))
def test_estimate_is_monotone_in_p(known, log_p, gap):
    _, _, fit = known
    p_small, p_large = 10**log_p, 10 ** min(log_p + gap, -3.5)
    small, large = fit.estimate(p_small), fit.estimate(p_large)
    assert small.refused is None and large.refused is None
    assert small.value_ns >= large.value_ns
    assert small.hi_ns >= large.hi_ns * (1 - 1e-6)


def test_refuses_a_trend():
    x, _ = known_tail(-0.1, 20_000, 1)
    e = pwcet((x * np.linspace(1.0, 2.0, x.size)).astype(np.int64), 1e-9)
    assert e.value_ns is None and e.lo_ns is None and e.hi_ns is None
    assert e.refused.startswith("not stationary")
    assert any(g.name.startswith("trend") and not g.passed for g in e.gates)
    assert "conditions changed" in e.advice and e.advice_activations is None


def test_strong_autocorrelation_is_declustered_then_judged():
    """An AR(1) series at 0.95: its extremes come in long bursts. They are declustered
    (the raw independence test's failure is what the clustering gate reports), and the
    few bursts that remain do not give a stable tail: refused, with advice."""
    rng = np.random.default_rng(3)
    a = np.empty(20_000)
    a[0] = 0.0
    e = rng.standard_normal(a.size)
    for i in range(1, a.size):
        a[i] = 0.95 * a[i - 1] + e[i]
    est = pwcet((20_000 + 3_000 * a).astype(np.int64), 1e-9)
    assert est.value_ns is None and est.refused and est.advice
    clustering = next(g for g in est.gates if g.name == "clustering")
    assert "declustered" in clustering.detail and "Ljung-Box" in clustering.detail
    assert clustering.statistic < 0.5  # the extremal index: long bursts
    shared = [g.name for g in est.gates if g.method is None]
    assert shared.index("clustering") < shared.index("independence") < shared.index("trend")
    assert "burst maxima" in next(g for g in est.gates if g.name == "independence").detail


def test_refuses_too_few_samples():
    x, _ = known_tail(-0.1, 500, 2)
    e = pwcet(x, 1e-9)
    assert e.value_ns is None
    assert e.refused.startswith("too few samples")
    assert [g.name for g in e.gates] == ["samples"]
    assert e.advice_activations == 1000 and "run at least 1,000 activations" in e.advice


def test_refuses_a_bimodal_tail_as_two_regimes():
    """A frequent 200 µs delay and a rare 1 ms one: refused with the mixture reason (by
    both methods: one law is not fitted across two regimes), and told what would help."""
    rng = np.random.default_rng(0)
    x = stats.gamma(4, scale=5_000).rvs(20_000, random_state=rng)
    x[rng.choice(x.size, 400, replace=False)] = rng.normal(200_000, 3_000, 400)
    x[rng.choice(x.size, 30, replace=False)] = rng.normal(1_000_000, 5_000, 30)
    fit = fit_tail(x.astype(np.int64))
    e = fit.estimate(1e-9)
    assert e.value_ns is None and e.method is None
    assert e.refused.startswith("two tail regimes")
    mixture = next(g for g in e.gates if g.name == "mixture")
    assert not mixture.passed and mixture.method == "pot" and mixture.p_value <= 0.01
    assert "two tail regimes" in e.advice and "--explain" in e.advice
    assert "µs" in e.advice  # where the regimes part, so the user knows what to trace
    assert fit.exceedance(500_000).refused == e.refused
    assert fit.exceedance(500_000).advice == e.advice


def test_refused_fit_and_bad_arguments():
    e = refused_fit("no raw samples").estimate(1e-9)
    assert e.refused == "no raw samples" and e.value_ns is None and e.gates == ()
    assert refused_fit("why").exceedance(1e5).refused == "why"
    x, _ = known_tail(0.0, 2_000, 1)
    for bad in (0.0, 1.0, -1e-9):
        with pytest.raises(UserError):
            pwcet(x, bad)
    with pytest.raises(UserError):
        pwcet(x, 1e-9, method="bayes")
    with pytest.raises(UserError):
        pwcet(np.array([1.0, math.nan] * 1000), 1e-9)


def test_predict_max_interval(known):
    _, _, fit = known
    lo, hi, method = fit.predict_max(1_000_000)
    assert method == "pot" and 0 < lo < fit.estimate(1e-6).value_ns < hi


def test_operational_terms():
    assert parse_probability("1e-9") == 1e-9
    assert parse_probability("10y", 1000.0) == pytest.approx(1 / (10 * 365.25 * 86400 * 1000))
    assert parse_probability("1000h", 500.0) == pytest.approx(1 / (1000 * 3600 * 500))
    assert parse_probability("3d") == pytest.approx(1 / (3 * 86400 * 1000))
    for bad in ("0", "1.5", "soon", "10 parsecs", "-1e-9"):
        with pytest.raises(UserError):
            parse_probability(bad)
    assert parse_rate("1kHz") == parse_rate("1000") == parse_rate("1ms") == 1000.0
    assert parse_rate("2.5 khz") == 2500.0 and parse_rate("1MHz") == 1e6
    with pytest.raises(UserError):
        parse_rate("fast")
    assert once_per(1e-9, 1000.0) == "once per 11.6 days at 1 kHz"
    assert once_per(3.17e-12) == "once per 10 years at 1 kHz"
    assert period_text(5400) == "1.5 hours" and period_text(0.25) == "250 ms"
    assert p_text(1e-9) == "1e-9" and p_text(2.5e-12) == "2.5e-12" and p_text(0.01) == "0.01"


def test_fail_if_pwcet_grammar_and_check(known):
    t = parse_fail_if("pwcet(1e-9)>100us")
    assert (t.metric, t.kind, t.value, t.p) == ("pwcet", "absolute", 100_000.0, 1e-9)
    assert parse_fail_if("pwcet(10y)>1.2x", 500.0).p == pytest.approx(
        1 / (10 * 365.25 * 86400 * 500)
    )
    assert parse_fail_if(" pwcet ( 1e-6 ) > +10% ").kind == "ratio"
    assert parse_fail_if("p99>1.2x").p is None
    for bad in ("pwcet(2)>1us", "pwcet()>1x", "pwcet(1e-9)>", "pwcet 1e-9>1us"):
        with pytest.raises(UserError):
            parse_fail_if(bad)
    _, _, fit = known
    e = fit.estimate(1e-9)
    below, above = e.lo_ns * 0.5, e.hi_ns * 2
    assert parse_fail_if(f"pwcet(1e-9)>{above:.0f}ns").check_pwcet(e, e)[0] is False
    # a fixed limit is held against the upper end of the interval, not the estimate
    limit = (e.value_ns + e.hi_ns) / 2
    exceeded, text = parse_fail_if(f"pwcet(1e-9)>{limit:.0f}ns").check_pwcet(e, e)
    assert exceeded and "upper end" in text
    assert parse_fail_if(f"pwcet(1e-9)>{below:.0f}ns").check_pwcet(e, e)[0] is True
    assert parse_fail_if("pwcet(1e-9)>1.01x").check_pwcet(e, e)[0] is False
    no = dataclasses.replace(e, value_ns=None, lo_ns=None, hi_ns=None, refused="why")
    exceeded, text = parse_fail_if("pwcet(1e-9)>1s").check_pwcet(e, no)
    assert exceeded and "why" in text


def test_fits_match_scipy_stats():
    """The vectorised MLEs reach scipy.stats' own maximum (or a higher one)."""
    from rtlab.analysis._pwcet_fit import gev_fit, gev_loglik, gpd_fit_many

    rng = np.random.default_rng(11)
    for xi in (-0.3, 0.0, 0.3):
        y = stats.genpareto.rvs(xi, scale=2.0, size=800, random_state=rng)
        fxi, fsigma, fll = (float(v[0]) for v in gpd_fit_many(y))
        c, _, s = stats.genpareto.fit(y, floc=0)
        assert fll >= stats.genpareto.logpdf(y, c, 0, s).sum() - 1e-6
        assert fxi == pytest.approx(c, abs=0.01) and fsigma == pytest.approx(s, rel=0.01)
        m = stats.genextreme.rvs(-xi, loc=0.0, scale=1.0, size=300, random_state=rng)
        mu, sigma, gxi, gll = gev_fit(m)
        assert gll == pytest.approx(gev_loglik(m, mu, sigma, gxi))
        c, loc, scale = stats.genextreme.fit(m)  # scipy's shape is -xi
        assert gll >= stats.genextreme.logpdf(m, c, loc, scale).sum() - 1e-6


def test_quantile_profile_many_matches_the_scalar_profile():
    from rtlab.analysis._pwcet_fit import GPDModel, gpd_isf, gpd_quantile_profile_many

    rng = np.random.default_rng(3)
    y = gpd_isf(rng.random((4, 300)), 1.0, -0.1)
    zeta, p = 0.01, 1e-9
    for x in (2.0, 8.0, 30.0):  # below the sample maximum, near the truth, far above
        many = gpd_quantile_profile_many(y, x, math.log(zeta / p))
        one = [GPDModel(row, 1.0, 0.0, zeta, 1.0, -0.1, 0.0)._profile(x, p) for row in y]
        assert many == pytest.approx(one, abs=1e-6)


def test_calibrated_interval_is_the_scaled_cut_and_reproducible():
    from rtlab.analysis._pwcet_fit import GPDModel, gpd_fit_many, gpd_isf

    y = gpd_isf(np.random.default_rng(4).random(60), 1.0, -0.1)
    xi, sigma, ll = (float(v[0]) for v in gpd_fit_many(y))
    m = GPDModel(y, 1.0, 0.0, 0.01, sigma, xi, ll, seed=2)
    f = m.calibration(1e-9, 0.9)
    assert math.isfinite(f) and f > 0
    again = GPDModel(y, 1.0, 0.0, 0.01, sigma, xi, ll, seed=2)
    assert again.calibration(1e-9, 0.9) == f  # seeded
    # a quantile 1e-7 beyond 60 excesses: the chi-squared cut is too short in samples
    # this small, so the calibrated cut is wider, and its interval holds the plain one
    assert f > 1
    lo1, hi1 = m.interval(1e-9, 0.9)
    lo, hi = m.interval(1e-9, 0.9, f)
    assert lo < lo1 and hi > hi1
    est, plo, phi = m.sf_interval(float(m.isf(1e-9)), 0.9, f)
    assert plo < est < phi


def test_estimate_interval_is_the_calibrated_hull(known):
    _, _, fit = known
    e = fit.estimate(1e-9)
    f = next(f for f in fit.fits if f.method == "pot")
    ends = [m.interval(1e-9, 0.9, m.calibration(1e-9, 0.9)) for m in [f.model, *f.hull]]
    assert e.lo_ns == pytest.approx(min(lo for lo, _ in ends))
    assert e.hi_ns == pytest.approx(max(hi for _, hi in ends))


@pytest.mark.parametrize("rejections", [1, 99])
def test_threshold_moves_up_when_only_the_fit_rejects_it(known, monkeypatch, rejections):
    """A goodness-of-fit rejection at the lowest stable threshold moves the threshold up
    one candidate at a time, at most HULL candidates; every other gate is unchanged."""
    from rtlab.analysis import _pwcet_methods as pm

    x, _, _ = known
    idx = np.argsort(-x.astype(float), kind="stable")[:5001]
    top = x[idx].astype(float)
    plain = pm.fit_pot(x.size, top, idx, 0)
    assert plain.refused is None and plain.params["unfit_thresholds"] == []
    calls: list[float] = []
    real = pm.fit_gate

    def gate(method, a2, null, what):
        calls.append(a2)
        g = real(method, a2, null, what)
        if len(calls) <= rejections:  # as if A^2 beat every bootstrap refit
            return dataclasses.replace(g, p_value=1 / (null.size + 1), passed=False)
        return g

    monkeypatch.setattr(pm, "fit_gate", gate)
    f = pm.fit_pot(x.size, top, idx, 0)
    moved = f.params["unfit_thresholds"]
    cands = sorted({plain.params["threshold_ns"], *plain.params["hull_thresholds_ns"]})
    steps = min(rejections, pm.HULL)
    assert [m["threshold_ns"] for m in moved] == cands[: len(moved)]
    assert all(m["fit_p"] <= 0.01 for m in moved)
    assert f.params["threshold_ns"] == cands[steps]
    assert all(h > f.params["threshold_ns"] for h in f.params["hull_thresholds_ns"])
    assert len(calls) == steps + 1  # one goodness-of-fit test per threshold tried
    names = [g.name for g in f.gates]
    assert names.count("fit") == 1 and names.count("mixture") == 1
    if rejections > pm.HULL:  # nowhere near the stable choice does the GPD fit: refused
        assert len(moved) == pm.HULL and f.refused is not None and "fit" in names
        assert "stability" not in names
    else:
        assert len(moved) == 1 and f.refused is None and names[-1] == "stability"
