"""The periodic meter: every mechanism's document, policies really applied, no survivors.

Behaviour is asserted, never latency bounds: the test machine may be a noisy VM.
"""

from __future__ import annotations

import functools
import json
import signal
import struct
import subprocess
from pathlib import Path

import pytest

from . import procfs
from .conftest import is_root, one_line, online_cpus, wait_measuring
from .loadproc import start_load, stop, wait_gone
from .test_wakeup import check_thread

MECHANISMS = [
    "nanosleep-abs",
    "nanosleep-rel",
    "busy-poll",
    "setitimer",
    "posix-timer-signal",
    "posix-timer-thread",
    "timerfd",
    "condvar",
    "deadline",
]
TIMERS = [m for m in MECHANISMS if m != "deadline"]  # take the policy --policy asks for
SCHED_OTHER, SCHED_FIFO, SCHED_DEADLINE = 0, 1, 6
# fifo:50 as root; otherwise what an unprivileged user may set.
POLICY = ["--policy", "fifo:50"] if is_root() else ["--policy", "other", "--allow-fallback"]
needs_root = pytest.mark.skipif(not is_root(), reason="needs root for real-time policies")


@pytest.fixture
def periodic(meter_run):
    """Run `periodic` with ARGS: (completed process, document or None)."""
    return functools.partial(meter_run, "periodic")


def run_deadline(periodic, *args: str):
    """Run the deadline mechanism; skip (after checking the reason) where the kernel refuses."""
    cp, doc = periodic("--mechanism", "deadline", *args)
    if cp.returncode == 3:
        assert "deadline" in one_line(cp).lower() and doc is None
        pytest.skip(f"SCHED_DEADLINE refused here: {cp.stderr.strip()}")
    assert cp.returncode == 0, cp.stderr
    return doc


def check_periodic(doc: dict, mechanism: str, loops: int, interval_ns: int = 1_000_000) -> None:
    assert doc["meter"] == "periodic" and doc["complete"] is True
    params = doc["params"]
    assert params["mechanism"] == mechanism and params["interval_ns"] == interval_ns
    assert params["clock"] == "CLOCK_MONOTONIC" and params["loops"] == loops
    for t in doc["threads"]:
        check_thread(t, loops=loops)
        assert t["period_ns"] == interval_ns
        assert t["mechanism"] == mechanism
        assert t["cpu_ns_per_activation"] > 0
        assert t["cpu_ns_per_activation"] * loops == pytest.approx(t["cpu_ns"])
        assert isinstance(t["drift_ns"], int)
        if mechanism != "nanosleep-rel":
            assert t["drift_ns"] == 0
        assert 0 <= t["mechanism_overruns"] <= t["overruns"]


