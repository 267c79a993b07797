"""The wakeup meter: document structure and invariants, policies really applied."""

from __future__ import annotations

import itertools
import json
import os
import platform
import pty
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from . import procfs
from .conftest import is_root, online_cpus

PCTS = ["50", "90", "99", "99.9", "99.99"]
SCHED_OTHER, SCHED_FIFO, SCHED_RR, SCHED_DEADLINE = 0, 1, 2, 6
needs_root = pytest.mark.skipif(not is_root(), reason="needs root for real-time policies")


def check_thread(t: dict, loops: int | None = None) -> None:
    n = t["count"]
    if loops is not None:
        assert n == loops
    assert n > 0
    p = t["percentiles_ns"]
    ordered = [t["min_ns"], *[p[k] for k in PCTS], t["max_ns"]]
    assert ordered == sorted(ordered)
    assert t["min_ns"] <= t["mean_ns"] <= t["max_ns"]
    assert t["stddev_ns"] >= 0
    buckets = t["histogram"]["buckets"]
    assert t["histogram"]["unit"] == "ns"
    assert sum(b[2] for b in buckets) + t["histogram"]["overflow"] == n
    assert all(lo <= hi for lo, hi, _ in buckets)
    assert all(a[1] < b[0] for a, b in itertools.pairwise(buckets))
    assert buckets[0][0] <= t["min_ns"] <= buckets[0][1]
    assert buckets[-1][0] <= t["max_ns"] <= buckets[-1][1]
    worst = t["worst"]
    assert 1 <= len(worst) <= 16 and len(worst) == min(16, n)
    assert worst[0]["latency_ns"] == t["max_ns"]
    assert [w["latency_ns"] for w in worst] == sorted(
        (w["latency_ns"] for w in worst), reverse=True
    )
    assert all(0 <= w["cycle"] < n and w["t_ns"] >= 0 for w in worst)
    s = t["series"]
    assert s["period_ns"] == 1_000_000_000
    assert sum(s["count"]) == n
    assert len(s["min_ns"]) == len(s["max_ns"]) == len(s["mean_ns"]) == len(s["count"])
    for lo, mean, hi, c in zip(s["min_ns"], s["mean_ns"], s["max_ns"], s["count"], strict=True):
        if c:
            assert t["min_ns"] <= lo <= mean <= hi <= t["max_ns"]
        else:
            assert lo is None and hi is None
    assert t["overruns"] >= 0 and t["raw_lost"] == 0


@needs_root
def test_document_structure_per_cpu(wakeup):
    cpus = online_cpus()
    cp, doc = wakeup("--cpus", ",".join(map(str, cpus)), "--loops", "300", "--policy", "fifo:50")
    assert cp.returncode == 0, cp.stderr
    assert doc["schema"] == 8 and doc["tool"] == "rtlab-probe" and doc["meter"] == "wakeup"
    assert doc["complete"] is True and doc["stop_reason"] == "loops"
    assert doc["argv"][1:3] == ["wakeup", "--cpus"]
    assert doc["start_utc"].endswith("Z") and doc["start_utc"] <= doc["end_utc"]
    assert doc["host"]["cpus_online"] == len(cpus)
    assert doc["host"]["realtime"] in (0, 1)
    assert set(doc["host"]["uname"]) >= {"sysname", "release", "version", "machine"}
    params = doc["params"]
    assert params["interval_ns"] == 1_000_000 and params["loops"] == 300
    assert params["policy"] == "fifo:50" and params["loads"] == []
    assert doc["mlocked"] is True
    assert [t["cpu"] for t in doc["threads"]] == cpus
    assert len({t["tid"] for t in doc["threads"]}) == len(cpus)
    for t in doc["threads"]:
        assert t["policy"] == {"name": "fifo", "priority": 50, "nice": 0}
        check_thread(t, loops=300)


