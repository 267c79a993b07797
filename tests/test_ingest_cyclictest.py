"""rtlab.ingest.cyclictest: cyclictest --json files and text histograms as result documents."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab.analysis import document_case_stats, per_thread_stats
from rtlab.errors import UserError
from rtlab.ingest import read_cyclictest
from rtlab.probe import RESULT_SCHEMA

from ._skips import skip_setup

FIX = Path(__file__).parent / "fixtures" / "cyclictest"
CYCLICTEST = Path("/usr/bin/cyclictest")
PCTS = ("50", "90", "99", "99.9", "99.99")
ORDER_STATS = ("median", "p90", "p99", "p999", "p9999", "q1", "q3", "iqr")
WHISKERS = ("whisker_low", "whisker_high")


# --------------------------------------------------------------------------- helpers


def check_invariants(doc: dict) -> None:
    """What every imported document must satisfy."""
    json.dumps(doc, allow_nan=False)  # plain JSON: no NaN, no odd types
    assert doc["schema"] == RESULT_SCHEMA
    assert doc["tool"] == "cyclictest" and doc["meter"] == "wakeup"
    assert isinstance(doc["complete"], bool) and isinstance(doc["argv"], list)
    assert doc["params"]["loads"] == [] and doc["params"]["threads"] == len(doc["threads"])
    assert doc["import"]["format"] in ("cyclictest-json", "cyclictest-histogram")
    assert [t["index"] for t in doc["threads"]] == sorted(t["index"] for t in doc["threads"])
    assert any(t["count"] for t in doc["threads"])
    for t in doc["threads"]:
        assert (t["tid"], t["period_ns"], t["policy"], t["stddev_ns"]) == (None,) * 4
        assert (t["overruns"], t["raw_lost"], t["worst"], t["series"]) == (0, 0, [], None)
        h, pct = t["histogram"], t["percentiles_ns"]
        if t["count"] == 0:
            assert t["min_ns"] is t["max_ns"] is t["mean_ns"] is None
            assert pct is None or all(v is None for v in pct.values())
            continue
        lo, hi = t["min_ns"], t["max_ns"]
        assert lo <= hi
        if t["mean_ns"] is not None:
            assert lo <= t["mean_ns"] <= hi
        if h is None:
            assert pct is None
            continue
        assert h["unit"] == "ns" and h["overflow"] >= 0
        assert sum(b[2] for b in h["buckets"]) + h["overflow"] == t["count"]
        prev = -1
        for b_lo, b_hi, c in h["buckets"]:
            assert prev < b_lo <= b_hi and c > 0
            prev = b_hi
        values = [pct[p] for p in PCTS]
        assert all(lo <= v <= hi for v in values)
        assert values == sorted(values)


def assert_same_run(dj: dict, dh: dict) -> None:
    """The JSON and the text histogram of one run give the same numbers."""
    unit = dj["import"]["unit_ns"]
    assert dh["import"]["unit_ns"] == unit
    assert len(dj["threads"]) == len(dh["threads"])
    for tj, th in zip(dj["threads"], dh["threads"], strict=True):
        for key in ("index", "count", "min_ns", "max_ns", "percentiles_ns", "histogram"):
            assert tj[key] == th[key], key
        if tj["count"]:  # the text prints avg truncated to a whole unit, the JSON with 2 decimals
            assert th["mean_ns"] <= tj["mean_ns"] <= th["mean_ns"] + unit


def read(path: Path, **kw) -> dict:
    doc = read_cyclictest(path, **kw)
    check_invariants(doc)
    return doc


# ----------------------------------------------------------------- real cyclictest runs


@pytest.fixture(scope="session")
def cyclictest() -> list[str]:
    """Base command line for short real runs; skips when cyclictest can't run SCHED_FIFO."""
    if not CYCLICTEST.exists():
        skip_setup(f"{CYCLICTEST} not installed (Debian package rt-tests: make debs)")
    try:
        probe = subprocess.run(
            [str(CYCLICTEST), "-m", "-p", "80", "-t", "1", "-l", "2", "-q"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot run cyclictest: {e}")
    if probe.returncode != 0:
        why = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
        pytest.skip(f"cyclictest cannot run with SCHED_FIFO/mlockall here: {why}")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    return [
        str(CYCLICTEST),
        "-m",
        "-p",
        "80",
        "-t",
        str(len(cpus)),
        "-a",
        ",".join(map(str, cpus)),
        "-i",
        "1000",
        "-d",
        "0",
        "-l",
        "300",
    ]


def run(base: list[str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([*base, *args], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc


def raw_threads(path: Path) -> dict:
    text = path.read_text().replace("-nan", "NaN").replace(": nan", ": NaN")
    return json.loads(text)["thread"]


def test_real_json_and_histfile_agree(cyclictest, tmp_path):
    run(cyclictest, tmp_path, "-q", "--json=run.json", "-h", "400", "--histfile=run.hist")
    dj, dh = read(tmp_path / "run.json"), read(tmp_path / "run.hist")
    assert_same_run(dj, dh)
    raw = raw_threads(tmp_path / "run.json")
    assert [t["count"] for t in dj["threads"]] == [raw[k]["cycles"] for k in sorted(raw, key=int)]
    assert dj["version"] and dj["complete"] is True and dj["argv"][0].endswith("cyclictest")
    assert dj["start_utc"].endswith("Z") and dj["start_utc"] <= dj["end_utc"]
    assert dj["host"]["uname"]["sysname"] == "Linux"
    p = dj["params"]
    assert (p["interval_ns"], p["loops"], p["policy"]) == (1_000_000, 300, "fifo:80")
    assert p["distance_ns"] == 0 and p["mlock"] is True
    assert dj["threads"][0]["cpu"] == sorted(os.sched_getaffinity(0))[0]
    assert all(t["histogram"] is not None for t in dj["threads"])
    assert dh["import"]["format"] == "cyclictest-histogram" and dh["argv"] == []


def test_real_json_without_histogram(cyclictest, tmp_path):
    run(cyclictest, tmp_path, "-q", "--json=run.json")
    doc = read(tmp_path / "run.json")
    raw = raw_threads(tmp_path / "run.json")
    for t in doc["threads"]:
        assert t["histogram"] is None and t["percentiles_ns"] is None
        assert t["count"] == raw[str(t["index"])]["cycles"]
        assert t["min_ns"] == raw[str(t["index"])]["min"] * 1000


def test_real_json_without_histogram_has_summary_statistics(cyclictest, tmp_path):
    run(cyclictest, tmp_path, "-q", "--json=run.json")
    doc = read(tmp_path / "run.json")
    s = document_case_stats(doc, tmp_path)
    assert s.count == sum(t["count"] for t in doc["threads"]) and not s.exact
    assert s.min == min(t["min_ns"] for t in doc["threads"])
    assert math.isnan(s.median) and s.jitter == s.max - s.min
    assert [p.count for p in per_thread_stats(doc, tmp_path)] == [
        t["count"] for t in doc["threads"]
    ]


def test_real_histofall_summary_column_is_dropped(cyclictest, tmp_path):
    run(cyclictest, tmp_path, "-q", "--json=run.json", "-H", "400", "--histfile=run.hist")
    nthreads = int(cyclictest[cyclictest.index("-t") + 1])
    rows = [
        line.split()
        for line in (tmp_path / "run.hist").read_text().splitlines()
        if line[:1].isdigit()
    ]
    assert {len(r) - 1 for r in rows} <= {nthreads, nthreads + 1}
    assert_same_run(read(tmp_path / "run.json"), read(tmp_path / "run.hist"))


def test_real_nsecs(cyclictest, tmp_path):
    """-N: the histogram, min, max and avg are in ns (buckets 1 ns wide)."""
    run(cyclictest, tmp_path, "-q", "-N", "--json=run.json", "-h", "30000", "--histfile=run.hist")
    dj = read(tmp_path / "run.json")
    assert dj["import"]["unit_ns"] == 1
    assert all(b[0] == b[1] for t in dj["threads"] for b in t["histogram"]["buckets"])
    assert_same_run(dj, read(tmp_path / "run.hist", nsecs=True))


def test_real_small_histogram_overflows(cyclictest, tmp_path):
    """-h 5: nearly everything overflows; overflow cycle lists end in '# N others'."""
    run(cyclictest, tmp_path, "-q", "--json=run.json", "-h", "5", "--histfile=run.hist")
    dj, dh = read(tmp_path / "run.json"), read(tmp_path / "run.hist")
    assert_same_run(dj, dh)
    for t, extra in zip(dh["threads"], dh["import"]["threads"], strict=True):
        overflow = t["histogram"]["overflow"]
        assert overflow > 0
        assert len(extra["overflow_cycles"]) + extra["overflow_cycles_omitted"] == overflow


def test_real_histogram_on_stdout(cyclictest, tmp_path):
    """-h without --histfile and without -q: status lines and escapes precede the histogram."""
    proc = run(cyclictest, tmp_path, "--json=run.json", "-h", "200")
    (tmp_path / "stdout.txt").write_text(proc.stdout)
    assert "T: 0" in proc.stdout
    assert_same_run(read(tmp_path / "run.json"), read(tmp_path / "stdout.txt"))


# ------------------------------------------------------------------- golden fixtures


def test_golden_real_capture_pair():
    """Captured from `cyclictest -m -p 80 -t 2 -a 0-1 -i 1000 -l 300 -q --json -h 60`."""
    dj, dh = read(FIX / "real-h60.json"), read(FIX / "real-h60.hist")
    assert_same_run(dj, dh)
    assert dj["version"] == "2.40" and dj["start_utc"] == "2026-11-22T01:04:01.000Z"
    assert dj["host"] == {
        "uname": {
            "sysname": "Linux",
            "nodename": "vm",
            "release": "6.18.44-fc-v445",
            "version": "#1 SMP PREEMPT_DYNAMIC @0",
            "machine": "x86_64",
        },
        "realtime": 0,
        "cpus_online": None,
        "cpus_configured": None,
    }
    assert dj["params"] == {
        "interval_ns": 1_000_000,
        "distance_ns": 0,
        "clock": "CLOCK_MONOTONIC",
        "loops": 300,
        "duration_ns": None,
        "policy": "fifo:80",
        "cpus": "0-1",
        "threads": 2,
        "mlock": True,
        "loads": [],
    }
    t0, t1 = dj["threads"]
    assert (t0["cpu"], t0["count"], t0["min_ns"], t0["max_ns"], t0["mean_ns"]) == (
        0,
        300,
        6000,
        830_000,
        26740.0,
    )
    assert t0["percentiles_ns"] == {
        "50": 17499,
        "90": 41499,
        "99": 830_000,
        "99.9": 830_000,
        "99.99": 830_000,
    }
    assert t0["histogram"]["overflow"] == 12 and t1["histogram"]["overflow"] == 23
    assert t0["histogram"]["buckets"][0] == [6000, 6999, 1]
    assert dh["threads"][0]["mean_ns"] == 26000.0
    assert dh["import"]["threads"][0]["overflow_cycles"][:3] == [55, 74, 75]


def test_golden_real_all_overflow():
    """-h 3: the JSON histogram is {} (cmdline has -h), every sample overflowed."""
    dj, dh = read(FIX / "real-h3.json"), read(FIX / "real-h3.hist")
    assert_same_run(dj, dh)
    t = dj["threads"][0]
    assert t["histogram"] == {"unit": "ns", "overflow": 50, "buckets": []}
    assert set(t["percentiles_ns"].values()) == {71_000}  # overflowed ranks report max_ns
    assert dh["import"]["threads"][0] == {
        "index": 0,
        "overflow_cycles": [0, 1, 2],
        "overflow_cycles_omitted": 47,
    }


def test_golden_real_no_histogram_and_zero_cycle_thread():
    doc = read(FIX / "real-nohist.json")
    assert [t["histogram"] for t in doc["threads"]] == [None, None]
    assert doc["params"]["distance_ns"] == 500_000  # cyclictest's default without -h
    doc = read(FIX / "real-zero-thread.json")  # thread 1: cycles 0, min 1000000, avg -nan
    t1 = doc["threads"][1]
    assert (t1["count"], t1["min_ns"], t1["max_ns"], t1["mean_ns"]) == (0, None, None, None)
    assert doc["threads"][0]["count"] == 2


def test_golden_real_stdout_capture_with_summary_column():
    doc = read(FIX / "real-stdout-H40.txt")
    assert [t["count"] for t in doc["threads"]] == [100, 100]
    assert [t["histogram"]["overflow"] for t in doc["threads"]] == [15, 5]
    assert doc["threads"][0]["max_ns"] == 145_000


def test_golden_handmade_nsecs_json_whole_document():
    doc = read(FIX / "handmade-nsecs.json")
    assert doc == {
        "schema": RESULT_SCHEMA,
        "tool": "cyclictest",
        "version": "2.40",
        "meter": "wakeup",
        "complete": True,
        "argv": [
            "cyclictest",
            "--mlockall",
            "--priority=95",
            "--policy=rr",
            "-t1",
            "-a",
            "3",
            "-i",
            "250",
            "-N",
            "-h",
            "20000",
            "-D",
            "1m",
            "--json=/tmp/x.json",
        ],
        "start_utc": "2026-03-02T09:15:30.000Z",
        "end_utc": "2026-03-02T09:16:30.000Z",
        "host": {
            "uname": {
                "sysname": "Linux",
                "nodename": "rtbox",
                "release": "6.12.0-rt5",
                "version": "#1 SMP PREEMPT_RT",
                "machine": "aarch64",
            },
            "realtime": 1,
            "cpus_online": None,
            "cpus_configured": None,
        },
        "params": {
            "interval_ns": 250_000,
            "distance_ns": 0,
            "clock": "CLOCK_MONOTONIC",
            "loops": None,
            "duration_ns": 60_000_000_000,
            "policy": "rr:95",
            "cpus": "3",
            "threads": 1,
            "mlock": True,
            "loads": [],
        },
        "threads": [
            {
                "index": 0,
                "cpu": 3,
                "tid": None,
                "period_ns": None,
                "policy": None,
                "count": 11,
                "min_ns": 1500,
                "max_ns": 25000,
                "mean_ns": 4448.09,
                "stddev_ns": None,
                "percentiles_ns": {
                    "50": 1502,
                    "90": 9999,
                    "99": 25000,
                    "99.9": 25000,
                    "99.99": 25000,
                },
                "overruns": 0,
                "raw_lost": 0,
                "histogram": {
                    "unit": "ns",
                    "overflow": 1,
                    "buckets": [[1500, 1500, 2], [1502, 1502, 5], [1710, 1710, 2], [9999, 9999, 1]],
                },
                "worst": [],
                "series": None,
            }
        ],
        "import": {
            "source": str(FIX / "handmade-nsecs.json"),
            "format": "cyclictest-json",
            "unit_ns": 1,
        },
    }


def test_golden_handmade_sparse_histogram():
    """Older layout: zero rows skipped, no '# Total:', -H column, '# N others', '# SMIs:'."""
    doc = read(FIX / "handmade-H-sparse.hist")
    t0, t1 = doc["threads"]
    assert t0["histogram"] == {
        "unit": "ns",
        "overflow": 2,
        "buckets": [[3000, 3999, 4], [4000, 4999, 5], [5000, 5999, 1]],
    }
    assert (t0["count"], t0["min_ns"], t0["max_ns"], t0["mean_ns"]) == (12, 3000, 9000, 3000.0)
    assert t0["percentiles_ns"] == {"50": 4499, "90": 9000, "99": 9000, "99.9": 9000, "99.99": 9000}
    assert [b[2] for b in t1["histogram"]["buckets"]] == [1, 5, 2, 1]
    assert t1["percentiles_ns"]["50"] == 3499 and t1["percentiles_ns"]["90"] == 12_000
    assert doc["import"]["threads"][1] == {
        "index": 1,
        "overflow_cycles": [1, 2],
        "overflow_cycles_omitted": 1,
    }
    assert doc["version"] is None and doc["host"] is None and doc["start_utc"] is None
    assert doc["params"]["interval_ns"] is None and doc["params"]["policy"] is None


def test_nan_avg_with_cycles_is_unknown_mean():
    doc = read(FIX / "handmade-nan-avg.json")
    assert [t["mean_ns"] for t in doc["threads"]] == [None, None]
    assert [t["cpu"] for t in doc["threads"]] == [None, None]  # cpu -1 = not pinned
    assert doc["threads"][0]["histogram"] is None  # {} and no cmdline showing -h
    assert doc["argv"] == [] and doc["params"]["threads"] == 2


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("broken-empty.json", "empty file"),
        ("broken-truncated.json", "truncated JSON"),
        ("broken-zero-cycles.json", "no samples"),
        ("broken-garbage.txt", "unknown format"),
        ("broken-invalid.json", "invalid JSON at line 1 column 31"),
        ("broken-non-numeric.json", "thread 0: min is not a number: 'fast'"),
        ("broken-negative-count.json", "thread 0: histogram count of bucket 5 is negative: -3"),
        ("broken-hist-exceeds.json", "thread 0: histogram holds 8 samples but cycles is 6"),
        ("broken-no-thread.json", "no 'thread' object"),
        ("broken-wrong-columns.hist", "line 12: 3 count columns, expected 2"),
        ("broken-negative-count.hist", "line 5: negative count -00001"),
        ("broken-non-numeric.hist", "line 5: non-numeric field '0000x4'"),
        ("broken-truncated.hist", "truncated histogram: no '# Min Latencies:' line"),
        ("broken-total-mismatch.hist", "thread 0: '# Total:' is 10 but its column sums to 8"),
    ],
)
def test_broken_files_raise_one_line_user_error(name, reason):
    path = FIX / name
    with pytest.raises(UserError) as info:
        read_cyclictest(path)
    msg = str(info.value)
    assert msg == f"{path}: {reason}" or msg.startswith(f"{path}: {reason}"), msg
    assert "\n" not in msg


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xff\xfe binary \x89PNG",
        b"[1, 2, 3]",
        b'{"thread": {"0": {"cycles": 1, "min": 1, "max": 2, "avg": 1}}' + b"]" * 3,
        b"[" * 100_000,
        b'{"thread": {"x": {"cycles": 1}}}',
        b'{"thread": {"0": {"cycles": 1, "min": 5, "max": 2}}}',
        b'{"thread": {"0": {"cycles": ' + b"9" * 5000 + b"}}}",
        b"# Histogram\n" + b"1" * 5000 + b" 1\n",
        b"# Histogram\n000001 000001\n000001 000002\n",
    ],
)
def test_garbage_raises_user_error(tmp_path, content):
    path = tmp_path / "bad"
    path.write_bytes(content)
    with pytest.raises(UserError, match=r"^" + str(path)):
        read_cyclictest(path)


def test_unreadable_paths(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        read_cyclictest(tmp_path / "missing.json")
    with pytest.raises(UserError, match="cannot read"):
        read_cyclictest(tmp_path)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_files_never_crash(tmp_path_factory, data):
    """Cut or corrupt a real file anywhere: a valid document or a UserError, nothing else."""
    name = data.draw(
        st.sampled_from(
            ["real-h60.json", "real-h60.hist", "handmade-H-sparse.hist", "real-zero-thread.json"]
        )
    )
    text = (FIX / name).read_bytes()
    pos = data.draw(st.integers(0, len(text)))
    junk = data.draw(st.binary(max_size=8))
    cut = data.draw(st.integers(0, 8))
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_bytes(text[:pos] + junk + text[pos + cut :])
    try:
        doc = read_cyclictest(path)
    except UserError as e:
        assert "\n" not in str(e) and str(e).startswith(str(path))
    else:
        check_invariants(doc)


# ------------------------------------------------- statistics of imported documents


def assert_summary_only(s, count: int, lo: int, hi: int) -> None:
    """Samples without a histogram: exact count/min/max/jitter, every order statistic NaN."""
    assert (s.count, s.min, s.max, s.jitter) == (count, lo, hi, hi - lo)
    assert not s.exact and s.outliers == 0
    for key in (*ORDER_STATS, *WHISKERS):
        assert math.isnan(getattr(s, key)), key
        assert math.isnan(s.error_ns[key]), key
    d = s.to_dict()
    assert d["median"] is None and d["min"] == lo
    json.dumps(d, allow_nan=False)


def test_no_histogram_gives_the_exact_summary(tmp_path):
    """cyclictest --json without -h: count, min, max, mean from the threads' own fields."""
    doc = read(FIX / "real-nohist.json")
    s = document_case_stats(doc, tmp_path)
    assert_summary_only(s, 341, 7000, 1_252_000)
    assert s.mean == pytest.approx((200 * 38650.0 + 141 * 34350.0) / 341, rel=1e-12)
    assert math.isnan(s.stddev)  # cyclictest does not report it
    assert (s.deadline_ns, s.deadline_misses, s.deadline_misses_bounds) == (None, None, None)
    t0, t1 = per_thread_stats(doc, tmp_path)
    assert_summary_only(t0, 200, 7000, 234_000)
    assert_summary_only(t1, 141, 11000, 1_252_000)
    assert t0.mean == 38650.0 and t1.mean == 34350.0


@pytest.mark.parametrize(
    ("deadline", "misses", "bounds"),
    [
        (1_252_000, 0, (0, 0)),  # the max meets it: no sample misses
        (10**9, 0, (0, 0)),
        (6999, 341, (341, 341)),  # the min misses it: every sample does
        (-5, 341, (341, 341)),
        (7000, None, (1, 340)),  # in between: at least the max, at most all but the min
        (100_000, None, (1, 340)),
        (1_251_999, None, (1, 340)),
    ],
)
def test_no_histogram_deadline_misses(tmp_path, deadline, misses, bounds):
    doc = read(FIX / "real-nohist.json")
    s = document_case_stats(doc, tmp_path, deadline_ns=deadline)
    assert (s.deadline_ns, s.deadline_misses, s.deadline_misses_bounds) == (
        deadline,
        misses,
        bounds,
    )
    assert_summary_only(s, 341, 7000, 1_252_000)


def test_no_histogram_with_a_zero_cycle_thread(tmp_path):
    doc = read(FIX / "real-zero-thread.json")
    s = document_case_stats(doc, tmp_path, deadline_ns=10**6)
    assert_summary_only(s, 2, 19000, 30000)
    assert s.deadline_misses == 0 and s.mean == 24500.0
    t0, t1 = per_thread_stats(doc, tmp_path)
    assert_summary_only(t0, 2, 19000, 30000)
    assert t1.count == 0 and math.isnan(t1.min) and math.isnan(t1.median)


def test_single_sample_without_histogram(tmp_path):
    doc = read(FIX / "real-zero-thread.json")
    t0 = doc["threads"][0]
    t0.update(count=1, min_ns=30000, max_ns=30000, mean_ns=30000.0)
    for deadline, misses in ((29999, 1), (30000, 0)):
        s = document_case_stats(doc, tmp_path, deadline_ns=deadline)
        assert_summary_only(s, 1, 30000, 30000)
        assert s.deadline_misses == misses and s.deadline_misses_bounds == (misses, misses)


def test_a_thread_without_histogram_makes_the_case_summary_only(tmp_path):
    """Percentiles of the other threads' histograms alone would misstate the case."""
    doc = read(FIX / "real-h60.json")
    full = document_case_stats(doc, tmp_path)
    assert not math.isnan(full.median)
    part = copy.deepcopy(doc)
    part["threads"][1]["histogram"] = part["threads"][1]["percentiles_ns"] = None
    s = document_case_stats(part, tmp_path)
    assert_summary_only(s, 600, 6000, 1_242_000)
    assert s.mean == full.mean
    t0, t1 = per_thread_stats(part, tmp_path)
    assert t0.median == per_thread_stats(doc, tmp_path)[0].median
    assert_summary_only(t1, 300, 6000, 1_242_000)


def test_samples_with_an_empty_histogram_are_summary_only(tmp_path):
    """count > 0 but no bucket nor overflow: the summary, not an empty CaseStats."""
    doc = read(FIX / "real-nohist.json")
    for t in doc["threads"]:
        t["histogram"] = {"unit": "ns", "overflow": 0, "buckets": []}
    assert_summary_only(document_case_stats(doc, tmp_path), 341, 7000, 1_252_000)


def test_histograms_still_give_percentiles(tmp_path):
    doc = read(FIX / "real-h60.json")
    s = document_case_stats(doc, tmp_path, deadline_ns=100_000)
    assert s.count == 600 and (s.min, s.max) == (6000, 1_242_000)
    assert s.min <= s.q1 <= s.median <= s.q3 <= s.p99 <= s.max
    assert s.deadline_misses is not None and not math.isnan(s.error_ns["median"])
    per = per_thread_stats(doc, tmp_path)
    assert [p.median for p in per] == [t["percentiles_ns"]["50"] for t in doc["threads"]]
