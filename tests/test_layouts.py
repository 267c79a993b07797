"""Pivot tables, p95 / variance / share below a bound, --fail-if on them, setup labels and
setups named by what differs: on fixture documents and fixture experiments."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rtlab.analysis import (
    Histogram,
    PivotCase,
    parse_fail_if,
    parse_pivot,
    pivot,
    share_below,
    stats_from_samples,
)
from rtlab.errors import UserError
from rtlab.rawfile import write_raw
from rtlab.records import check_label
from rtlab.system._setup import setup_names

from .test_report import make_sweep


def _doc(x: np.ndarray, raw: str | None = None) -> dict:
    """A one-thread document of samples X (probe histogram geometry)."""
    t = {
        "count": int(x.size),
        "min_ns": int(x.min()),
        "max_ns": int(x.max()),
        "mean_ns": float(x.mean()),
        "stddev_ns": float(x.std(ddof=1)),
        "histogram": Histogram.from_samples(x).to_document(),
    }
    if raw is not None:
        t["raw_file"] = raw
    return {"threads": [t]}


def test_p95_and_variance_from_samples_and_histograms(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.integers(1_000, 200_000, 20_000).astype(np.int64)
    exact = stats_from_samples(x)
    assert exact.p95 == np.sort(x)[math.ceil(0.95 * x.size) - 1]
    assert exact.variance == pytest.approx(float(np.var(x, ddof=1)), rel=1e-12)
    assert exact.stddev**2 == pytest.approx(exact.variance, rel=1e-12)
    from rtlab.analysis import document_case_stats

    est = document_case_stats(_doc(x), tmp_path)
    assert not est.exact and est.error_ns["p95"] >= abs(est.p95 - exact.p95)
    assert "p95" in est.to_dict() and "variance" in est.to_dict()


def test_share_below_exact_from_raw_and_bracketed_from_histogram(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.integers(1_000, 300_000, 10_000).astype(np.int64)
    write_raw(tmp_path / "c.raw", x)
    bound = 100_000
    truth = int(np.count_nonzero(x <= bound))
    raw = share_below(_doc(x, "c.raw"), tmp_path, bound)
    assert raw.exact and raw.lo == raw.hi == truth and raw.count == x.size
    hist = share_below(_doc(x), tmp_path, bound)  # no raw file named: the histogram
    assert hist.lo <= truth <= hist.hi and hist.lo <= hist.below <= hist.hi
    # a bound beyond every sample is exact whatever the data
    assert share_below(_doc(x), tmp_path, int(x.max())).value == 1.0
    assert share_below(_doc(x), tmp_path, int(x.min()) - 1).value == 0.0
    empty = share_below({"threads": [{"count": 0}]}, tmp_path, bound)
    assert empty.count == 0 and math.isnan(empty.value)


@pytest.mark.parametrize(
    ("text", "rows", "cols", "stat", "bound"),
    [
        ("setup:load", ("setup",), ("load",), "max", None),
        ("policy:load:p95", ("policy",), ("load",), "p95", None),
        ("setup+series:forkcopy:p50", ("setup", "series"), ("forkcopy",), "median", None),
        ("mechanism:series:variance", ("mechanism",), ("series",), "variance", None),
        ("sysctl.kernel.sched_rt_runtime_us:setup", ("sysctl.kernel.sched_rt_runtime_us",),
         ("setup",), "max", None),
        ("policy:load:below:100us", ("policy",), ("load",), "below", 100_000),
    ],
)  # fmt: skip
def test_pivot_spelling(text, rows, cols, stat, bound):
    spec = parse_pivot(text)
    assert (spec.rows, spec.cols, spec.stat, spec.bound_ns) == (rows, cols, stat, bound)


@pytest.mark.parametrize(
    "text",
    ["setup", "setup:", ":load", "setup:setup", "a:b:c:d", "setup:load:bogus",
     "setup:load:below", "setup:load:below:fast", "setup:load:exact", "a+b+c+d+e:load"],
)  # fmt: skip
def test_bad_pivot_is_one_line_user_error(text):
    with pytest.raises(UserError) as e:
        parse_pivot(text)
    assert "\n" not in str(e.value) and "--pivot" in str(e.value)


def _case(exp, setup, series, params, value):
    from rtlab.analysis import CaseStats

    st = CaseStats.empty()
    st.count, st.max, st.p99 = 10, float(value), float(value) / 2
    return PivotCase(exp, setup, series, f"{series}-{params}", params, st)


def test_pivot_lays_out_rows_columns_and_cells():
    cases = [
        _case("a", "RT", "stress", {"load": "none", "policy": "fifo:99"}, 10),
        _case("a", "RT", "stress", {"load": "cpu", "policy": "fifo:99"}, 20),
        _case("b", "generic", "stress", {"load": "none", "policy": "fifo:99"}, 30),
        _case("b", "generic", "stress", {"load": "cpu", "policy": "fifo:99"}, 40),
    ]
    p = pivot(cases, parse_pivot("setup:load"))
    assert p.row_labels == [("RT",), ("generic",)] and p.col_labels == [("none",), ("cpu",)]
    assert p.csv_columns() == ["setup", "none", "cpu"]
    assert [r["setup"] for r in p.csv_rows()] == ["RT", "generic"]
    j = p.to_json()
    assert j["stat"] == "max" and j["unit"] == "ns" and len(j["cells"]) == 2
    assert all(len(r) == 2 for r in j["cells"])
    # priority comes from the policy; two cases in one cell name both and suggest a key
    assert pivot(cases, parse_pivot("priority+load:setup")).row_labels == [
        (99, "none"),
        (99, "cpu"),
    ]
    with pytest.raises(UserError, match=r"fall in one cell.*setup"):
        pivot(cases, parse_pivot("policy:load"))
    with pytest.raises(UserError, match="no case has the key 'stressor'"):
        pivot(cases, parse_pivot("setup:stressor"))


@pytest.mark.parametrize(
    ("expr", "metric", "kind"),
    [("p95>50us", "p95", "absolute"), ("p95>1.2x", "p95", "ratio"),
     ("variance>1.5x", "variance", "ratio"), ("variance>25us^2", "variance", "absolute"),
     ("variance>+4µs²", "variance", "increase"), ("below:100us<0.999", "below", "absolute"),
     ("below:100us<99.9%", "below", "absolute")],
)  # fmt: skip
def test_fail_if_spellings(expr, metric, kind):
    t = parse_fail_if(expr)
    assert (t.metric, t.kind) == (metric, kind)
    if metric == "below":
        assert t.bound_ns == 100_000 and t.value == pytest.approx(0.999)
    if expr == "variance>25us^2":
        assert t.value == 25e6  # ns²


@pytest.mark.parametrize(
    "expr", ["variance>25us", "below:100us", "below:100us<1.5", "below:100us<0", "below:x<0.9"]
)
def test_bad_fail_if(expr):
    with pytest.raises(UserError) as e:
        parse_fail_if(expr)
    assert "\n" not in str(e.value)


def test_label_check():
    assert check_label("  PREEMPT_RT + threadirqs ") == "PREEMPT_RT + threadirqs"
    for bad in ("", "   ", "x" * 81, "a\nb"):
        with pytest.raises(UserError):
            check_label(bad)


def test_setups_alike_but_for_boot_flags_debug_or_sysctls():
    base = {"preempt_model": "rt", "hz": 1000, "kernel_release": "6.1.0-rt"}
    # a boot flag on one setup only: named by it, the other by its absence
    a = {**base, "cmdline": "quiet threadirqs"}
    b = {**base, "cmdline": "quiet"}
    assert setup_names([a, b], ["A", "B"]) == ["threadirqs", "no threadirqs"]
    # audit facts: a debug option, a sysctl
    c = {**base, "rt_params": {}, "debug_options": ["CONFIG_LOCKDEP"]}
    d = {**base, "rt_params": {}, "debug_options": []}
    assert setup_names([c, d], ["C", "D"]) == ["CONFIG_LOCKDEP", "no CONFIG_LOCKDEP"]
    e = {**base, "sched_rt_runtime_us": 950000}
    f = {**base, "sched_rt_runtime_us": -1}
    assert setup_names([e, f], ["E", "F"]) == [
        "kernel.sched_rt_runtime_us=950000",
        "kernel.sched_rt_runtime_us=-1",
    ]
    # setups the main facts tell apart are not named by their flags too
    g = {**a, "preempt_model": "full"}
    assert setup_names([g, b], ["G", "B"]) == ["PREEMPT", "PREEMPT_RT"]


def _label(root: Path, exp_id: str, label: str | None) -> None:
    path = root / exp_id / "experiment.json"
    m = json.loads(path.read_text())
    if label is None:
        m.pop("label", None)
    else:
        m["label"] = label
    path.write_text(json.dumps(m))


def test_labels_name_setups_everywhere(tmp_path):
    from rtlab.results import setup_label, setup_labels
    from rtlab.store import Store

    root = tmp_path / "results"
    for i, host in enumerate(("h1", "h2", "h3")):
        make_sweep.write_sweep(root, f"e{i}", n=500, seed=i, host=host, loads=(0,))
    _label(root, "e0", "before")
    _label(root, "e1", "after")
    store = Store(root)
    recs = [store.open(f"e{i}") for i in range(3)]
    assert [r.manifest.label for r in recs] == ["before", "after", None]  # absent: None
    assert setup_labels(recs) == ["before", "after", "h3"]
    assert setup_label(recs[0]).startswith("before (")
    _label(root, "e1", "before")
    recs = [Store(root).open(f"e{i}") for i in range(3)]
    assert setup_labels(recs)[:2] == ["before (e0)", "before (e1)"]
    _label(root, "e2", "\n")
    with pytest.raises(UserError, match="label"):
        Store(root).open("e2")


def test_import_label_is_stored_listed_and_checked(rtlab, tmp_path):
    fixture = next(p for p in sorted((Path(__file__).parent / "fixtures" / "cyclictest").iterdir())
                   if p.suffix == ".json" and not p.name.startswith("broken"))  # fmt: skip
    res = str(tmp_path / "results")
    rc, out, err = rtlab(
        "import", "cyclictest", str(fixture), "--label", "threadirqs", "--json", "--results", res
    )
    assert rc == 0, err
    exp_id = json.loads(out)["id"]
    rc, out, _ = rtlab("list", "--json", "--results", res)
    assert [r["label"] for r in json.loads(out)] == ["threadirqs"]
    rc, out, _ = rtlab("show", exp_id, "--json", "--results", res)
    assert json.loads(out)["setup"].startswith("threadirqs")
    rc, out, err = rtlab("import", "cyclictest", str(fixture), "--label", " ", "--results", res)
    assert rc == 2 and "label" in err and len(err.strip().splitlines()) == 1
