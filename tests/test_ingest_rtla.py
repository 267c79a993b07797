"""rtlab.ingest.rtla: rtla timerlat/osnoise hist and top output as result documents.

The fixtures in tests/fixtures/rtla are rtla's output as its sources print it, across
versions: the examples of its documentation (5.17 timerlat and osnoise hist, osnoise
top, 6.1 timerlat hist, the 6.3 timerlat top with its auto-analysis) and outputs built
with rtla's print formats for the newer layouts (the ALL summary, -u, -n, --no-irq,
--no-thread, --with-zeros, overflows, missed events, screens of top without -q, a tty
capture). broken-* must be refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rtlab.analysis import document_case_stats, per_thread_stats
from rtlab.errors import UserError
from rtlab.ingest import read_rtla
from rtlab.probe import RESULT_SCHEMA
from rtlab.resultdoc import check_document

FIX = Path(__file__).parent / "fixtures" / "rtla"
GOOD = sorted(p for p in FIX.iterdir() if not p.name.startswith("broken-"))
BROKEN = sorted(p for p in FIX.iterdir() if p.name.startswith("broken-"))
PCTS = ("50", "90", "99", "99.9", "99.99")
FIGURES = ("irq", "thread", "user")


# --------------------------------------------------------------------------- helpers


def check_figure(f: dict, where: str) -> None:
    """A count/min/mean/max figure (with its histogram when it has one) is consistent."""
    count, lo, hi = f["count"], f["min_ns"], f["max_ns"]
    if count == 0:
        assert lo is None and hi is None and f["mean_ns"] is None, where
        return
    if count is None:  # osnoise top: totals only
        assert lo is None and f["mean_ns"] is None and hi is not None, where
        return
    assert 0 <= lo <= hi, where
    if f["mean_ns"] is not None:
        assert lo <= f["mean_ns"] <= hi, where
    h = f.get("histogram")
    if h is None:
        assert f.get("percentiles_ns") is None, where
        return
    assert h["unit"] == "ns" and h["overflow"] >= 0, where
    assert sum(b[2] for b in h["buckets"]) + h["overflow"] == count, where
    prev = -1
    for b_lo, b_hi, c in h["buckets"]:
        assert prev < b_lo <= b_hi and c > 0, where
        prev = b_hi
    values = [f["percentiles_ns"][p] for p in PCTS]
    assert all(lo <= v <= hi for v in values) and values == sorted(values), where


def check_invariants(doc: dict) -> None:
    """What every imported rtla document must satisfy."""
    json.dumps(doc, allow_nan=False)
    check_document(doc, "doc")
    assert doc["schema"] == RESULT_SCHEMA and doc["tool"] == "rtla"
    assert doc["explain"] is None and doc["spikes"] == []
    assert doc["meter"] in ("wakeup", "noise")
    assert doc["complete"] is (not doc["import"]["stopped"])
    assert doc["stop_reason"] == ("threshold" if doc["import"]["stopped"] else "unknown")
    assert doc["params"]["threads"] == len(doc["threads"]) and doc["params"]["loads"] == []
    assert doc["import"]["format"].startswith(("rtla-timerlat-", "rtla-osnoise-", "rtla-hwnoise"))
    cpus = [t["cpu"] for t in doc["threads"]]
    assert cpus == sorted(set(cpus)) and [t["index"] for t in doc["threads"]] == list(
        range(len(cpus))
    )
    for t in doc["threads"]:
        check_figure(t, f"CPU {t['cpu']}")
        assert (t["tid"], t["policy"], t["stddev_ns"], t["series"]) == (None,) * 4
        if doc["meter"] == "wakeup":
            figs = t["timerlat"]
            assert set(figs) == set(FIGURES)
            main = figs[doc["import"]["figure"]]
            assert (t["count"], t["min_ns"], t["max_ns"]) == (
                main["count"],
                main["min_ns"],
                main["max_ns"],
            )
            for name, f in figs.items():
                if f is not None:
                    check_figure(f, f"CPU {t['cpu']} {name}")


def read(name: str) -> dict:
    doc = read_rtla(FIX / name)
    check_invariants(doc)
    return doc


def by_cpu(doc: dict) -> dict[int, dict]:
    return {t["cpu"]: t for t in doc["threads"]}


def one_line_error(path: Path) -> str:
    with pytest.raises(UserError) as info:
        read_rtla(path)
    msg = str(info.value)
    assert len(msg.splitlines()) == 1 and msg.startswith(str(path) + ": "), msg
    return msg


# ------------------------------------------------------------------ every fixture


@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_every_fixture_imports_and_gives_statistics(path):
    doc = read(path.name)
    stats = document_case_stats(doc, FIX)
    assert len(per_thread_stats(doc, FIX)) == len(doc["threads"])
    if doc["threads"][0]["count"] is not None:
        assert stats.count == sum(t["count"] for t in doc["threads"]) > 0


@pytest.mark.parametrize("path", BROKEN, ids=lambda p: p.name)
def test_every_broken_fixture_is_one_line(path):
    one_line_error(path)


# ------------------------------------------------------------------ real outputs

# Debian's rtla 6.1 run on Debian's 6.1 PREEMPT_RT kernel (2 CPUs, TCG guest; made again
# by tests/vm/test_tracers.py): `rtla timerlat hist -d 3s`, `rtla timerlat top -q
# --auto 10000 -d 3s` (stopped by its threshold), `rtla osnoise hist -d 3s`,
# `rtla osnoise top -q -d 3s`, stdout as captured (top prints its colours without a tty).
REAL_61 = {
    "timerlat-hist-6.1-rt.txt": ("wakeup", True, {0: 2804, 1: 2829}),
    "timerlat-top-6.1-rt-auto.txt": ("wakeup", False, {0: 41, 1: 54}),
    "osnoise-hist-6.1-rt.txt": ("noise", True, {0: 2791, 1: 2378}),
    "osnoise-top-6.1-rt.txt": ("noise", True, {0: None, 1: None}),
}


@pytest.mark.parametrize("name", sorted(REAL_61))
def test_real_rtla_6_1_outputs(name):
    meter, complete, counts = REAL_61[name]
    doc = read(name)
    assert doc["meter"] == meter and doc["complete"] is complete
    assert {c: t["count"] for c, t in by_cpu(doc).items()} == counts
    assert doc["import"]["missed_events"] == 0


def test_real_rtla_6_1_figures():
    hist = by_cpu(read("timerlat-hist-6.1-rt.txt"))
    assert hist[1]["timerlat"]["irq"]["max_ns"] == 6826 * 1000  # "max:" of IRQ-001
    assert hist[1]["max_ns"] == 7912 * 1000 and hist[1]["histogram"]["overflow"] == 212
    top = read("timerlat-top-6.1-rt-auto.txt")
    assert top["stop_reason"] == "threshold" and top["import"]["trace_file"] == "timerlat_trace.txt"
    assert by_cpu(top)[0]["timerlat"]["thread"]["cur_ns"] == 11625 * 1000
    noise = by_cpu(read("osnoise-top-6.1-rt.txt"))
    assert noise[0]["measured_ns"] == 3007540 * 1000 and noise[0]["noise_ns"] == 1637274 * 1000
    assert noise[1]["max_ns"] == 19395 * 1000  # Max Single
    assert noise[0]["osnoise"]["periods"] == 3
    assert noise[0]["osnoise"]["interference"] == {
        "hw": 765,
        "nmi": 110,
        "irq": 498,
        "softirq": 0,
        "thread": 112,
    }


# ------------------------------------------------------------------ timerlat hist


def test_timerlat_hist_5_17_documentation_example():
    doc = read("timerlat-hist-5.17.txt")
    imp = doc["import"]
    assert (doc["meter"], imp["format"], imp["figure"]) == (
        "wakeup",
        "rtla-timerlat-hist",
        "thread",
    )
    assert (imp["unit_ns"], imp["bucket_size"], imp["summary"]) == (1000, 1, True)
    assert doc["elapsed_ns"] == imp["duration_ns"] == 60 * 10**9 and doc["complete"]
    assert list(by_cpu(doc)) == [0, 1, 2, 3]
    t = by_cpu(doc)[3]
    # the thread latency: 1 us .. 8 us, avg printed truncated as 1
    assert (t["count"], t["min_ns"], t["mean_ns"], t["max_ns"]) == (60001, 1000, 1000.0, 8000)
    assert t["histogram"]["buckets"][0] == [1000, 1999, 56805]
    assert t["histogram"]["buckets"][-1] == [8000, 8999, 1]
    assert t["percentiles_ns"]["50"] == 1499 and t["percentiles_ns"]["99.99"] == 4499
    irq = t["timerlat"]["irq"]
    assert (irq["count"], irq["min_ns"], irq["max_ns"]) == (60001, 0, 2000)
    assert irq["histogram"]["buckets"] == [[0, 999, 58895], [1000, 1999, 1102], [2000, 2999, 4]]
    assert t["timerlat"]["user"] is None
    assert imp["missed_events"] == 0 and imp["auto_analysis"] == []


def test_timerlat_hist_6_1_documentation_example():
    """Ten minutes on CPUs 0-4, skipping zero-only rows (Debian's rtla 6.1 man page)."""
    doc = read("timerlat-hist-6.1.txt")
    assert doc["elapsed_ns"] == 600 * 10**9 and list(by_cpu(doc)) == [0, 1, 2, 3, 4]
    t = by_cpu(doc)[1]
    assert (t["count"], t["min_ns"], t["mean_ns"], t["max_ns"]) == (600002, 1000, 5000.0, 58000)
    assert t["histogram"]["buckets"][-2:] == [[54000, 54999, 1], [58000, 58999, 1]]
    assert by_cpu(doc)[4]["timerlat"]["irq"]["max_ns"] == 13000


def test_timerlat_hist_with_all_summary_reads_the_cpus():
    doc = read("timerlat-hist.txt")
    assert len(doc["threads"]) == 4
    assert all(t["count"] == t["timerlat"]["irq"]["count"] for t in doc["threads"])


def test_nanoseconds_and_bucket_size():
    doc = read("timerlat-hist-nano.txt")
    assert doc["import"]["unit_ns"] == 1 and doc["import"]["bucket_size"] == 250
    t = by_cpu(doc)[0]
    first = t["histogram"]["buckets"][0]
    assert first[0] == t["min_ns"] == 2500 and first[1] == 2749  # [2500, 2750) ns
    assert all((b[1] + 1) % 250 == 0 for b in t["histogram"]["buckets"][:-1])
    assert t["histogram"]["overflow"] > 0  # -E 40 -b 250: above 10 us
    assert t["max_ns"] > 10_000 and t["max_ns"] % 1 == 0


def test_overflow_missed_events_and_bucket_width():
    doc = read("timerlat-hist-overflow.txt")
    imp = doc["import"]
    assert imp["bucket_size"] == 2 and imp["missed_events"] == 12
    assert list(by_cpu(doc)) == [2, 3]  # -c 2-3: the other CPUs have no column
    for t in doc["threads"]:
        h = t["histogram"]
        assert h["overflow"] > 0 and h["buckets"][-1][1] <= 39_999  # -E 20 -b 2: < 40 us
        assert t["max_ns"] >= 40_000
        assert t["percentiles_ns"]["99.99"] == t["max_ns"]  # ranks among the overflowed


def test_no_irq_and_no_thread():
    doc = read("timerlat-hist-no-irq.txt")
    assert doc["import"]["figure"] == "thread" and list(by_cpu(doc)) == [4, 5]
    assert all(t["timerlat"]["irq"] is None for t in doc["threads"])
    doc = read("timerlat-hist-no-thread.txt")
    assert doc["import"]["figure"] == "irq"  # nothing else to describe
    for t in doc["threads"]:
        assert t["timerlat"]["thread"] is None
        assert t["count"] == t["timerlat"]["irq"]["count"] == 3000


def test_user_threads_keep_the_return_latency():
    doc = read("timerlat-hist-user.txt")
    for t in doc["threads"]:
        user, thread = t["timerlat"]["user"], t["timerlat"]["thread"]
        assert user["count"] == thread["count"] == t["count"] == 4000
        assert user["min_ns"] > thread["min_ns"]  # returning to user space comes later


def test_with_zeros_rows_are_dropped():
    doc = read("timerlat-hist-with-zeros.txt")
    t = doc["threads"][0]
    assert all(c > 0 for _, _, c in t["histogram"]["buckets"])
    assert doc["import"]["bucket_size"] == 1


def test_auto_analysis_of_a_thread_latency():
    doc = read("timerlat-hist-auto-analysis.txt")
    imp = doc["import"]
    assert doc["complete"] is False and doc["stop_reason"] == "threshold" and imp["stopped"]
    (aa,) = imp["auto_analysis"]
    assert (aa["cpu"], aa["latency"], aa["latency_ns"]) == (2, "thread", 41960)
    assert aa["irq_handler_delay_ns"] == 27490 and aa["irq_latency_ns"] == 28130
    assert aa["timerlat_irq_duration_ns"] == 9590 and aa["exit_from_idle"] is False
    assert aa["blocking_thread"] == {"comm": "objtool", "pid": 49256, "ns": 3790}
    assert aa["stack"][0] == "timerlat_irq" and len(aa["stack"]) == 10
    assert aa["irq_interference"] == {
        "ns": 520,
        "sources": [{"name": "local_timer", "vector": 236, "ns": 520}],
    }
    assert aa["softirq_interference"]["sources"] == [{"name": "TIMER", "vector": 1, "ns": 310}]
    assert aa["thread_interference"]["sources"] == [
        {"comm": "kworker/u16:2", "pid": 1234, "ns": 260}  # a ':' in the name
    ]
    assert imp["max_irq_latency_from_idle"] == {"cpu": 1, "latency_ns": 17480}
    assert imp["trace_file"] == "timerlat_trace.txt"
    assert by_cpu(doc)[2]["max_ns"] == 41000  # the latency that stopped it is counted


# ------------------------------------------------------------------ timerlat top


def test_timerlat_top_6_3_documentation_example():
    doc = read("timerlat-top-6.3-auto-analysis.txt")
    imp = doc["import"]
    assert imp["format"] == "rtla-timerlat-top" and imp["screens"] == 1
    assert list(by_cpu(doc)) == list(range(1, 24))
    t = by_cpu(doc)[23]
    assert (t["count"], t["min_ns"], t["mean_ns"], t["max_ns"]) == (12320, 3000, 11000.0, 41000)
    assert t["histogram"] is None and t["percentiles_ns"] is None
    irq = t["timerlat"]["irq"]
    assert (irq["cur_ns"], irq["min_ns"], irq["mean_ns"], irq["max_ns"]) == (
        28000,
        0,
        1000.0,
        28000,
    )
    assert doc["complete"] is False  # "rtla timerlat hit stop tracing"
    (aa,) = imp["auto_analysis"]
    assert (aa["cpu"], aa["latency"], aa["latency_ns"]) == (23, "thread", 41960)
    assert aa["blocking_thread"] == {"comm": "objtool", "pid": 49256, "ns": 3790}
    assert len(aa["stack"]) == 19 and aa["stack"][-1] == "entry_SYSCALL_64_after_hwframe"
    assert imp["max_irq_latency_from_idle"] == {"cpu": 4, "latency_ns": 17480}
    stats = document_case_stats(doc, FIX)
    assert stats.count == sum(t["count"] for t in doc["threads"]) and stats.max == 41000


def test_timerlat_top_with_all_line():
    doc = read("timerlat-top.txt")
    assert [t["count"] for t in doc["threads"]] == [10000] * 4
    assert doc["complete"] and doc["elapsed_ns"] == 10 * 10**9


def test_top_screens_the_last_one_counts():
    doc = read("timerlat-top-frames.txt")
    assert doc["import"]["screens"] == 3 and doc["elapsed_ns"] == 3 * 10**9
    assert [t["count"] for t in doc["threads"]] == [3000, 3000]  # not 1000 or 2000
    assert doc["import"]["missed_events"] == 9  # reported after the last screen


def test_tty_capture_with_colours_and_crlf():
    doc = read("timerlat-top-pretty.txt")
    assert doc["import"]["screens"] == 2 and [t["count"] for t in doc["threads"]] == [2000, 2000]


def test_user_threads_in_nanoseconds_and_a_cpu_without_user_samples():
    doc = read("timerlat-top-user-nano.txt")
    assert doc["import"]["unit_ns"] == 1
    t0, t1 = doc["threads"]
    assert t0["timerlat"]["user"]["min_ns"] == 3400 and t0["min_ns"] == 2500
    assert t1["timerlat"]["user"] == {"count": 0, "min_ns": None, "mean_ns": None, "max_ns": None}


def test_auto_analysis_of_an_irq_latency_and_the_cpu_tasks():
    doc = read("timerlat-top-irq-stop.txt")
    (aa,) = doc["import"]["auto_analysis"]
    assert (aa["latency"], aa["latency_ns"], aa["exit_from_idle"]) == ("irq", 21400, True)
    assert aa["blocking_thread"] == {"comm": "swapper/1", "pid": 0, "ns": None}
    assert aa["timerlat_irq_duration_ns"] is None and aa["irq_interference"] is None
    assert doc["import"]["cpu_tasks"] == [
        {"cpu": 0, "task": "rtla:4711"},
        {"cpu": 1, "task": "swapper/1:0"},
    ]
    assert by_cpu(doc)[1]["timerlat"]["irq"]["max_ns"] == 21000


# ------------------------------------------------------------------ osnoise


def test_osnoise_hist_5_17_documentation_example():
    doc = read("osnoise-hist-5.17.txt")
    assert doc["meter"] == "noise" and doc["import"]["bucket_size"] == 10  # -b 10
    assert list(by_cpu(doc)) == list(range(12))
    t = by_cpu(doc)[11]
    assert (t["count"], t["min_ns"], t["mean_ns"], t["max_ns"]) == (54880, 0, 0.0, 50000)
    assert t["histogram"]["buckets"] == [
        [0, 9999, 52377],
        [10000, 19999, 2413],
        [20000, 29999, 39],
        [30000, 39999, 38],
        [40000, 49999, 11],
        [50000, 59999, 2],
    ]
    assert t["noise_pct"] is None and "osnoise" not in t


def test_osnoise_hist_decimal_avg_and_overflow():
    doc = read("osnoise-hist.txt")
    t1, t2 = doc["threads"]
    assert (t1["cpu"], t1["mean_ns"], t1["histogram"]["overflow"]) == (1, 2550.0, 3)
    assert (t2["cpu"], t2["mean_ns"], t2["count"]) == (2, 3530.0, 300)


def test_osnoise_top_5_17_documentation_example():
    doc = read("osnoise-top-5.17.txt")
    t = by_cpu(doc)[0]
    assert (t["count"], t["min_ns"], t["max_ns"]) == (None, None, 56_000)  # Max Single
    assert t["noise_ns"] == 304_896_000 and t["measured_ns"] == 53_100_000_000
    assert t["noise_pct"] == pytest.approx(100 - 99.42580, abs=1e-5)
    assert t["noise_ns_per_s"] == pytest.approx(t["noise_pct"] * 1e7)
    assert t["osnoise"] == {
        "periods": 59,
        "max_noise_ns": 6_978_000,
        "interference": {"hw": 549, "nmi": 0, "irq": 53111, "softirq": 1590, "thread": 13},
    }
    assert document_case_stats(doc, FIX).count == 0  # no distribution to pool


def test_osnoise_top_screens_and_stop():
    doc = read("osnoise-top-frames.txt")
    assert doc["import"]["screens"] == 2 and not doc["complete"]
    assert by_cpu(doc)[1]["noise_ns"] == (2 * 2000 + 17) * 1000  # the second screen
    assert doc["import"]["trace_file"] == "osnoise_trace.txt"


def test_hwnoise():
    doc = read("hwnoise-top.txt")
    assert doc["import"]["format"] == "rtla-hwnoise-top"
    assert by_cpu(doc)[3]["osnoise"]["interference"] == {"hw": 10, "nmi": 0}


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("broken-empty.txt", "empty file$"),
        ("broken-garbage.txt", "unknown format: not the output of rtla"),
        ("broken-cyclictest.hist", "unknown format"),
        ("broken-no-header.txt", "--no-header output cannot be read"),
        ("broken-no-index.txt", r"line 4: no 'Index' column \(--no-index\)"),
        ("broken-aa-only.txt", r"only a timerlat auto-analysis \(rtla timerlat top --aa-only\?\)"),
        ("broken-truncated-rows.txt", "truncated histogram: no 'over:' line"),
        ("broken-truncated-summary.txt", "truncated summary: no 'avg:' line"),
        ("broken-count-mismatch.txt", r"CPU 0 irq: count 20004 but its rows and 'over:' sum"),
        ("broken-wrong-columns.txt", "line 6: 7 counts, expected 8"),
        ("broken-concatenated.txt", r"a second '# RTLA timerlat histogram' \(concatenated"),
        ("broken-osnoise-no-samples.txt", "no CPU column: no CPU had a sample"),
        ("broken-out-of-range.txt", "CPU 0 thread: 9999999999999999 is out of range"),
        ("broken-top-truncated.txt", "line 24: 1 '|'-separated blocks, expected 2"),
    ],
)
def test_broken_fixtures_name_the_reason(name, message):
    assert re.search(message, one_line_error(FIX / name))
