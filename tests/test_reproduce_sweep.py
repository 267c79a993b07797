"""The throttling table (Enea's Table 3.4) from the `noise` preset: its throttling series is
one case per kernel.sched_rt_runtime_us value, named by it, and `rtlab show` of such a run
has one row per value (columns: statistics; never numbers asserted)."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from rtlab.experiment import load_experiment
from rtlab.measure import Settings, measure, plan
from rtlab.probe import load_catalog
from rtlab.records import CaseRecord
from rtlab.runner import Display
from rtlab.store import Store
from rtlab.system import SysRoot
from rtlab.targets import LocalTarget
from tests._journals import desktop

KEY = "sysctl.kernel.sched_rt_runtime_us"
VALUES = [950000, 900000, 800000, -1]
CATALOG = Path(__file__).parent / "fixtures" / "probe-list.json"


def test_the_throttling_series_is_one_case_per_value_named_by_it(tmp_path):
    exp = load_experiment("noise", root=SysRoot(desktop(tmp_path)), catalog=load_catalog(CATALOG))
    cases = [c for c in exp.cases if c.series == "throttling"]
    assert [c.params[KEY] for c in cases] == VALUES
    assert [c.name for c in cases] == [f"{KEY}={v}" for v in VALUES]
    assert all(c.swept == {KEY: c.params[KEY]} for c in cases)
    for c in cases:  # one busy SCHED_FIFO thread on one CPU (the last), all else alike
        assert c.call is not None
        assert c.call.value("policy") == "fifo:1" and c.call.value("cpus") == "3"
        assert c.params["meter"] == "noise"
    # every value is one the kernel takes: at most the period (1000000 µs), or -1 (off)
    assert all(v == -1 or 0 <= v <= 1_000_000 for v in VALUES)


class Unapplied(LocalTarget):
    """This machine, measuring the cases without writing their settings (writing them is
    tested in test_sweep_settings; the real-time runtime is no setting to change on a
    shared host): the run records the values as a real one does."""

    def check_settings(self, cases: list[CaseRecord], trial: bool) -> None:
        pass

    def case_settings(self, case: CaseRecord) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def recover_settings(self, say: Any) -> None:
        pass


@pytest.fixture(scope="module")
def throttling_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A stored run of the noise preset's throttling series, 50 ms a case."""
    if os.geteuid() != 0:
        pytest.skip("the series measures at SCHED_FIFO: needs root")
    results = tmp_path_factory.mktemp("results")
    target = Unapplied()
    exp = plan("noise", target, Settings(scale=0.005), lambda text: None)
    exp.series = [s for s in exp.series if s["name"] == "throttling"]
    exp.cases = [c for c in exp.cases if c.series == "throttling"]
    for i, c in enumerate(exp.cases):
        c.index = i
    store = Store(results)
    done = measure(store, exp, target, Settings(scale=0.005), Display(), lambda text: None)
    assert done.record.complete
    return results, done.record.id


def test_show_has_one_row_per_value(throttling_run, rtlab):
    results, exp_id = throttling_run
    rc, out, err = rtlab("show", exp_id, "--results", str(results), "--json")
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    assert [r["swept"] for r in rows] == [{KEY: v} for v in VALUES]
    assert all(r["series"] == "throttling" and r["count"] > 0 for r in rows)
    rc, out, err = rtlab("show", exp_id, "--results", str(results))
    assert rc == 0, err
    assert KEY in out  # the table's first column is named by the swept key
    lines = [line for line in out.splitlines() if line.startswith("│")]
    assert [line.split("│")[1].strip() for line in lines[: len(VALUES)]] == [str(v) for v in VALUES]


def test_pivot_rows_are_the_values(throttling_run, rtlab):
    results, exp_id = throttling_run
    rc, out, err = rtlab("show", exp_id, "--results", str(results), "--csv",
                         "--pivot", f"{KEY}:series:max")  # fmt: skip
    assert rc == 0, err
    body = [line.split(",")[0] for line in out.strip().splitlines()[1:]]
    assert body == [str(v) for v in VALUES]
