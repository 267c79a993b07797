"""The compiled exact statistics (rtlab.analysis._scan, _select, _raw) against the numpy
implementation they replaced (tests/_exact_reference.py): the same numbers on random data
with ties, extremes and sizes crossing every block boundary."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rtlab.analysis._pilot as pilot_mod
import rtlab.analysis._raw as raw_mod
import rtlab.analysis._scan as scan_mod
from rtlab.analysis import NBUCKETS, CaseStats, bucket_bounds, bucket_index, stats_from_samples
from rtlab.analysis._raw import sqrt_ratio
from rtlab.analysis._scan import Interval, Scanner
from rtlab.errors import UnsupportedError, UserError
from rtlab.rawfile import open_samples, write_raw

from ._exact_reference import reference_stats

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
SUB = 1024  # src/scan/scan.c SCAN_SUB: samples per inner block


def exact_stddev(x: np.ndarray) -> float:
    """sqrt of the exact sample variance, rounded once to float (100 digits first)."""
    v = [int(i) for i in x]
    n, s1, s2 = len(v), sum(v), sum(i * i for i in v)
    with localcontext() as ctx:
        ctx.prec = 100
        return float((Decimal(n * s2 - s1 * s1) / Decimal(n * (n - 1))).sqrt())


def assert_same(new: CaseStats, ref: CaseStats, x: np.ndarray | None = None) -> None:
    """Every statistic identical; the standard deviation and variance, which the reference
    computes in float64 from per-chunk deviations, within 1e-9 and exactly rounded in the
    new."""
    a, b = new.to_dict(), ref.to_dict()
    sd_new, sd_ref = a.pop("stddev"), b.pop("stddev")
    var_new, var_ref = a.pop("variance"), b.pop("variance")
    assert a == b
    if sd_ref is None:
        assert sd_new is None and var_new is None and var_ref is None
        return
    assert sd_new == pytest.approx(sd_ref, rel=1e-9, abs=1e-6)
    assert var_new == pytest.approx(var_ref, rel=1e-9, abs=1e-6)
    if x is not None:
        assert sd_new == exact_stddev(x)


def both(x: np.ndarray | list[np.ndarray], deadline: int | None = None, **kw) -> None:
    arrays = x if isinstance(x, list) else [x]
    new = stats_from_samples(x, deadline_ns=deadline, overruns=3, **kw)
    ref = reference_stats(x, deadline_ns=deadline, overruns=3)
    pooled = np.concatenate([np.asarray(a, dtype=np.int64).reshape(-1) for a in arrays])
    assert_same(new, ref, pooled if 1 < pooled.size <= 50_000 else None)


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch):
    """Set the scanner's thread count for small inputs too."""

    def use(n: int) -> None:
        monkeypatch.setattr(scan_mod, "MIN_PER_THREAD", 1)
        monkeypatch.setattr(scan_mod, "_threads", lambda total: n)

    return use


@pytest.fixture
def pilot(monkeypatch: pytest.MonkeyPatch):
    """Read a pilot (and split its buckets in pass 1) for small inputs too."""

    def use(on: bool = True) -> None:
        monkeypatch.setattr(pilot_mod, "PILOT_MIN", 1 if on else 1 << 62)
        monkeypatch.setattr(pilot_mod, "PILOT_SAMPLES", 2000)
        monkeypatch.setattr(pilot_mod, "PILOT_RUNS", 8)

    return use


