"""The pipeline meter: record accounting, ring overruns, producer placement, cleanup, refusals.

Structure and behaviour only, never latency bounds: this runs on shared, noisy machines.
Where a test expects overruns or none, the numbers make it arithmetic, not timing.
"""

from __future__ import annotations

import functools
import json
import signal
import subprocess
import time

import pytest

from . import procfs
from .conftest import check_latencies, is_root, online_cpus, refused

PCTS = ["50", "90", "99", "99.9", "99.99"]
PRODUCER_COMM = "rtlab:producer"
SMALL = ["--rate", "2000", "--loops", "500", "--ring", "64"]
# A real-time consumer as root; elsewhere whatever the system allows.
POLICY = ["--policy", "fifo:50"] if is_root() else ["--policy", "other", "--allow-fallback"]
THREAD_KEYS = {"consumer", "ring", "max_fill", "records", "unread", "producer_late", "producer"}
THREAD_KEYS |= {"cpu_ns", "wall_ns", "cpu_pct"}
PARAM_KEYS = {"consumer", "period_ns", "ring", "rate_hz", "record_size", "processes", "work_ns"}


@pytest.fixture
def pipeline(meter_run):
    """Run `pipeline` with ARGS: (completed process, document or None)."""
    return functools.partial(meter_run, "pipeline")


def check_records(t: dict, records: int | None = None) -> None:
    """One consumer: every record produced was read, dropped (overruns) or left unread."""
    n = t["count"]
    assert t["records"] == n + t["overruns"] + t["unread"]
    if records is not None:  # --loops: all produced, and all read or dropped
        assert t["records"] == records and t["unread"] == 0
        assert n + t["overruns"] == records
    assert 0 <= t["max_fill"] <= t["ring"]
    if t["overruns"]:  # a record is dropped only when the ring is full
        assert t["max_fill"] == t["ring"]
    assert t["producer_late"] >= 0 and "producer_error" not in t
    assert set(t) >= THREAD_KEYS
    if not n:
        return
    check_latencies(t)
    assert t["raw_lost"] == 0


def proc_args(process: bool) -> list[str]:
    return ["--processes"] if process else []


@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
@pytest.mark.parametrize("consumer", ["periodic:1ms", "aperiodic"])
def test_small_scale(pipeline, consumer, process):
    cp, doc = pipeline("--consumer", consumer, *SMALL, *POLICY, *proc_args(process))
    assert cp.returncode == 0, cp.stderr
    assert doc["meter"] == "pipeline" and doc["complete"] is True
    assert doc["stop_reason"] == "loops"
    params = doc["params"]
    assert set(params) >= PARAM_KEYS
    kind = consumer.split(":")[0]
    assert params["consumer"] == kind and params["ring"] == 64 and params["rate_hz"] == 2000
    assert params["period_ns"] == (1_000_000 if kind == "periodic" else None)
    assert params["record_size"] == 64 and params["processes"] is process
    assert params["producer_cpu"] is None
    (t,) = doc["threads"]
    assert t["consumer"] == kind and t["ring"] == 64
    assert t["period_ns"] == 500_000  # one sample per record: the record interval
    check_records(t, records=500)  # --loops counts records produced
    assert t["count"] > 0
    prod = t["producer"]
    assert prod["process"] is process and prod["tid"] != t["tid"]
    assert prod["cpu"] is None  # unpinned consumer, unpinned producer
    assert prod["policy"] == t["policy"]  # what the consumer runs with


@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
def test_a_slow_consumer_overruns_the_ring(pipeline, process):
    # 5000 records/s, drained every 10 ms: 50 records arrive per period into 8 slots.
    args = ["--consumer", "periodic:10ms", "--ring", "8", "--rate", "5000", "--loops", "500"]
    cp, doc = pipeline(*args, *POLICY, *proc_args(process))
    assert cp.returncode == 0, cp.stderr
    (t,) = doc["threads"]
    check_records(t, records=500)
    assert t["overruns"] > 0 and t["max_fill"] == 8
    assert t["count"] < 500


def test_a_fast_consumer_does_not_overrun(pipeline):
    # 1000 records/s, drained every 1 ms: about one per period. 256 slots hold 256 ms of
    # records: only a consumer taking nothing for a quarter second (256 of its periods,
    # half this run) could overflow the ring.
    args = ["--consumer", "periodic:1ms", "--ring", "256", "--rate", "1000", "--loops", "500"]
    cp, doc = pipeline(*args, *POLICY)
    assert cp.returncode == 0, cp.stderr
    (t,) = doc["threads"]
    check_records(t, records=500)
    assert t["overruns"] == 0 and t["count"] == 500


