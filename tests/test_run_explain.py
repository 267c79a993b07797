"""`rtlab run --explain` and the key `explain`: the probe traces and explains the cases
whose meter can explain its samples; the stored documents carry the spikes and
`rtlab explain` reads them. Structure only, never latencies."""

from __future__ import annotations

import json
import os

import pytest

MIXED = """
[experiment]
name = "mixed"
[defaults]
loops = 200
[[series]]
name = "wake"
meter = "wakeup"
[[series]]
name = "gaps"
meter = "noise"
"""

EXPLAINED = """
[experiment]
name = "explained"
[defaults]
cpus = "{cpu}"
loops = 1500
explain = "1us"
explain_max = 3
[[series]]
name = "timers"
sweep = {{ load = ["none", "timer:50:1ms@{cpu}"] }}
"""


def test_explain_reaches_the_cases_that_can_be_explained(rtlab, tmp_path):
    toml = tmp_path / "mixed.toml"
    toml.write_text(MIXED)
    rc, out, err = rtlab("run", str(toml), "--explain", "100us", "--check", "--json")
    assert rc == 0, err
    cases = json.loads(out)["cases"]
    by = {c["series"]: c["args"] for c in cases}
    wake = by["wake"]
    assert wake[0] == "wakeup" and wake[wake.index("--explain") + 1] == "100000ns"
    assert "--explain" not in by["gaps"]
    assert "1 case(s) of other meters are not explained" in err


def test_explain_without_any_explainable_case_is_bad_usage(rtlab):
    rc, _, err = rtlab("run", "noise", "--explain", "100us", "--check")
    assert rc == 2
    can = "(wakeup, periodic, response, sched)"
    assert f"no case of this experiment has a meter that can {can}" in err


@pytest.mark.parametrize("value", ["100", "-1us", "fast"])
def test_bad_explain_values_exit_2(rtlab, value):
    rc, _, err = rtlab("run", "quick", "--explain", value, "--check")
    assert rc == 2 and err.count("\n") == 1


@pytest.mark.usefixtures("tracefs")  # as root, mounted when it is not
def test_explained_run_is_stored_and_explained(rtlab, tmp_path):
    toml = tmp_path / "explained.toml"
    toml.write_text(EXPLAINED.format(cpu=os.cpu_count() - 1))
    results = tmp_path / "results"
    rc, out, err = rtlab("run", str(toml), "--results", str(results), "--json")
    assert rc == 0, err
    exp_id = json.loads(out)["id"]
    docs = sorted((results / exp_id / "cases").glob("*.json"))
    assert len(docs) == 2
    for path in docs:
        doc = json.loads(path.read_text())
        assert doc["explain"]["status"] == "ok" and doc["explain"]["threshold_ns"] == 1000
        assert 1 <= len(doc["spikes"]) <= 3
        for s in doc["spikes"]:
            assert sum(c["ns"] for c in s["causes"]) + s["unexplained_ns"] == s["latency_ns"]
    rc, out, err = rtlab("explain", exp_id, "--results", str(results), "--json")
    assert rc == 0, err
    got = json.loads(out)
    assert len(got["cases"]) == 2
    assert all(c["spikes"] for c in got["cases"])
