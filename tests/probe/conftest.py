from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .._skips import skip_setup
from . import procfs

ROOT = Path(__file__).resolve().parents[2]


def probe_path() -> Path:
    """$RTLAB_PROBE, else the one installed beside this Python, else the Meson build."""
    env = os.environ.get("RTLAB_PROBE")
    candidates = (
        [Path(env)]
        if env
        else [
            Path(sys.executable).parent / "rtlab-probe",
            ROOT / "build" / "probe" / "src" / "rtlab-probe",
        ]
    )
    for path in candidates:
        if path.is_file():
            return path
    skip_setup(f"rtlab-probe not found ({', '.join(map(str, candidates))}): run `make install`")


@pytest.fixture(scope="session")
def probe() -> Path:
    return probe_path()


@pytest.fixture
def run_probe(probe):
    def run(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(probe), *args], capture_output=True, text=True, timeout=timeout, **kw
        )

    return run


@pytest.fixture
def wakeup(run_probe, tmp_path):
    """Run `wakeup` with ARGS and return (completed process, document or None)."""

    def go(*args: str, timeout: float = 60):
        out = tmp_path / "result.json"
        cp = run_probe("wakeup", *args, "--json", str(out), "--quiet", timeout=timeout)
        doc = json.loads(out.read_text()) if out.exists() else None
        return cp, doc

    return go


def is_root() -> bool:
    return os.geteuid() == 0


def online_cpus() -> list[int]:
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    cpus: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


@pytest.fixture
def meter_run(run_probe, tmp_path):
    """Run METER with ARGS writing its document: (completed process, document or None)."""

    def go(meter: str, *args: str, timeout: float = 60):
        out = tmp_path / "result.json"
        out.unlink(missing_ok=True)
        cp = run_probe(meter, *args, "--json", str(out), "--quiet", timeout=timeout)
        doc = json.loads(out.read_text()) if out.exists() else None
        return cp, doc

    return go


PCTS = ["50", "90", "99", "99.9", "99.99"]


def check_latencies(t: dict) -> None:
    """What every thread object of a result document satisfies: ordered statistics,
    histogram and per-second counts equal to the samples, the worst samples sorted."""
    n = t["count"]
    p = t["percentiles_ns"]
    ordered = [t["min_ns"], *[p[k] for k in PCTS], t["max_ns"]]
    assert ordered == sorted(ordered)
    assert t["min_ns"] <= t["mean_ns"] <= t["max_ns"]
    buckets = t["histogram"]["buckets"]
    assert sum(b[2] for b in buckets) + t["histogram"]["overflow"] == n
    assert all(a[1] < b[0] for a, b in itertools.pairwise(buckets))
    assert sum(t["series"]["count"]) == n
    worst = t["worst"]
    assert len(worst) == min(16, n) and worst[0]["latency_ns"] == t["max_ns"]
    assert all(0 <= w["cycle"] < n for w in worst)  # cycle: the sample's index


def refused(
    meter_run, run_probe, meter: str, args: list[str], extra: list[str]
) -> tuple[str, dict]:
    """METER refuses ARGS (EXTRA added for the run): exit 2, one line naming the meter and
    no document; and with --check the same error as one JSON line. (line, refusal)."""
    cp, doc = meter_run(meter, *args, *extra)
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    prefix = f"rtlab-probe {meter}: "
    assert len(lines) == 1 and lines[0].startswith(prefix), cp.stderr
    assert doc is None
    cp = run_probe(meter, *args, "--check")
    assert cp.returncode == 2
    fault = json.loads(cp.stdout)
    assert fault["error"] == cp.stderr.strip().removeprefix(prefix)
    return lines[0], fault


def one_line(cp: subprocess.CompletedProcess) -> str:
    """The one line of stderr of a refused run."""
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1, cp.stderr
    return lines[0]


def wait_measuring(progress: Path, proc: subprocess.Popen) -> None:
    """Until the --progress stream shows a sample (or the probe ended)."""

    def measuring() -> bool:
        if proc.poll() is not None:
            return True
        try:
            lines = [json.loads(x) for x in progress.read_text().splitlines() if x.strip()]
        except (FileNotFoundError, json.JSONDecodeError):
            return False
        return any(ln["phase"] == "measure" and ln["threads"][0]["count"] > 0 for ln in lines)

    assert procfs.wait_for(measuring, timeout_s=15)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
