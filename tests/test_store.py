from __future__ import annotations

import json

import pytest

from rtlab.errors import UserError
from rtlab.store import CaseRecord, Store


def manifest(n: int = 2) -> dict:
    return {
        "name": "demo run",
        "created_utc": "2026-01-01T00:00:00Z",
        "complete": False,
        "cases": [CaseRecord(i, "s", f"c{i}", {"forkcopy": i}).to_dict() for i in range(n)],
    }


def test_create_open_and_index(tmp_path):
    store = Store(tmp_path / "results")
    rec = store.create(manifest(), "# toml\n", {"kernel_release": "6.1", "preempt_model": "rt"})
    assert rec.id.endswith("-demo-run")
    assert (rec.path / "experiment.toml").read_text() == "# toml\n"
    assert json.loads((rec.path / "system.json").read_text())["kernel_release"] == "6.1"
    again = store.open(rec.id)
    assert [c.name for c in again.cases] == ["c0", "c1"] and not again.complete
    (row,) = store.listing()
    assert row["id"] == rec.id and row["cases"] == 2 and row["done"] == 0
    assert row["kernel"] == "6.1" and row["preempt"] == "rt"


def test_case_status_updates_index_and_completion(tmp_path):
    store = Store(tmp_path)
    rec = store.create(manifest(), "", {})
    for case in rec.cases:
        case.status, case.document = "done", f"cases/{case.index:03d}.json"
        rec.set_case(case)
    assert store.open(rec.id).complete
    (row,) = store.listing()
    assert row["done"] == 2 and row["complete"] == 1


def test_index_is_rebuilt_from_directories(tmp_path):
    store = Store(tmp_path)
    a = store.create(manifest(), "", {})
    (tmp_path / "index.sqlite").unlink()
    assert [r["id"] for r in store.listing()] == [a.id]
    b = store.create(manifest(1), "", {})
    import shutil

    shutil.rmtree(a.path)
    assert [r["id"] for r in store.listing()] == [b.id]


def test_open_by_prefix_and_errors(tmp_path):
    store = Store(tmp_path)
    rec = store.create(manifest(), "", {}, exp_id="20260101-000000-x")
    store.create(manifest(), "", {}, exp_id="20260101-000000-y")
    assert store.open("20260101-000000-x").id == rec.id
    assert store.open(str(rec.path)).id == rec.id
    with pytest.raises(UserError, match="ambiguous"):
        store.open("20260101")
    with pytest.raises(UserError, match="no experiment"):
        store.open("nothing")
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "experiment.json").write_text("{nope")
    with pytest.raises(UserError, match="unreadable"):
        store.open("broken")
    assert len(store.experiments()) == 2  # the broken one is skipped


def test_document_of_a_pending_case_is_a_user_error(tmp_path):
    rec = Store(tmp_path).create(manifest(), "", {})
    with pytest.raises(UserError, match="no result yet"):
        rec.document(rec.cases[0])
