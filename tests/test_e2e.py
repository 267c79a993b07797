"""The quick preset end to end with the real probe, and interrupt + resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import is_root

RTLAB = [sys.executable, "-m", "rtlab.cli"]


@pytest.mark.skipif(not is_root(), reason="the quick preset uses SCHED_FIFO")
def test_quick_preset_tiny_scale(tmp_path):
    out = tmp_path / "results"
    cp = subprocess.run(
        [*RTLAB, "run", "quick", "--scale", "0.01", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cp.returncode == 0, cp.stderr
    (exp_dir,) = [p for p in out.iterdir() if p.is_dir()]
    manifest = json.loads((exp_dir / "experiment.json").read_text())
    assert manifest["complete"] and len(manifest["cases"]) == 27
    assert (exp_dir / "experiment.toml").read_text().startswith("# The standard series")
    system = json.loads((exp_dir / "system.json").read_text())
    assert system["kernel_release"] and system["preempt_model"]
    assert len(list((exp_dir / "cases").glob("*.json"))) == 27
    assert (out / "index.sqlite").exists()
    cp = subprocess.run(
        [*RTLAB, "show", exp_dir.name, "--results", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp.returncode == 0, cp.stderr
    rows = json.loads(cp.stdout)["rows"]
    assert [r["series"] for r in rows] == ["no preemption"] * 9 + ["preemption"] * 9 + [
        "preemption + isolation"
    ] * 9
    assert [r["label"] for r in rows[:9]] == [str(n) for n in range(9)]
    for r in rows:
        assert r["count"] == 40
        assert r["min"] <= r["q1"] <= r["median"] <= r["q3"] <= r["max"]
    assert any("isolation series measures on" in n for n in json.loads(cp.stdout)["notes"])


SLOW = """
[experiment]
name = "slow"
[defaults]
duration = "2s"
settle = "0"
policy = "other"
[[series]]
name = "s"
sweep = { forkcopy = [0, 1, 0, 1] }
"""


def test_interrupt_keeps_finished_cases_and_resume_completes(tmp_path):
    toml = tmp_path / "slow.toml"
    toml.write_text(SLOW)
    out = tmp_path / "results"
    proc = subprocess.Popen(
        [*RTLAB, "run", str(toml), "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as from a terminal: a shell without job control starts background commands with
        # SIGINT ignored, and a Python started so keeps ignoring it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )

    def manifest() -> dict | None:
        found = list(out.glob("*/experiment.json")) if out.exists() else []
        return json.loads(found[0].read_text()) if found else None

    end = time.monotonic() + 60
    while time.monotonic() < end:
        m = manifest()
        if m and sum(c["status"] == "done" for c in m["cases"]) >= 1:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    m = manifest()
    done = [c for c in m["cases"] if c["status"] == "done"]
    assert 1 <= len(done) < 4 and not m["complete"]
    assert "--resume" in err
    exp_dir = Path(next(out.glob("*/experiment.json"))).parent
    docs = sorted(p.name for p in (exp_dir / "cases").glob("*.json"))
    assert docs == [Path(c["document"]).name for c in done]  # no half case left behind
    cp = subprocess.run(
        [*RTLAB, "run", "--resume", m["id"], "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp.returncode == 0, cp.stderr
    m = manifest()
    assert m["complete"] and all(c["status"] == "done" for c in m["cases"])
