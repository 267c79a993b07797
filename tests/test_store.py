from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from rtlab.errors import UserError
from rtlab.probecall import Option, ProbeCall, probe_argv
from rtlab.records import MANIFEST_SCHEMA, CaseRecord, Manifest, SeriesRecord, new_manifest
from rtlab.store import Store


def manifest(n: int = 2, name: str = "demo run") -> Manifest:
    return new_manifest(
        name=name,
        description="",
        source="test",
        series=[SeriesRecord("s", "", ["forkcopy"])],
        cases=[CaseRecord(i, "s", f"c{i}", {"forkcopy": i}) for i in range(n)],
    )


def test_create_open_and_index(tmp_path):
    store = Store(tmp_path / "results")
    rec = store.create(manifest(), "# toml\n", {"kernel_release": "6.1", "preempt_model": "rt"})
    assert rec.id.endswith("-demo-run")
    assert (rec.path / "experiment.toml").read_text() == "# toml\n"
    assert json.loads((rec.path / "system.json").read_text())["kernel_release"] == "6.1"
    again = store.open(rec.id)
    assert [c.name for c in again.cases] == ["c0", "c1"] and not again.complete
    assert again.manifest.schema == MANIFEST_SCHEMA
    (row,) = store.listing()
    assert row["id"] == rec.id and row["cases"] == 2 and row["done"] == 0
    assert row["kernel"] == "6.1" and row["preempt"] == "rt"
    assert not [p for p in (tmp_path / "results").iterdir() if p.name.startswith(".new-")]


def test_case_status_updates_index_and_completion(tmp_path):
    store = Store(tmp_path)
    rec = store.create(manifest(), "", {})
    for case in rec.cases:
        case.status, case.document = "done", f"cases/{case.index:03d}.json"
        (rec.path / case.document).write_text('{"schema": 4, "threads": []}')
        rec.set_case(case)
    assert store.open(rec.id).complete
    (row,) = store.listing()
    assert row["done"] == 2 and row["complete"] is True


def test_create_with_documents_marks_cases_done(tmp_path):
    store = Store(tmp_path)
    doc = {"schema": 8, "threads": [], "explain": None, "spikes": []}
    docs = {0: dict(doc), 1: dict(doc)}
    rec = store.create(manifest(), "", {}, documents=docs)
    assert rec.complete and [c.document for c in rec.cases] == ["cases/000.json", "cases/001.json"]
    assert store.open(rec.id).document(rec.cases[1]) == docs[1]


def test_a_finished_case_without_its_document_is_failed(tmp_path):
    store = Store(tmp_path)
    rec = store.create(manifest(), "", {}, documents={0: {"schema": 4, "threads": []}})
    (rec.path / rec.cases[0].document).unlink()
    again = store.open(rec.id)
    assert again.cases[0].status == "failed" and "missing" in again.cases[0].reason
    assert not again.complete and again.done_cases == []


def test_index_is_rebuilt_from_directories(tmp_path):
    store = Store(tmp_path)
    a = store.create(manifest(), "", {})
    (tmp_path / "index.sqlite").unlink()
    assert [r["id"] for r in store.listing()] == [a.id]
    b = store.create(manifest(1), "", {})
    shutil.rmtree(a.path)
    assert [r["id"] for r in store.listing()] == [b.id]


def test_damaged_index_is_rebuilt_with_a_warning(tmp_path):
    store = Store(tmp_path)
    a = store.create(manifest(), "", {})
    (tmp_path / "index.sqlite").write_bytes(b"this is not a database" * 100)
    assert [r["id"] for r in store.listing()] == [a.id]
    assert any("index" in w for w in store.warnings)
    assert [r["id"] for r in Store(tmp_path).listing()] == [a.id]


def test_listing_reads_only_changed_manifests(tmp_path, monkeypatch):
    store = Store(tmp_path)
    recs = [store.create(manifest(), "", {}) for _ in range(3)]
    store.listing()
    import rtlab.store as mod

    read = []
    real = mod.read_record
    monkeypatch.setattr(mod, "read_record", lambda p: read.append(p.name) or real(p))
    assert len(store.listing()) == 3 and read == []
    case = recs[1].cases[0]
    case.status, case.document = "done", "cases/000.json"
    (recs[1].path / case.document).write_text('{"schema": 4, "threads": []}')
    time.sleep(0.01)
    recs[1].set_case(case)
    rows = {r["id"]: r for r in store.listing()}
    assert read == [recs[1].id] and rows[recs[1].id]["done"] == 1


