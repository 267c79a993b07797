"""The response meter: every transport, event accounting, placement, cleanup, refusals.

Structure and behaviour only, never latency bounds: this runs on shared, noisy machines.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

from .._skips import need_tool
from . import procfs
from .conftest import check_latencies, is_root, online_cpus, refused

TRANSPORTS = ["pipe", "eventfd", "futex", "condvar", "signal", "mq", "unix", "semaphore"]
PCTS = ["50", "90", "99", "99.9", "99.99"]
SCHED_FIFO = 1
STIMULUS_COMM = "rtlab:stimulus"
needs_root = pytest.mark.skipif(not is_root(), reason="needs root for real-time policies")
# A real-time handler as root; elsewhere whatever the system allows.
POLICY = ["--policy", "fifo:50"] if is_root() else ["--policy", "other", "--allow-fallback"]


@pytest.fixture
def response(meter_run):
    """Run `response` with ARGS: (completed process, document or None)."""
    return functools.partial(meter_run, "response")


def check_events(t: dict, events: int | None = None) -> None:
    """Statistics of one handler thread; samples + lost events == events scheduled."""
    n = t["count"]
    assert n > 0
    assert t["events"] == n + t["lost"]
    if events is not None:
        assert t["events"] == events
    check_latencies(t)
    assert t["raw_lost"] == 0 and t["overruns"] >= 0
    s = t["stimulus"]
    assert s["tid"] > 0 and s["tid"] != t["tid"]
    assert "transport_error" not in t


@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_transport(response, transport, process):
    extra = ["--handler-process"] if process else []
    cp, doc = response(
        "--transport", transport, "--loops", "300", "--interval", "1ms", *POLICY, *extra
    )
    assert cp.returncode == 0, cp.stderr
    assert doc["meter"] == "response" and doc["complete"] is True
    assert doc["stop_reason"] == "loops"
    params = doc["params"]
    assert params["transport"] == transport and params["interval_ns"] == 1_000_000
    assert "interval_min_ns" not in params and isinstance(params["seed"], int)
    assert params["handler_process"] is process and params["stimulus_cpu"] is None
    assert params["stimulus_policy"] is None and params["gpio"] is None
    assert "max_rate_per_s" not in doc
    (t,) = doc["threads"]
    assert t["transport"] == transport and t["interval_ns"] == 1_000_000
    check_events(t, events=300)  # --loops counts events: samples + lost
    assert t["stimulus"]["process"] is process
    assert t["stimulus"]["policy"] == t["policy"]  # default: what the handler runs with
    assert t["stimulus"]["cpu"] is None  # unpinned handler, unpinned stimulus


def test_threads_have_their_own_stimulus(response):
    cp, doc = response("--transport", "futex", "--threads", "2", "--loops", "100", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert len(doc["threads"]) == 2
    assert len({t["stimulus"]["tid"] for t in doc["threads"]}) == 2
    for t in doc["threads"]:
        check_events(t, events=100)


def test_duration_counts_events_scheduled_within_it(response):
    cp, doc = response("--transport", "eventfd", "--duration", "300ms", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["stop_reason"] == "duration"
    (t,) = doc["threads"]
    check_events(t)
    assert t["events"] <= 299  # events at 1ms, 2ms, ... strictly before 300ms


@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
def test_random_intervals_are_reproducible_from_the_seed(response, process):
    extra = ["--handler-process"] if process else []
    common = ["--transport", "pipe", "--interval", "200us..2ms", "--loops", "150", *POLICY, *extra]
    cp, first = response(*common)
    assert cp.returncode == 0, cp.stderr
    params = first["params"]
    assert params["interval_min_ns"] == 200_000 and params["interval_max_ns"] == 2_000_000
    assert "interval_ns" not in params
    assert params["seed_given"] is False and 0 <= params["seed"] <= 0xFFFFFFFF
    t = first["threads"][0]
    assert t["interval_ns"] is None
    assert 200_000 <= t["interval_mean_ns"] <= 2_000_000
    check_events(t, events=150)

    cp, again = response(*common, "--seed", str(params["seed"]))
    assert cp.returncode == 0, cp.stderr
    assert again["params"]["seed"] == params["seed"] and again["params"]["seed_given"] is True
    # The same seed draws the same schedule, whatever the latencies were.
    assert again["threads"][0]["interval_mean_ns"] == t["interval_mean_ns"]

    other = params["seed"] ^ 1
    cp, third = response(*common, "--seed", str(other))
    assert cp.returncode == 0, cp.stderr
    assert third["params"]["seed"] == other
    assert third["threads"][0]["interval_mean_ns"] != t["interval_mean_ns"]


def stimulus_tasks(pid: int) -> list[procfs.ProcStat]:
    """The probe's stimulus threads and stimulus child processes."""
    tasks = [t for t in procfs.threads(pid) if t.comm == STIMULUS_COMM]
    kids = [c for c in procfs.children(pid) if c.comm == STIMULUS_COMM and c.state != "Z"]
    return tasks + kids


