"""The published tables of the meters come from one command each (docs/reproduce.md): the
presets expand to the grids they promise, and the meters' tables have the columns those
tables need. Layout and keys only, never numbers."""

from __future__ import annotations

import copy
import functools
import itertools
import json
from pathlib import Path

import pytest

from rtlab.analysis import VIEWS, meter_rows
from rtlab.experiment import load_experiment
from rtlab.ingest import read_cyclictest
from rtlab.probe import Catalog, load_catalog
from rtlab.probecall import probe_argv
from rtlab.records import CaseRecord, SeriesRecord, new_manifest
from rtlab.store import Store
from rtlab.system import SysRoot

from .conftest import make_root

CATALOG_FILE = Path(__file__).parent / "fixtures" / "probe-list.json"
BASE = read_cyclictest(Path(__file__).parent / "fixtures" / "cyclictest" / "real-h60.json")
POLICIES = ["other:0", "other:-20", "fifo:40", "fifo:60", "fifo:99"]
STRESSORS = ["none", "stress-ng:cpu", "stress-ng:vm", "stress-ng:io", "ipc:4", "net"]
MECHANISMS = [
    "nanosleep-abs", "nanosleep-rel", "busy-poll", "setitimer", "posix-timer-signal",
    "posix-timer-thread", "timerfd", "condvar", "deadline",
]  # fmt: skip


@functools.cache
def catalog() -> Catalog:
    return load_catalog(CATALOG_FILE)


def load_preset(spec: str, tmp_path: Path):
    root = make_root(tmp_path, {"sys/devices/system/cpu/online": "0-1\n", "proc/cmdline": "\n"})
    return load_experiment(spec, root=SysRoot(root), catalog=catalog())


def option(case, name: str) -> str | None:
    args = probe_argv(case.call)
    return args[args.index(name) + 1] if name in args else None


def test_preemption_is_the_policy_grid_under_each_stressor(tmp_path):
    exp = load_preset("preemption", tmp_path)
    cells = [(c.swept["policy"], c.swept["load"]) for c in exp.cases]
    assert cells == list(itertools.product(POLICIES, STRESSORS))
    for case in exp.cases:
        args = probe_argv(case.call)
        assert args[0] == "preempt" and option(case, "--cpus") == "1"  # pinned: attributed
        assert option(case, "--policy") == case.swept["policy"]
        load = case.swept["load"]
        assert option(case, "--load") == (None if load == "none" else load)
    assert sum(c.expected_s for c in exp.cases) < 5 * 60  # a modest default


def test_mechanisms_adds_sched_other_and_spin_loads(tmp_path):
    exp = load_preset("mechanisms", tmp_path)
    by_series: dict[str, list] = {}
    for c in exp.cases:
        by_series.setdefault(c.series, []).append(c)
    for name in ("1 ms, idle", "1 ms, 4 loads", "100 µs, idle", "100 µs, 4 loads"):
        assert [c.swept["mechanism"] for c in by_series[name]] == MECHANISMS
    for pct in ("25", "75"):
        fifo = by_series[f"1 ms, {pct} % spin"]
        assert [c.swept["mechanism"] for c in fifo] == MECHANISMS
        assert {option(c, "--load") for c in fifo} == {f"spin:{pct}%"}
        assert {option(c, "--policy") for c in fifo} == {"fifo:99"}
    for what in ("idle", "25 % spin", "75 % spin"):
        other = by_series[f"1 ms, SCHED_OTHER, {what}"]
        # deadline has its own policy: not a SCHED_OTHER mechanism
        assert [c.swept["mechanism"] for c in other] == MECHANISMS[:-1]
        assert {option(c, "--policy") for c in other} == {"other"}
        spin = None if what == "idle" else f"spin:{what.split()[0]}%"
        assert {option(c, "--load") for c in other} == {spin}


def _doc(meter: str, thread: dict, params: dict) -> dict:
    doc = copy.deepcopy(BASE)
    doc.update(meter=meter, tool="rtlab-probe")
    doc["threads"] = doc["threads"][:1]
    doc["threads"][0].update(thread)
    doc["params"].update(params)
    return doc


def preempt(kernel: int | None, user: int | None, migrations: dict | None) -> dict:
    pre = {"voluntary": 1, "involuntary": 9, "off_cpu_ns": 5, "off_cpu_source": "schedstat"}
    pre |= {"by": [], "kernel_mode": kernel, "user_mode": user}
    thread = {"preemptions": pre} | ({"migrations": migrations} if migrations else {})
    return _doc("preempt", thread, {"unit_ns": 100_000})