def test_damaged_experiments_are_skipped_with_a_warning(tmp_path, rtlab):
    store = Store(tmp_path)
    good = store.create(manifest(), "", {})
    damaged = {
        "unparseable": b"{nope",
        "not-an-object": b"[1, 2]",
        "wrong-type": json.dumps({**good.manifest.to_dict(), "cases": "x"}).encode(),
        "missing-key": json.dumps(
            {k: v for k, v in good.manifest.to_dict().items() if k != "cases"}
        ).encode(),
        "bad-status": json.dumps(
            {
                **good.manifest.to_dict(),
                "cases": [{**good.manifest.to_dict()["cases"][0], "status": "weird"}],
            }
        ).encode(),
        "not-utf8": b"\xff\xfe{",
        "escape": json.dumps(
            {
                **good.manifest.to_dict(),
                "cases": [
                    {**good.manifest.to_dict()["cases"][0], "status": "done", "document": "../x"}
                ],
            }
        ).encode(),
    }
    for name, data in damaged.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "experiment.json").write_bytes(data)
    rc, out, err = rtlab("list", "--results", str(tmp_path), "--json")
    assert rc == 0
    assert [r["id"] for r in json.loads(out)] == [good.id]
    for name in damaged:
        assert f"skipped {tmp_path / name}" in err, name
    assert "Traceback" not in err
    for name in damaged:
        rc, out, err = rtlab("show", name, "--results", str(tmp_path))
        assert rc == 2 and err.count("\n") == 1 and name in err, (name, err)


def test_copied_or_renamed_experiment_is_listed_under_its_directory(tmp_path, rtlab):
    store = Store(tmp_path)
    rec = store.create(manifest(), "", {})
    shutil.copytree(rec.path, tmp_path / "copy-of-it")
    rc, out, _ = rtlab("list", "--results", str(tmp_path), "--json")
    assert sorted(r["id"] for r in json.loads(out)) == sorted([rec.id, "copy-of-it"])
    assert store.open("copy-of-it").id == "copy-of-it"
    rc, out, _ = rtlab("show", "copy-of-it", "--results", str(tmp_path), "--json")
    assert rc == 0 and json.loads(out)["id"] == "copy-of-it"


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
    for trick in ("/etc", "**", "*", "..", ".", "../x", "a\0b", ""):
        with pytest.raises(UserError):
            store.open(trick)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "experiment.json").write_text("{nope")
    with pytest.raises(UserError, match="unreadable"):
        store.open("broken")
    assert len(store.experiments()) == 2  # the broken one is skipped
    assert store.warnings


def test_results_option_errors_and_list_creates_nothing(tmp_path, rtlab, monkeypatch):
    missing = tmp_path / "typo"
    rc, out, err = rtlab("list", "--results", str(missing))
    assert rc == 0 and "no experiments" in out and not missing.exists()
    afile = tmp_path / "file"
    afile.write_text("x")
    for cmd in (["list"], ["show", "x"], ["compare", "a", "b"], ["report", "x"]):
        rc, _, err = rtlab(*cmd, "--results", str(afile))
        assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, (cmd, err)
    monkeypatch.setenv("RTLAB_RESULTS", str(tmp_path / "env"))
    Store(tmp_path / "env").create(manifest(), "", {}, exp_id="from-env")
    rc, out, _ = rtlab("list", "--json")
    assert rc == 0 and [r["id"] for r in json.loads(out)] == ["from-env"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_results_directory_lists(tmp_path, rtlab):
    Store(tmp_path).create(manifest(), "", {}, exp_id="ro")
    (tmp_path / "index.sqlite").unlink()
    tmp_path.chmod(0o555)
    try:
        rc, out, _ = rtlab("list", "--results", str(tmp_path), "--json")
    finally:
        tmp_path.chmod(0o755)
    assert rc == 0 and [r["id"] for r in json.loads(out)] == ["ro"]


def test_schema_1_manifest_is_migrated(tmp_path):
    store = Store(tmp_path)
    rec = store.create(manifest(1), "", {}, exp_id="old")
    data = rec.manifest.to_dict()
    data["schema"] = 1
    data["cases"][0]["params"]["dma_latency"] = 0
    del data["cases"][0]["call"]
    data["cases"][0]["args"] = ["wakeup", "--dma-latency", "0", "--loops", "10", "--no-mlock"]
    (rec.path / "experiment.json").write_text(json.dumps(data))
    case = store.open("old").cases[0]
    assert case.params["dma_latency"] == "0us"
    assert case.call == ProbeCall(
        "wakeup",
        (
            Option("dma-latency", "0us", "dma_latency"),
            Option("loops", "10", "probe_args"),
            Option("no-mlock", None, "probe_args"),
        ),
    )
    assert probe_argv(case.call) == [
        "wakeup",
        "--dma-latency",
        "0us",
        "--loops",
        "10",
        "--no-mlock",
    ]
    data["schema"] = MANIFEST_SCHEMA + 1
    (rec.path / "experiment.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match="schema"):
        store.open("old")


def test_second_runner_of_an_experiment_is_refused(tmp_path):
    store = Store(tmp_path)
    rec = store.create(manifest(), "", {})
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from rtlab.store import Store; s = Store(sys.argv[1]);"
            "r = s.open(sys.argv[2]);\n"
            "with s.lock(r):\n print('locked', flush=True); time.sleep(60)",
            str(tmp_path),
            rec.id,
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(UserError, match=f"process {holder.pid}"), store.lock(rec):
            pass
    finally:
        holder.kill()
        holder.wait()
    with store.lock(rec):  # released when its holder died
        pass


def test_document_of_a_pending_case_is_a_user_error(tmp_path):
    rec = Store(tmp_path).create(manifest(), "", {})
    with pytest.raises(UserError, match="no result yet"):
        rec.document(rec.cases[0])