def test_unpinned_threads_and_distance(wakeup):
    cp, doc = wakeup(
        "--threads",
        "2",
        "--interval",
        "500us",
        "--distance",
        "250us",
        "--loops",
        "100",
        "--allow-fallback",
    )
    assert cp.returncode == 0, cp.stderr
    assert [t["cpu"] for t in doc["threads"]] == [None, None]
    assert [t["period_ns"] for t in doc["threads"]] == [500_000, 750_000]
    for t in doc["threads"]:
        check_thread(t, loops=100)


@needs_root
def test_policy_is_really_applied(probe, tmp_path):
    """While it runs, the kernel reports the measuring threads as SCHED_FIFO 42."""
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [
            str(probe),
            "wakeup",
            "--threads",
            "2",
            "--policy",
            "fifo:42",
            "--duration",
            "20s",
            "--main-cpus",
            "0",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    try:

        def fifo_threads() -> list[procfs.ProcStat]:
            found = [t for t in procfs.threads(proc.pid) if t.policy == SCHED_FIFO]
            return found if len(found) >= 2 else []  # both measuring threads set up

        rt = procfs.wait_for(fifo_threads)
        assert len(rt) == 2 and all(t.rt_priority == 42 for t in rt)
        main = procfs.stat(proc.pid)
        assert main.policy == SCHED_OTHER
        assert procfs.wait_for(lambda: procfs.cpus_allowed(proc.pid) == "0")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    doc = json.loads(out.read_text())
    assert {t["tid"] for t in doc["threads"]} == {t.pid for t in rt}


@needs_root
@pytest.mark.parametrize(
    ("spec", "name", "prio", "nice"),
    [
        ("rr:10", "rr", 10, 0),
        ("other:5", "other", 0, 5),
        ("other:-20", "other", 0, -20),
        ("fifo:99", "fifo", 99, 0),
    ],
)
def test_policies_read_back(wakeup, spec, name, prio, nice):
    cp, doc = wakeup("--policy", spec, "--loops", "50")
    assert cp.returncode == 0, cp.stderr
    assert doc["threads"][0]["policy"] == {"name": name, "priority": prio, "nice": nice}
    assert doc["threads"][0]["policy_fallback"] is False


@needs_root
def test_deadline_policy(wakeup):
    cp, doc = wakeup("--policy", "deadline:200us/1ms/1ms", "--loops", "50")
    if cp.returncode == 3:
        pytest.skip(f"SCHED_DEADLINE refused here: {cp.stderr.strip()}")
    assert cp.returncode == 0, cp.stderr
    pol = doc["threads"][0]["policy"]
    assert pol["name"] == "deadline"
    assert (pol["runtime_ns"], pol["deadline_ns"], pol["period_ns"]) == (
        200_000,
        1_000_000,
        1_000_000,
    )
    check_thread(doc["threads"][0], loops=50)


@needs_root
def test_deadline_pinned_is_refused_with_a_reason(wakeup):
    cp, doc = wakeup("--policy", "deadline:200us/1ms/1ms", "--cpus", "0", "--loops", "20")
    if cp.returncode == 0:
        pytest.skip("this kernel accepts a pinned SCHED_DEADLINE thread")
    assert cp.returncode == 3
    assert len(cp.stderr.strip().splitlines()) == 1 and "deadline" in cp.stderr.lower()
    assert doc is None


@pytest.fixture
def shared_dir():
    """A directory the unprivileged user can write (pytest's tmp_path is private to root)."""
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="rtlab-test-")
    os.chmod(path, 0o777)
    yield Path(path)
    shutil.rmtree(path)


def as_nobody(cmd: list[str]) -> list[str]:
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", *cmd]