def test_preempt_table_columns_and_older_documents():
    view, (row,) = meter_rows(preempt(2, 7, {"pinned": True, "nr_migrations": 0,
                                             "cpu_changes": None}))  # fmt: skip
    keys = [c.key for c in view.columns]
    assert {"voluntary", "involuntary", "kernel_mode", "user_mode", "migrations"} <= set(keys)
    assert (row["kernel_mode"], row["user_mode"], row["migrations"]) == (2, 7, 0)
    _, (row,) = meter_rows(preempt(None, None, {"pinned": False, "nr_migrations": None,
                                                "cpu_changes": 4}))  # fmt: skip
    assert row["migrations"] == 4  # the thread's own count where the kernel's is unknown
    _, (row,) = meter_rows(preempt(None, None, None))  # before schema 8
    assert row["migrations"] is None and all(c.format(row.get(c.key)) for c in view.columns)


def test_pipeline_worker_and_alloc_columns():
    cols = {m: [c.key for c in VIEWS[m].columns] for m in ("pipeline", "worker", "alloc")}
    assert {"work_ns", "cpu_pct"} <= set(cols["pipeline"])
    assert "cpu_pct" in cols["worker"] and "rate_hz" in cols["worker"]
    assert {"p50_ns", "touch_p50_ns", "touch_max_ns"} <= set(cols["alloc"])
    doc = _doc("pipeline", {"cpu_pct": 42.0, "records": 10}, {"work_ns": 500_000})
    _, (row,) = meter_rows(doc)
    assert (row["work_ns"], row["cpu_pct"]) == (500_000, 42.0)
    size = {"size_bytes": 4096, "count": 2, "p50_ns": 1, "p99_ns": 1, "max_ns": 1}
    doc = _doc("alloc", {"sizes": [size | {"touch": {"p50_ns": 30, "max_ns": 40}}]}, {})
    _, (row,) = meter_rows(doc)
    assert (row["touch_p50_ns"], row["touch_max_ns"]) == (30, 40)
    _, (row,) = meter_rows(_doc("alloc", {"sizes": [size]}, {}))  # without --touch
    assert row["touch_p50_ns"] is None


def test_a_worker_without_events_has_its_cpu_share():
    """0 Hz: no sample, yet the idle worker's CPU time over its wall time is the answer."""
    thread = {"count": 0, "items": 0, "lost": 0, "cpu_ns": 250, "wall_ns": 1000}
    _, (row,) = meter_rows(_doc("worker", thread | {"cpu_pct": 25.0}, {"rate_hz": 0}))
    assert (row["rate_hz"], row["cpu_pct"]) == (0, 25.0)
    older = {"count": 10, "cpu_pct": 3.0}  # without the parts: the cpu_pct stated
    _, (row,) = meter_rows(_doc("worker", older, {"rate_hz": 10}))
    assert row["cpu_pct"] == 3.0


def periodic(mechanism: str, per_activation_ns: float) -> dict:
    thread = {"mechanism": mechanism, "cpu_ns_per_activation": per_activation_ns}
    return _doc("periodic", thread, {"mechanism": mechanism, "interval_ns": 1_000_000})


@pytest.fixture
def mechanisms_store(tmp_path) -> tuple[Path, str]:
    docs = [
        ("1 ms, idle", "timerfd", periodic("timerfd", 3_000.0)),
        ("1 ms, idle", "busy-poll", periodic("busy-poll", 1_000_000.0)),
        ("1 ms, 75 % spin", "timerfd", periodic("timerfd", 6_000.0)),
    ]
    cases = [
        CaseRecord(i, series, f"mechanism={name}", {"mechanism": name}, status="pending")
        for i, (series, name, _) in enumerate(docs)
    ]
    series = [SeriesRecord(s, "", ["mechanism"]) for s in dict.fromkeys(d[0] for d in docs)]
    m = new_manifest(name="mechanisms", description="", source="t", series=series, cases=cases)
    results = tmp_path / "results"
    Store(results).create(m, "", {}, documents={i: d for i, (_, _, d) in enumerate(docs)},
                          exp_id="mech")  # fmt: skip
    return results, "mech"


def test_mechanisms_table_shows_cpu_per_activation_and_share(rtlab, mechanisms_store):
    results, exp_id = mechanisms_store
    rc, out, err = rtlab("show", exp_id, "--results", str(results))
    assert rc == 0, err
    assert "Periodic mechanisms" in out and "CPU / activation" in out and "CPU %" in out
    rc, out, err = rtlab("show", exp_id, "--results", str(results), "--json")
    assert rc == 0, err
    rows = json.loads(out)["meters"]["periodic"]
    assert [(r["series"], r["mechanism"]) for r in rows] == [
        ("1 ms, idle", "timerfd"),
        ("1 ms, idle", "busy-poll"),
        ("1 ms, 75 % spin", "timerfd"),
    ]
    for r in rows:  # the share is the CPU time per activation over the 1 ms interval
        assert r["cpu_pct"] == pytest.approx(r["cpu_ns_per_activation"] / 1e4)