@needs_root
@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
def test_policies_and_cpus_are_really_applied(probe, tmp_path, process):
    """While it runs, /proc shows the handler at --policy and the stimulus at its own."""
    cpus = online_cpus()
    placement = ["--cpus", str(cpus[-1]), "--stimulus-cpu", str(cpus[0])]
    out = tmp_path / "r.json"
    cmd = [str(probe), "response", "--transport", "futex", "--policy", "fifo:42"]
    cmd += ["--stimulus-policy", "fifo:31", "--duration", "20s", *placement]
    cmd += ["--json", str(out), "--quiet"] + (["--handler-process"] if process else [])
    proc = subprocess.Popen(cmd)
    try:

        def ready():
            handler = [t for t in procfs.threads(proc.pid) if t.rt_priority == 42]
            stim = [s for s in stimulus_tasks(proc.pid) if s.rt_priority == 31]
            return (handler, stim) if handler and stim else None

        found = procfs.wait_for(ready)
        assert found, "no fifo:42 handler and fifo:31 stimulus"
        (handler,), (stim,) = found
        assert handler.policy == SCHED_FIFO and stim.policy == SCHED_FIFO
        assert procfs.cpus_allowed(proc.pid, handler.pid) == str(cpus[-1])
        if process:
            assert stim.ppid == proc.pid and procfs.cpus_allowed(stim.pid) == str(cpus[0])
        else:
            assert procfs.cpus_allowed(proc.pid, stim.pid) == str(cpus[0])
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    doc = json.loads(out.read_text())
    assert doc["params"]["stimulus_cpu"] == cpus[0]
    assert doc["params"]["stimulus_policy"] == "fifo:31"
    (t,) = doc["threads"]
    assert t["tid"] == handler.pid and t["cpu"] == cpus[-1]
    assert t["policy"] == {"name": "fifo", "priority": 42, "nice": 0}
    s = t["stimulus"]
    assert s["tid"] == stim.pid and s["cpu"] == cpus[0] and s["process"] is process
    assert s["policy"] == {"name": "fifo", "priority": 31, "nice": 0}
    assert s["policy_fallback"] is False


@needs_root
def test_stimulus_follows_the_handler_cpu(response):
    cpus = online_cpus()
    cp, doc = response(
        "--transport", "semaphore", "--cpus", ",".join(map(str, cpus)), "--loops", "100", *POLICY
    )
    assert cp.returncode == 0, cp.stderr
    assert [t["stimulus"]["cpu"] for t in doc["threads"]] == cpus
    for t in doc["threads"]:
        check_events(t, events=100)


def mqueue_names() -> list[str]:
    """Names in the mqueue file system (mounted privately for the look when needed)."""
    if os.path.ismount("/dev/mqueue"):
        return os.listdir("/dev/mqueue")
    if not is_root():
        pytest.skip("no /dev/mqueue mount, and mounting one privately needs root")
    need_tool("unshare")
    need_tool("mount")
    with tempfile.TemporaryDirectory() as mnt:
        cp = subprocess.run(
            [
                "unshare",
                "--mount",
                "--propagation",
                "private",
                "sh",
                "-c",
                'mount -t mqueue none "$0" && ls -A "$0"',
                mnt,
            ],
            capture_output=True,
            text=True,
            timeout=10,
        )
    if cp.returncode:
        pytest.skip(f"cannot mount an mqueue file system here: {cp.stderr.strip()}")
    return cp.stdout.split()


