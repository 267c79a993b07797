"""`rtlab run` killed: its probe and loads die with it, the lock is released, --resume
finishes the experiment; two runs of one experiment at once are refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .probe import procfs

EXPERIMENT = """
[experiment]
name = "lifecycle"
[defaults]
policy = "other"
interval = "1ms"
settle = "0s"
load = "spin:1"
[[series]]
name = "s"
sweep = { duration = ["6s", "1s"] }
"""


def _alive(pid: int) -> bool:
    s = procfs.stat(pid)
    return s is not None and s.state != "Z"  # a zombie has exited (PID 1 reaps late here)


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        kids = [c.pid for c in procfs.children(todo.pop()) if c.state != "Z"]
        out += kids
        todo += kids
    return out


def _wait(cond, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _rtlab(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "rtlab.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_killed_run_takes_its_probe_along_and_resumes(tmp_path):
    toml = tmp_path / "exp.toml"
    toml.write_text(EXPERIMENT)
    results = tmp_path / "results"
    run = _rtlab("run", str(toml), "--results", str(results))
    probe_pids: list[int] = []
    try:
        # the probe of the first case is running with its load worker
        def started() -> bool:
            dirs = results.is_dir() and [
                p for p in results.iterdir() if p.is_dir() and p.name[0] != "."
            ]
            return bool(dirs) and len(_descendants(run.pid)) >= 2

        assert _wait(started, 30)
        (exp_dir,) = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
        probe_pids = _descendants(run.pid)

        second = _rtlab("run", "--resume", exp_dir.name, "--results", str(results))
        _, err = second.communicate(timeout=60)
        assert second.returncode == 2, err
        assert f"being run by process {run.pid}" in err and err.count("\n") == 1

        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=10)
        assert _wait(lambda: not any(_alive(p) for p in probe_pids), 15), [
            procfs.stat(p) for p in probe_pids
        ]
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        for pid in probe_pids:  # by PID, and only if the test failed to see them go
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

    manifest = json.loads((exp_dir / "experiment.json").read_text())
    assert [c["status"] for c in manifest["cases"]] == ["pending", "pending"]
    resumed = _rtlab("run", "--resume", exp_dir.name, "--results", str(results), "--json")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    summary = json.loads(out)
    assert summary["id"] == exp_dir.name and summary["complete"] and summary["ran"] == 2
    assert Path(summary["report"]).is_file()


FULL = """
[experiment]
name = "full"
[defaults]
policy = "other"
mlock = false
interval = "10us"
loops = 300000
[[series]]
name = "s"
"""


def test_a_full_disk_fails_the_case_with_exit_5_and_keeps_the_record(tmp_path):
    """The probe cannot write every raw sample (no space left): rtlab says so, exit 5, the
    case is failed with the reason and --resume is named; nothing is called done."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "rtlab-test", str(mnt)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        toml = tmp_path / "full.toml"
        toml.write_text(FULL)
        run = _rtlab("run", str(toml), "--raw", "--results", str(mnt / "results"))
        _, err = run.communicate(timeout=120)
        assert run.returncode == 5, err
        assert "failed" in err and "rtlab run --resume" in err
        (manifest,) = (mnt / "results").glob("*/experiment.json")
        (case,) = json.loads(manifest.read_text())["cases"]
        assert case["status"] == "failed" and case["reason"]
        assert not list(manifest.parent.glob("cases/000.json"))  # nothing half-kept
    finally:
        subprocess.run(["umount", str(mnt)], check=True)
