"""rtlab bench throughput: real workloads at a tiny scale, stored and compared."""

from __future__ import annotations

import json
import shutil

import pytest

from rtlab.throughput import WORKLOADS, change_pct

from ._skips import need_tool


def test_change_and_its_interval():
    same = change_pct([10.0, 10.2, 9.8, 10.1, 9.9], [10.1, 9.9, 10.0, 10.2, 9.8])
    assert not same["excludes_zero"] and same["change_lo"] < 0 < same["change_hi"]
    faster = change_pct([10.0, 10.2, 9.8, 10.1, 9.9], [12.0, 12.2, 11.8, 12.1, 11.9])
    assert faster["excludes_zero"] and faster["change_pct"] == pytest.approx(20.0)
    assert faster["change_lo"] <= faster["change_pct"] <= faster["change_hi"]


def test_suite_is_stored_shown_and_compared(rtlab, tmp_path):
    need_tool("hackbench")
    results = tmp_path / "results"
    args = ["bench", "throughput", "--repeat", "2", "--scale", "0.05", "--json",
            "--workloads", "fork-exec,hackbench-pipe", "--results", str(results)]  # fmt: skip
    ids = []
    for _ in range(2):
        rc, out, err = rtlab(*args)
        assert rc == 0, err
        ids.append(json.loads(out)["id"])
    rc, out, _ = rtlab("show", ids[0], "--results", str(results), "--json")
    rows = json.loads(out)["meters"]["throughput"]
    assert [r["workload"] for r in rows] == ["fork-exec", "hackbench-pipe"]
    for r in rows:
        assert r["runs"] == 2 and len(r["values"]) == 2 and r["mean"] > 0
        assert r["ci_low"] <= r["mean"] <= r["ci_high"]
    assert rows[1]["unit"] == "s" and rows[1]["better"] == "lower"
    rc, out, _ = rtlab("show", ids[0], "--results", str(results))
    assert rc == 0 and "What does this setup cost" in out
    rc, out, _ = rtlab("compare", *ids, "--results", str(results), "--json")
    pairs = json.loads(out)["meters"]["throughput"]
    assert len(pairs) == 2 and all("change_pct" in p["change"] for p in pairs)
    rc, out, _ = rtlab("compare", *ids, "--results", str(results))
    assert rc == 0 and "change" in out


def test_bad_input_and_missing_tools(rtlab, tmp_path, monkeypatch):
    rc, _, err = rtlab("bench", "throughput", "--workloads", "nonesuch",
                       "--results", str(tmp_path))  # fmt: skip
    assert rc == 2 and "nonesuch" in err and err.count("\n") == 1
    rc, _, err = rtlab("bench", "throughput", "--repeat", "0", "--results", str(tmp_path))
    assert rc == 2 and "--repeat" in err
    monkeypatch.setattr(shutil, "which", lambda name: None)
    rc, _, err = rtlab("bench", "throughput", "--workloads", "iperf3", "--results", str(tmp_path))
    assert rc == 3 and "iperf3" in err
    assert not list(tmp_path.iterdir())  # nothing stored
    assert set(WORKLOADS) >= {"hackbench-pipe", "hackbench-socket", "iperf3", "fork-exec"}


def test_run_throughput_is_the_suite(rtlab, tmp_path, monkeypatch):
    import rtlab.cli.bench as bench
    from rtlab.throughput import Workload

    fake = Workload("fake", "s", False, None, "a workload that takes no time", lambda s: 1.0 + s)
    monkeypatch.setattr(bench, "select_workloads", lambda names: [fake])
    rc, out, err = rtlab(
        "run", "throughput", "--scale", "0.5", "--results", str(tmp_path), "--json"
    )
    assert rc == 0, err
    stored = json.loads(out)
    assert stored["cases"] == 1
    rc, out, _ = rtlab("show", stored["id"], "--results", str(tmp_path), "--json")
    (row,) = json.loads(out)["meters"]["throughput"]
    assert row["workload"] == "fake" and row["runs"] == 5 and row["mean"] == 1.5
