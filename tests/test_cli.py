"""Every rtlab subcommand, including bad input (one line, exit 2)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from rtlab.results import stats_rows
from rtlab.store import Store

from .conftest import is_root

POLICY = "fifo:50" if is_root() else "other"

SMALL = f"""
[experiment]
name = "small"
[defaults]
loops = 300
interval = "500us"
settle = "0"
policy = "{POLICY}"
[[series]]
name = "plain"
sweep = {{ forkcopy = [0, 1] }}
[[series]]
name = "two threads"
threads = 2
sweep = {{ forkcopy = [0, 1] }}
"""


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory):
    """Two real runs of a small experiment (raw samples on), in one results directory."""
    from rtlab.cli import main

    base = tmp_path_factory.mktemp("cli")
    toml = base / "small.toml"
    toml.write_text(SMALL)
    out = base / "results"
    # the hidden old spelling --out still works
    assert main(["run", str(toml), "--out", str(out), "--raw"]) == 0
    rc = main(["run", str(toml), "--results", str(out), "--raw", "--deadline", "1ms"])
    ids = sorted(p.name for p in out.iterdir() if p.is_dir())
    over = any(r["max"] > 1_000_000 for r in stats_rows(Store(out).open(ids[1])))
    assert rc == (1 if over else 0)  # the verdict sets the exit status
    return out, ids


def test_help_and_version(rtlab):
    rc, out, _ = rtlab("--help")
    assert rc == 0
    for cmd in ("run", "list", "show", "compare", "import"):
        assert cmd in out
    rc, out, _ = rtlab("--version")
    assert rc == 0 and "rtlab" in out


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["run", "nonesuch"], "nonesuch"),
        (["run"], "EXPERIMENT"),
        (["run", "quick", "--scale", "0"], "--scale"),
        (["run", "quick", "--deadline", "10"], "--deadline"),
        (["run", "quick", "--bogus"], "--bogus"),
        (["show", "nothing-here", "--results", "/nonexistent"], "nothing-here"),
        (["show"], "EXPERIMENT_ID"),
        (["compare", "a"], "two experiments"),
        (["list", "--json", "--csv"], "--json"),
        (["frobnicate"], "frobnicate"),
        (["import", "cyclictest", "/nonexistent/file.json"], "/nonexistent/file.json"),
    ],
)
def test_bad_input_one_line_exit_2(rtlab, args, named):
    rc, _, err = rtlab(*args)
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and named in err
    assert "Traceback" not in err


def test_bad_experiment_file_names_file_and_key(rtlab, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[series]]\nname = 'a'\npolcy = 'fifo:99'\n")
    rc, _, err = rtlab("run", str(bad), "--out", str(tmp_path / "r"))
    assert rc == 2 and "bad.toml" in err and "polcy" in err
    assert not (tmp_path / "r").exists()


def test_probe_checks_values_before_anything_runs(rtlab, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(
        "[[series]]\nname = 'a'\nloops = 10\nsweep = { policy = ['fifo:10', 'fifo:200'] }\n"
    )
    rc, _, err = rtlab("run", str(bad), "--out", str(tmp_path / "r"))
    assert rc == 2
    assert "bad.toml" in err and "'policy'" in err and "fifo:200" in err
    assert not (tmp_path / "r").exists()


def test_run_check_lists_cases(rtlab):
    rc, out, _ = rtlab("run", "standard", "--check")
    assert rc == 0
    assert out.count("rtlab-probe wakeup") == 27 and "27 cases" in out


def test_list(rtlab, small_runs):
    out_dir, ids = small_runs
    rc, out, _ = rtlab("list", "--results", str(out_dir), "--json")
    assert rc == 0
    rows = json.loads(out)
    assert [r["id"] for r in rows] == ids
    assert all(r["complete"] and r["done"] == r["cases"] == 4 for r in rows)
    rc, out, _ = rtlab("list", "--results", str(out_dir), "--csv")
    assert rc == 0 and len(list(csv.DictReader(io.StringIO(out)))) == 2
    rc, out, _ = rtlab("list", "--results", str(out_dir))
    assert rc == 0 and ids[0] in out


def test_show(rtlab, small_runs):
    out_dir, ids = small_runs
    rc, out, _ = rtlab("show", ids[1], "--results", str(out_dir), "--json")
    doc = json.loads(out)
    assert doc["id"] == ids[1] and doc["complete"]
    rows = doc["rows"]
    # the experiment's own deadline (1 ms) gives the verdict and the exit status
    over_1ms = any(r["max"] > 1_000_000 for r in rows)
    assert doc["verdict"] == ("FAIL" if over_1ms else "PASS") and rc == int(over_1ms)
    assert [(r["series"], r["label"]) for r in rows] == [
        ("plain", "0"),
        ("plain", "1"),
        ("two threads", "0"),
        ("two threads", "1"),
    ]
    for r in rows:
        assert r["count"] == (300 if r["series"] == "plain" else 600)
        assert r["min"] <= r["median"] <= r["p99"] <= r["p999"] <= r["max"]
        assert r["jitter"] == r["max"] - r["min"]
        assert r["exact"] is True  # raw samples were captured
        assert r["deadline_ns"] == 1_000_000 and 0 <= r["deadline_misses"] <= r["count"]
    rc, out, _ = rtlab("show", ids[1], "--results", str(out_dir), "--csv")
    assert rc == int(over_1ms) and len(list(csv.DictReader(io.StringIO(out)))) == 4
    rc, out, _ = rtlab("show", ids[1], "--results", str(out_dir), "--deadline", "50us")
    over = any(r["max"] > 50_000 for r in rows)
    assert rc == (1 if over else 0) and ("FAIL" if over else "PASS") in out
    assert "plain" in out and "two threads" in out and "> 50" in out


def test_compare_and_fail_if(rtlab, small_runs):
    out_dir, ids = small_runs
    rc, out, _ = rtlab("compare", *ids, "--results", str(out_dir), "--json")
    assert rc == 0
    doc = json.loads(out)
    assert len(doc["rows"]) == 4
    for r in doc["rows"]:
        assert r["ratios"]["max"] == pytest.approx(
            r["other_stats"]["max"] / r["baseline_stats"]["max"]
        )
        assert 0 <= r["rank_test"]["pvalue"] <= 1
    # A threshold every run exceeds (max above a millionth of the baseline's) fails: exit 1.
    rc, _, err = rtlab("compare", *ids, "--results", str(out_dir), "--fail-if", "max>0.000001x")
    assert rc == 1 and err.count("FAIL") == 4
    rc, _, err = rtlab("compare", *ids, "--results", str(out_dir), "--fail-if", "max>1000000x")
    assert rc == 0 and "FAIL" not in err
    rc, _, err = rtlab("compare", *ids, "--results", str(out_dir), "--fail-if", "p99>>2")
    assert rc == 2 and "p99>>2" in err
    rc, out, _ = rtlab("compare", *ids, "--results", str(out_dir))
    assert rc == 0 and "B/A" in out


def test_notebook_api(small_runs):
    import numpy as np

    import rtlab

    out_dir, ids = small_runs
    exp = rtlab.load(out_dir / ids[0])
    assert len(exp.cases) == 4
    table = exp.stats()
    assert [r["count"] for r in table] == [300, 300, 600, 600]
    samples = exp.samples(exp.cases[2])
    assert isinstance(samples, np.ndarray) and len(samples) == 600
    assert samples.min() == table[2]["min"] and samples.max() == table[2]["max"]


def test_import_cyclictest_then_show(rtlab, tmp_path):
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures" / "cyclictest"
    files = [str(fixtures / "real-h60.json"), str(fixtures / "real-h60.hist")]
    rc, out, err = rtlab("import", "cyclictest", *files, "--results", str(tmp_path))
    assert rc == 0, err
    exp_id = out.split(":")[0]
    rc, out, _ = rtlab("show", exp_id, "--results", str(tmp_path), "--json")
    assert rc == 0
    rows = json.loads(out)["rows"]
    assert [r["case"] for r in rows] == ["real-h60.json", "real-h60.hist"]
    assert rows[0]["count"] == rows[1]["count"] > 0  # the same run, read from both formats
    assert rows[0]["exact"] is False


def test_import_rejects_a_broken_file_and_stores_nothing(rtlab, tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"thread": {"0": {"cycles": 10, "min": 1')
    rc, _, err = rtlab("import", "cyclictest", str(bad), "--results", str(tmp_path / "r"))
    assert rc == 2 and "broken.json" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()