def dataset(kind: str, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if kind == "lognormal":  # a body around 20 us with a heavy tail
        x = rng.lognormal(np.log(20_000), 0.4, n)
        tail = rng.random(n) < 0.01
        x[tail] *= rng.pareto(1.2, int(tail.sum())) + 3
        return np.minimum(x, 2e18).astype(np.int64)
    if kind == "ties":
        return rng.integers(0, 7, n)
    if kind == "equal":
        return np.full(n, 123_456_789, np.int64)
    if kind == "extreme":  # int64 limits, zero, negatives, the 2^40 overflow edge
        pool = np.array([I64_MIN, I64_MIN + 1, -1, 0, 1, 255, 256, 2**40 - 1, 2**40, I64_MAX])
        return rng.choice(pool, n)
    if kind == "wide":
        return rng.integers(I64_MIN, I64_MAX, n, dtype=np.int64, endpoint=True)
    if kind == "negative":
        return rng.integers(-50_000, 5_000, n)
    if kind == "offset":  # a tiny spread far out: wide buckets, narrowing passes
        return rng.integers(2**62, 2**62 + 300, n)
    if kind == "crowded":  # above 2^23 ns, where 1-ns answers need a second pass
        return np.concatenate([rng.integers(2**33, 2**33 + 5000, n - 2), [2**45, 9]])
    raise AssertionError(kind)


KINDS = ("lognormal", "ties", "equal", "extreme", "wide", "negative", "offset", "crowded")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 63, 64, 65, SUB - 1, SUB, SUB + 1, 3 * SUB + 17, 50_000])
@pytest.mark.parametrize("guess", [False, True], ids=["two-pass", "pilot"])
def test_same_as_reference(kind: str, n: int, guess: bool, threads, pilot) -> None:
    if kind == "crowded" and n < 3:
        n = 3
    threads(3 if n > 2 else 1)
    pilot(guess)
    x = dataset(kind, n, seed=n)
    both(x, deadline=int(np.median(x)))
    both(x, chunk=SUB + 1)  # page-release blocks not aligned with the inner blocks


@pytest.mark.parametrize("nthreads", [1, 2, 4])
@pytest.mark.parametrize("block", [1, 100, 1 << 18, 1 << 20])
def test_threads_and_blocks(nthreads: int, block: int, threads) -> None:
    threads(nthreads)
    x = dataset("lognormal", 20_011, seed=7)
    both(x, deadline=40_000, chunk=block)
    # blocks of whole huge pages after a head block up to the first 2-MiB address
    big = dataset("lognormal", 1_200_007, seed=8)
    both([big[:3], big[3:700_001], big[700_001:]], chunk=block)


small_lists = st.one_of(
    st.lists(st.integers(min_value=-1000, max_value=5000), min_size=1, max_size=300),
    st.lists(st.integers(min_value=0, max_value=2**41), min_size=1, max_size=300),
    st.lists(st.integers(min_value=I64_MIN, max_value=I64_MAX), min_size=1, max_size=80),
    st.lists(st.sampled_from([I64_MIN, -1, 0, 1, 2**23, 2**40, I64_MAX]), min_size=1),
    st.builds(lambda v, n: [v] * n, st.integers(I64_MIN, I64_MAX), st.integers(1, 200)),
)


def whole_buckets(indices: list[int]) -> list[Interval]:
    lower, upper = bucket_bounds(np.array(sorted(set(indices)), dtype=np.int64))
    return [
        Interval(int(lo), int(hi), int(b))
        for lo, hi, b in zip(lower, upper, sorted(set(indices)), strict=True)
    ]


@settings(max_examples=300, deadline=None)
@given(
    small_lists,
    st.integers(min_value=1, max_value=3),
    st.integers(min_value=1, max_value=70),
    st.one_of(st.none(), st.integers(-(2**70), 2**70), st.integers(-5000, 5000)),
    st.lists(st.integers(1, NBUCKETS - 1), max_size=12),
)
def test_random_lists(
    values: list[int], nthreads: int, block: int, dl: int | None, guessed: list[int]
) -> None:
    """Any buckets split in pass 1 (right or wrong guesses) give the same results."""
    x = np.array(values, dtype=np.int64)
    s = Scanner([x], block=block, threads=nthreads)
    m = s.moments(dl)
    assert (m.count, m.min, m.max) == (x.size, min(values), max(values))
    assert (m.sum, m.sum_squares) == (sum(values), sum(v * v for v in values))
    assert m.above == (0 if dl is None else sum(v > dl for v in values))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scan_mod, "_threads", lambda total: nthreads)
        mp.setattr(raw_mod, "predicted_cells", lambda scanner: whole_buckets(guessed))
        new = stats_from_samples(x, deadline_ns=dl, chunk=block)
    assert_same(new, reference_stats(x, deadline_ns=dl), x if x.size > 1 else None)


