"""Boards, history and baselines over stored experiments of two boards.

Each board is a real sysinfo document of this machine (`rtlab-probe sysinfo`) given the
board's own machine ID, host name, device-tree model and kernel release; each experiment
is a real wakeup document of the probe whose samples (raw file and statistics) are drawn
from a seeded distribution, so that one board regresses deterministically (its latencies
tripled), imported with `rtlab import probe --sysinfo`.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rtlab.analysis import Histogram
from rtlab.rawfile import write_raw
from rtlab.store import Store
from rtlab.system import board_identity, migrate_fingerprint
from rtlab.system._board import APP_ID, app_specific_id, model_text

from .probe.conftest import probe_path

IDS = {"a": "0123456789abcdef0123456789abcdef", "b": "fedcba9876543210fedcba9876543210"}


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("made")
    probe = str(probe_path())
    cmd = [probe, "wakeup", "--loops", "300", "--interval", "200us", "--policy", "other",
           "--no-mlock", "--quiet", "--raw", str(d / "w.raw"),
           "--json", str(d / "w.json")]  # fmt: skip
    subprocess.run(cmd, check=True, timeout=60)
    subprocess.run([probe, "sysinfo", "--json", str(d / "s.json")], check=True, timeout=60)
    return {
        "doc": json.loads((d / "w.json").read_text()),
        "sysinfo": json.loads((d / "s.json").read_text()),
    }


def _sysinfo(base: dict, board: str, release: str) -> dict:
    s = copy.deepcopy(base)
    f = s["files"]
    f["/etc/machine-id"] = IDS[board] + "\n"
    f["/proc/sys/kernel/hostname"] = f"board-{board}\n"
    f["/proc/device-tree/model"] = f"Acme Board {board.upper()} rev 2\0"
    f["/proc/sys/kernel/osrelease"] = release + "\n"
    s["uname"] = {**s.get("uname", {}), "release": release, "nodename": f"board-{board}"}
    return s


def _doc(base: dict, d: Path, name: str, x: np.ndarray, host: str) -> Path:
    """BASE (a real wakeup document) with one thread of samples X and its raw file."""
    doc = copy.deepcopy(base)
    t = doc["threads"][0]
    d = d / name  # the case is named by the file: "w" in every experiment
    d.mkdir()
    write_raw(d / "w.raw", x)
    t.update(
        count=int(x.size),
        min_ns=int(x.min()),
        max_ns=int(x.max()),
        mean_ns=float(x.mean()),
        stddev_ns=float(x.std(ddof=1)),
        histogram=Histogram.from_samples(x).to_document(),
        raw_file="w.raw",
        raw_samples=int(x.size),
        percentiles_ns={},
        worst=[],
    )
    doc["threads"] = [t]
    doc["host"]["uname"]["nodename"] = host
    (d / "w.json").write_text(json.dumps(doc))
    return d / "w.json"


@pytest.fixture(scope="module")
def store(made, tmp_path_factory) -> dict:
    """Two boards, two experiments each: a and b measured alike at first; then a on a new
    kernel, alike again, and b with its latencies tripled."""
    from rtlab.cli import main

    d = tmp_path_factory.mktemp("store")
    results = d / "results"
    rng = np.random.default_rng(24)
    plan = [
        ("a", "6.1.0-a", 1.0),
        ("b", "6.1.0-b", 1.0),
        ("a", "6.6.0-a", 1.0),
        ("b", "6.1.0-b", 3.0),
    ]
    for i, (board, release, factor) in enumerate(plan):
        x = (rng.lognormal(np.log(20_000), 0.3, 4000) * factor).astype(np.int64)
        doc = _doc(made["doc"], d, f"w{i}", x, f"board-{board}")
        si = d / f"s{i}.json"
        si.write_text(json.dumps(_sysinfo(made["sysinfo"], board, release)))
        args = ["import", "probe", str(doc), "--sysinfo", str(si), "--name", f"n{i}",
                "--results", str(results), "--json"]  # fmt: skip
        assert main(args) == 0
    recs = Store(results).experiments()
    ids = [r.id for r in sorted(recs, key=lambda r: int(r.name[1:]))]
    return {"results": str(results), "ids": ids}


def test_app_specific_machine_id_is_systemds():
    assert app_specific_id("uninitialized") is None and app_specific_id("0" * 32) is None
    assert app_specific_id(IDS["a"].upper()) is None  # machine-id(5): lowercase only
    got = app_specific_id(IDS["a"])
    assert got and len(got) == 32 and got != IDS["a"] and got[12] == "4"
    tool = shutil.which("systemd-id128")
    mid = Path("/etc/machine-id")
    if tool and mid.is_file() and app_specific_id(mid.read_text()):
        out = subprocess.run(
            [tool, "machine-id", f"--app-specific={APP_ID}"], capture_output=True, text=True
        )
        if out.returncode == 0:
            assert out.stdout.strip().replace("-", "") == app_specific_id(mid.read_text())


def test_identity_of_older_fingerprints_and_of_targets():
    old = {"schema": 2, "hostname": "rpi", "kernel_release": "6.1", "virtualization": {}}
    fp = migrate_fingerprint(old)
    assert fp["schema"] == 3 and fp["board"]["machine_id"] is None
    assert board_identity(fp).key == "host:rpi"
    assert board_identity(fp, "rpi4").key == "target:rpi4"
    assert board_identity({"schema": 1}).key == "unknown"
    new = {"hostname": "h", "board": {"machine_id": "ab" * 16, "dmi": {}, "target": "local"}}
    assert board_identity(new).key == "machine:" + "ab" * 16 and board_identity(new).name == "h"
    assert board_identity({"system": new}).key == board_identity(new).key  # a monitor's doc
    dmi = {"sys_vendor": "Dell Inc.", "product_name": "OptiPlex 7090", "board_name": "0X1"}
    assert model_text(dmi, None) == "Dell Inc. OptiPlex 7090 (0X1)"
    assert model_text({"product_name": "To Be Filled By O.E.M."}, None) is None


def test_history_lists_the_boards_and_a_boards_kernel_upgrade(rtlab, store, tmp_path):
    r = ["--results", store["results"]]
    rc, out, err = rtlab("history", *r, "--json")
    assert rc == 0, err
    boards = {b["name"]: b for b in json.loads(out)}
    assert set(boards) == {"board-a", "board-b"}
    a = boards["board-a"]
    assert a["experiments"] == 2 and a["kernels"] == ["6.1.0-a", "6.6.0-a"]
    assert a["model"] == "Acme Board A rev 2" and a["board"].startswith("machine:")
    assert a["machine_id"] == app_specific_id(IDS["a"])  # the ID itself is not stored
    assert IDS["a"] not in Path(store["results"], store["ids"][0], "system.json").read_text()
    rc, out, err = rtlab("history", "board-a", *r, "--json", "--stat", "max")
    assert rc == 0, err
    h = json.loads(out)
    assert [e["id"] for e in h["experiments"]] == [store["ids"][0], store["ids"][2]]
    first, second = h["experiments"]
    assert first["kernel_change"] is None and second["kernel_change"] == "6.1.0-a → 6.6.0-a"
    assert all(e["values"]["worst case"] > 0 for e in h["experiments"])
    plot = tmp_path / "a.svg"
    rc, out, err = rtlab("history", "board-a", *r, "--plot", str(plot))
    assert rc == 0, err
    assert "6.1.0-a → 6.6.0-a" in out and "<svg" in plot.read_text()[:500]
    rc, out, _ = rtlab("history", *r)
    assert rc == 0 and "board-a" in out and "board-b" in out


def test_compare_against_each_boards_baseline_names_the_regressed_board(rtlab, store):
    r = ["--results", store["results"]]
    a1, b1, a2, b2 = store["ids"]
    rc, out, err = rtlab("compare", "--baseline", a2, b2, *r, "--fail-if", "p99>1.5x")
    assert rc == 0 and "NO BASELINE" in out  # none set yet: nothing to regress against
    assert rtlab("baseline", "set", "board-a", a1, *r)[0] == 0
    assert rtlab("baseline", "set", "board-b", b1, *r)[0] == 0
    saved = json.loads(Path(store["results"], "baselines.json").read_text())
    assert {v["experiment"] for v in saved["boards"].values()} == {a1, b1}
    rc, out, err = rtlab("baseline", "show", *r, "--json")
    assert rc == 0 and {b["experiment"] for b in json.loads(out)} == {a1, b1}
    rc, out, err = rtlab("compare", "--baseline", a2, b2, *r, "--fail-if", "p99>1.5x", "--json")
    assert rc == 1, out
    data = json.loads(out)
    assert data["regressed"] == ["board-b"]
    status = {x["board_name"]: x["status"] for x in data["boards"]}
    assert status == {"board-a": "ok", "board-b": "regressed"}
    b = next(x for x in data["boards"] if x["board_name"] == "board-b")
    assert b["baseline"] == b1 and b["failures"] and "p99" in b["failures"][0]
    (row,) = b["rows"]
    assert row["ratios"]["p99"] > 2 and row["significant"] is True  # the rank test, raw samples
    rc, out, err = rtlab("compare", "--baseline", a2, b2, *r, "--fail-if", "p99>1.5x")
    assert rc == 1 and "REGRESSED board-b" in err and "board-a" not in err
    rc, out, _ = rtlab("history", "board-b", *r)
    assert rc == 0 and "baseline" in out
    assert rtlab("baseline", "clear", "board-b", *r)[0] == 0
    rc, out, err = rtlab("compare", "--baseline", a2, b2, *r, "--fail-if", "p99>1.5x", "--json")
    assert rc == 0 and json.loads(out)["regressed"] == []
    assert rtlab("baseline", "set", "board-b", b1, *r)[0] == 0  # as it was, for others


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["history", "nope"], 'no board "nope"'),
        (["history", "board-"], 'board "board-" is ambiguous'),
        (["history", "board-a", "--stat", "p42"], "unknown metric"),
        (["history", "--case", "x"], "need a BOARD"),
        (["history", "board-a", "--plot", "/nonexistent/dir/x.svg"], "no such directory"),
        (["history", "board-a", "--plot", "x.txt"], "unknown figure format"),
        (["baseline", "set", "board-a", "nope"], 'no experiment "nope"'),
        (["baseline", "set", "nope", "x"], 'no board "nope"'),
        (["baseline", "clear", "board-"], "ambiguous"),
        (["compare", "--baseline", "x", "--csv"], "no --csv"),
        (["compare", "--baseline", "nope"], 'no experiment "nope"'),
        (["compare", "--baseline", "x", "--fail-if", "p99>>1"], "bad --fail-if"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(rtlab, store, args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rc, out, err = rtlab(*args, "--results", store["results"])
    assert rc == 2, (out, err)
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_baseline_of_another_board_and_a_damaged_file_are_refused(rtlab, store, tmp_path):
    a1, b1, _, _ = store["ids"]
    rc, _, err = rtlab("baseline", "set", "board-a", b1, "--results", store["results"])
    assert rc == 2 and "ran on board board-b" in err
    copy_ = tmp_path / "r"
    shutil.copytree(store["results"], copy_)
    (copy_ / "baselines.json").write_text('{"schema": 1, "boards": {"x": 3}}')
    for args in (["baseline", "show"], ["history"], ["compare", "--baseline", a1]):
        rc, _, err = rtlab(*args, "--results", str(copy_))
        assert rc == 2 and "baselines.json" in err and len(err.strip().splitlines()) == 1
    (copy_ / "baselines.json").write_bytes(b"\xff" * 10)
    rc, _, err = rtlab("baseline", "set", "board-a", a1, "--results", str(copy_))
    assert rc == 2 and "baselines.json" in err
    assert (copy_ / "baselines.json").read_bytes() == b"\xff" * 10  # left as it was


def test_board_facts_read_through_a_fixture_root(tmp_path):
    from rtlab.system import SysRoot, read_board

    from .conftest import make_root

    root = make_root(
        tmp_path,
        {
            "etc/machine-id": "uninitialized\n",
            "proc/device-tree/model": "Raspberry Pi 4 Model B Rev 1.4\0",
            "sys/class/dmi/id/sys_vendor": "To Be Filled By O.E.M.\n",
            "sys/class/dmi/id/board_name": "X570\n",
        },
    )
    got = read_board(SysRoot(root))
    assert got == {
        "machine_id": None,  # an image's placeholder is no ID
        "dmi": {"board_name": "X570"},
        "dt_model": "Raspberry Pi 4 Model B Rev 1.4",
    }
    (root / "etc/machine-id").write_text(IDS["b"] + "\n")
    (root / "proc/device-tree/model").unlink()
    got = read_board(SysRoot(root))
    assert got["machine_id"] == app_specific_id(IDS["b"]) and got["dt_model"] is None
    assert board_identity({"hostname": "x", "board": got}).model == "X570"


def _monitor(results: Path, mon_id: str, system: dict, maxima: list[int]) -> None:
    """A stored monitor as `rtlab monitor` writes one (rtlab.monitor.create_monitor, rows
    appended): one window per MAXIMA entry on CPU 1, a gap of 60 s after the second."""
    from rtlab.monitor import MonitorManifest, MonitorSettings, append_row, create_monitor

    t0 = 1_900_000_000.0
    settings = MonitorSettings(cpus="1", period_ns=10**6, window_ns=300 * 10**9, le_ns=[10**5])
    manifest = MonitorManifest(mon_id, mon_id, _utc(t0), settings, target=None)
    rec = create_monitor(Store(results), manifest, system, {})
    append_row(rec.rows_path, {"kind": "start", "utc": _utc(t0)})
    t = t0
    for i, mx in enumerate(maxima):
        cpu = {"cpu": 1, "count": 300_000, "min_ns": 2_000, "max_ns": mx, "p99_ns": 9_000,
               "sum_ns": 15 * 10**8, "misses": None, "overruns": 0, "le": [300_000]}  # fmt: skip
        row = {"kind": "interval", "seq": i, "start_utc": _utc(t), "end_utc": _utc(t + 300),
               "elapsed_ns": 300 * 10**9, "cpus": [cpu], "spikes": []}  # fmt: skip
        append_row(rec.rows_path, row)
        t += 300
        if i == 1:
            gap = {"kind": "gap", "start_utc": _utc(t), "end_utc": _utc(t + 60),
                   "seconds": 60.0, "reason": "not running"}  # fmt: skip
            append_row(rec.rows_path, gap)
            t += 60


def _utc(t: float) -> str:
    from rtlab.monitor import utc_text

    return utc_text(t)


def test_monitors_belong_to_their_boards(rtlab, store, tmp_path):
    results = tmp_path / "results"
    shutil.copytree(store["results"], results)
    r = ["--results", str(results)]
    a1, _, a2, b2 = store["ids"]
    # each monitor's board comes from its fingerprint, as an experiment's
    sys_a = json.loads((results / a2 / "system.json").read_text())
    sys_b = json.loads((results / b2 / "system.json").read_text())
    _monitor(results, "20300101-000000-mon-a", sys_a, [40_000, 95_000, 60_000, 30_000])
    _monitor(results, "20300101-000000-mon-b", sys_b, [50_000])
    # and one measured here: this machine's board, with no experiment
    done = subprocess.run(
        [sys.executable, "-m", "rtlab.cli", "monitor", "--window", "1s", "--duration", "3s",
         "--cpus", "0", "--policy", "other", "--name", "here", "--json", *r],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    here = json.loads(done.stdout)["id"]

    rc, out, err = rtlab("history", *r, "--json")
    assert rc == 0, err
    boards = {b["name"]: b for b in json.loads(out)}
    assert (boards["board-a"]["experiments"], boards["board-a"]["monitors"]) == (2, 1)
    assert (boards["board-b"]["experiments"], boards["board-b"]["monitors"]) == (2, 1)
    (mine,) = [b for n, b in boards.items() if n not in ("board-a", "board-b")]
    assert (mine["experiments"], mine["monitors"]) == (0, 1)
    assert boards["board-a"]["last_utc"].startswith("2030-")  # the monitor is the newest

    rc, out, err = rtlab("history", "board-a", *r, "--json")
    assert rc == 0, err
    h = json.loads(out)
    assert [e["id"] for e in h["experiments"]] == [a1, a2]
    (m,) = h["monitors"]
    assert m["id"] == "20300101-000000-mon-a" and m["kernel"] == "6.6.0-a"
    assert (m["windows"], m["gaps"], m["gap_s"], m["max_ns"]) == (4, 1, 60.0, 95_000)
    assert m["start_utc"] == _utc(1_900_000_000.0)
    assert m["end_utc"] == _utc(1_900_000_000.0 + 4 * 300 + 60)
    assert m["worst_utc"] == _utc(1_900_000_000.0 + 300) and m["setup"]
    rc, out, err = rtlab("history", "board-a", *r)
    assert rc == 0 and "20300101-000000-mon-a" in out and "95.0" in out and a1 in out
    assert "mon-b" not in out

    rc, out, err = rtlab("history", mine["board"], *r, "--json")
    assert rc == 0, err
    h = json.loads(out)
    assert h["experiments"] == [] and [x["id"] for x in h["monitors"]] == [here]
    assert h["identity"]["key"] == mine["board"] and h["monitors"][0]["windows"] >= 1
    rc, _, err = rtlab("history", mine["board"], *r, "--plot", str(tmp_path / "x.svg"))
    assert rc == 2 and "no experiment to plot" in err

    # rtlab list shows the monitors beside the experiments
    rc, out, err = rtlab("list", *r, "--json")
    assert rc == 0, err
    mons = {x["id"]: x for x in json.loads(out) if x["source"] == "monitor"}
    assert set(mons) == {"20300101-000000-mon-a", "20300101-000000-mon-b", here}
    assert mons["20300101-000000-mon-a"]["done"] == 4
    assert mons["20300101-000000-mon-a"]["board_name"] == "board-a"
    rc, out, _ = rtlab("list", *r)
    assert rc == 0 and "4 windows" in out

    # a damaged monitor is skipped with a warning; damaged rows of a listed board: exit 2
    (results / "20300101-000000-mon-b" / "monitor.json").write_text("{")
    rc, out, err = rtlab("history", *r, "--json")
    assert rc == 0 and "skipped" in err and "mon-b" in err
    assert {b["name"]: b for b in json.loads(out)}["board-b"]["monitors"] == 0
    with (results / "20300101-000000-mon-a" / "intervals.jsonl").open("a") as f:
        f.write("{not json\n")
    rc, _, err = rtlab("history", "board-a", *r)
    assert rc == 2 and "intervals.jsonl" in err and len(err.strip().splitlines()) == 1
