"""Production conditions (schema 8): the CPU time split per category and CPU and the load
average over a case, as the real probe records them, migrated, validated and read."""

from __future__ import annotations

import copy
import json
import subprocess

import pytest

from rtlab.analysis import production
from rtlab.analysis._production import CATEGORIES
from rtlab.errors import UserError
from rtlab.probe import RESULT_SCHEMA, migrate
from rtlab.resultdoc import check_document

from ._skips import skip_setup
from .probe.conftest import probe_path

LOAD_KEYS = {"avg_1min", "avg_5min", "avg_15min", "runnable", "threads"}


@pytest.fixture(scope="module")
def spun(tmp_path_factory) -> dict:
    """A real 1 s run of the noise meter: a thread busy on CPU 0 (a spin load)."""
    out = tmp_path_factory.mktemp("prod") / "noise.json"
    try:
        probe = probe_path()
    except Exception as e:  # not built: the setup's, not the test's
        skip_setup(str(e))
    cp = subprocess.run(
        [str(probe), "noise", "--cpus", "0", "--policy", "other", "--duration", "1s",
         "--quiet", "--json", str(out)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    return json.loads(out.read_text())


def test_a_real_run_records_every_category_of_every_cpu(spun):
    assert spun["schema"] == RESULT_SCHEMA == 8
    act = spun["activity"]
    assert act["tick_ns"] > 0
    split = act["cpu_time_ns"]
    cpus = [k for k in split if k != "all"]
    assert cpus and "0" in cpus and set(cpus) == set(act["cpu_busy_pct"])
    for cats in split.values():
        assert list(cats) == ["user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"]
        assert all(isinstance(v, int) and v >= 0 for v in cats.values())
    for c in CATEGORIES:
        assert split["all"][c] == sum(split[k][c] for k in cpus)
    # accounting, not speed: the CPUs' time adds up to about the interval on each
    total = sum(split["all"].values())
    span = act["interval_ns"] * len(cpus)
    assert 0.5 * span <= total <= 1.5 * span + len(cpus) * 4 * act["tick_ns"]
    for when in ("start", "end"):
        assert set(act["loadavg"][when]) == LOAD_KEYS
        assert act["loadavg"][when]["threads"] >= 1


def test_the_measured_cpu_is_busy_under_the_spin(spun):
    p = production(migrate(copy.deepcopy(spun), "noise.json"))
    assert p is not None and p["measured_cpus"] == ["0"]
    assert p["measured"]["busy_pct"] > 0 and p["measured"]["ns"] == p["per_cpu"]["0"]["ns"]
    assert set(p["measured"]["pct"]) == set(CATEGORIES)
    assert sum(v for v in p["measured"]["pct"].values()) == pytest.approx(100.0)
    assert set(p["loadavg_end"]) == LOAD_KEYS


def test_schema_7_documents_migrate_with_nothing_recorded(spun):
    old = copy.deepcopy(spun)
    old["schema"] = 7
    for key in ("tick_ns", "cpu_time_ns", "loadavg"):
        del old["activity"][key]
    doc = migrate(old, "old.json")
    assert doc["schema"] == 8
    assert doc["activity"]["cpu_time_ns"] is None and doc["activity"]["loadavg"] is None
    assert "loadavg" not in old["activity"]  # the caller's is left as it was
    assert production(doc) is None
    assert production({"activity": None}) is None and production({}) is None


@pytest.mark.parametrize(
    "path, value",
    [
        (("cpu_time_ns", "0", "user"), -1),
        (("cpu_time_ns", "0", "idle"), 1.5),
        (("cpu_time_ns", "0"), [1, 2]),
        (("cpu_time_ns",), "lots"),
        (("loadavg", "end", "avg_1min"), "high"),
        (("loadavg", "end", "avg_1min"), float("inf")),
        (("tick_ns",), 0),
    ],
)
def test_malformed_production_conditions_are_refused(spun, path, value):
    doc = copy.deepcopy(spun)
    node = doc["activity"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(UserError, match="activity"):
        check_document(doc, "bad.json")
