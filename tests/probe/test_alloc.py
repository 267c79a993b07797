"""The alloc meter: per-size document, counts, the tuned allocator's faults, refusals.

Behaviour and structure are asserted, never latency bounds: the test machine may be a
noisy VM. Runs are small (--loops 200 per size at most) and at SCHED_OTHER, but for
the one test of a real-time policy: the CPUs are shared.
"""

from __future__ import annotations

import functools
import json
import resource
import signal
import struct
import subprocess
import time
from pathlib import Path

import pytest

from . import procfs
from .conftest import is_root, one_line, online_cpus, refused
from .loadproc import start_load, stop, wait_gone
from .test_wakeup import check_thread

DEFAULT_SIZES = [16, 256, 4096, 65536, 262144, 1 << 20, 4 << 20]
SIZES = "16,4K,256K,4M"
SIZE_BYTES = [16, 4096, 262144, 4 << 20]
POLICY = ["--policy", "other"]
SLACK = 4096  # per block held, in the prefault's sizing
needs_root = pytest.mark.skipif(not is_root(), reason="needs root for real-time policies")


@pytest.fixture
def alloc(meter_run):
    """Run `alloc` with ARGS: (completed process, document or None)."""
    return functools.partial(meter_run, "alloc")


def ordered(s: dict) -> None:
    assert s["min_ns"] <= s["p50_ns"] <= s["p99_ns"] <= s["max_ns"], s
    assert s["min_ns"] <= s["mean_ns"] <= s["max_ns"], s


def check_size(z: dict, mallocs: int | None) -> None:
    m, f = z["malloc"], z["free"]
    if mallocs is not None:
        assert m["count"] == mallocs
    assert z["failed"] == 0
    assert f["count"] == m["count"] - z["failed"]  # every block is freed
    assert z["count"] == m["count"] + f["count"]
    for s in (z, m, f):
        if s["count"]:
            ordered(s)
    if m["count"] and f["count"]:
        assert z["min_ns"] == min(m["min_ns"], f["min_ns"])
        assert z["max_ns"] == max(m["max_ns"], f["max_ns"])
        assert z["mean_ns"] * z["count"] == pytest.approx(
            m["mean_ns"] * m["count"] + f["mean_ns"] * f["count"]
        )
    assert set(z["faults"]) == {"minor", "major"}
    assert z["faults"]["minor"] >= 0 and z["faults"]["major"] >= 0


def check_alloc(
    doc: dict, pattern: str, sizes: list[int], tuned: bool, mallocs: int | None = None
) -> None:
    """MALLOCS: per size (pairs, batch), or in all over the sizes (random)."""
    assert doc["meter"] == "alloc" and doc["schema"] == 8
    p = doc["params"]
    assert p["sizes"] == sizes and p["pattern"] == pattern and p["tuned"] is tuned
    assert p["clock"] == "CLOCK_MONOTONIC"
    assert (p["seed"] is None) == (pattern != "random")
    assert (p["batch"] is None) == (pattern == "pairs")
    assert (p["prefault_bytes"] is None) == (not tuned)
    for t in doc["threads"]:
        assert t["pattern"] == pattern and t["tuned"] is tuned
        zs = t["sizes"]
        assert [z["size_bytes"] for z in zs] == sizes
        per_size = mallocs if pattern != "random" else None
        for z in zs:
            check_size(z, per_size)
        if pattern == "random" and mallocs is not None:
            assert sum(z["malloc"]["count"] for z in zs) == mallocs
        check_thread(t, loops=sum(z["count"] for z in zs))  # every call is a sample
        measured = [z for z in zs if z["count"]]
        assert t["min_ns"] == min(z["min_ns"] for z in measured)
        assert t["max_ns"] == max(z["max_ns"] for z in measured)
        for kind in ("minor", "major"):
            assert t["faults"][kind] == sum(z["faults"][kind] for z in zs)
        assert t["period_ns"] == 1000 and t["overruns"] == 0


def malloc_counts(doc: dict) -> list[list[int]]:
    return [[z["malloc"]["count"] for z in t["sizes"]] for t in doc["threads"]]