def test_several_arrays_pooled(threads) -> None:
    threads(2)
    rng = np.random.default_rng(3)
    parts = [
        dataset("lognormal", 5000, 1),
        np.empty(0, np.int64),
        np.array([7]),
        dataset("ties", 3000, 2),
        rng.integers(-5, 2**41, 2 * SUB + 3),
    ]
    both(parts, deadline=20_000)


def test_other_dtypes_and_layouts() -> None:
    x = dataset("lognormal", 10_000, 4)
    both(x.astype(np.int32), deadline=30_000)
    both(x.astype(np.float64) + 0.7)  # truncated to int64, as before
    both(x[::3])  # not contiguous
    both(x.astype(">i8"))  # not native
    both([list(map(int, x[:100])), x[100:]])  # plain Python ints too


def mapped_kib(path: Path) -> int:
    """Resident KiB of this process's mappings of PATH (/proc/self/smaps)."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
            inside = len(head) >= 6 and head[5] == str(path)
        elif inside and head[:1] == ["Rss:"]:
            total += int(head[1])
    return total


def test_memory_map_read_in_place(tmp_path: Path, threads) -> None:
    threads(2)
    x = dataset("lognormal", 300_000, 5)
    write_raw(tmp_path / "r", x)
    mm = open_samples(tmp_path / "r")
    assert scan_mod._releasable(mm) and not scan_mod._releasable(x)
    np.asarray(mm).sum()
    assert mapped_kib(tmp_path / "r") >= 2000  # the whole file (2.4 MB) is mapped now
    stats_from_samples(mm, chunk=4096)
    # every block's pages were dropped after reading: at most a page per block edge
    assert mapped_kib(tmp_path / "r") <= 300_000 // 4096 * 4 + 8


def test_huge_page_blocks_are_released_whole(tmp_path: Path, threads) -> None:
    """Blocks of whole 2-MiB pages (the default) start on 2-MiB addresses: a short head
    block first, so that no mapping straddles two blocks and each is dropped whole."""
    threads(3)
    x = dataset("lognormal", 1_500_000, 12)
    write_raw(tmp_path / "r", x)
    mm = open_samples(tmp_path / "r")
    assert_same(stats_from_samples(mm, chunk=1 << 18), reference_stats(x))
    assert mapped_kib(tmp_path / "r") <= 16  # unaligned blocks left 2 MiB mapped here
    assert_same(
        stats_from_samples(mm, deadline_ns=30_000, chunk=4096),
        reference_stats(x, deadline_ns=30_000),
    )
    # the pages dropped after reading fault back in with the same data
    assert_same(stats_from_samples([mm[:1000], mm[1000:]]), reference_stats(x))


def test_private_mapping_changes_are_kept(tmp_path: Path) -> None:
    """A copy-on-write map is never released: its changed pages would be lost."""
    x = dataset("lognormal", 100_000, 6)
    write_raw(tmp_path / "r", x)
    mm = np.memmap(tmp_path / "r", dtype="<i8", mode="c", offset=64, shape=(x.size,))
    mm[:50_000] = 5
    assert not scan_mod._releasable(mm)
    y = x.copy()
    y[:50_000] = 5
    assert_same(stats_from_samples(mm, chunk=1000), reference_stats(y))


def count_refines(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    orig = Scanner.refine

    def refine(self, intervals):
        calls.append(len(intervals))
        return orig(self, intervals)

    monkeypatch.setattr(Scanner, "refine", refine)
    return calls


def test_typical_data_takes_two_passes(monkeypatch: pytest.MonkeyPatch, pilot) -> None:
    pilot(False)
    calls = count_refines(monkeypatch)
    x = dataset("lognormal", 200_000, 8)
    both(x, deadline=50_000)
    assert len(calls) == 1  # the histogram pass, then one pass settles every order statistic


def test_pilot_saves_the_second_pass(monkeypatch: pytest.MonkeyPatch, pilot) -> None:
    pilot()
    monkeypatch.setattr(pilot_mod, "PILOT_SAMPLES", 100_000)
    calls = count_refines(monkeypatch)
    for seed in range(5):
        x = np.random.default_rng(seed).lognormal(np.log(20_000), 0.3, 300_000)
        both(x.astype(np.int64), deadline=30_000)
    assert calls == []  # the buckets the pilot guessed held every order statistic


def test_pilot_runs_cover_the_case(pilot) -> None:
    x = np.concatenate([np.full(50_000, 10), np.full(50_000, 1000)])  # a step halfway
    s = Scanner([x[:30_000], x[30_000:]])
    hist = s.pilot(1000, 10)
    assert (
        int(hist.sum()) == 1000 and hist[10] == hist[int(bucket_index(np.array([1000]))[0])] == 500
    )


def test_wide_buckets_take_more_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_refines(monkeypatch)
    stats_from_samples(dataset("crowded", 10_000, 9))
    assert len(calls) >= 2


def test_all_equal_needs_no_refine(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = count_refines(monkeypatch)
    s = stats_from_samples(np.full(5000, 42))
    assert calls == [] and (s.min, s.median, s.p9999, s.max, s.outliers) == (42,) * 4 + (0,)
    assert s.stddev == 0.0


def test_changed_samples_are_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    orig = Scanner.refine

    def refine(self, intervals):
        counts = orig(self, intervals)
        counts[0][0] += 1  # as if a sample had been rewritten between two passes
        return counts

    monkeypatch.setattr(Scanner, "refine", refine)
    with pytest.raises(UserError, match="changed while"):
        stats_from_samples(dataset("lognormal", 10_000, 10))


def test_refine_counts_sub_bins() -> None:
    x = np.array([-5, 0, 3, 300, 301, 301, 2**41, 2**41 + 2**30, 2**62])
    s = Scanner([x], block=2, threads=2)
    ivs = [
        Interval(-5, 0, 0),
        Interval(300, 301, 278),
        Interval(2**40, 2**62, 4352),  # the overflow bucket, 2^47-ns sub-bins
    ]
    got = s.refine(ivs)
    assert got[0].tolist() == [1, 0, 0, 0, 0, 1]
    assert got[1].tolist() == [1, 2]
    assert ivs[2].bins <= 1 << 16 and int(got[2].sum()) == 3
    assert got[2][0] == 2 and got[2][-1] == 1


@pytest.mark.parametrize(
    ("p", "q"), [(0, 1), (1, 1), (4, 1), (2, 1), (1, 3), (10**40, 7), (2**127 - 1, 2**64 + 3)]
)
def test_sqrt_ratio_is_correctly_rounded(p: int, q: int) -> None:
    with localcontext() as ctx:
        ctx.prec = 100
        want = float((Decimal(p) / Decimal(q)).sqrt())
    assert sqrt_ratio(p, q) == want


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**140), st.integers(1, 2**80))
def test_sqrt_ratio_random(p: int, q: int) -> None:
    with localcontext() as ctx:
        ctx.prec = 100
        want = float((Decimal(p) / Decimal(q)).sqrt())
    assert sqrt_ratio(p, q) == want
    assert math.isclose(sqrt_ratio(p, q), math.sqrt(p / q), rel_tol=1e-15)


def test_missing_library_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan_mod, "LIBRARY", "librtlabscan-missing.so")
    scan_mod._library.cache_clear()
    try:
        with pytest.raises(UnsupportedError, match="reinstall rtlab"):
            stats_from_samples(np.arange(10))
    finally:
        monkeypatch.undo()
        scan_mod._library.cache_clear()
    assert stats_from_samples(np.arange(10)).median == 4


def test_unaligned_samples_are_copied(tmp_path: Path) -> None:
    x = dataset("lognormal", 5000, 11)
    raw = tmp_path / "r"
    write_raw(raw, x)
    body = raw.read_bytes()
    odd = tmp_path / "odd"
    odd.write_bytes(body[:12] + (65).to_bytes(4, "little") + body[16:64] + b"\0" + body[64:])
    mm = open_samples(odd)
    assert not mm.flags.aligned
    assert_same(stats_from_samples(mm), reference_stats(x))
