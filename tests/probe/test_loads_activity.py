"""Achieved activity: every document says what the system did while it measured."""

from __future__ import annotations

import json
import signal
import subprocess
import time

from .conftest import online_cpus

CPUS = online_cpus()


def check_activity(act: dict) -> None:
    assert act["source"] == "/proc/stat"
    assert set(act["cpu_busy_pct"]) == {str(c) for c in CPUS}
    for pct in [*act["cpu_busy_pct"].values(), act["cpu_busy_pct_all"]]:
        assert 0.0 <= pct <= 100.0
    assert act["interval_ns"] > 0
    for key in ("ctxt_per_s", "intr_per_s", "softirq_per_s"):
        assert act[key] >= 0


def test_wakeup_records_activity_over_the_measurement(wakeup):
    cpu = CPUS[-1]
    cp, doc = wakeup(
        "--load",
        f"spin:100%@{cpu}",
        "--settle",
        "300ms",
        "--duration",
        "1500ms",
        "--allow-fallback",
    )
    assert cp.returncode == 0, cp.stderr
    act = doc["activity"]
    check_activity(act)
    # sampled at the start and the end of measuring, not of the whole run
    assert abs(act["interval_ns"] - doc["elapsed_ns"]) < doc["elapsed_ns"] // 10
    # the load was real: its CPU was busy, the measuring thread switched and timers fired
    assert act["cpu_busy_pct"][str(cpu)] > 50.0
    assert act["ctxt_per_s"] > 0 and act["intr_per_s"] > 0


def test_wakeup_without_load_records_the_baseline(wakeup):
    cp, doc = wakeup("--loops", "200", "--allow-fallback")
    assert cp.returncode == 0, cp.stderr
    check_activity(doc["activity"])
    assert doc["loads"] == []


def test_load_command_records_activity_after_settling(run_probe, tmp_path):
    cpu = CPUS[-1]
    out = tmp_path / "l.json"
    cp = run_probe(
        "load",
        f"spin:100%@{cpu}",
        "timer:4",
        "--settle",
        "200ms",
        "--duration",
        "1s",
        "--json",
        str(out),
        "--quiet",
    )
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    act = doc["activity"]
    check_activity(act)
    assert act["interval_ns"] < 1_150_000_000  # settling is not part of it
    assert act["cpu_busy_pct"][str(cpu)] > 50.0
    spin, timer = doc["loads"]
    assert spin["work_unit"] == "busy-loop clock read" and spin["work_units"] > 0
    assert timer["work_unit"] == "timer expiration" and timer["workers"] == len(CPUS)
    # 4 timers per CPU at 1 ms for about a second: thousands of expirations, not a handful
    assert timer["work_units"] > 100


def test_activity_is_null_when_stopped_while_settling(probe, tmp_path):
    out = tmp_path / "l.json"
    proc = subprocess.Popen(
        [str(probe), "load", "spin:5%", "--settle", "1m", "--json", str(out), "--quiet"]
    )
    try:
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    doc = json.loads(out.read_text())
    assert doc["activity"] is None and doc["loads"][0]["work_units"] > 0


def test_a_failing_worker_is_recorded(probe, tmp_path):
    """timerfds cannot be created under a 40-file limit: the timer workers end at once."""
    out = tmp_path / "l.json"
    args = ["load", "timer:100", "spin:5%", "--duration", "500ms", "--json", str(out), "--quiet"]
    cp = subprocess.run(
        ["prlimit", "--nofile=40:40", str(probe), *args],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert cp.returncode == 0, cp.stderr
    timer, spin = json.loads(out.read_text())["loads"]
    assert timer["workers_ended_early"] == len(CPUS) and timer["work_units"] == 0
    assert spin["workers_ended_early"] == 0 and spin["work_units"] > 0
