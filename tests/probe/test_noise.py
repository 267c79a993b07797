"""The noise meter: gaps in a busy clock-reading loop, their document, and real-time throttling.

Every assertion is about structure or about behaviour the test itself causes (a planted
higher-priority spinner, the kernel's throttling); none is a latency bound. Busy loops at
SCHED_FIFO run on one CPU for at most 2 s and rely on the system's throttling, which the
tests read and never change.
"""

from __future__ import annotations

import itertools
import json
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from . import procfs
from .conftest import is_root, online_cpus
from .loadproc import start_load, stop, wait_gone

PCTS = ["50", "90", "99", "99.9", "99.99"]
SCHED_FIFO = 1
CPU = 0  # the one CPU measured
needs_root = pytest.mark.skipif(not is_root(), reason="needs root for real-time policies")

# A helper process: pinned to CPU, at POLICY (fifo:PRIO or other), busy for SPIN_US every
# PERIOD_US (0: busy all the time) until LIFE_S has passed or SIGTERM, which prints the
# number of busy stretches done.
HELPER = r"""
import os, signal, sys, time
cpu, policy, prio, spin_us, period_us, life_s = sys.argv[1:7]
os.sched_setaffinity(0, {int(cpu)})
if policy == "fifo":
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(prio)))
spins = 0
def stop(*_):
    print(spins, flush=True)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
spin, period = int(spin_us) * 1000, int(period_us) * 1000
end = time.monotonic_ns() + int(float(life_s) * 1e9)
nxt = time.monotonic_ns()
while time.monotonic_ns() < end:
    if period:
        nxt += period
        delay = nxt - time.monotonic_ns()
        if delay > 0:
            time.sleep(delay / 1e9)
        elif -delay > period:
            nxt = time.monotonic_ns()  # fell behind (throttled): never catch up
    busy_until = time.monotonic_ns() + spin
    while time.monotonic_ns() < busy_until:
        pass
    spins += 1
stop()
"""


