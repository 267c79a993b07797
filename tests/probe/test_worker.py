"""The worker meter: every design, item accounting, CPU use, placement, cleanup, refusals.

Structure and behaviour only, never latency bounds: this runs on shared, noisy machines.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import time

import pytest

from . import procfs
from .conftest import check_latencies, is_root, one_line, online_cpus, refused, wait_measuring

DESIGNS = ["busy", "yield", "sleep:100us", "futex", "eventfd"]
PCTS = ["50", "90", "99", "99.9", "99.99"]
SCHED_FIFO = 1
PRODUCER_COMM = "rtlab:producer"
needs_root = pytest.mark.skipif(not is_root(), reason="needs root for real-time policies")
# A real-time worker as root (it gets its CPU on a busy machine); elsewhere what is allowed.
POLICY = ["--policy", "fifo:50"] if is_root() else ["--policy", "other", "--allow-fallback"]


@pytest.fixture
def worker(meter_run):
    """Run `worker` with ARGS: (completed process, document or None)."""
    return functools.partial(meter_run, "worker")


def check_items(t: dict, items: int | None = None) -> None:
    """Statistics of one worker thread; samples + lost items == items made."""
    n = t["count"]
    assert n > 0
    assert t["items"] == n + t["lost"]
    if items is not None:
        assert t["items"] == items
    check_latencies(t)
    assert t["raw_lost"] == 0 and t["overruns"] >= 0
    assert isinstance(t["cpu_pct"], (int, float)) and t["cpu_pct"] >= 0
    assert t["cpu_ns"] >= 0 and t["wall_ns"] > 0
    prod = t["producer"]
    assert prod["tid"] > 0 and prod["tid"] != t["tid"]
    assert isinstance(prod["cpu_pct"], (int, float))


@pytest.mark.parametrize("design", DESIGNS)
def test_every_design(worker, design):
    cp, doc = worker("--design", design, "--rate", "1000", "--loops", "300", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["meter"] == "worker" and doc["complete"] is True
    assert doc["stop_reason"] == "loops"
    params = doc["params"]
    name, _, period = design.partition(":")
    assert params["design"] == name and params["rate_hz"] == 1000
    assert params["interval_ns"] == 1_000_000 and params["clock"] == "CLOCK_MONOTONIC"
    assert params["poll_sleep_ns"] == (100_000 if period else None)
    assert params["producer_cpu"] is None and params["producer_policy"] is None
    (t,) = doc["threads"]
    assert t["design"] == name and t["rate_hz"] == 1000
    assert t["period_ns"] == 1_000_000
    check_items(t, items=300)  # --loops counts items made: samples + lost
    assert t["producer"]["policy"] == t["policy"]  # default: what the worker runs with
    assert t["producer"]["cpu"] is None  # unpinned worker, unpinned producer


def test_busy_polling_costs_more_cpu_than_blocking(worker):
    """At 200 Hz a spinning worker uses most of its CPU time, a futex waiter little."""
    pct = {}
    for design in ("busy", "futex"):
        cp, doc = worker("--design", design, "--rate", "200", "--loops", "200", *POLICY)
        assert cp.returncode == 0, cp.stderr
        (t,) = doc["threads"]
        check_items(t, items=200)
        pct[design] = t["cpu_pct"]
    assert pct["busy"] > 50
    assert pct["futex"] < pct["busy"]


def test_odd_rate_and_threads_have_their_own_producer(worker):
    cp, doc = worker("--design", "eventfd", "--rate", "3000", "--threads", "2", "--loops", "150")
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["interval_ns"] == 333_333  # 1/rate, rounded to the ns
    assert len(doc["threads"]) == 2
    assert len({t["producer"]["tid"] for t in doc["threads"]}) == 2
    for t in doc["threads"]:
        check_items(t, items=150)


def test_duration_counts_items_made_within_it(worker):
    cp, doc = worker("--design", "sleep:1ms", "--rate", "100", "--duration", "300ms", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["stop_reason"] == "duration"
    assert doc["params"]["poll_sleep_ns"] == 1_000_000
    (t,) = doc["threads"]
    check_items(t)
    assert t["items"] <= 29  # items at 10ms, 20ms, ... strictly before 300ms


def test_raw_capture_has_every_sample(worker, tmp_path):
    raw = tmp_path / "samples.raw"
    cp, doc = worker("--design", "futex", "--loops", "200", "--raw", str(raw), *POLICY)
    assert cp.returncode == 0, cp.stderr
    (t,) = doc["threads"]
    check_items(t, items=200)
    assert t["raw_samples"] == t["count"]
    assert (raw.stat().st_size - 64) // 8 == t["count"]


def producers(pid: int) -> list[procfs.ProcStat]:
    return [t for t in procfs.threads(pid) if t.comm == PRODUCER_COMM]


@needs_root
def test_policies_and_cpus_are_really_applied(probe, tmp_path):
    """While it runs, /proc shows the worker at --policy and the producer at its own."""
    cpus = online_cpus()
    out = tmp_path / "r.json"
    cmd = [str(probe), "worker", "--design", "futex", "--rate", "100", "--policy", "fifo:42"]
    cmd += ["--cpus", str(cpus[-1]), "--producer-cpu", str(cpus[0])]
    cmd += ["--producer-policy", "fifo:31", "--duration", "20s", "--json", str(out), "--quiet"]
    progress = tmp_path / "progress.jsonl"
    proc = subprocess.Popen([*cmd, "--progress", str(progress)])
    try:

        def ready():
            work = [t for t in procfs.threads(proc.pid) if t.rt_priority == 42]
            prod = [p for p in producers(proc.pid) if p.rt_priority == 31]
            return (work, prod) if work and prod else None

        found = procfs.wait_for(ready)
        assert found, "no fifo:42 worker and fifo:31 producer"
        (work,), (prod,) = found
        assert work.policy == SCHED_FIFO and prod.policy == SCHED_FIFO
        assert procfs.cpus_allowed(proc.pid, work.pid) == str(cpus[-1])
        assert procfs.cpus_allowed(proc.pid, prod.pid) == str(cpus[0])
        wait_measuring(progress, proc)  # an item was handled: the document has a sample
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "signal"
    assert doc["params"]["producer_cpu"] == cpus[0]
    assert doc["params"]["producer_policy"] == "fifo:31"
    (t,) = doc["threads"]
    assert t["tid"] == work.pid and t["cpu"] == cpus[-1]
    p = t["producer"]
    assert p["tid"] == prod.pid and p["cpu"] == cpus[0]
    assert p["policy"] == {"name": "fifo", "priority": 31, "nice": 0}
    assert p["policy_fallback"] is False
    check_items(t)


@needs_root
def test_producer_follows_the_worker_cpu(worker):
    cpus = online_cpus()
    cp, doc = worker("--design", "futex", "--cpus", ",".join(map(str, cpus)), "--loops", "100")
    assert cp.returncode == 0, cp.stderr
    assert [t["producer"]["cpu"] for t in doc["threads"]] == cpus
    for t in doc["threads"]:
        check_items(t, items=100)


@needs_root
@pytest.mark.parametrize("design", ["busy", "yield"])
def test_a_starved_producer_is_refused(worker, design):
    """A real-time poller never lets an equal (busy) or lower (yield) producer on its CPU run."""
    cpu = str(online_cpus()[-1])
    prio = "fifo:50" if design == "busy" else "fifo:49"
    cp, doc = worker("--design", design, "--cpus", cpu, "--policy", "fifo:50",
                     "--producer-policy", prio, "--loops", "10")  # fmt: skip
    assert cp.returncode == 3, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rtlab-probe worker: --design {design}: ")
    assert "--producer-cpu" in lines[0] and doc is None
    # A producer of a higher priority preempts the poller: the run goes.
    cp, doc = worker("--design", design, "--cpus", cpu, "--policy", "fifo:50",
                     "--producer-policy", "fifo:51", "--loops", "50")  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    check_items(doc["threads"][0], items=50)


def test_nothing_survives_sigkill(probe):
    cmd = [str(probe), "worker", "--design", "eventfd", "--threads", "2", "--rate", "100"]
    cmd += ["--duration", "60s", *POLICY, "--quiet"]
    proc = subprocess.Popen(cmd)
    try:
        found = procfs.wait_for(lambda: len(producers(proc.pid)) == 2)
        assert found, "the two producers never appeared"
        time.sleep(0.3)  # measuring
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert procfs.stat(proc.pid) is None
    assert procfs.children(proc.pid) == []


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--design", "x"], "--design"),
        (["--design", "busy:1ms"], "--design"),
        (["--design", "sleep"], "--design"),
        (["--design", "sleep:0"], "--design"),
        (["--design", "sleep:100"], "--design"),  # no unit
        (["--design", "sleep:2s"], "--design"),
        (["--rate", "-1"], "--rate"),
        (["--rate", "1000001"], "--rate"),
        (["--producer-cpu", "0-1"], "--producer-cpu"),
        (["--producer-policy", "fifo:0"], "--producer-policy"),
    ],
)
def test_bad_values_exit_2_with_one_line(meter_run, run_probe, args, option):
    line, refusal = refused(meter_run, run_probe, "worker", args, ["--loops", "10"])
    assert option in line
    assert refusal["error"] == line.removeprefix("rtlab-probe worker: ")


def test_listed_with_its_options(run_probe):
    cp = run_probe("list", "--json")
    meters = {m["name"]: m for m in json.loads(cp.stdout)["meters"]}
    names = [o["name"] for o in meters["worker"]["options"]]
    assert names == ["design", "rate", "producer-cpu", "producer-policy"]


@pytest.mark.parametrize("design", ["futex", "sleep:10ms", "eventfd"])
def test_zero_hz_measures_the_idle_worker(worker, design):
    """--rate 0: no item, the run lasts its --duration; the worker's CPU use is reported."""
    cp, doc = worker("--design", design, "--rate", "0", "--duration", "500ms", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["stop_reason"] == "duration"
    assert doc["params"]["rate_hz"] == 0 and doc["params"]["interval_ns"] is None
    (t,) = doc["threads"]
    assert t["count"] == 0 and t["items"] == 0 and t["lost"] == 0
    assert t["wall_ns"] >= 500_000_000 and 0 <= t["cpu_ns"] <= t["wall_ns"]
    assert t["cpu_pct"] == pytest.approx(100 * t["cpu_ns"] / t["wall_ns"])


def test_one_hz_makes_one_item_a_second(worker):
    cp, doc = worker("--design", "futex", "--rate", "1", "--duration", "2500ms", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["interval_ns"] == 1_000_000_000
    (t,) = doc["threads"]
    check_items(t)
    assert t["items"] == 2  # at 1 s and 2 s, strictly before 2.5 s


def test_zero_hz_with_loops_is_refused(worker, run_probe):
    """--loops counts items made: at 0 Hz it would never be reached."""
    cp, doc = worker("--rate", "0", "--loops", "5")
    assert cp.returncode == 2 and doc is None
    line = one_line(cp)
    assert line.startswith("rtlab-probe worker: --rate 0") and "--duration" in line
    cp = run_probe("worker", "--rate", "0", "--loops", "5", "--check")
    assert cp.returncode == 2 and json.loads(cp.stdout)["option"] == "rate"
