"""The preempt meter: stretched units of work, context switches, who preempted, tracefs hygiene.

Behaviour is asserted, never latency bounds: the test machine may be a noisy VM. Runs last
1 s on one CPU; the planted preemptor is a helper process this test starts and stops by PID.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ..conftest import skip_untraced
from . import procfs
from .conftest import is_root, online_cpus, wait_measuring
from .test_noise import HELPER
from .test_wakeup import check_thread

SCHED_FIFO = 1
CPU = online_cpus()[-1]
needs_root = pytest.mark.skipif(not is_root(), reason="needs root for real-time policies")
POLICY = ["--policy", "fifo:10"] if is_root() else ["--policy", "other", "--allow-fallback"]
TOP_LEVEL = ["tracing_on", "current_tracer", "set_event", "trace_clock", "tracing_cpumask"]


@pytest.fixture
def preempt(meter_run):
    """Run `preempt` with ARGS: (completed process, document or None)."""
    return functools.partial(meter_run, "preempt")


def tracefs_root() -> Path | None:
    """Where tracefs is mounted (/sys/kernel/tracing first), None when it is not."""
    found = None
    for line in Path("/proc/mounts").read_text().splitlines():
        _, mnt, fstype, *_ = line.split()
        if fstype == "tracefs":
            if mnt == "/sys/kernel/tracing":
                return Path(mnt)
            found = found or Path(mnt)
    return found


def instance(pid: int) -> Path | None:
    root = tracefs_root()
    return root / "instances" / f"rtlab-{pid}" if root else None


def top_level() -> dict[str, str]:
    root = tracefs_root()
    return {f: (root / f).read_text() for f in TOP_LEVEL} if root else {}


def attributed(doc: dict) -> list[dict]:
    """The thread's "by" list; skip (with the probe's reason) where tracing is unavailable."""
    pre = doc["threads"][0]["preemptions"]
    if pre["by"] is None:
        skip_untraced(f"attribution unavailable here: {pre['by_unavailable']}")
    return pre["by"]


@contextmanager
def helper(policy: str, prio: int, spin_us: int, period_us: int) -> Iterator[int]:
    """The helper of test_noise pinned to CPU: busy SPIN_US every PERIOD_US; yields its PID."""
    args = [str(CPU), policy, str(prio), str(spin_us), str(period_us), "30"]
    proc = subprocess.Popen(
        [sys.executable, "-c", HELPER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline().strip() if proc.stdout else ""
        assert line == "ready", proc.stderr.read() if proc.stderr else ""
        yield proc.pid
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # by PID: the one this test started
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def check_preempt(doc: dict, unit_ns: int = 100_000) -> dict:
    assert doc["meter"] == "preempt"
    assert doc["params"]["unit_ns"] == unit_ns and isinstance(doc["params"]["trace"], bool)
    (t,) = doc["threads"]
    check_thread(t)
    p = t["percentiles_ns"]
    assert t["min_ns"] <= p["50"] <= t["max_ns"]
    assert t["period_ns"] == unit_ns
    assert t["unit_nominal_ns"] > 0 and t["unit_iterations"] > 0 and t["measured_ns"] > 0
    assert t["min_ns"] >= 0 and 0 <= t["units_faster"] <= t["count"]
    pre = t["preemptions"]
    assert pre["voluntary"] >= 0 and pre["involuntary"] >= 0 and pre["off_cpu_ns"] >= 0
    assert pre["off_cpu_source"] in ("schedstat", "stretch")
    mig = t["migrations"]
    assert mig["pinned"] is (t["cpu"] is not None)
    assert mig["nr_migrations"] is None or mig["nr_migrations"] >= 0
    assert (mig["cpu_changes"] is None) is mig["pinned"]  # pinned: nothing to look at
    if pre["by"] is None:
        assert isinstance(pre["by_unavailable"], str) and pre["by_unavailable"]
        assert pre["trace_events_lost"] is None and pre["trace_buffer_kb"] is None
        assert pre["kernel_mode"] is None and pre["user_mode"] is None
    else:
        assert "by_unavailable" not in pre
        assert pre["trace_buffer_kb"] > 0 and pre["trace_events_lost"] >= 0
        times = [b["time_ns"] for b in pre["by"]]
        assert times == sorted(times, reverse=True)
        for b in pre["by"]:
            assert set(b) == {"comm", "pid", "policy", "priority", "count", "time_ns"}
            assert b["count"] > 0 and b["time_ns"] >= 0 and b["pid"] != t["tid"]
            assert b["policy"] in ("other", "batch", "idle", "fifo", "rr", "rt", "deadline")
        # Every preemption is told kernel mode (R+) or return to user (R), also one the
        # trace never closed (not in "by").
        split = pre["kernel_mode"] + pre["user_mode"]
        assert split >= sum(b["count"] for b in pre["by"])
        if pre["trace_events_lost"] == 0:  # each preemption is one involuntary switch
            assert split <= pre["involuntary"] + pre["voluntary"]
    return t


def test_document_structure(preempt):
    cp, doc = preempt("--cpus", str(CPU), "--duration", "1s", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""
    t = check_preempt(doc)
    assert t["cpu"] == CPU and doc["complete"] is True and doc["params"]["trace"] is True
    if is_root():
        assert t["policy"] == {"name": "fifo", "priority": 10, "nice": 0}


def test_unit_option_and_loops(preempt):
    cp, doc = preempt("--cpus", str(CPU), "--loops", "500", "--unit", "50us", *POLICY)
    assert cp.returncode == 0, cp.stderr
    t = check_preempt(doc, unit_ns=50_000)
    assert t["count"] == 500


def test_no_trace(preempt):
    cp, doc = preempt("--cpus", str(CPU), "--loops", "200", "--no-trace", *POLICY)
    assert cp.returncode == 0, cp.stderr
    pre = check_preempt(doc)["preemptions"]
    assert doc["params"]["trace"] is False
    assert pre["by"] is None and "--no-trace" in pre["by_unavailable"]


def test_unpinned_thread_says_why(preempt):
    cp, doc = preempt("--loops", "200", *POLICY)
    assert cp.returncode == 0, cp.stderr
    pre = check_preempt(doc)["preemptions"]
    assert pre["by"] is None and "--cpus" in pre["by_unavailable"]


@needs_root
def test_higher_priority_helper_is_the_top_preemptor(preempt):
    """A fifo:80 helper busy ~1 ms every ~10 ms on the CPU preempts the fifo:10 thread."""
    with helper("fifo", 80, 1000, 10_000) as pid:
        cp, doc = preempt("--cpus", str(CPU), "--policy", "fifo:10", "--duration", "1s")
    assert cp.returncode == 0, cp.stderr
    pre = check_preempt(doc)["preemptions"]
    assert pre["involuntary"] > 0
    by = attributed(doc)
    assert by[0]["pid"] == pid, by[:3]
    assert by[0]["policy"] == "fifo" and by[0]["priority"] == 80
    assert by[0]["count"] > 0 and by[0]["comm"].startswith("python")


@needs_root
def test_instance_removed_and_top_level_untouched(preempt, probe):
    before = top_level()
    proc = subprocess.run(
        [str(probe), "preempt", "--cpus", str(CPU), "--duration", "1s", "--quiet", *POLICY],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    if tracefs_root() is None:
        skip_untraced("tracefs is not mounted and the probe could not mount it")
    after = top_level()
    assert after == (before or after)  # the probe may have mounted tracefs itself
    leftovers = [p.name for p in (tracefs_root() / "instances").iterdir()]
    assert not any(
        n.startswith("rtlab-") and not Path(f"/proc/{n[6:]}").exists() for n in leftovers
    )


def start_long(probe: Path, tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """A 30 s run; once its tracefs instance exists: (process, instance)."""
    out, progress = tmp_path / "long.json", tmp_path / "progress.jsonl"
    proc = subprocess.Popen(
        [str(probe), "preempt", "--cpus", str(CPU), "--duration", "30s", "--quiet",
         "--json", str(out), "--progress", str(progress), *POLICY],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip

    def ready() -> Path | None:
        path = instance(proc.pid)
        return path if proc.poll() is not None or (path and path.is_dir()) else None

    path = procfs.wait_for(ready, timeout_s=10)
    if proc.poll() is not None or not path:
        proc.kill() if proc.poll() is None else None
        proc.wait()
        skip_untraced(f"no tracefs instance appeared: {proc.stderr.read() if proc.stderr else ''}")
    wait_measuring(progress, proc)
    return proc, path


@needs_root
def test_sigterm_removes_the_instance(probe, tmp_path):
    proc, path = start_long(probe, tmp_path)
    try:
        threads = procfs.wait_for(
            lambda: [t for t in procfs.threads(proc.pid) if t.policy == SCHED_FIFO]
        )
        assert threads and all(t.rt_priority == 10 for t in threads)  # the policy applied
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not path.exists()
    doc = json.loads((tmp_path / "long.json").read_text())
    assert doc["complete"] is False and doc["signal"] == "SIGTERM"
    check_preempt(doc)


@needs_root
def test_after_sigkill_the_next_run_removes_the_stale_instance(probe, preempt, tmp_path):
    proc, path = start_long(probe, tmp_path)
    try:
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not Path(f"/proc/{proc.pid}").exists()  # nothing of it survives
    assert path.is_dir()  # the kernel keeps the instance of a killed run
    cp, doc = preempt("--cpus", str(CPU), "--loops", "100", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert not path.exists()
    check_preempt(doc)


@pytest.mark.parametrize(
    "args",
    [
        ["--unit", "0"],
        ["--unit", "100"],
        ["--unit", "500ns"],
        ["--unit", "200ms"],
        ["--no-trace=1"],
        ["--cpus", ",".join(map(str, online_cpus()))],
        ["--threads", "2"],
    ],
)
def test_bad_values_exit_2_with_one_line(run_probe, args):
    if args[0] == "--cpus" and len(online_cpus()) < 2:
        pytest.skip("one CPU: --cpus lists one thread")
    cp = run_probe("preempt", *args, "--loops", "10")
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rtlab-probe preempt: "), cp.stderr
    assert cp.stdout == ""


def test_listed_with_its_options(run_probe):
    cp = run_probe("list", "--json")
    assert cp.returncode == 0
    (meter,) = [m for m in json.loads(cp.stdout)["meters"] if m["name"] == "preempt"]
    assert [o["name"] for o in meter["options"]] == ["unit", "no-trace"]


def test_a_pinned_thread_never_migrates(preempt):
    cp, doc = preempt("--cpus", str(CPU), "--loops", "2000", *POLICY)
    assert cp.returncode == 0, cp.stderr
    mig = check_preempt(doc)["migrations"]
    assert mig["pinned"] is True and mig["cpu_changes"] is None
    if mig["nr_migrations"] is None:
        pytest.skip("no /proc/PID/sched here (CONFIG_SCHED_DEBUG): the kernel's count is unknown")
    assert mig["nr_migrations"] == 0


@needs_root
@pytest.mark.skipif(len(online_cpus()) < 2, reason="one CPU: nowhere to migrate to")
def test_an_unpinned_thread_under_load_migrates(preempt):
    """Real-time spinners busy half of each ~10 ms window on two CPUs, at random phases: the
    SCHED_OTHER thread is pushed off whichever CPU is taken while the other is free. Up to
    three runs of 2 s: at least one migration in one of them."""
    a, b = online_cpus()[-2:]
    loads = [f"spin:50%@{c},policy=fifo:10" for c in (a, b)]
    seen = []
    for _ in range(3):
        cp, doc = preempt(
            "--threads", "1", "--policy", "other", "--duration", "2s",
            "--load", loads[0], "--load", loads[1],
        )  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        t = check_preempt(doc)
        mig = t["migrations"]
        assert t["cpu"] is None and mig["pinned"] is False
        assert mig["cpu_changes"] >= 0
        seen.append(mig)
        if (mig["nr_migrations"] or 0) > 0 and mig["cpu_changes"] > 0:
            break
    assert any((m["nr_migrations"] is None or m["nr_migrations"] > 0) for m in seen), seen
    assert any(m["cpu_changes"] > 0 for m in seen), seen
    # What the thread saw change can only be less than what the kernel counted.
    assert all(
        m["nr_migrations"] is None or m["cpu_changes"] <= m["nr_migrations"] for m in seen
    ), seen


@needs_root
def test_preemptions_split_by_mode(preempt):
    """A fifo:80 helper preempts the busy fifo:10 thread: every preemption is told kernel
    mode (R+) or on the way back to user mode (R)."""
    with helper("fifo", 80, 1000, 10_000):
        cp, doc = preempt("--cpus", str(CPU), "--policy", "fifo:10", "--duration", "1s")
    assert cp.returncode == 0, cp.stderr
    pre = check_preempt(doc)["preemptions"]
    attributed(doc)
    assert isinstance(pre["kernel_mode"], int) and isinstance(pre["user_mode"], int)
    assert pre["kernel_mode"] + pre["user_mode"] > 0