@needs_root
def test_refused_policy_exits_3_without_fallback(probe, shared_dir):
    out = shared_dir / "r.json"
    cp = subprocess.run(
        as_nobody(
            [
                str(probe),
                "wakeup",
                "--policy",
                "fifo:80",
                "--loops",
                "10",
                "--no-mlock",
                "--json",
                str(out),
            ]
        ),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert cp.returncode == 3, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1 and "--policy" in cp.stderr
    assert not out.exists()


@needs_root
def test_fallback_records_the_policy_really_used(probe, shared_dir):
    out = shared_dir / "r.json"
    cp = subprocess.run(
        as_nobody(
            [
                str(probe),
                "wakeup",
                "--policy",
                "fifo:80",
                "--loops",
                "20",
                "--allow-fallback",
                "--json",
                str(out),
                "--quiet",
            ]
        ),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(out.read_text())
    t = doc["threads"][0]
    assert doc["params"]["policy"] == "fifo:80"
    assert t["policy_fallback"] is True and t["policy"]["name"] == "other"
    assert t["policy_fallback_reason"]
    check_thread(t, loops=20)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_stops_cleanly_with_incomplete_document(probe, tmp_path, sig):
    out = tmp_path / "r.json"
    proc = subprocess.Popen(
        [
            str(probe),
            "wakeup",
            "--duration",
            "10m",
            "--allow-fallback",
            "--json",
            str(out),
            "--quiet",
        ]
    )
    time.sleep(1.0)
    proc.send_signal(sig)
    assert proc.wait(timeout=10) == 0
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "signal"
    assert doc["signal"] == signal.Signals(sig).name
    check_thread(doc["threads"][0])
    assert not list(tmp_path.glob("*.tmp.*"))


def test_deadline_exit_codes(wakeup):
    cp, doc = wakeup("--loops", "20", "--deadline", "1ns", "--allow-fallback")
    assert cp.returncode == 1 and doc["deadline_exceeded"] is True
    assert doc["params"]["deadline_ns"] == 1
    cp, doc = wakeup("--loops", "20", "--deadline", "1h", "--allow-fallback")
    assert cp.returncode == 0 and doc["deadline_exceeded"] is False


def test_json_to_stdout_and_escaping(run_probe, tmp_path):
    cp = run_probe("wakeup", "--loops", "10", "--allow-fallback", "--json", "-")
    assert cp.returncode == 0
    assert json.loads(cp.stdout)["threads"][0]["count"] == 10
    weird = tmp_path / 'd\u00e9j\u00e0 "q" \\ \x01.json'
    cp = run_probe("wakeup", "--loops", "5", "--allow-fallback", "--quiet", "--json", str(weird))
    assert cp.returncode == 0, cp.stderr
    assert json.loads(weird.read_text())["argv"][-1] == str(weird)


def read_raw(path):
    data = path.read_bytes()
    magic, version, hdr, index, cpu, interval, size = struct.unpack_from("<8sIIiiqI", data)
    samples = struct.unpack_from(f"<{(len(data) - hdr) // 8}q", data, hdr)
    return (magic, version, hdr, index, cpu, interval, size), samples


@needs_root
def test_raw_capture_matches_document(wakeup, tmp_path):
    raw = tmp_path / "samples.raw"
    cp, doc = wakeup(
        "--cpus",
        "0-1" if len(online_cpus()) > 1 else "0",
        "--loops",
        "500",
        "--interval",
        "200us",
        "--raw",
        str(raw),
    )
    assert cp.returncode == 0, cp.stderr
    for t in doc["threads"]:
        path = raw if len(doc["threads"]) == 1 else tmp_path / f"samples.raw.{t['index']}"
        assert t["raw_file"] == str(path) and t["raw_samples"] == 500 and t["raw_lost"] == 0
        head, samples = read_raw(path)
        assert head == (b"RTLABRAW", 1, 64, t["index"], t["cpu"], 200_000, 8)
        assert len(samples) == t["count"] == 500
        assert min(samples) == t["min_ns"] and max(samples) == t["max_ns"]
        assert sum(samples) / len(samples) == pytest.approx(t["mean_ns"])
        assert sorted(samples, reverse=True)[:16] == [w["latency_ns"] for w in t["worst"]]
        for w in t["worst"]:
            assert samples[w["cycle"]] == w["latency_ns"]


def test_no_mlock_and_quiet(run_probe, tmp_path):
    out = tmp_path / "r.json"
    cp = run_probe(
        "wakeup", "--loops", "10", "--no-mlock", "--allow-fallback", "--quiet", "--json", str(out)
    )
    assert cp.returncode == 0 and cp.stdout == "" and cp.stderr == ""
    doc = json.loads(out.read_text())
    assert doc["mlocked"] is False and doc["params"]["mlock"] is False


def test_summary_without_json(run_probe):
    cp = run_probe("wakeup", "--loops", "10", "--allow-fallback")
    assert cp.returncode == 0
    assert "10 cycles" in cp.stdout and "p99" in cp.stdout


def test_live_status_on_a_terminal(probe):
    """With a terminal on stderr, a status line per thread shows cycles and min/avg/max."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [str(probe), "wakeup", "--threads", "2", "--duration", "1500ms", "--allow-fallback"],
        stdout=subprocess.DEVNULL,
        stderr=follower,
    )
    os.close(follower)
    chunks = b""
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks += data
    proc.wait(timeout=10)
    os.close(leader)
    text = chunks.decode(errors="replace")
    assert proc.returncode == 0
    assert "T0" in text and "T1" in text and "cycles" in text and "max" in text


def test_progress_lines_are_json(run_probe, tmp_path):
    out = tmp_path / "r.json"
    cp = run_probe(
        "wakeup",
        "--loops",
        "1500",
        "--allow-fallback",
        "--quiet",
        "--progress",
        "-",
        "--json",
        str(out),
    )
    assert cp.returncode == 0, cp.stderr
    lines = [json.loads(line) for line in cp.stdout.splitlines()]
    assert lines[0]["phase"] == "start" and lines[-1]["phase"] == "done"
    assert lines[-1]["threads"][0]["count"] == 1500
    counts = [ln["threads"][0]["count"] for ln in lines]
    assert counts == sorted(counts)
    last = lines[-1]["threads"][0]
    assert last["min_ns"] <= last["mean_ns"] <= last["max_ns"]


def test_progress_lines_carry_cpu_misses_busy_and_final_p99(run_probe, tmp_path):
    cp = run_probe(
        "wakeup", "--loops", "1500", "--interval", "200us", "--cpus", "0", "--deadline", "1ns",
        "--policy", "other", "--quiet", "--progress", "-", "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert cp.returncode == 1, cp.stderr  # every wake-up is later than 1 ns
    lines = [json.loads(line) for line in cp.stdout.splitlines()]
    assert "cpu_busy_pct" not in lines[0]  # before measuring
    for ln in lines:
        (t,) = ln["threads"]
        assert t["cpu"] == 0 and 0 <= t["misses"] <= t["count"]
        assert ("p99_ns" in t) == (ln["phase"] == "done")
        if ln["phase"] in ("measure", "done"):
            assert set(ln["cpu_busy_pct"]) >= {"0"} and 0 <= ln["cpu_busy_pct_all"] <= 100
    done = lines[-1]["threads"][0]
    assert done["misses"] == done["count"] == 1500
    assert done["min_ns"] <= done["p99_ns"] <= done["max_ns"]


def test_check_validates_without_running(run_probe, tmp_path):
    out = tmp_path / "r.json"
    cp = run_probe("wakeup", "--check", "--loops", "100000", "--json", str(out))
    assert cp.returncode == 0 and cp.stdout == "" and cp.stderr == ""
    assert not out.exists()
    cp = run_probe("wakeup", "--check", "--interval", "0")
    assert cp.returncode == 2 and "--interval" in cp.stderr


def test_the_probe_says_which_hypervisor_it_runs_under(run_probe, tmp_path):
    """On x86 the CPU says it (CPUID): the same answer as /proc/cpuinfo's flag."""
    out = tmp_path / "w.json"
    run_probe("wakeup", "--loops", "5", "--policy", "other", "--no-mlock", "--json", str(out))
    virt = json.loads(out.read_text())["host"]["virtualization"]
    assert set(virt) == {"kind", "hypervisor", "signature", "source"}
    if platform.machine() in ("x86_64", "i686"):
        flagged = " hypervisor " in " " + Path("/proc/cpuinfo").read_text().replace("\n", " ")
        assert virt["source"] == ("cpuid" if flagged else "none")
        assert virt["kind"] == ("vm" if flagged else "none")
        assert bool(virt["hypervisor"]) == flagged
    else:
        assert virt["kind"] in ("vm", "none")
