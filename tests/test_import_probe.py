"""`rtlab import probe`: documents made by hand with rtlab-probe (several meters and
schemas, raw files, a sysinfo document) become one stored experiment; a bad one stores
nothing."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .probe.conftest import probe_path


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """Documents of two meters (wakeup with raw files of two threads), and a sysinfo."""
    d = tmp_path_factory.mktemp("board")
    probe = str(probe_path())
    common = ["--allow-fallback", "--quiet", "--policy", "other"]
    wakeup = [
        "wakeup", "--loops", "200", "--interval", "200us", "--threads", "2",
        "--raw", str(d / "w.raw"), "--json", str(d / "w.json"), "--deadline", "1s",
    ]  # fmt: skip
    noise = ["noise", "--duration", "100ms", "--cpus", "0", "--json", str(d / "n.json")]
    for args in (wakeup, noise):
        subprocess.run([probe, *args, *common], check=True, timeout=60)
    subprocess.run([probe, "sysinfo", "--json", str(d / "s.json")], check=True, timeout=60)
    return {"dir": d, "w": d / "w.json", "n": d / "n.json", "sysinfo": d / "s.json"}


def _experiments(results: Path) -> list[Path]:
    if not results.exists():
        return []
    return [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]


def _import(rtlab, results: Path, *args) -> tuple[int, str, str]:
    return rtlab("import", "probe", *map(str, args), "--results", str(results))


def _older(doc: dict, schema: int) -> dict:
    """DOC written back as an older probe wrote it (the reverse of the migration)."""
    old = copy.deepcopy(doc)
    old.pop("explain", None)
    old.pop("spikes", None)
    if schema <= 2:
        for t in old["threads"]:
            t["lost"] = t.pop("raw_lost")
    if schema == 1:
        old["threshold_exceeded"] = old.pop("deadline_exceeded")
        old["params"]["threshold_ns"] = old["params"].pop("deadline_ns")
    old["schema"] = schema
    return old


def test_documents_of_two_meters_raw_files_and_sysinfo(rtlab, made, tmp_path):
    results = tmp_path / "results"
    rc, out, err = rtlab(
        "import", "probe", str(made["w"]), str(made["n"]), "--sysinfo", str(made["sysinfo"]),
        "--results", str(results), "--json",
    )  # fmt: skip
    assert rc == 0, err
    summary = json.loads(out)
    exp = Path(summary["path"])
    assert summary["cases"] == 2
    manifest = json.loads((exp / "experiment.json").read_text())
    assert manifest["source"] == "import:probe" and manifest["complete"]
    assert [(c["series"], c["name"]) for c in manifest["cases"]] == [
        ("wakeup", "w.json"),
        ("noise", "n.json"),
    ]
    assert manifest["deadline_ns"] is None  # only one document had --deadline
    doc = json.loads((exp / "cases" / "000.json").read_text())
    assert [t["raw_file"] for t in doc["threads"]] == ["000.raw.0", "000.raw.1"]
    assert doc["import"]["format"] == "rtlab-probe" and doc["import"]["raw_missing"] == []
    for i in (0, 1):
        assert (exp / "cases" / f"000.raw.{i}").read_bytes() == (
            made["dir"] / f"w.raw.{i}"
        ).read_bytes()
    # the board's fingerprint and audit come from its sysinfo document
    system = json.loads((exp / "system.json").read_text())
    sysinfo = json.loads(made["sysinfo"].read_text())
    assert system["hostname"] == sysinfo["uname"]["nodename"] and system["imported"]
    assert system["kernel_release"] == sysinfo["uname"]["release"]
    audit = json.loads((exp / "audit.json").read_text())
    assert audit["findings"] and audit["facts"]
    # the raw samples are used: exact statistics
    rc, out, err = rtlab("show", exp.name, "--results", str(results), "--json")
    assert rc == 0, err
    rows = {r["label"]: r for r in json.loads(out)["rows"]}
    assert rows["w.json"]["exact"] is True and rows["w.json"]["count"] == 400


@pytest.mark.parametrize("schema", [1, 2, 3])
def test_older_schemas_are_migrated(rtlab, made, tmp_path, schema):
    doc = json.loads(made["w"].read_text())
    for t in doc["threads"]:
        t["raw_file"] = None
    path = tmp_path / f"v{schema}.json"
    path.write_text(json.dumps(_older(doc, schema)))
    rc, _, err = _import(rtlab, tmp_path / "results", path, "--name", "old")
    assert rc == 0, err
    (exp,) = _experiments(tmp_path / "results")
    stored = json.loads((exp / "cases" / "000.json").read_text())
    assert stored["schema"] == 8 and stored["import"]["schema"] == schema
    assert stored["deadline_exceeded"] is False and stored["params"]["deadline_ns"] == 10**9
    assert "raw_lost" in stored["threads"][0] and stored["spikes"] == []
    manifest = json.loads((exp / "experiment.json").read_text())
    assert manifest["deadline_ns"] == 10**9  # the document's own --deadline
    assert json.loads((exp / "system.json").read_text())["imported"] is True


def test_a_raw_file_not_found_is_left_out_with_a_note(rtlab, made, tmp_path):
    doc = json.loads(made["w"].read_text())
    doc["threads"][1]["raw_file"] = "/nonexistent/elsewhere.raw.1"
    (tmp_path / "w.json").write_text(json.dumps(doc))  # w.raw.0 is not beside it either
    os.link(made["dir"] / "w.raw.0", tmp_path / "w.raw.0")
    rc, _, err = _import(rtlab, tmp_path / "results", tmp_path / "w.json")
    assert rc == 0, err
    assert "elsewhere.raw.1 not found: imported without raw samples" in err
    (exp,) = _experiments(tmp_path / "results")
    stored = json.loads((exp / "cases" / "000.json").read_text())
    assert [t["raw_file"] for t in stored["threads"]] == ["000.raw.0", None]
    assert stored["import"]["raw_missing"] == ["/nonexistent/elsewhere.raw.1"]


def _bad_docs(made, tmp_path) -> list[tuple[Path, str]]:
    w = json.loads(made["w"].read_text())
    cases: list[tuple[str, object, str]] = [
        ("sysinfo.json", json.loads(made["sysinfo"].read_text()), "give it with --sysinfo"),
        ("load.json", {"schema": 1, "tool": "rtlab-probe", "loads": []}, "rtlab-probe load"),
        ("newer.json", {**w, "schema": 99}, "schema 99 is newer"),
        ("nometer.json", {k: v for k, v in w.items() if k != "meter"}, "no 'meter'"),
        ("list.json", [1, 2], "not a JSON object"),
        ("count.json", {**w, "threads": [{**w["threads"][0], "count": "many"}]}, "count"),
    ]
    out = []
    for name, doc, why in cases:
        (tmp_path / name).write_text(json.dumps(doc))
        out.append((tmp_path / name, why))
    (tmp_path / "broken.json").write_text('{"schema": 4, ')
    out.append((tmp_path / "broken.json", "not valid JSON"))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    out.append((fifo, "a FIFO"))
    for depth in (65, 950, 100_000):  # ~950 passed json.loads, then broke the migration
        text = json.dumps(w)[:-1] + ', "extra": ' + "[" * depth + "]" * depth + "}"
        (tmp_path / f"deep{depth}.json").write_text(text)
        out.append((tmp_path / f"deep{depth}.json", "nested deeper than 64 levels"))
    # raw files that do not belong to the document
    for name, thread, cut, why in (
        ("swapped", 1, 0, "raw file of thread 0, but"),
        ("truncated", 0, 8, "a truncated copy"),
    ):
        d = tmp_path / name
        d.mkdir()
        raw = (made["dir"] / "w.raw.0").read_bytes()
        (d / f"w.raw.{thread}").write_bytes(raw[: len(raw) - cut])
        doc = copy.deepcopy(w)
        doc["threads"][1 - thread]["raw_file"] = None
        doc["threads"][thread]["raw_file"] = f"w.raw.{thread}"  # beside the document
        (d / "w.json").write_text(json.dumps(doc))
        out.append((d / "w.json", why))
    return out


def test_bad_documents_store_nothing(rtlab, made, tmp_path):
    results = tmp_path / "results"
    for path, why in _bad_docs(made, tmp_path):
        rc, _, err = _import(rtlab, results, made["n"], path)
        assert rc == 2, (path, err)
        assert why in err and err.count("\n") == 1 and err.startswith("rtlab: "), (path, err)
        assert not _experiments(results)


def test_bad_options(rtlab, made, tmp_path):
    results = tmp_path / "results"
    rc, _, err = _import(rtlab, results, made["w"], made["n"], "--series", "one")
    assert rc == 2 and "several meters (noise, wakeup)" in err
    rc, _, err = _import(rtlab, results, made["w"], "--sysinfo", made["w"])
    assert rc == 2 and "not a sysinfo document" in err
    rc, _, err = _import(rtlab, results, made["w"], "--sysinfo", made["sysinfo"], "--this-system")
    assert rc == 2 and "exclude each other" in err
    assert not _experiments(results)


def _sysinfo_variants(made, tmp_path) -> list[tuple[Path, str]]:
    """Forged sysinfo documents: each is refused in one line before anything is stored."""
    si = json.loads(made["sysinfo"].read_text())
    bomb = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    data = b"".join(bomb.compress(bytes(1 << 20)) for _ in range(20)) + bomb.flush()
    variants = {
        "bomb": ({**si, "base64": {"/proc/config.gz": base64.b64encode(data).decode()}},
                 "/proc/config.gz: inflates to more than 16 MiB"),
        "cpus": ({**si, "files": {**si["files"], "/sys/devices/system/cpu/online": "0-999999999"}},
                 "CPU 999999999 is beyond 8191"),
    }  # fmt: skip
    out = []
    for name, (doc, why) in variants.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        out.append((tmp_path / f"{name}.json", why))
    deep = tmp_path / "deep.json"
    deep.write_text('{"kind": "sysinfo", "schema": 1, "files": ' + "[" * 10**5 + "]" * 10**5 + "}")
    out.append((deep, "nested deeper than 64 levels"))
    fifo = tmp_path / "si-fifo.json"
    os.mkfifo(fifo)
    out.append((fifo, "a FIFO"))
    return out


def test_forged_sysinfo_documents_store_nothing(rtlab, made, tmp_path):
    results = tmp_path / "results"
    for path, why in _sysinfo_variants(made, tmp_path):
        rc, _, err = _import(rtlab, results, made["w"], "--sysinfo", path)
        assert rc == 2, (path, err)
        assert why in err and err.count("\n") == 1 and str(path.name) in err, (path, err)
        assert "Traceback" not in err and "internal error" not in err
        assert not _experiments(results)


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(min_value=1, max_value=2000), st.sampled_from(["[", '{"k":']))
def test_generated_nesting_imports_or_is_one_line(rtlab, made, tmp_path_factory, depth, opener):
    tmp = tmp_path_factory.mktemp("nest")
    closer = "]" if opener == "[" else "}"
    inner = "1" if opener != "[" else ""
    text = json.dumps(json.loads(made["w"].read_text()))[:-1]
    text += ', "extra": ' + opener * depth + inner + closer * depth + "}"
    (tmp / "w.json").write_text(text)
    rc, _, err = _import(rtlab, tmp / "results", tmp / "w.json")
    if depth + 1 <= 64:
        assert rc == 0, err
    else:
        assert rc == 2 and err.count("\n") == 1 and "nested deeper than 64" in err
