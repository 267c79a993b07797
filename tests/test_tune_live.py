"""rtlab tune on this machine, for the knobs that are safe to touch here.

kernel.timer_migration and vm.stat_interval are applied and reset for real (the
originals are put back in a finally even when an assertion fails); hold-latency holds
/dev/cpu_dma_latency, which the kernel releases when the process ends.
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import rtlab.cli.tune as tune_cli
from rtlab.tune import STATE_ENV

from .conftest import is_root

TIMER = Path("/proc/sys/kernel/timer_migration")
STAT = Path("/proc/sys/vm/stat_interval")
DMA = Path("/dev/cpu_dma_latency")
SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.mark.skipif(not is_root(), reason="changing kernel settings needs root")
@pytest.mark.skipif(not (TIMER.exists() and STAT.exists()), reason="no timer_migration here")
def test_live_timer_migration_and_stat_interval_apply_and_reset(tmp_path, monkeypatch, rtlab):
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    originals = {p: p.read_bytes() for p in (TIMER, STAT)}
    try:
        rc, out, err = rtlab(
            "tune", "apply", "--only", "sched.timer_migration,vm.stat_interval", "--json"
        )
        assert rc == 0, err
        doc = json.loads(out)
        assert doc["plan"]["live"] and doc["plan"]["root"] == "/"
        assert {o["target"] for o in doc["outcomes"]} <= {
            "proc/sys/kernel/timer_migration",
            "proc/sys/vm/stat_interval",
        }
        assert TIMER.read_text().strip() == "0"
        assert int(STAT.read_text()) >= 10
        rc, out, _ = rtlab("tune", "status", "--json")
        st = json.loads(out)
        changed = [o for o in doc["outcomes"] if o["state"] == "changed"]
        assert rc == 0 and len(st["changes"]) == len(changed)
        assert all(c["state"] == "rtlab's" for c in st["changes"])
        if changed:
            assert st["root"] == "/"
        rc, out, err = rtlab("tune", "reset", "--json")
        assert rc == 0, err
        assert json.loads(out)["restored"]
        for path, data in originals.items():
            assert path.read_bytes() == data, path
    finally:
        for path, data in originals.items():
            if path.read_bytes() != data:
                path.write_bytes(data)


def _dma_value() -> int:
    fd = os.open(DMA, os.O_RDONLY)
    try:
        return struct.unpack("=i", os.read(fd, 4))[0]
    finally:
        os.close(fd)


@pytest.mark.skipif(not is_root(), reason="/dev/cpu_dma_latency is root's")
@pytest.mark.skipif(not DMA.exists(), reason="no /dev/cpu_dma_latency (PM QoS) here")
def test_hold_latency_holds_until_sigterm_and_releases():
    before = _dma_value()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "rtlab.cli", "tune", "hold-latency", "1000", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        held = json.loads(proc.stdout.readline())
        assert held["held_us"] == 1000 and held["pid"] == proc.pid
        assert held["effective_us"] is not None and held["effective_us"] <= 1000
        assert _dma_value() <= 1000  # the kernel's limit while it runs
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert json.loads(out.splitlines()[-1]) == {"released": True, "signal": "SIGTERM"}
        assert _dma_value() == before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_hold_latency_without_the_device_exits_3(rtlab, monkeypatch, tmp_path):
    monkeypatch.setattr(tune_cli, "DMA_LATENCY", str(tmp_path / "no-such-device"))
    rc, out, err = rtlab("tune", "hold-latency", "0")
    assert rc == 3 and "no-such-device" in err and not out


@pytest.mark.parametrize("value", ["-1", "abc", "3000000000"])
def test_hold_latency_bad_value_exits_2(rtlab, value):
    rc, _, err = rtlab("tune", "hold-latency", value)
    assert rc == 2 and len(err.strip().splitlines()) == 1
