"""Loads: real work, SCHED_OTHER, pinned, and nothing left after the probe ends for any reason."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from . import procfs
from .conftest import online_cpus

GONE_WITHIN_S = 1.0


def load_group_of(proc: subprocess.Popen, nworkers: int) -> int:
    """Wait until the probe has forked NWORKERS load workers; return their process group."""

    def workers_so_far() -> list[procfs.ProcStat]:
        found = [c for c in procfs.children(proc.pid) if c.comm.startswith("rtlab:")]
        return found if len(found) >= nworkers else []

    workers = procfs.wait_for(workers_so_far)
    assert len(workers) == nworkers, workers
    groups = {w.pgid for w in workers}
    assert len(groups) == 1
    pgid = groups.pop()
    assert pgid != proc.pid  # not the probe's own group: a terminal ^C reaches the probe only
    return pgid


def assert_group_gone(pgid: int) -> None:
    left = procfs.wait_for(lambda: not procfs.live_in_group(pgid), timeout_s=GONE_WITHIN_S)
    assert left, f"load processes still alive: {procfs.live_in_group(pgid)}"


COMMANDS = {
    "load": ["load", "forkcopy:3"],
    "wakeup": [
        "wakeup",
        "--load",
        "forkcopy:3",
        "--settle",
        "100ms",
        "--duration",
        "10m",
        "--allow-fallback",
        "--quiet",
    ],
}


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGKILL"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_load_survives_a_signal(probe, tmp_path, command, how):
    proc = subprocess.Popen(
        [str(probe), *COMMANDS[command]], stderr=subprocess.DEVNULL, cwd=tmp_path
    )
    try:
        pgid = load_group_of(proc, 3)
        time.sleep(0.3)  # let the workers fork and copy
        assert len(procfs.live_in_group(pgid)) >= 3
        proc.send_signal(getattr(signal, how))
        assert_group_gone(pgid)
        rc = proc.wait(timeout=10)
        assert rc == (-signal.SIGKILL if how == "SIGKILL" else 0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("command", ["load", "wakeup"])
def test_no_load_survives_a_normal_exit(probe, tmp_path, command):
    args = (
        ["load", "forkcopy:3", "--duration", "1500ms", "--quiet"]
        if command == "load"
        else [
            "wakeup",
            "--load",
            "forkcopy:3",
            "--settle",
            "100ms",
            "--duration",
            "1500ms",
            "--allow-fallback",
            "--quiet",
        ]
    )
    proc = subprocess.Popen([str(probe), *args], cwd=tmp_path)
    pgid = load_group_of(proc, 3)
    assert proc.wait(timeout=20) == 0
    assert_group_gone(pgid)


def test_forkcopy_does_real_work_and_is_reported(run_probe, tmp_path):
    out = tmp_path / "loads.json"
    cp = run_probe("load", "forkcopy:2:256K", "--duration", "1s", "--json", str(out), "--quiet")
    assert cp.returncode == 0, cp.stderr
    (entry,) = json.loads(out.read_text())["loads"]
    assert entry["spec"] == "forkcopy:2:256K" and entry["workers"] == 2
    assert entry["work_units"] > 0 and entry["work_units_per_s"] > 0
    assert entry["ran_ns"] >= 900_000_000


def test_wakeup_records_the_load_it_ran(wakeup):
    cp, doc = wakeup(
        "--load", "forkcopy:2:64K", "--settle", "200ms", "--loops", "300", "--allow-fallback"
    )
    assert cp.returncode == 0, cp.stderr
    (spec,) = doc["params"]["loads"]
    assert spec == {
        "spec": "forkcopy:2:64K",
        "kind": "forkcopy",
        "processes": 2,
        "cpus": None,
        "size_bytes": 65536,
        "work_unit": "fork+copy",
    }
    (ran,) = doc["loads"]
    assert ran["workers"] == 2 and ran["work_units"] > 0
    assert doc["params"]["settle_ns"] == 200_000_000


def test_load_workers_are_pinned_and_sched_other(probe, tmp_path):
    cpu = online_cpus()[-1]
    proc = subprocess.Popen([str(probe), "load", f"forkcopy:2@{cpu}", "--quiet"], cwd=tmp_path)
    try:
        load_group_of(proc, 2)
        workers = [c for c in procfs.children(proc.pid) if c.comm.startswith("rtlab:")]
        for w in workers:
            assert w.comm == "rtlab:forkcopy"
            assert w.policy == 0
            assert procfs.cpus_allowed(w.pid) == str(cpu)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def test_zero_processes_is_valid(wakeup):
    cp, doc = wakeup("--load", "forkcopy:0", "--settle", "0", "--loops", "10", "--allow-fallback")
    assert cp.returncode == 0, cp.stderr
    assert doc["loads"][0]["workers"] == 0
