"""rtlab.analysis: exact and histogram statistics, documents, comparisons."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rtlab.analysis import (
    NBUCKETS,
    QUANTILES,
    RATIO_KEYS,
    CaseStats,
    Histogram,
    bucket_bounds,
    bucket_index,
    document_case_stats,
    nearest_rank,
    parse_fail_if,
    per_thread_stats,
    rank_test,
    ratio_table,
    stats_from_histogram,
    stats_from_samples,
)
from rtlab.errors import UserError
from rtlab.rawfile import open_samples, write_raw

# --- references -----------------------------------------------------------------------


def hist_index_ref(v: int) -> int:
    """probe/src/lib/hist.h hist_index, with NBUCKETS for overflow."""
    if v < 256:
        return max(v, 0)
    if v >= 1 << 40:
        return NBUCKETS
    e = v.bit_length() - 1
    shift = e - 7
    return 256 + (e - 8) * 128 + ((v >> shift) - 128)


def exact_stddev(x: np.ndarray) -> float:
    """Sample standard deviation (n - 1), from exact integer sums when affordable."""
    n = x.size
    if n < 2:
        return math.nan
    if n > 20_000:
        return float(np.std(x.astype(np.float64), ddof=1))
    v = [int(i) for i in x]
    s1, s2 = sum(v), sum(i * i for i in v)
    return math.sqrt(Fraction(n * s2 - s1 * s1, n * (n - 1)))


def exact_ref(x: np.ndarray, deadline: int | None = None) -> dict[str, Any]:
    """Brute-force statistics by sorting (nearest rank: sorted[ceil(q n) - 1])."""
    s = np.sort(x)
    n = s.size
    out: dict[str, Any] = {
        k: int(s[math.ceil(Fraction(q) * n) - 1]) if n else None for k, q in QUANTILES.items()
    }
    q1, q3 = out["q1"], out["q3"]
    lo_f, hi_f = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    inside = s[(s >= lo_f) & (s <= hi_f)]
    out.update(
        min=int(s[0]),
        max=int(s[-1]),
        whisker_low=int(inside.min()),
        whisker_high=int(inside.max()),
        outliers=int(n - inside.size),
        mean=sum(int(v) for v in x) / n,
        stddev=exact_stddev(x),
    )
    if deadline is not None:
        out["deadline_misses"] = int(np.count_nonzero(x > deadline))
    return out


def lognormal(n: int, seed: int = 1, median: float = 20_000, sigma: float = 0.4) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.lognormal(np.log(median), sigma, n)
    tail = rng.random(n) < 0.002  # heavy tail mixture
    x[tail] *= rng.pareto(1.5, int(tail.sum())) + 3
    return x.astype(np.int64)


def hist_stats(x: np.ndarray, **kw: Any) -> CaseStats:
    return stats_from_histogram(
        Histogram.from_samples(x),
        minimum=int(x.min()),
        maximum=int(x.max()),
        mean=float(x.mean()),
        stddev=float(x.std(ddof=1)) if x.size > 1 else None,
        **kw,
    )


ORDER_KEYS = ("q1", "median", "q3", "p90", "p99", "p999", "p9999")
EXACT_KEYS = (*ORDER_KEYS, "min", "max", "whisker_low", "whisker_high", "outliers")


def assert_exact(st_: CaseStats, x: np.ndarray, deadline: int | None = None) -> None:
    ref = exact_ref(x, deadline)
    assert st_.exact
    assert st_.count == x.size
    for k in EXACT_KEYS:
        assert getattr(st_, k) == ref[k], k
    assert st_.mean == pytest.approx(ref["mean"], rel=1e-12, abs=1e-9)
    if x.size > 1:
        assert st_.stddev == pytest.approx(ref["stddev"], rel=1e-9, abs=1e-6)
    assert st_.jitter == ref["max"] - ref["min"]
    assert st_.iqr == ref["q3"] - ref["q1"]
    if deadline is not None:
        assert st_.deadline_misses == ref["deadline_misses"]
        assert st_.deadline_misses_bounds == (ref["deadline_misses"],) * 2


def assert_invariants(s: CaseStats) -> None:
    assert s.min <= s.q1 <= s.median <= s.q3 <= s.max
    assert s.median <= s.p90 <= s.p99 <= s.p999 <= s.p9999 <= s.max
    assert s.min <= s.whisker_low <= s.whisker_high <= s.max
    assert 0 <= s.outliers <= s.count
    assert s.jitter == s.max - s.min


# --- bucket geometry ------------------------------------------------------------------


@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=1, max_size=64))
def test_bucket_index_matches_probe(values: list[int]) -> None:
    got = bucket_index(np.array(values, dtype=np.int64))
    assert got.tolist() == [hist_index_ref(v) for v in values]


def test_bucket_index_at_every_octave_edge() -> None:
    edges = [v for e in range(8, 41) for v in (2**e - 1, 2**e, 2**e + 1)]
    got = bucket_index(np.array(edges, dtype=np.int64))
    assert got.tolist() == [hist_index_ref(v) for v in edges]


def test_bucket_bounds_tile_the_range() -> None:
    lower, upper = bucket_bounds(np.arange(NBUCKETS))
    assert lower[0] == 0
    assert np.all(lower[1:] == upper[:-1] + 1)
    assert upper[-1] == 2**40 - 1
    assert np.all(bucket_index(lower) == np.arange(NBUCKETS))
    assert np.all(bucket_index(upper) == np.arange(NBUCKETS))
    assert np.all((upper - lower + 1) * 128 <= np.maximum(lower, 128))


# --- exact statistics -----------------------------------------------------------------


@pytest.mark.parametrize("n", [100_000, 1_000_000])
def test_exact_on_lognormal(n: int) -> None:
    x = lognormal(n)
    s = stats_from_samples(x, deadline_ns=40_000)
    assert_exact(s, x, deadline=40_000)
    assert s.error_ns and all(v == 0 for v in s.error_ns.values())
    assert_invariants(s)


def test_exact_chunked_over_several_arrays() -> None:
    x = lognormal(300_000, seed=2)
    parts = [x[:1000], x[1000:250_000], x[250_000:]]
    s = stats_from_samples(parts, chunk=65_536, deadline_ns=25_000)
    assert_exact(s, x, deadline=25_000)


small_arrays = st.one_of(
    st.lists(st.integers(min_value=-1000, max_value=5000), min_size=1, max_size=300),
    st.lists(st.integers(min_value=0, max_value=2**41), min_size=1, max_size=300),
    st.lists(st.integers(min_value=-(2**62), max_value=2**62), min_size=1, max_size=50),
    st.builds(lambda v, n: [v] * n, st.integers(-(2**40), 2**42), st.integers(1, 200)),
)


@settings(max_examples=200, deadline=None)
@given(small_arrays, st.integers(min_value=1, max_value=400), st.integers(-5000, 2**41))
def test_chunked_equals_unchunked_and_sorting(values: list[int], chunk: int, dl: int) -> None:
    x = np.array(values, dtype=np.int64)
    whole = stats_from_samples(x, deadline_ns=dl, chunk=10**6)
    part = stats_from_samples(x, deadline_ns=dl, chunk=chunk)
    assert_exact(whole, x, deadline=dl)
    for k in (*EXACT_KEYS, "count", "deadline_misses", "mean"):
        assert getattr(part, k) == getattr(whole, k), k
    if x.size > 1:
        assert part.stddev == pytest.approx(whole.stddev, rel=1e-9, abs=1e-6)
    else:
        assert math.isnan(part.stddev) and math.isnan(whole.stddev)
    assert_invariants(part)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=-(2**40), max_value=2**45), min_size=1, max_size=400),
    st.integers(min_value=1, max_value=50),
)
def test_narrowing_passes_are_exact(values: list[int], chunk: int) -> None:
    """Buckets wider than 2^16 ns (above 2^23 ns, negatives, overflow) take several
    narrowing passes."""
    x = np.array(values + values[:50] * 3, dtype=np.int64)
    assert_exact(stats_from_samples(x, chunk=chunk), x)


def test_narrowing_on_crowded_bucket() -> None:
    rng = np.random.default_rng(5)
    base = 1 << 35  # buckets 2^28 ns wide: 1-ns answers need a second narrowing pass
    x = np.concatenate([rng.integers(base, base + 4096, 20_000), [2**50, 2**45, 7]])
    assert_exact(stats_from_samples(x, chunk=1000), x)


def test_exact_from_memmap(tmp_path: Path) -> None:
    x = lognormal(200_000, seed=3)
    write_raw(tmp_path / "r", x)
    s = stats_from_samples(open_samples(tmp_path / "r"), chunk=4096, deadline_ns=30_000)
    assert_exact(s, x, deadline=30_000)


def test_empty_and_single() -> None:
    e = stats_from_samples(np.empty(0, np.int64), deadline_ns=5)
    assert e.count == 0 and math.isnan(e.median) and e.deadline_misses == 0
    json.dumps(e.to_dict(), allow_nan=False)
    s = stats_from_samples(np.array([42]))
    assert (s.min, s.median, s.p9999, s.max, s.whisker_low, s.outliers) == (42, 42, 42, 42, 42, 0)
    assert math.isnan(s.stddev)


def test_to_dict_is_plain_json() -> None:
    s = stats_from_samples(lognormal(1000), deadline_ns=20_000, overruns=3)
    d = s.to_dict()
    assert json.loads(json.dumps(d, allow_nan=False)) == d
    assert d["overruns"] == 3 and d["deadline_misses_bounds"] == [s.deadline_misses] * 2


# --- histogram estimates --------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_histogram_within_stated_error(seed: int) -> None:
    x = lognormal(300_000, seed=seed)
    exact = stats_from_samples(x)
    est = hist_stats(x, deadline_ns=33_333)
    assert not est.exact
    for k in (*ORDER_KEYS, "whisker_low", "whisker_high", "iqr"):
        assert abs(getattr(est, k) - getattr(exact, k)) <= est.error_ns[k], k
        assert est.error_ns[k] <= max(abs(getattr(exact, k)) / 128 * 3, 1), k
    for k in ("min", "max", "jitter"):
        assert getattr(est, k) == getattr(exact, k)
    misses = int(np.count_nonzero(x > 33_333))
    lo, hi = est.deadline_misses_bounds
    assert lo <= misses <= hi and lo <= est.deadline_misses <= hi
    assert abs(est.outliers - exact.outliers) <= 0.05 * exact.outliers + 10
    assert_invariants(est)


def test_histogram_percentiles_are_probe_midpoints() -> None:
    x = lognormal(50_000)
    est = hist_stats(x)
    counts = np.bincount(bucket_index(x), minlength=NBUCKETS + 1)
    cum = np.cumsum(counts)
    for k, q in QUANTILES.items():
        b = int(np.searchsorted(cum, nearest_rank(x.size, q)))
        lo, hi = (int(v) for v in bucket_bounds(b))
        assert getattr(est, k) == min(max(lo + (hi - lo) // 2, x.min()), x.max())


def test_deadline_on_bucket_boundary_is_exact() -> None:
    x = lognormal(100_000)
    _, upper = bucket_bounds(bucket_index(np.array([25_000])))
    d = int(upper[0])
    est = hist_stats(x, deadline_ns=d)
    n = int(np.count_nonzero(x > d))
    assert est.deadline_misses == n and est.deadline_misses_bounds == (n, n)
    for d in (int(x.max()), int(x.min()) - 1):
        est = hist_stats(x, deadline_ns=d)
        assert est.deadline_misses_bounds == (int(np.count_nonzero(x > d)),) * 2


@settings(max_examples=100, deadline=None)
@given(small_arrays, st.integers(-5000, 2**41))
def test_histogram_route_bounds_hold(values: list[int], dl: int) -> None:
    x = np.array(values, dtype=np.int64)
    assume(x.max() < 2**62)  # keep the float mean/stddev finite-precision sane
    exact = exact_ref(x, dl)
    est = hist_stats(x, deadline_ns=dl)
    for k in (*ORDER_KEYS, "whisker_low", "whisker_high"):
        assert abs(getattr(est, k) - exact[k]) <= est.error_ns[k], k
    lo, hi = est.deadline_misses_bounds
    assert lo <= exact["deadline_misses"] <= hi
    assert_invariants(est)


def test_negative_samples_binned_at_zero() -> None:
    x = np.array([-50, -10, -10, 0, 3, 300, 301, 5000], dtype=np.int64)
    h = Histogram.from_samples(x)
    assert h.lower[0] == 0 and h.count[0] == 4
    est = hist_stats(x)
    assert est.min == -50 and est.q1 == 0 and est.error_ns["q1"] == 50
    assert abs(est.q1 - exact_ref(x)["q1"]) <= est.error_ns["q1"]


def test_overflow_counts_as_a_last_bucket() -> None:
    x = np.concatenate([lognormal(1000), [2**40 + 1, 2**42]])
    h = Histogram.from_samples(x)
    assert h.overflow == 2 and h.total == x.size
    est = stats_from_histogram(
        h, minimum=int(x.min()), maximum=int(x.max()), mean=0.0, stddev=0.0, deadline_ns=2**40 - 1
    )
    assert est.deadline_misses_bounds == (2, 2)
    assert est.max == 2**42
    unknown = Histogram(h.lower, h.upper, h.count, h.overflow)  # e.g. imported geometry
    est = stats_from_histogram(
        unknown,
        minimum=int(x.min()),
        maximum=int(x.max()),
        mean=0.0,
        stddev=0.0,
        deadline_ns=2**40 - 1,
    )
    assert est.deadline_misses_bounds == (0, 2)
    doc_thread = {"histogram": h.to_document()}
    assert Histogram.from_document_thread(doc_thread).overflow_at == 2**40
    doc_thread["histogram"]["buckets"].append([2000, 2999, 1])
    assert Histogram.from_document_thread(doc_thread).overflow_at is None


# --- merge and documents --------------------------------------------------------------


def test_merge_same_geometry_equals_histogram_of_union() -> None:
    a, b, c = lognormal(10_000, 1), lognormal(20_000, 2, median=40_000), np.array([2**41])
    merged = Histogram.merge([Histogram.from_samples(v) for v in (a, b, c)])
    union = Histogram.from_samples(np.concatenate([a, b, c]))
    np.testing.assert_array_equal(merged.lower, union.lower)
    np.testing.assert_array_equal(merged.upper, union.upper)
    np.testing.assert_array_equal(merged.count, union.count)
    assert merged.overflow == union.overflow == 1 and merged.disjoint


def test_merge_mixed_geometry() -> None:
    probe = Histogram([1000, 1024], [1007, 1031], [5, 6], overflow=1)
    cyclic = Histogram([1000, 2000, 1000], [1999, 2999, 1999], [7, 8, 1], overflow=2)
    m = Histogram.merge([probe, cyclic, Histogram.empty()])
    assert list(zip(m.lower.tolist(), m.upper.tolist(), m.count.tolist(), strict=True)) == [
        (1000, 1007, 5),
        (1000, 1999, 8),
        (1024, 1031, 6),
        (2000, 2999, 8),
    ]
    assert m.overflow == 3 and m.total == probe.total + cyclic.total and not m.disjoint


def test_from_document_thread_round_trip() -> None:
    h = Histogram.from_samples(lognormal(5000))
    doc_thread = {"index": 0, "histogram": h.to_document()}
    doc_thread["histogram"]["buckets"].reverse()  # order is restored
    back = Histogram.from_document_thread(doc_thread)
    np.testing.assert_array_equal(back.lower, h.lower)
    np.testing.assert_array_equal(back.count, h.count)
    with pytest.raises(UserError, match="bad histogram"):
        Histogram.from_document_thread({"index": 1, "histogram": {"buckets": [[1, 2]]}})
    with pytest.raises(UserError, match="no histogram"):
        Histogram.from_document_thread({"index": 1})


def thread_doc(x: np.ndarray, index: int, raw_file: str | None = None, **extra: Any) -> dict:
    t: dict[str, Any] = {
        "index": index,
        "count": int(x.size),
        "min_ns": int(x.min()),
        "max_ns": int(x.max()),
        "mean_ns": float(x.mean()),
        "stddev_ns": float(x.std(ddof=1)) if x.size > 1 else None,
        "overruns": index + 1,
        "raw_lost": 0,
        "histogram": Histogram.from_samples(x).to_document(),
        **extra,
    }
    if raw_file is not None:
        t["raw_file"] = raw_file
        t["raw_samples"] = int(x.size)
    return t


def three_threads() -> list[np.ndarray]:
    return [lognormal(30_000, 1), lognormal(20_000, 2, median=30_000), np.array([12_345])]


def test_document_pools_threads_from_histograms(tmp_path: Path) -> None:
    xs = three_threads()
    doc = {"schema": 1, "threads": [thread_doc(x, i) for i, x in enumerate(xs)]}
    s = document_case_stats(doc, tmp_path, deadline_ns=25_000)
    allx = np.concatenate(xs)
    assert not s.exact and s.count == allx.size and s.overruns == 1 + 2 + 3
    assert (s.min, s.max) == (allx.min(), allx.max())
    assert s.mean == pytest.approx(allx.mean(), rel=1e-12)
    assert s.stddev == pytest.approx(np.std(allx, ddof=1), rel=1e-9)
    exact = exact_ref(allx, 25_000)
    for k in ORDER_KEYS:
        assert abs(getattr(s, k) - exact[k]) <= s.error_ns[k]
    lo, hi = s.deadline_misses_bounds
    assert lo <= exact["deadline_misses"] <= hi


def test_document_uses_raw_files_when_all_present(tmp_path: Path) -> None:
    xs = three_threads()
    threads = []
    for i, x in enumerate(xs):
        write_raw(tmp_path / f"run.raw.{i}", x, thread_index=i)
        # relative name, absolute name elsewhere (copied results), relative subpath
        name = [f"run.raw.{i}", f"/nonexistent/dir/run.raw.{i}", f"./run.raw.{i}"][i]
        threads.append(thread_doc(x, i, raw_file=name))
    doc = {"schema": 1, "threads": threads}
    s = document_case_stats(doc, tmp_path, deadline_ns=25_000)
    assert_exact(s, np.concatenate(xs), deadline=25_000)
    assert s.overruns == 6
    per = per_thread_stats(doc, tmp_path)
    assert len(per) == 3 and all(p.exact for p in per)
    for p, x in zip(per, xs, strict=True):
        assert_exact(p, x)
    assert not document_case_stats(doc, tmp_path, prefer_raw=False).exact
    threads[1]["raw_lost"] = 5  # the raw file lacks samples: fall back to the histograms
    assert not document_case_stats(doc, tmp_path).exact
    threads[1]["raw_lost"] = 0
    (tmp_path / "run.raw.2").unlink()
    assert not document_case_stats(doc, tmp_path).exact
    assert [p.exact for p in per_thread_stats(doc, tmp_path)] == [True, True, False]


def test_document_errors_and_empty(tmp_path: Path) -> None:
    with pytest.raises(UserError):
        document_case_stats({"schema": 1}, tmp_path)
    empty = {
        "count": 0,
        "min_ns": None,
        "max_ns": None,
        "mean_ns": None,
        "stddev_ns": None,
        "overruns": 0,
        "histogram": {"unit": "ns", "overflow": 0, "buckets": []},
    }
    s = document_case_stats({"threads": [empty]}, tmp_path, deadline_ns=10)
    assert s.count == 0 and math.isnan(s.p99)


# --- comparisons ----------------------------------------------------------------------


def test_ratio_table() -> None:
    a = stats_from_samples(np.array([0, 10, 20, 30]))
    b = stats_from_samples(np.array([0, 20, 40, 60]))
    r = ratio_table(a, b)
    assert set(r) == set(RATIO_KEYS)
    assert {"min", "mean", "median", "p90", "p99", "p999", "p9999", "max"} <= set(r)
    assert r["min"] == 1.0 and r["max"] == 2.0 and r["mean"] == 2.0
    c = stats_from_samples(np.array([5, 20, 40, 60]))
    assert math.isnan(ratio_table(a, c)["min"])


def test_rank_test_detects_shift_and_not_equality() -> None:
    a, b = lognormal(50_000, 1), lognormal(50_000, 2)
    same = rank_test(a, b)
    assert same.pvalue > 0.01 and abs(same.effect_size - 0.5) < 0.01
    shifted = rank_test(a, b + 500)
    assert shifted.pvalue < 1e-10 and shifted.effect_size > 0.52
    assert not shifted.subsampled and (shifted.n_a, shifted.n_b) == (50_000, 50_000)
    sub = rank_test([a[:30_000], a[30_000:]], b + 500, max_n=10_000, seed=7)
    assert sub.subsampled and (sub.n_a, sub.n_b, sub.total_a) == (10_000, 10_000, 50_000)
    assert sub == rank_test([a[:30_000], a[30_000:]], b + 500, max_n=10_000, seed=7)
    assert sub.pvalue < 1e-3 and sub.effect_size > 0.5
    with pytest.raises(UserError):
        rank_test(np.empty(0, np.int64), b)


@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=30),
    st.lists(st.integers(0, 20), min_size=1, max_size=30),
)
def test_rank_test_effect_size_is_probability_of_superiority(a: list[int], b: list[int]) -> None:
    assume(len(set(a + b)) > 1)
    r = rank_test(np.array(a), np.array(b))
    pairs = [(x, y) for x in a for y in b]
    ps = (sum(y > x for x, y in pairs) + 0.5 * sum(y == x for x, y in pairs)) / len(pairs)
    assert r.effect_size == pytest.approx(ps)


@pytest.mark.parametrize(
    ("expr", "metric", "kind", "value"),
    [
        ("p99>1.2x", "p99", "ratio", 1.2),
        ("max>1.5x", "max", "ratio", 1.5),
        ("mean>+20us", "mean", "increase", 20_000),
        ("avg > +1.5ms", "mean", "increase", 1_500_000),
        ("p99.9>1.1x", "p999", "ratio", 1.1),
        ("P99.99>2X", "p9999", "ratio", 2.0),
        ("median>+10%", "median", "ratio", 1.1),
        ("p50>1x", "median", "ratio", 1.0),
        ("p90>+0", "p90", "increase", 0),
        ("jitter>+500ns", "jitter", "increase", 500),
        ("stddev>3x", "stddev", "ratio", 3.0),
        ("min>1.05x", "min", "ratio", 1.05),
        ("max>100us", "max", "absolute", 100_000),
    ],
)
def test_parse_fail_if_good(expr: str, metric: str, kind: str, value: float) -> None:
    t = parse_fail_if(expr)
    assert (t.metric, t.kind) == (metric, kind)
    assert t.value == pytest.approx(value)


@pytest.mark.parametrize(
    "expr",
    [
        "",
        "p99",
        "p99>",
        "p98>1.2x",
        "p99<1.2x",
        "p99>1.2",
        "p99>0x",
        "mean>+20",
        "mean>+20 fortnights",
        "mean>+-5us",
        "p99>>1.2x",
        "max>1.2x extra",
        "1.2x>p99",
        "p99>x",
    ],
)
def test_parse_fail_if_bad(expr: str) -> None:
    with pytest.raises(UserError) as e:
        parse_fail_if(expr)
    msg = str(e.value)
    assert "\n" not in msg and repr(expr) in msg


def test_threshold_check() -> None:
    a = stats_from_samples(np.arange(10_000, 20_000))
    b = stats_from_samples(np.arange(10_000, 20_000) * 13 // 10)
    exceeded, text = parse_fail_if("p99>1.2x").check(a, b)
    assert exceeded and "exceeded" in text and "p99>1.2x" in text
    exceeded, text = parse_fail_if("p99>1.5x").check(a, b)
    assert not exceeded and text.endswith("ok")
    assert parse_fail_if("mean>+1us").check(a, b)[0]
    assert not parse_fail_if("mean>+10ms").check(a, b)[0]
    assert not parse_fail_if("max>1ms").check(a, b)[0]
    assert parse_fail_if("max>20us").check(a, b)[0]
    empty = CaseStats.empty()
    assert parse_fail_if("p99>1.2x").check(a, empty)[0]
    zero = stats_from_samples(np.zeros(5, np.int64))
    assert not parse_fail_if("max>1.2x").check(zero, zero)[0]
    assert parse_fail_if("max>1.2x").check(zero, a)[0]