def test_pairs_default_sizes(alloc):
    cp, doc = alloc("--loops", "200", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""
    assert doc["complete"] is True and doc["stop_reason"] == "loops"
    check_alloc(doc, "pairs", DEFAULT_SIZES, False, mallocs=200)
    (t,) = doc["threads"]
    assert t["count"] == 2 * 200 * len(DEFAULT_SIZES)
    p = doc["params"]
    assert p["loops"] == 200 and p["mallopt"] is None and p["libc"].startswith("glibc ")


def test_batch_counts(alloc):
    cp, doc = alloc(
        "--sizes", SIZES, "--pattern", "batch", "--batch", "4", "--loops", "50", *POLICY
    )
    assert cp.returncode == 0, cp.stderr
    check_alloc(doc, "batch", SIZE_BYTES, False, mallocs=4 * 50)
    assert doc["params"]["batch"] == 4


def test_size_units(alloc):
    cp, doc = alloc("--sizes", "1K,2KiB,3M,100", "--loops", "5", *POLICY)
    assert cp.returncode == 0, cp.stderr
    check_alloc(doc, "pairs", [1024, 2048, 3 << 20, 100], False, mallocs=5)


def test_random_records_and_reproduces_its_seed(alloc):
    args = ["--sizes", SIZES, "--pattern", "random", "--loops", "200", *POLICY]
    cp, doc = alloc(*args)
    assert cp.returncode == 0, cp.stderr
    check_alloc(doc, "random", SIZE_BYTES, False, mallocs=200 * len(SIZE_BYTES))
    seed = doc["params"]["seed"]
    assert isinstance(seed, int) and seed >= 0
    assert doc["params"]["batch"] == 8  # slots held at once
    counts = malloc_counts(doc)
    cp, again = alloc(*args, "--seed", str(seed))
    assert cp.returncode == 0, cp.stderr
    assert again["params"]["seed"] == seed
    assert malloc_counts(again) == counts
    cp, other = alloc(*args, "--seed", str(seed + 1))
    assert cp.returncode == 0, cp.stderr
    check_alloc(other, "random", SIZE_BYTES, False, mallocs=200 * len(SIZE_BYTES))


def test_random_threads_draw_their_own_sequences(alloc):
    cp, doc = alloc(
        "--sizes", SIZES, "--pattern", "random", "--seed", "7", "--threads", "2", "--loops", "200",
        *POLICY,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    check_alloc(doc, "random", SIZE_BYTES, False, mallocs=200 * len(SIZE_BYTES))
    one, two = malloc_counts(doc)
    assert one != two


def tuned_run(alloc, *args: str):
    cp, doc = alloc("--tuned", *args, *POLICY)
    if cp.returncode == 3 and not is_root():
        pytest.skip(f"cannot lock the heap here: {cp.stderr.strip()}")
    assert cp.returncode == 0, cp.stderr
    assert doc["mlocked"] is True  # the zero below is the locked heap's
    return doc


@pytest.mark.parametrize("pattern", ["pairs", "batch", "random"])
def test_tuned_allocator_takes_no_faults(alloc, pattern):
    """mallopt M_MMAP_MAX=0, no trim, one arena and a prefaulted locked heap: after the
    warm-up no malloc or free of any size touches a page that is not there."""
    extra = [] if pattern == "pairs" else ["--pattern", pattern]
    doc = tuned_run(alloc, "--loops", "200", *extra)
    mallocs = {"pairs": 200, "batch": 8 * 200, "random": 200 * len(DEFAULT_SIZES)}[pattern]
    check_alloc(doc, pattern, DEFAULT_SIZES, True, mallocs=mallocs)
    p = doc["params"]
    assert p["mallopt"] == {"M_MMAP_MAX": 0, "M_TRIM_THRESHOLD": -1, "M_ARENA_MAX": 1}
    blocks = 1 if pattern == "pairs" else 8
    assert p["prefault_bytes"] == 2 * blocks * ((4 << 20) + SLACK)  # (threads + 1) shares
    (t,) = doc["threads"]
    assert t["faults"] == {"minor": 0, "major": 0}
    assert all(z["faults"] == {"minor": 0, "major": 0} for z in t["sizes"])


def test_tuned_threads_share_one_prefaulted_heap(alloc):
    doc = tuned_run(
        alloc, "--sizes", SIZES, "--pattern", "batch", "--batch", "4", "--threads", "2",
        "--loops", "100",
    )  # fmt: skip
    check_alloc(doc, "batch", SIZE_BYTES, True, mallocs=400)
    assert doc["params"]["prefault_bytes"] == 3 * 4 * ((4 << 20) + SLACK)
    assert [t["faults"] for t in doc["threads"]] == [{"minor": 0, "major": 0}] * 2


def test_default_allocator_faults_above_the_mmap_threshold(alloc):
    """4 MiB is above glibc's initial mmap threshold: with its defaults the blocks come
    from new mappings or a growing heap, which fault; tuned, they never do."""
    args = ["--sizes", "4M", "--loops", "200"]
    cp, doc = alloc(*args, *POLICY)
    assert cp.returncode == 0, cp.stderr
    check_alloc(doc, "pairs", [4 << 20], False, mallocs=200)
    (z,) = doc["threads"][0]["sizes"]
    assert z["faults"]["minor"] > 0
    tuned = tuned_run(alloc, *args)
    (z,) = tuned["threads"][0]["sizes"]
    assert z["faults"]["minor"] == 0


def test_duration_is_split_over_the_sizes(alloc):
    cp, doc = alloc("--sizes", "16,64K", "--duration", "200ms", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["stop_reason"] == "duration" and doc["params"]["duration_ns"] == 200_000_000
    check_alloc(doc, "pairs", [16, 65536], False)
    assert all(z["malloc"]["count"] > 0 for z in doc["threads"][0]["sizes"])


def test_signal_ends_an_open_run_after_whole_cycles(probe, tmp_path):
    """Without --loops or --duration the sizes go round until a signal; every block taken
    is freed and recorded."""
    out = tmp_path / "r.json"
    args = ["alloc", "--sizes", "16,1M", "--pattern", "batch", "--batch", "4", "--json", str(out)]
    proc = subprocess.Popen(
        [str(probe), *args, "--quiet", *POLICY], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        time.sleep(0.5)
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        stop(proc)
    assert proc.returncode == 0, err
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "signal"
    assert doc["signal"] == "SIGINT"
    check_alloc(doc, "batch", [16, 1 << 20], False)
    z16 = doc["threads"][0]["sizes"][0]
    assert z16["malloc"]["count"] > 0 and z16["malloc"]["count"] % 4 == 0


def read_raw(path: Path) -> list[int]:
    data = path.read_bytes()
    assert data[:8] == b"RTLABRAW"
    (header,) = struct.unpack_from("<I", data, 12)
    return list(struct.unpack_from(f"<{(len(data) - header) // 8}q", data, header))


def test_raw_file_holds_every_call(alloc, tmp_path):
    raw = tmp_path / "calls.raw"
    cp, doc = alloc("--sizes", "16,64K", "--loops", "50", "--raw", str(raw), *POLICY)
    assert cp.returncode == 0, cp.stderr
    (t,) = doc["threads"]
    samples = read_raw(raw)
    assert t["raw_lost"] == 0 and t["raw_samples"] == len(samples) == t["count"] == 200
    assert max(samples) == t["max_ns"] and min(samples) == t["min_ns"]
    zs = t["sizes"]
    assert max(samples[:100]) == zs[0]["max_ns"] and max(samples[100:]) == zs[1]["max_ns"]
    assert max(samples[0:100:2]) == zs[0]["malloc"]["max_ns"]  # pairs: malloc, free, ...
    assert max(samples[1:100:2]) == zs[0]["free"]["max_ns"]


def test_deadline_exit_code(alloc):
    cp, doc = alloc("--sizes", "16,4M", "--loops", "20", "--deadline", "1ns", *POLICY)
    assert cp.returncode == 1, cp.stderr
    assert doc["deadline_exceeded"] is True
    check_alloc(doc, "pairs", [16, 4 << 20], False, mallocs=20)


@needs_root
def test_pinned_threads_at_a_real_time_policy(alloc):
    cpus = online_cpus()
    cp, doc = alloc(
        "--cpus", ",".join(map(str, cpus)), "--policy", "fifo:50", "--sizes", "16,64K",
        "--loops", "100",
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    assert [t["cpu"] for t in doc["threads"]] == cpus
    for t in doc["threads"]:
        assert t["policy"] == {"name": "fifo", "priority": 50, "nice": 0}
    check_alloc(doc, "pairs", [16, 65536], False, mallocs=100)


BAD = [
    (["--sizes", "0"], "sizes", "out of range"),
    (["--sizes", "512M"], "sizes", "out of range"),
    (["--sizes", "16,,4K"], "sizes", "empty size"),
    (["--sizes", "16,"], "sizes", "empty size"),
    (["--sizes", "4K,4096"], "sizes", "repeats"),
    (["--sizes", "1X"], "sizes", "unit"),
    (["--sizes", ",".join(str(16 * (i + 1)) for i in range(17))], "sizes", "at most 16"),
    (["--pattern", "lifo"], "pattern", "must be one of pairs, batch, random; not 'lifo'"),
    (["--batch", "0", "--pattern", "batch"], "batch", "out of range"),
    (["--batch", "4"], "batch", "--pattern batch and random only"),
    (["--seed", "1"], "seed", "--pattern random only"),
    (["--seed", "-1", "--pattern", "random"], "seed", "out of range"),
    (["--pattern", "batch", "--batch", "4096"], "batch", "held at once"),
    (["--tuned", "--pattern", "batch", "--batch", "200", "--threads", "2"], "tuned", "prefault"),
    (["--tuned=yes"], "tuned", "takes no value"),
]


@pytest.mark.parametrize(("args", "option", "text"), BAD)
def test_bad_values_exit_2(meter_run, run_probe, args, option, text):
    line, fault = refused(meter_run, run_probe, "alloc", args, ["--loops", "5", *POLICY])
    assert line.startswith("rtlab-probe alloc: ") and text in line, line
    assert fault["option"] == option


def test_check_accepts_and_measures_nothing(run_probe, tmp_path):
    out = tmp_path / "r.json"
    args = ["--check", "--tuned", "--pattern", "random", "--seed", "3", "--threads", "2"]
    cp = run_probe("alloc", *args, "--sizes", "16,1M", "--json", str(out))
    assert cp.returncode == 0 and cp.stdout == "" and cp.stderr == ""
    assert list(tmp_path.iterdir()) == []


AS_LIMIT = 160 << 20  # bytes of address space: the probe runs, 48 blocks of 4M do not fit


def limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


@pytest.mark.parametrize(("extra", "text"), [(["--tuned"], "--tuned: cannot prefault"),
                                              ([], "for the blocks held at once")])  # fmt: skip
def test_memory_the_system_refuses_exits_3(probe, tmp_path, extra, text):
    """What one thread holds at once (or, tuned, the heap to prefault) is tried before
    measuring: a refusal is exit 3 with the reason, not failed mallocs."""
    out = tmp_path / "r.json"
    args = ["alloc", "--sizes", "16,4M", "--pattern", "batch", "--batch", "48", *extra]
    cp = subprocess.run(
        [str(probe), *args, "--loops", "5", *POLICY, "--json", str(out), "--quiet"],
        capture_output=True, text=True, timeout=60, preexec_fn=limit_address_space,
    )  # fmt: skip
    if cp.returncode < 0:
        pytest.skip(f"the probe cannot start within {AS_LIMIT >> 20} MiB of address space")
    assert cp.returncode == 3, cp.stderr
    assert text in one_line(cp)
    assert not out.exists()


def test_nothing_survives_sigkill(probe, tmp_path):
    cpu = online_cpus()[-1]
    out = tmp_path / "r.json"
    args = ["alloc", "--pattern", "batch", "--tuned", *POLICY, "--load", f"spin:5%@{cpu}"]
    args += ["--settle", "100ms", "--json", str(out), "--quiet"]
    proc, pgid = start_load(probe, args, tmp_path, 1)
    try:
        # measuring: the main and the measuring thread (however loaded this machine is)
        assert procfs.wait_for(lambda: len(procfs.threads(proc.pid)) >= 2 or proc.poll())
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert wait_gone(pgid) == []
    finally:
        stop(proc)
    assert not Path(f"/proc/{proc.pid}").exists()
    assert list(tmp_path.iterdir()) == []  # no document, no temporary file


def test_help(run_probe):
    cp = run_probe("alloc", "--help")
    assert cp.returncode == 0 and cp.stdout.startswith("usage: rtlab-probe alloc")
    for text in ("--sizes LIST", "--pattern P", "--batch N", "--tuned", "--touch", "M_MMAP_MAX"):
        assert text in cp.stdout, text
    for pattern in ("pairs", "batch", "random"):
        assert f"\n  {pattern} " in cp.stdout


def test_listed_with_its_options(run_probe):
    cp = run_probe("list", "--json")
    assert cp.returncode == 0
    (meter,) = [m for m in json.loads(cp.stdout)["meters"] if m["name"] == "alloc"]
    names = [o["name"] for o in meter["options"]]
    assert names == ["sizes", "pattern", "batch", "tuned", "touch", "seed"]


@pytest.mark.parametrize("pattern", ["pairs", "batch", "random"])
def test_touch_times_writing_each_fresh_block(alloc, pattern):
    """--touch: one "touch" per malloc that returned a block, kept apart from the samples
    (malloc and free calls); without it no "touch" at all."""
    sizes = [4096, 1 << 20]
    extra = ["--seed", "7"] if pattern == "random" else []
    cp, doc = alloc("--sizes", "4K,1M", "--pattern", pattern, "--loops", "20", "--touch",
                    *extra, *POLICY)  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    check_alloc(doc, pattern, sizes, False, mallocs=None if pattern == "random" else
                20 * (8 if pattern == "batch" else 1))  # fmt: skip
    assert doc["params"]["touch"] is True
    for t in doc["threads"]:
        for z in t["sizes"]:
            touch = z["touch"]
            assert touch["count"] == z["malloc"]["count"] - z["failed"]
            if touch["count"]:
                ordered(touch)
                assert touch["min_ns"] > 0  # a page written takes time
    cp, doc = alloc("--sizes", "4K", "--loops", "5", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["touch"] is False
    assert all("touch" not in z for t in doc["threads"] for z in t["sizes"])