@pytest.mark.parametrize("mechanism", TIMERS)
def test_every_mechanism_document(periodic, mechanism):
    cp, doc = periodic("--mechanism", mechanism, "--loops", "200", "--interval", "1ms", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""
    check_periodic(doc, mechanism, 200)
    assert doc["params"]["runtime_ns"] is None
    if is_root():
        assert doc["threads"][0]["policy"] == {"name": "fifo", "priority": 50, "nice": 0}


def test_default_mechanism_is_nanosleep_abs(periodic):
    cp, doc = periodic("--loops", "20", *POLICY)
    assert cp.returncode == 0, cp.stderr
    check_periodic(doc, "nanosleep-abs", 20)


@pytest.mark.parametrize("mechanism", ["posix-timer-signal", "posix-timer-thread", "timerfd"])
def test_timers_per_pinned_thread(periodic, mechanism):
    """Each thread's timer wakes that thread: every thread gets all its activations."""
    cpus = online_cpus()
    cp, doc = periodic(
        "--mechanism", mechanism, "--cpus", ",".join(map(str, cpus)), "--loops", "200",
        "--interval", "500us", *POLICY,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    assert [t["cpu"] for t in doc["threads"]] == cpus
    check_periodic(doc, mechanism, 200, interval_ns=500_000)


def test_unpinned_threads(periodic):
    cp, doc = periodic("--mechanism", "condvar", "--threads", "2", "--loops", "100", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert [t["cpu"] for t in doc["threads"]] == [None, None]
    check_periodic(doc, "condvar", 100)


def test_deadline_unpinned(periodic):
    doc = run_deadline(periodic, "--policy", "other", "--loops", "200", "--interval", "1ms")
    check_periodic(doc, "deadline", 200)
    assert doc["params"]["runtime_ns"] == 100_000  # interval / 10
    pol = doc["threads"][0]["policy"]
    assert pol["name"] == "deadline"
    assert (pol["runtime_ns"], pol["deadline_ns"], pol["period_ns"]) == (
        100_000,
        1_000_000,
        1_000_000,
    )
    assert doc["threads"][0]["min_ns"] >= 0  # the inferred grid is never after a wake


def test_deadline_runtime_option(periodic):
    doc = run_deadline(
        periodic, "--policy", "other", "--loops", "50", "--interval", "2ms", "--runtime", "300us"
    )
    assert doc["params"]["runtime_ns"] == 300_000
    pol = doc["threads"][0]["policy"]
    assert (pol["runtime_ns"], pol["period_ns"]) == (300_000, 2_000_000)


@needs_root
def test_deadline_pinned_is_refused_with_a_reason(periodic):
    if len(online_cpus()) == 1:
        pytest.skip("one CPU: pinning spans the whole root domain, the kernel accepts it")
    cp, doc = periodic("--mechanism", "deadline", "--cpus", "0", "--loops", "20")
    assert cp.returncode == 3, cp.stderr
    line = one_line(cp)
    assert line.startswith("rtlab-probe periodic: --mechanism deadline:") and "(" in line
    assert doc is None


def run_watched(probe: Path, tmp_path: Path, args: list[str], check) -> dict:
    """Run `periodic ARGS` for a while, call CHECK(pid) once it measures, stop it, return
    the document."""
    out, progress = tmp_path / "r.json", tmp_path / "progress.jsonl"
    outputs = ["--progress", str(progress), "--json", str(out)]
    proc = subprocess.Popen(
        [str(probe), "periodic", *args, "--duration", "20s", "--quiet", *outputs],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_measuring(progress, proc)
        check(proc.pid)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    return json.loads(out.read_text())


@needs_root
@pytest.mark.parametrize("mechanism", TIMERS)
def test_policy_is_really_applied(probe, tmp_path, mechanism):
    """While it measures, the kernel reports the measuring thread as SCHED_FIFO 42."""
    seen: list[procfs.ProcStat] = []

    def check(pid: int) -> None:
        seen.extend(t for t in procfs.threads(pid) if t.policy == SCHED_FIFO)
        assert seen and all(t.rt_priority == 42 for t in seen)
        assert procfs.stat(pid).policy == SCHED_OTHER  # the main thread keeps its own

    doc = run_watched(probe, tmp_path, ["--mechanism", mechanism, "--policy", "fifo:42"], check)
    assert doc["complete"] is False and doc["stop_reason"] == "signal"
    assert doc["threads"][0]["tid"] in {t.pid for t in seen}
    assert doc["threads"][0]["count"] > 0 and doc["threads"][0]["mechanism"] == mechanism


@needs_root
def test_deadline_policy_is_really_applied(probe, tmp_path):
    seen: list[procfs.ProcStat] = []

    def check(pid: int) -> None:
        seen.extend(t for t in procfs.threads(pid) if t.policy == SCHED_DEADLINE)
        assert len(seen) == 1
        sched = Path(f"/proc/{pid}/task/{seen[0].pid}/sched").read_text().splitlines()
        fields = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in sched)}
        assert fields["policy"] == str(SCHED_DEADLINE) and "dl.runtime" in fields

    probe_cp = subprocess.run(  # refused here? then skip, as test_deadline_unpinned
        [str(probe), "periodic", "--mechanism", "deadline", "--policy", "other", "--loops", "5"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if probe_cp.returncode == 3:
        pytest.skip(f"SCHED_DEADLINE refused here: {probe_cp.stderr.strip()}")
    doc = run_watched(
        probe,
        tmp_path,
        ["--mechanism", "deadline", "--policy", "other", "--interval", "2ms"],
        check,
    )
    assert doc["threads"][0]["tid"] == seen[0].pid
    assert doc["threads"][0]["policy"]["name"] == "deadline"


@pytest.mark.parametrize("mechanism", TIMERS)
def test_nothing_survives_sigkill(probe, tmp_path, mechanism):
    """SIGKILL of the probe mid-run: its load processes and its threads are all gone."""
    args = ["periodic", "--mechanism", mechanism, "--load", "spin:1", "--settle", "100ms"]
    args += ["--duration", "10m", "--quiet", *POLICY]
    proc, pgid = start_load(probe, args, tmp_path, len(online_cpus()))
    try:
        # measuring: the main and the measuring threads (however loaded this machine is)
        assert procfs.wait_for(lambda: len(procfs.threads(proc.pid)) >= 2 or proc.poll())
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        assert wait_gone(pgid) == []
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert not Path(f"/proc/{proc.pid}").exists()
    finally:
        stop(proc)


@needs_root  # a SCHED_OTHER spinner shares its CPU: its share would depend on other load
def test_busy_poll_burns_the_cpu_a_sleep_does_not(periodic):
    """CPU time per activation: busy-poll spins most of each period, a sleep little of it."""
    interval = 2_000_000
    ratios = {}
    for mechanism in ("busy-poll", "nanosleep-abs"):
        cp, doc = periodic("--mechanism", mechanism, "--loops", "200", "--interval", "2ms", *POLICY)
        assert cp.returncode == 0, cp.stderr
        ratios[mechanism] = doc["threads"][0]["cpu_ns_per_activation"] / interval
    assert ratios["busy-poll"] > 0.5, ratios
    assert ratios["nanosleep-abs"] < 0.5, ratios


def test_relative_sleep_drifts(periodic):
    """nanosleep-rel: each cycle's lateness adds up, so the drift grows with the cycles."""
    drift = {}
    for loops in (50, 500):
        cp, doc = periodic("--mechanism", "nanosleep-rel", "--loops", str(loops), *POLICY)
        assert cp.returncode == 0, cp.stderr
        t = doc["threads"][0]
        drift[loops] = t["drift_ns"]
        # The intended time follows the previous wake: the drift is the sum of latencies.
        assert t["drift_ns"] == pytest.approx(t["mean_ns"] * t["count"], rel=1e-9, abs=loops)
    assert drift[500] > drift[50] > 0, drift


def read_raw(path: Path):
    data = path.read_bytes()
    head = struct.unpack_from("<8sIIiiqI", data)
    return head, struct.unpack_from(f"<{(len(data) - head[2]) // 8}q", data, head[2])


def test_raw_capture(periodic, tmp_path):
    raw = tmp_path / "samples.raw"
    cp, doc = periodic("--mechanism", "timerfd", "--loops", "300", "--raw", str(raw), *POLICY)
    assert cp.returncode == 0, cp.stderr
    t = doc["threads"][0]
    head, samples = read_raw(raw)
    assert head == (b"RTLABRAW", 1, 64, 0, -1, 1_000_000, 8)
    assert len(samples) == t["count"] == t["raw_samples"] == 300
    assert (min(samples), max(samples)) == (t["min_ns"], t["max_ns"])


BAD = [
    (["--mechanism", "bogus"], "--mechanism"),
    (["--mechanism", ""], "--mechanism"),
    (["--interval", "0"], "--interval"),
    (["--interval", "20s"], "--interval"),
    (["--mechanism", "setitimer", "--interval", "1500ns"], "--interval"),
    (["--mechanism", "timerfd", "--runtime", "100us"], "--runtime"),
    (["--mechanism", "deadline", "--runtime", "2ms"], "--runtime"),
    (["--mechanism", "deadline", "--runtime", "100ns"], "--runtime"),
]


@pytest.mark.parametrize(("args", "names"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_options_exit_2_with_one_line(periodic, args, names):
    if "--cpus" in args and len(online_cpus()) < 2:
        pytest.skip("needs two CPUs")
    cp, doc = periodic(*args, "--loops", "10", *POLICY)
    assert cp.returncode == 2, cp.stderr
    line = one_line(cp)
    assert line.startswith("rtlab-probe periodic: ") and names in line
    assert doc is None


# The meter's check() must see the thread count: pending a shared change (the check hook
# of struct meter gains `int nthreads`). Strict: once it lands, remove this marker.


@pytest.mark.parametrize("threads", [["--threads", "2"], ["--cpus", "0,1"]])
def test_setitimer_takes_one_thread(periodic, run_probe, threads):
    if "--cpus" in threads and len(online_cpus()) < 2:
        pytest.skip("needs two CPUs")
    cp, doc = periodic("--mechanism", "setitimer", *threads, "--loops", "10", *POLICY)
    assert cp.returncode == 2, cp.stderr
    assert "setitimer" in one_line(cp) and doc is None
    cp = run_probe("periodic", "--check", "--mechanism", "setitimer", *threads)
    assert cp.returncode == 2
    assert json.loads(cp.stdout) == {
        "error": one_line(cp).removeprefix("rtlab-probe periodic: "),
        "option": "mechanism",
        "value": "setitimer",
    }


def test_setitimer_second_thread_never_measures(periodic):
    """Whatever refuses it, two threads never share ITIMER_REAL: no document."""
    cp, doc = periodic("--mechanism", "setitimer", "--threads", "2", "--loops", "10", *POLICY)
    assert cp.returncode in (2, 3) and "setitimer" in one_line(cp) and doc is None


def test_check_reports_the_mechanism(run_probe):
    cp = run_probe("periodic", "--check", "--mechanism", "bogus")
    assert cp.returncode == 2
    fault = json.loads(cp.stdout)
    assert fault["option"] == "mechanism" and fault["value"] == "bogus"
    for m in MECHANISMS:
        assert m in fault["error"]
    cp = run_probe("periodic", "--check", "--mechanism", "posix-timer-thread", "--threads", "2")
    assert cp.returncode == 0 and cp.stdout == "" and cp.stderr == ""


def test_help_names_every_mechanism(run_probe):
    cp = run_probe("periodic", "--help")
    assert cp.returncode == 0
    for m in MECHANISMS:
        assert f"\n  {m} " in cp.stdout
    assert "--mechanism M" in cp.stdout and "--runtime DUR" in cp.stdout


def test_listed_with_its_options(run_probe):
    cp = run_probe("list", "--json")
    assert cp.returncode == 0
    (meter,) = [m for m in json.loads(cp.stdout)["meters"] if m["name"] == "periodic"]
    assert [o["name"] for o in meter["options"]] == ["interval", "mechanism", "runtime"]