@contextmanager
def planted(policy: str, prio: int, spin_us: int, period_us: int) -> Iterator[list[int]]:
    """Run the helper on CPU while the block runs; yields a list that gets its spin count."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HELPER,
            str(CPU),
            policy,
            str(prio),
            str(spin_us),
            str(period_us),
            "30",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    spins: list[int] = []
    try:
        line = proc.stdout.readline().strip() if proc.stdout else ""
        if line != "ready":
            proc.wait(timeout=10)
            raise AssertionError(
                f"helper did not start: {proc.stderr.read() if proc.stderr else ''}"
            )
        yield spins
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # by PID, the one this test started
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        spins.extend(int(w) for w in out.split() if w.isdigit())


def rt_throttling() -> tuple[int, int] | None:
    """(runtime_us, period_us) of real-time throttling, None when it is off."""
    kernel = Path("/proc/sys/kernel")
    runtime = int((kernel / "sched_rt_runtime_us").read_text())
    period = int((kernel / "sched_rt_period_us").read_text())
    return (runtime, period) if 0 <= runtime < period else None


def rt_runtime_shared() -> bool:
    """RT_RUNTIME_SHARE lets a throttled CPU borrow the others' budget (old kernels' default)."""
    try:
        features = Path("/sys/kernel/debug/sched/features").read_text().split()
    except OSError:
        return False  # unknown: debugfs not mounted; off by default since Linux 5.10
    return "RT_RUNTIME_SHARE" in features


@pytest.fixture
def noise(run_probe, tmp_path):
    """Run `noise` with ARGS and return (completed process, document or None)."""

    def go(*args: str, timeout: float = 60):
        out = tmp_path / "result.json"
        cp = run_probe("noise", *args, "--json", str(out), "--quiet", timeout=timeout)
        doc = json.loads(out.read_text()) if out.exists() else None
        return cp, doc

    return go


def read_raw(path: Path) -> tuple[tuple, list[int]]:
    data = path.read_bytes()
    magic, version, hdr, index, cpu, interval, size = struct.unpack_from("<8sIIiiqI", data)
    samples = list(struct.unpack_from(f"<{(len(data) - hdr) // 8}q", data, hdr))
    return (magic, version, hdr, index, cpu, interval, size), samples


def check_gaps(t: dict, threshold_ns: int) -> None:
    """The latency fields describe the gaps above the threshold; the noise fields add up."""
    n = t["count"]
    assert n >= 0
    assert t["reads"] >= n + 1
    assert t["measured_ns"] >= 0
    assert t["noise_ns"] <= t["measured_ns"]
    assert 0 <= t["noise_pct"] <= 100
    assert t["noise_ns_per_s"] == pytest.approx(t["noise_pct"] * 1e7, rel=1e-9, abs=1e-6)
    assert t["noise_pct"] == pytest.approx(100 * t["noise_ns"] / t["measured_ns"])
    assert t["read_interval_ns"] > 0
    assert t["period_ns"] == threshold_ns  # the stand-in for a period
    s = t["series"]
    assert s["period_ns"] == 1_000_000_000 and sum(s["count"]) == n
    if n == 0:
        assert t["min_ns"] is None and t["max_ns"] is None and t["noise_ns"] == 0
        assert t["worst"] == [] and t["histogram"]["buckets"] == []
        return
    p = t["percentiles_ns"]
    ordered = [t["min_ns"], *[p[k] for k in PCTS], t["max_ns"]]
    assert threshold_ns < t["min_ns"] and ordered == sorted(ordered)
    assert t["noise_ns"] == pytest.approx(t["mean_ns"] * n)
    buckets = t["histogram"]["buckets"]
    assert sum(b[2] for b in buckets) + t["histogram"]["overflow"] == n
    assert all(a[1] < b[0] for a, b in itertools.pairwise(buckets))
    worst = t["worst"]
    assert len(worst) == min(16, n) and worst[0]["latency_ns"] == t["max_ns"]
    assert [w["latency_ns"] for w in worst] == sorted(
        (w["latency_ns"] for w in worst), reverse=True
    )
    assert all(0 <= w["cycle"] < n and w["latency_ns"] <= w["t_ns"] for w in worst)
    for lo, mean, hi, c in zip(s["min_ns"], s["mean_ns"], s["max_ns"], s["count"], strict=True):
        if c:
            assert t["min_ns"] <= lo <= mean <= hi <= t["max_ns"]
    assert t["overruns"] == 0 and t["raw_lost"] == 0


def check_params(doc: dict, threshold_ns: int = 1000) -> None:
    params = doc["params"]
    assert params["threshold_ns"] == threshold_ns and params["clock"] == "CLOCK_MONOTONIC"
    on = rt_throttling()
    assert params["rt_throttling"] is (on is not None)
    assert params["rt_runtime_us"] == int(Path("/proc/sys/kernel/sched_rt_runtime_us").read_text())
    assert params["rt_period_us"] == int(Path("/proc/sys/kernel/sched_rt_period_us").read_text())
    if on:
        off_ns = (on[1] - on[0]) * 1000
        assert params["throttle_gap_min_ns"] == off_ns // 2
        assert params["throttle_gap_max_ns"] == off_ns + off_ns // 2
    else:
        assert params["throttle_gap_min_ns"] is None and params["throttle_gap_max_ns"] is None


def test_document_at_policy_other(noise):
    cp, doc = noise("--cpus", str(CPU), "--duration", "1s", "--policy", "other", "--allow-fallback")
    assert cp.returncode == 0, cp.stderr
    assert doc["meter"] == "noise" and doc["complete"] is True
    assert doc["stop_reason"] == "duration"
    check_params(doc)
    (t,) = doc["threads"]
    assert t["cpu"] == CPU and t["policy"]["name"] == "other"
    assert t["measured_ns"] >= 1_000_000_000
    assert t["throttled"] is None  # not a real-time policy
    check_gaps(t, 1000)


@needs_root
def test_the_default_policy_is_other(noise):
    """As oslat without --rtprio and the osnoise tracer without rtla's -P: a fair-scheduler
    thread, which no real-time thread hides behind and throttling never stops."""
    cp, doc = noise("--cpus", str(CPU), "--duration", "300ms", "--allow-fallback")
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["policy"] == "other:0"
    (t,) = doc["threads"]
    assert t["policy"] == {"name": "other", "priority": 0, "nice": 0}
    assert t["throttled"] is None
    check_gaps(t, 1000)


def test_document_at_fifo(noise):
    cp, doc = noise("--cpus", str(CPU), "--duration", "1s", "--policy", "fifo:50")
    assert cp.returncode == 0, cp.stderr
    check_params(doc)
    (t,) = doc["threads"]
    assert t["policy"] == {"name": "fifo", "priority": 50, "nice": 0}
    check_gaps(t, 1000)
    if rt_throttling() is None:
        assert t["throttled"] is None
    else:
        thr = t["throttled"]
        assert set(thr) == {"count", "total_ns"}
        assert 0 <= thr["count"] <= t["count"] and 0 <= thr["total_ns"] <= t["noise_ns"]


def test_unpinned_thread_and_threshold(noise):
    cp, doc = noise(
        "--duration", "300ms", "--threshold", "5us", "--policy", "other", "--allow-fallback"
    )
    assert cp.returncode == 0, cp.stderr
    check_params(doc, 5000)
    (t,) = doc["threads"]
    assert t["cpu"] is None
    check_gaps(t, 5000)


def test_one_thread_per_cpu(noise):
    cp, doc = noise(
        "--cpus",
        "0-1" if len(online_cpus()) > 1 else "0",
        "--duration",
        "300ms",
        "--policy",
        "other",
        "--allow-fallback",
    )
    assert cp.returncode == 0, cp.stderr
    threads = doc["threads"]
    assert [t["cpu"] for t in threads] == list(range(len(threads)))
    assert len({t["tid"] for t in threads}) == len(threads)
    for t in threads:
        assert t["throttled"] is None
        check_gaps(t, 1000)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_the_loop_with_an_incomplete_document(probe, tmp_path, sig):
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [
            str(probe),
            "noise",
            "--cpus",
            str(CPU),
            "--policy",
            "other",
            "--allow-fallback",
            "--duration",
            "10m",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    try:
        time.sleep(0.7)
        proc.send_signal(sig)
        assert proc.wait(timeout=10) == 0
    finally:
        stop(proc)
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["signal"] == signal.Signals(sig).name
    (t,) = doc["threads"]
    assert 0 < t["measured_ns"] < 60_000_000_000
    check_gaps(t, 1000)


def test_loops_count_clock_reads(noise):
    cp, doc = noise(
        "--cpus", str(CPU), "--loops", "200000", "--policy", "other", "--allow-fallback"
    )
    assert cp.returncode == 0, cp.stderr
    assert doc["stop_reason"] == "loops" and doc["params"]["loops"] == 200000
    (t,) = doc["threads"]
    assert t["reads"] == 200000
    check_gaps(t, 1000)


def test_raw_capture_holds_every_gap(noise, tmp_path):
    raw = tmp_path / "gaps.raw"
    cp, doc = noise(
        "--cpus",
        str(CPU),
        "--duration",
        "1s",
        "--policy",
        "other",
        "--allow-fallback",
        "--raw",
        str(raw),
    )
    assert cp.returncode == 0, cp.stderr
    (t,) = doc["threads"]
    head, gaps = read_raw(raw)
    assert head == (b"RTLABRAW", 1, 64, 0, CPU, 1000, 8)
    assert t["raw_samples"] == len(gaps) == t["count"]
    assert sum(gaps) == t["noise_ns"]
    if gaps:
        assert min(gaps) == t["min_ns"] and max(gaps) == t["max_ns"]
        for w in t["worst"]:
            assert gaps[w["cycle"]] == w["latency_ns"]


def test_threshold_is_the_meters_and_deadline_stays_common(noise):
    cp, doc = noise(
        "--loops",
        "100000",
        "--policy",
        "other",
        "--allow-fallback",
        "--threshold",
        "2us",
        "--deadline",
        "1h",
    )
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["threshold_ns"] == 2000
    assert doc["params"]["deadline_ns"] == 3_600_000_000_000
    assert doc["deadline_exceeded"] is False


def test_deadline_exit_code_follows_the_gaps(noise):
    # Every gap exceeds the threshold (1 us) and so the deadline: exit 1 exactly when there is one.
    cp, doc = noise(
        "--cpus",
        str(CPU),
        "--duration",
        "300ms",
        "--policy",
        "other",
        "--allow-fallback",
        "--deadline",
        "1us",
    )
    gaps = doc["threads"][0]["count"]
    assert cp.returncode == (1 if gaps else 0), cp.stderr
    assert doc["deadline_exceeded"] is bool(gaps)


BAD = [
    (["--threshold", "0"], "--threshold"),
    (["--threshold", "5"], "--threshold"),  # no unit
    (["--threshold", "50ns"], "--threshold"),  # below what a clock read can resolve
    (["--threshold", "2s"], "--threshold"),
    (["--threshold", "abc"], "--threshold"),
    (["--threshold"], "--threshold"),
    (["--deadline", "0"], "--deadline"),
    (["--duration", "1"], "--duration"),
]


@pytest.mark.parametrize(("args", "named"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_values_exit_2_with_one_line(run_probe, tmp_path, args, named):
    out = tmp_path / "doc.json"
    cp = run_probe("noise", "--policy", "other", "--duration", "1s", *args, "--json", str(out))
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rtlab-probe noise: ") and named in lines[0]
    assert cp.stdout == "" and not out.exists()


def test_check_names_the_meters_threshold(run_probe):
    cp = run_probe("noise", "--check", "--threshold", "5")
    assert cp.returncode == 2
    assert json.loads(cp.stdout) == {
        "error": cp.stderr.strip().removeprefix("rtlab-probe noise: "),
        "option": "threshold",
        "value": "5",
    }
    cp = run_probe("noise", "--check", "--threshold", "1us", "--duration", "1s")
    assert cp.returncode == 0 and cp.stdout == "" and cp.stderr == ""


def test_catalog_lists_the_meter_and_its_option(run_probe):
    cp = run_probe("list", "--json")
    assert cp.returncode == 0, cp.stderr
    cat = json.loads(cp.stdout)
    (meter,) = [m for m in cat["meters"] if m["name"] == "noise"]
    (opt,) = [o for o in meter["options"] if o["name"] == "threshold"]
    assert opt["type"] == "duration" and opt["min_ns"] == 100 and opt["aliases"] == []
    assert "1us" in opt["help"]


@needs_root
def test_policy_is_really_applied(probe, tmp_path):
    """While it runs, the kernel reports the measuring thread as SCHED_FIFO 50 on CPU 0."""
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [
            str(probe),
            "noise",
            "--cpus",
            str(CPU),
            "--policy",
            "fifo:50",
            "--duration",
            "2s",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    try:

        def measuring() -> list[procfs.ProcStat]:
            return [t for t in procfs.threads(proc.pid) if t.policy == SCHED_FIFO]

        rt = procfs.wait_for(measuring)
        assert len(rt) == 1 and rt[0].rt_priority == 50
        assert procfs.cpus_allowed(proc.pid, rt[0].pid) == str(CPU)
        assert proc.wait(timeout=30) == 0
    finally:
        stop(proc)
    doc = json.loads(out.read_text())
    assert doc["threads"][0]["tid"] == rt[0].pid


def test_nothing_survives_sigkill(probe, tmp_path):
    out = tmp_path / "r.json"
    args = [
        "noise",
        "--cpus",
        str(CPU),
        "--policy",
        "other",
        "--allow-fallback",
        "--duration",
        "30s",
        "--load",
        f"spin:5%@{CPU}",
        "--settle",
        "100ms",
        "--json",
        str(out),
        "--quiet",
    ]
    proc, pgid = start_load(probe, args, tmp_path, 1)
    try:
        # measuring: the main and the measuring thread (however loaded this machine is)
        assert procfs.wait_for(lambda: len(procfs.threads(proc.pid)) >= 2)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert wait_gone(pgid) == []
    finally:
        stop(proc)
    assert not Path(f"/proc/{proc.pid}").exists()
    assert list(tmp_path.iterdir()) == []  # no document, no temporary file


@needs_root
def test_planted_higher_priority_spinner_is_seen(noise, tmp_path):
    """A fifo:80 helper busy 300 us every 5 ms on the measured CPU steals the CPU from the
    fifo:10 measuring thread: about duration / 5 ms gaps of at least 200 us."""
    raw = tmp_path / "gaps.raw"
    with planted("fifo", 80, spin_us=300, period_us=5000) as spins:
        cp, doc = noise(
            "--cpus", str(CPU), "--policy", "fifo:10", "--duration", "1s", "--raw", str(raw)
        )
    assert cp.returncode == 0, cp.stderr
    (t,) = doc["threads"]
    check_gaps(t, 1000)
    _, gaps = read_raw(raw)
    long_gaps = sum(1 for g in gaps if g >= 200_000)
    expected = t["measured_ns"] / 5_000_000
    assert 0.5 * expected <= long_gaps <= 2 * expected, (long_gaps, expected, spins)


@needs_root
def test_rt_throttling_gaps_are_recognised(noise, tmp_path):
    """At fifo under throttling the kernel takes period - runtime of every period from the
    spinning thread and gives it to other work: one long gap a period, counted as throttled."""
    setting = rt_throttling()
    if setting is None:
        pytest.skip("real-time throttling is off here (sched_rt_runtime_us is -1 or = period)")
    if rt_runtime_shared():
        pytest.skip("RT_RUNTIME_SHARE is on: a throttled CPU borrows the others' runtime")
    if setting[1] > 1_000_000:
        pytest.skip(f"the throttling period ({setting[1]} us) is longer than a 2 s run can hold")
    raw = tmp_path / "gaps.raw"
    # Work waiting on the CPU (needed where the fair deadline server replaces throttling).
    with planted("other", 0, spin_us=1000, period_us=0):
        cp, doc = noise(
            "--cpus", str(CPU), "--policy", "fifo:50", "--duration", "2s", "--raw", str(raw)
        )
    assert cp.returncode == 0, cp.stderr
    (t,) = doc["threads"]
    thr = t["throttled"]
    assert thr is not None and thr["count"] >= 1, t["worst"][:4]
    assert thr["total_ns"] >= 10_000_000 * thr["count"]  # long gaps, >= 10 ms each
    params = doc["params"]
    _, gaps = read_raw(raw)
    window = [
        g for g in gaps if params["throttle_gap_min_ns"] <= g <= params["throttle_gap_max_ns"]
    ]
    assert (len(window), sum(window)) == (thr["count"], thr["total_ns"])