def gone(pids: list[int]) -> bool:
    return all((s := procfs.stat(p)) is None or s.state in ("Z", "X") for p in pids)


@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
def test_nothing_survives_sigkill(probe, process):
    before = [n for n in mqueue_names() if n.startswith("rtlab-response")]
    cmd = [str(probe), "response", "--transport", "mq", "--threads", "2", "--duration", "60s"]
    cmd += [*POLICY, "--quiet"] + (["--handler-process"] if process else [])
    proc = subprocess.Popen(cmd)
    try:

        def both():
            found = stimulus_tasks(proc.pid)
            return found if len(found) == 2 else []

        stim = procfs.wait_for(both)
        assert stim, "the two stimuli never appeared"
        time.sleep(0.3)  # measuring
        # The queue's name is unlinked as soon as it is open.
        assert [n for n in mqueue_names() if n.startswith("rtlab-response")] == before
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert procfs.wait_for(lambda: gone([s.pid for s in stim])), "a stimulus outlived the probe"
    assert [n for n in mqueue_names() if n.startswith("rtlab-response")] == before


@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
def test_signal_stops_cleanly(probe, tmp_path, process):
    out = tmp_path / "r.json"
    cmd = [str(probe), "response", "--transport", "signal", "--duration", "10m", *POLICY]
    cmd += ["--json", str(out), "--quiet"] + (["--handler-process"] if process else [])
    proc = subprocess.Popen(cmd)
    time.sleep(1.0)
    kids = [c.pid for c in procfs.children(proc.pid)]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert gone(kids)
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "signal"
    check_events(doc["threads"][0])


def test_raw_capture_has_every_sample(response, tmp_path):
    raw = tmp_path / "samples.raw"
    cp, doc = response("--transport", "unix", "--loops", "200", "--raw", str(raw), *POLICY)
    assert cp.returncode == 0, cp.stderr
    (t,) = doc["threads"]
    check_events(t, events=200)
    assert t["raw_samples"] == t["count"]
    assert (raw.stat().st_size - 64) // 8 == t["count"]


def test_find_max_rate(response):
    cp, doc = response(
        "--transport",
        "eventfd",
        "--find-max-rate",
        "--interval",
        "2ms",
        "--loops",
        "100",
        *POLICY,
    )
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["find_max_rate"] is True
    rate = doc["max_rate_per_s"]
    assert isinstance(rate, (int, float)) and rate > 0
    steps = doc["max_rate_steps"]
    assert steps and doc["max_rate_thread"] == 0
    rates = [s["rate_per_s"] for s in steps]
    assert rates == sorted(rates) and len(set(rates)) == len(rates)
    assert [s["interval_ns"] for s in steps] == [2_000_000 >> i for i in range(len(steps))]
    for s in steps:
        assert set(s) == {"interval_ns", "rate_per_s", "p99_ns", "lost", "count", "ok"}
        if s["ok"]:  # sustained: every event handled, p99 within the interval
            assert s["count"] == 100 and s["lost"] == 0 and s["p99_ns"] <= s["interval_ns"]
    assert all(s["ok"] for s in steps[:-1])  # the search stops at the first failing step
    best = [s for s in steps if s["ok"]][-1]
    assert rate == pytest.approx(best["rate_per_s"])
    assert not steps[-1]["ok"] or steps[-1]["interval_ns"] // 2 < 1000
    (t,) = doc["threads"]
    assert t["max_rate_per_s"] == rate and t["max_rate_steps"] == steps
    assert t["interval_ns"] == best["interval_ns"]  # the final measurement is at the best rate
    check_events(t, events=100)


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--interval", "0"], "--interval"),
        (["--interval", "0..1ms"], "--interval"),
        (["--interval", "2ms..1ms"], "--interval"),
        (["--interval", "1ms..2s"], "--interval"),
        (["--interval", "fast"], "--interval"),
        (["--transport", "smoke-signal"], "--transport"),
        (["--transport", "gpio"], "--gpio"),
        (["--transport", "gpio", "--gpio", "gpiochip0"], "--gpio"),
        (["--transport", "gpio", "--gpio", "gpiochip0:4,4"], "--gpio"),
        (["--transport", "gpio", "--gpio", "gpiochip0:4,x"], "--gpio"),
        (["--gpio", "gpiochip0:4,5"], "--gpio"),
        (["--find-max-rate", "--interval", "1ms..2ms"], "--find-max-rate"),
        (["--stimulus-cpu", "0-1"], "--stimulus-cpu"),
        (["--stimulus-policy", "fifo:0"], "--stimulus-policy"),
        (["--seed", "-1"], "--seed"),
    ],
)
def test_bad_values_exit_2_with_one_line(meter_run, run_probe, args, option):
    line, refusal = refused(meter_run, run_probe, "response", args, ["--loops", "10"])
    assert option in line
    assert refusal["error"] == line.removeprefix("rtlab-probe response: ")


