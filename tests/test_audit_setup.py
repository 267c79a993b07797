"""Each experiment stores the audit; setups are named by what differs between them."""

from __future__ import annotations

import json

from rtlab.experiment import load_experiment
from rtlab.records import CaseRecord, new_manifest
from rtlab.results import setup_label, setup_labels
from rtlab.runner import new_record
from rtlab.store import Store, write_json_atomic
from rtlab.system import SysRoot, audit_system
from rtlab.targets import LocalTarget

from .test_audit import SYSTEMS


def manifest():
    return new_manifest(
        name="demo",
        description="",
        source="test",
        series=[],
        cases=[CaseRecord(0, "s", "c0", {"forkcopy": 0})],
    )


def stored(store: Store, system: str, **overrides):
    fingerprint, audit = audit_system(SysRoot(SYSTEMS / system))
    audit["facts"].update(overrides)
    rec = store.create(manifest(), "", fingerprint)
    write_json_atomic(rec.path / "audit.json", audit)
    return rec


def test_setups_named_by_what_differs(tmp_path):
    store = Store(tmp_path)
    board = stored(store, "rt-board")
    desktop = stored(store, "desktop", preempt_model="full", smt_active=False)
    desktop_gov = {"governors": {"0": "performance"}}
    # Same governor and SMT on both: only the kernel build and isolation differ.
    board2 = stored(store, "rt-board", **desktop_gov)
    desktop2 = stored(store, "desktop", preempt_model="full", smt_active=False, **desktop_gov)
    labels = setup_labels([board2, desktop2])
    assert labels == [
        "PREEMPT_RT · HZ=1000 · NO_HZ_FULL · isolcpus=3 · nohz_full=3 · rcu_nocbs=3",
        "PREEMPT · HZ=250 · NO_HZ_IDLE",
    ]
    assert setup_labels([board, desktop])[1] == (
        "PREEMPT · HZ=250 · NO_HZ_IDLE · governor=ondemand"
    )


def test_identical_setups_fall_back_to_release_then_id(tmp_path):
    store = Store(tmp_path)
    a = stored(store, "rt-board")
    b = stored(store, "rt-board", kernel_release="6.6.31-rt31")
    assert setup_labels([a, b]) == ["6.6.30-rt30", "6.6.31-rt31"]
    c = stored(store, "rt-board")
    assert setup_labels([a, c]) == [a.id, c.id]


def test_labels_from_system_json_when_no_audit_is_stored(tmp_path):
    store = Store(tmp_path)
    old = store.create(manifest(), "", {"preempt_model": "dynamic", "hz": 250})
    new = store.create(manifest(), "", {"preempt_model": "rt", "hz": 1000})
    assert setup_labels([old, new]) == ["PREEMPT_DYNAMIC · HZ=250", "PREEMPT_RT · HZ=1000"]
    assert setup_label(new) == "PREEMPT_RT · HZ=1000"


def test_new_experiment_stores_fingerprint_and_audit(tmp_path):
    store = Store(tmp_path)
    exp = load_experiment("quick", scale=0.01)
    rec = new_record(store, exp, raw=False, target=LocalTarget())
    audit = json.loads((rec.path / "audit.json").read_text())
    system = json.loads((rec.path / "system.json").read_text())
    assert set(audit) == {"facts", "findings"} and len(audit["findings"]) >= 40
    assert system["kernel_release"] == audit["facts"]["kernel_release"]
    assert system["preempt_model"] == audit["facts"]["preempt_model"]
    assert setup_label(rec).startswith(("PREEMPT", "unknown"))


def test_show_prints_the_setup(tmp_path, rtlab):
    store = Store(tmp_path)
    rec = stored(store, "rt-board")
    rc, out, _ = rtlab("show", rec.id, "--results", str(tmp_path))
    assert rc == 0 and "system: PREEMPT_RT · HZ=1000 · NO_HZ_FULL · isolcpus=3" in out
    rc, out, _ = rtlab("show", rec.id, "--results", str(tmp_path), "--json")
    assert json.loads(out)["setup"].startswith("PREEMPT_RT · HZ=1000")