def test_duration_counts_records_due_within_it(pipeline):
    cp, doc = pipeline("--consumer", "aperiodic", "--rate", "1000", "--duration", "300ms", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["stop_reason"] == "duration" and doc["complete"] is True
    (t,) = doc["threads"]
    check_records(t)
    assert t["records"] == 299 and t["unread"] == 0  # due at 1ms, 2ms, ... before 300ms


@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
def test_threads_have_their_own_producer(pipeline, tmp_path, process):
    raw = tmp_path / "samples.raw"
    args = ["--threads", "2", "--record-size", "4096", "--rate", "2000", "--loops", "200"]
    cp, doc = pipeline(*args, "--raw", str(raw), *POLICY, *proc_args(process))
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["record_size"] == 4096
    assert len(doc["threads"]) == 2
    assert len({t["producer"]["tid"] for t in doc["threads"]}) == 2
    for t in doc["threads"]:
        check_records(t, records=200)
        assert t["raw_samples"] == t["count"]


def test_producer_follows_or_leaves_the_consumer_cpu(pipeline):
    cpus = online_cpus()
    cp, doc = pipeline("--cpus", str(cpus[-1]), "--loops", "100", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["threads"][0]["producer"]["cpu"] == cpus[-1]
    cp, doc = pipeline("--cpus", str(cpus[-1]), "--producer-cpu", str(cpus[0]), "--loops", "100")
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["producer_cpu"] == cpus[0]
    assert doc["threads"][0]["producer"]["cpu"] == cpus[0]


def producers(pid: int) -> list[procfs.ProcStat]:
    """The probe's producer threads and producer child processes."""
    tasks = [t for t in procfs.threads(pid) if t.comm == PRODUCER_COMM]
    kids = [c for c in procfs.children(pid) if c.comm == PRODUCER_COMM and c.state != "Z"]
    return tasks + kids


def gone(pids: list[int]) -> bool:
    return all((s := procfs.stat(p)) is None or s.state in ("Z", "X") for p in pids)


@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
def test_nothing_survives_sigkill(probe, process):
    cpu = online_cpus()[0]
    cmd = [str(probe), "pipeline", "--consumer", "aperiodic", "--threads", "2"]
    cmd += ["--duration", "60s", "--producer-cpu", str(cpu), *POLICY, "--quiet"]
    proc = subprocess.Popen(cmd + proc_args(process))
    try:

        def both():
            found = producers(proc.pid)
            return found if len(found) == 2 else []

        found = procfs.wait_for(both)
        assert found, "the two producers never appeared"
        for p in found:
            if process:  # a child of the probe, in its process group, where it was put
                assert p.ppid == proc.pid and p.pgid == procfs.stat(proc.pid).pgid
                assert procfs.cpus_allowed(p.pid) == str(cpu)
            else:
                assert procfs.cpus_allowed(proc.pid, p.pid) == str(cpu)
        time.sleep(0.3)  # measuring
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert procfs.wait_for(lambda: gone([p.pid for p in found])), "a producer outlived the probe"


@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
def test_signal_stops_cleanly(probe, tmp_path, process):
    out = tmp_path / "r.json"
    cmd = [str(probe), "pipeline", "--consumer", "aperiodic", "--duration", "10m", *POLICY]
    proc = subprocess.Popen([*cmd, "--json", str(out), "--quiet", *proc_args(process)])
    time.sleep(0.8)
    kids = [c.pid for c in procfs.children(proc.pid)]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert gone(kids)
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "signal"
    (t,) = doc["threads"]
    check_records(t)  # read + dropped + unread == produced, also when stopped
    assert t["records"] > 0


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--consumer", "periodic"], "--consumer"),
        (["--consumer", "periodic:0"], "--consumer"),
        (["--consumer", "periodic:2s"], "--consumer"),
        (["--consumer", "periodic:fast"], "--consumer"),
        (["--consumer", "burst"], "--consumer"),
        (["--ring", "0"], "--ring"),
        (["--ring", "1048577"], "--ring"),
        (["--ring", "1048576", "--record-size", "512"], "--ring"),
        (["--rate", "0"], "--rate"),
        (["--rate", "1000001"], "--rate"),
        (["--record-size", "8"], "--record-size"),
        (["--record-size", "100"], "--record-size"),
        (["--producer-cpu", "0-1"], "--producer-cpu"),
        (["--work", "2s"], "--work"),
        (["--work", "-1us"], "--work"),
        (["--work", "5"], "--work"),  # no unit
    ],
)
def test_bad_values_exit_2_with_one_line(meter_run, run_probe, args, option):
    line, refusal = refused(meter_run, run_probe, "pipeline", args, ["--loops", "10"])
    assert option in line
    assert refusal["error"] == line.removeprefix("rtlab-probe pipeline: ")
    assert refusal["option"] == option.removeprefix("--")


def test_listed_with_its_options(run_probe):
    cp = run_probe("list", "--json")
    meters = {m["name"]: m for m in json.loads(cp.stdout)["meters"]}
    names = [o["name"] for o in meters["pipeline"]["options"]]
    assert names == ["consumer", "ring", "rate", "record-size", "processes", "producer-cpu", "work"]


def consumer_share(t: dict) -> float:
    """The consumer's CPU share as the document states it, checked against its parts."""
    assert 0 <= t["cpu_ns"] <= t["wall_ns"] + 1_000_000  # one thread: no more than its time
    assert t["cpu_pct"] == pytest.approx(100 * t["cpu_ns"] / t["wall_ns"])
    return t["cpu_pct"]


@pytest.mark.parametrize("consumer", ["periodic:1ms", "aperiodic"])
def test_work_raises_the_consumers_cpu_share(pipeline, consumer):
    """--work keeps the consumer busy per record: 500 records of 1 ms of work at 500/s
    is half of its time busy; without work it mostly sleeps. Its CPU time must grow."""
    shares = {}
    for work in ("0", "1ms"):
        cp, doc = pipeline("--consumer", consumer, "--rate", "500", "--loops", "500",
                           "--ring", "1024", "--work", work, *POLICY)  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        (t,) = doc["threads"]
        check_records(t, records=500)
        assert doc["params"]["work_ns"] == (0 if work == "0" else 1_000_000)
        shares[work] = (consumer_share(t), t["cpu_ns"])
    assert shares["1ms"][1] > shares["0"][1]
    assert shares["1ms"][0] > shares["0"][0]