def test_gpio_without_a_chip_exits_3(response, run_probe):
    chip = "/nonexistent/gpiochip7"
    cp, doc = response("--transport", "gpio", "--gpio", f"{chip}:17,27", "--loops", "10")
    assert cp.returncode == 3, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "no such chip" in lines[0] and chip in lines[0]
    assert doc is None
    cp = run_probe("response", "--transport", "gpio", "--gpio", f"{chip}:17,27", "--check")
    assert cp.returncode == 3 and json.loads(cp.stdout)["option"] == "gpio"


@pytest.mark.skipif(bool(glob.glob("/dev/gpiochip*")), reason="this machine has a GPIO chip")
def test_gpio_chip_by_name_or_number_exits_3_here(response):
    for spec in ("gpiochip0:17,27", "0:17,27"):
        cp, _ = response("--transport", "gpio", "--gpio", spec, "--loops", "10")
        assert cp.returncode == 3 and "no such chip /dev/gpiochip0" in cp.stderr


def test_listed_with_its_options(run_probe):
    cp = run_probe("list", "--json")
    meters = {m["name"]: m for m in json.loads(cp.stdout)["meters"]}
    names = [o["name"] for o in meters["response"]["options"]]
    assert names == [
        "transport",
        "interval",
        "seed",
        "stimulus-cpu",
        "stimulus-policy",
        "handler-process",
        "find-max-rate",
        "gpio",
    ]


def as_nobody(cmd: list[str]) -> list[str]:
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", *cmd]


@needs_root
@pytest.mark.parametrize("transport", ["signal", "mq", "condvar"])
def test_unprivileged_handler_process(probe, transport):
    """Across two processes without privileges: the signal's permission, the queue's limit."""
    cmd = [str(probe), "response", "--transport", transport, "--handler-process", "--loops", "50"]
    cmd += ["--policy", "other", "--no-mlock", "--quiet", "--json", "-"]
    cp = subprocess.run(as_nobody(cmd), capture_output=True, text=True, timeout=30)
    assert cp.returncode == 0, cp.stderr
    (t,) = json.loads(cp.stdout)["threads"]
    check_events(t, events=50)
    assert t["stimulus"]["policy"]["name"] == "other"


@needs_root
@pytest.mark.parametrize("process", [False, True], ids=["threads", "process"])
def test_refused_stimulus_policy_exits_3(probe, process):
    cmd = [str(probe), "response", "--policy", "other", "--stimulus-policy", "fifo:10"]
    cmd += ["--loops", "20", "--no-mlock", "--json", "-"]
    cmd += ["--handler-process"] if process else []
    cp = subprocess.run(as_nobody(cmd), capture_output=True, text=True, timeout=30)
    assert cp.returncode == 3, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rtlab-probe response: --stimulus-policy: ")
    assert cp.stdout == ""
