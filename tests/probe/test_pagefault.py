"""The pagefault meter: every region under every protection, fault counts, no file left.

Asserted are structure and kernel facts (a page's first touch faults; a locked or
prefaulted page does not), never latency bounds: the test machine may be a noisy VM.
Regions are 4 MiB (1024 pages of 4 KiB), so each run takes milliseconds.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import struct
import subprocess
from pathlib import Path

import pytest

from .._skips import need_tool
from . import procfs
from .conftest import is_root, one_line, online_cpus, wait_measuring
from .loadproc import start_load, stop, wait_gone
from .test_wakeup import as_nobody, check_thread

REGIONS = ["static", "stack", "heap", "mmap", "file"]
ANONYMOUS = [r for r in REGIONS if r != "file"]
PROTECTIONS = ["none", "mlock", "prefault", "mlock+prefault"]
PAGE = os.sysconf("SC_PAGESIZE")
SIZE = "4M"
PAGES = (4 << 20) // PAGE
SCHED_FIFO = 1
# fifo:50 as root; otherwise what an unprivileged user may set.
POLICY = ["--policy", "fifo:50"] if is_root() else ["--policy", "other", "--allow-fallback"]
needs_root = pytest.mark.skipif(not is_root(), reason="needs root for real-time policies")


def skip_unless_mlock(protect: str) -> None:
    """--protect mlock locks the whole process: root, or an unlimited RLIMIT_MEMLOCK."""
    unlimited = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0] == resource.RLIM_INFINITY
    if "mlock" in protect and not (is_root() or unlimited):
        pytest.skip("mlockall of the whole process needs root or an unlimited RLIMIT_MEMLOCK")


@pytest.fixture
def pagefault(run_probe, tmp_path):
    """Run `pagefault` with ARGS and return (completed process, document or None)."""

    def go(*args: str, timeout: float = 60, env: dict[str, str] | None = None):
        out = tmp_path / "result.json"
        out.unlink(missing_ok=True)
        cp = run_probe("pagefault", *args, "--json", str(out), "--quiet", timeout=timeout, env=env)
        doc = json.loads(out.read_text()) if out.exists() else None
        return cp, doc

    return go


@pytest.fixture
def filedir(tmp_path) -> Path:
    """An empty directory of its own for the file region (the document goes elsewhere)."""
    d = tmp_path / "files"
    d.mkdir()
    return d


def region_args(region: str, filedir: Path) -> list[str]:
    return ["--region", region, *(["--dir", str(filedir)] if region == "file" else [])]


def check_pagefault(doc: dict, region: str, protect: str, pages: int, count: int) -> dict:
    assert doc["meter"] == "pagefault" and doc["complete"] is True
    params = doc["params"]
    assert params["region"] == region and params["protect"] == protect
    assert params["size_bytes"] == pages * PAGE and params["page_size"] == PAGE
    assert (params["dir"] is None) == (region != "file")
    (t,) = doc["threads"]
    check_thread(t, loops=count)
    assert t["region"] == region and t["protect"] == protect
    assert t["pages"] == pages and t["page_size"] == PAGE
    assert set(t["faults"]) == {"minor", "major"}
    assert t["faults"]["minor"] >= 0 and t["faults"]["major"] >= 0
    assert 0 <= t["resident_pages"] <= pages and t["setup_ns"] > 0
    return t


@pytest.mark.parametrize("protect", PROTECTIONS)
@pytest.mark.parametrize("region", REGIONS)
def test_every_region_and_protection(pagefault, filedir, region, protect):
    skip_unless_mlock(protect)
    cp, doc = pagefault(
        *region_args(region, filedir), "--protect", protect, "--size", SIZE, *POLICY
    )
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr == ""
    t = check_pagefault(doc, region, protect, PAGES, PAGES)
    faults = t["faults"]
    if protect == "mlock+prefault" or (region in ANONYMOUS and protect != "none"):
        # Locked or written before the pass: every page is there, writable.
        assert faults == {"minor": 0, "major": 0}
        assert t["resident_pages"] == PAGES
    elif protect == "none":
        # A new region: nothing resident, every page's first touch is a fault.
        assert t["resident_pages"] == 0
        if region in ANONYMOUS:
            assert faults["minor"] >= 0.9 * PAGES
        else:  # a page the page cache lacks may count as major (no I/O for a sparse file)
            assert faults["minor"] + faults["major"] >= 0.9 * PAGES
    if region == "file":
        assert list(filedir.iterdir()) == []
    if is_root():
        assert t["policy"] == {"name": "fifo", "priority": 50, "nice": 0}


def test_defaults(pagefault):
    """Default: the anonymous mapping, no protection, every page of 64 MiB once."""
    cp, doc = pagefault(*POLICY)
    assert cp.returncode == 0, cp.stderr
    pages = (64 << 20) // PAGE
    t = check_pagefault(doc, "mmap", "none", pages, pages)
    assert t["faults"]["minor"] >= 0.9 * pages
    assert doc["params"]["interval_ns"] == 0


def test_loops_touch_the_first_pages(pagefault):
    cp, doc = pagefault("--size", SIZE, "--loops", "100", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert doc["stop_reason"] == "loops" and doc["params"]["loops"] == 100
    t = check_pagefault(doc, "mmap", "none", PAGES, 100)
    assert 90 <= t["faults"]["minor"] < PAGES  # the other pages were never touched


def test_loops_beyond_the_pages_is_one_pass(pagefault):
    cp, doc = pagefault("--size", "64K", "--loops", "1000", *POLICY)
    assert cp.returncode == 0, cp.stderr
    pages = (64 << 10) // PAGE
    check_pagefault(doc, "mmap", "none", pages, pages)


def test_static_threads_touch_slices_of_their_own(pagefault):
    """Two threads share the .bss array: each its own slice, so each faults on every page."""
    cp, doc = pagefault("--region", "static", "--size", SIZE, "--threads", "2", *POLICY)
    assert cp.returncode == 0, cp.stderr
    assert len(doc["threads"]) == 2
    for t in doc["threads"]:
        check_thread(t, loops=PAGES)
        assert t["faults"]["minor"] >= 0.9 * PAGES


def test_stack_region_beyond_the_runner_stack(pagefault):
    """16 MiB of stack: far more than the runner's 256 KiB thread stacks."""
    cp, doc = pagefault("--region", "stack", "--size", "16M", *POLICY)
    assert cp.returncode == 0, cp.stderr
    pages = (16 << 20) // PAGE
    t = check_pagefault(doc, "stack", "none", pages, pages)
    assert t["faults"]["minor"] >= 0.9 * pages


@pytest.mark.parametrize("protect", ["none", "mlock+prefault"])
def test_pinned_threads(pagefault, protect):
    skip_unless_mlock(protect)
    cpus = online_cpus()
    cp, doc = pagefault(
        "--cpus", ",".join(map(str, cpus)), "--size", SIZE, "--protect", protect, *POLICY
    )
    assert cp.returncode == 0, cp.stderr
    assert [t["cpu"] for t in doc["threads"]] == cpus
    for t in doc["threads"]:
        check_thread(t, loops=PAGES)
        if protect != "none":
            assert t["faults"] == {"minor": 0, "major": 0}


def test_interval_paces_the_touches(pagefault):
    """One touch every 2 ms on an absolute grid: the pass lasts at least 19 intervals."""
    cp, doc = pagefault("--size", "80K", "--interval", "2ms", *POLICY)
    assert cp.returncode == 0, cp.stderr
    t = check_pagefault(doc, "mmap", "none", 20, 20)
    assert doc["params"]["interval_ns"] == 2_000_000 and t["period_ns"] == 2_000_000
    assert doc["elapsed_ns"] >= 19 * 2_000_000
    assert max(w["t_ns"] for w in t["worst"]) <= doc["elapsed_ns"]


def test_default_dir_is_tmpdir(pagefault, filedir):
    env = {**os.environ, "TMPDIR": str(filedir)}
    cp, doc = pagefault("--region", "file", "--size", "64K", *POLICY, env=env)
    assert cp.returncode == 0, cp.stderr
    assert doc["params"]["dir"] == str(filedir)
    assert list(filedir.iterdir()) == []


def test_raw_capture(pagefault, tmp_path):
    raw = tmp_path / "samples.raw"
    cp, doc = pagefault("--size", SIZE, "--raw", str(raw), *POLICY)
    assert cp.returncode == 0, cp.stderr
    t = doc["threads"][0]
    data = raw.read_bytes()
    head = struct.unpack_from("<8sIIiiqI", data)
    samples = struct.unpack_from(f"<{(len(data) - head[2]) // 8}q", data, head[2])
    assert head[:3] == (b"RTLABRAW", 1, 64)
    assert len(samples) == t["count"] == t["raw_samples"] == PAGES
    assert (min(samples), max(samples)) == (t["min_ns"], t["max_ns"])


BAD = [
    (["--region", "x"], "--region"),
    (["--region", ""], "--region"),
    (["--protect", "x"], "--protect"),
    (["--protect", "mlock+"], "--protect"),
    (["--size", "0"], "--size"),
    (["--size", "5000"], "--size"),
    (["--size", "-4K"], "--size"),
    (["--size", "4Q"], "--size"),
    (["--size", "1024T"], "--size"),
    (["--region", "static", "--size", "128M"], "--size"),
    (["--region", "static", "--threads", "2"], "--size"),
    (["--region", "file", "--dir", "/nonexistent"], "--dir"),
    (["--region", "mmap", "--dir", "."], "--dir"),
    (["--interval", "5"], "--interval"),
]


@pytest.mark.parametrize(("args", "name"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_options_exit_2_with_one_line(pagefault, args, name):
    cp, doc = pagefault(*args, "--loops", "10", *POLICY)
    assert cp.returncode == 2, cp.stderr
    line = one_line(cp)
    assert line.startswith("rtlab-probe pagefault: ") and name in line
    assert doc is None


@pytest.mark.parametrize(("args", "name"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_check_names_the_option(run_probe, args, name):
    cp = run_probe("pagefault", "--check", *args)
    assert cp.returncode == 2
    fault = json.loads(cp.stdout)
    assert fault["error"] == one_line(cp).removeprefix("rtlab-probe pagefault: ")
    assert fault["option"] == name.removeprefix("--")


def test_check_accepts_without_making_anything(run_probe, filedir):
    cp = run_probe("pagefault", "--check", "--region", "file", "--dir", str(filedir))
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", "")
    assert list(filedir.iterdir()) == []


@needs_root
@pytest.mark.parametrize("fallback", [[], ["--allow-fallback"]])
def test_refused_mlock_exits_3(probe, fallback):
    """Unprivileged, 64 KiB of RLIMIT_MEMLOCK: the meter's own mlockall is refused, and
    the protection under test is never dropped, even with --allow-fallback."""
    need_tool("setpriv")

    def small_memlock() -> None:  # the child's own limit, not a system setting
        resource.setrlimit(resource.RLIMIT_MEMLOCK, (64 << 10, 64 << 10))

    cmd = [str(probe), "pagefault", "--protect", "mlock", "--no-mlock", "--policy", "other"]
    cp = subprocess.run(
        as_nobody([*cmd, "--size", SIZE, "--quiet", *fallback]),
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=small_memlock,
    )
    assert cp.returncode == 3, cp.stderr
    assert "mlockall" in one_line(cp)


def start_paced(probe: Path, tmp_path: Path, args: list[str]):
    """`pagefault ARGS` touching one page per ms (16 s for 16 MiB), once it measures."""
    out, progress = tmp_path / "r.json", tmp_path / "progress.jsonl"
    proc = subprocess.Popen(
        [str(probe), "pagefault", "--size", "16M", "--interval", "1ms", *args, "--quiet",
         "--progress", str(progress), "--json", str(out)],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    wait_measuring(progress, proc)
    return proc, out


@needs_root
def test_policy_is_really_applied(probe, tmp_path):
    """While it measures, the kernel reports the measuring thread as SCHED_FIFO 42; a
    SIGTERM then ends the pass early with an incomplete document."""
    proc, out = start_paced(probe, tmp_path, ["--policy", "fifo:42"])
    try:
        rt = [t for t in procfs.threads(proc.pid) if t.policy == SCHED_FIFO]
        assert len(rt) == 1 and rt[0].rt_priority == 42
        assert procfs.stat(proc.pid).policy == 0  # the main thread keeps its own
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    doc = json.loads(out.read_text())
    assert doc["complete"] is False and doc["stop_reason"] == "signal"
    (t,) = doc["threads"]
    assert t["tid"] == rt[0].pid and t["policy"]["name"] == "fifo"
    assert 0 < t["count"] < t["pages"]
    assert t["faults"]["minor"] >= 0.9 * t["count"]  # counted over the pages touched


def test_file_is_unnamed_and_gone_after_sigkill(probe, tmp_path, filedir):
    """The file is mapped while the probe measures but has no name in --dir at any time
    we look, and SIGKILL leaves nothing there."""
    proc, out = start_paced(probe, tmp_path, ["--region", "file", "--dir", str(filedir), *POLICY])
    try:
        maps = Path(f"/proc/{proc.pid}/maps").read_text().splitlines()
        mapped = [ln for ln in maps if str(filedir) in ln]
        assert len(mapped) == 1 and mapped[0].endswith("(deleted)") and " rw-s " in mapped[0]
        assert list(filedir.iterdir()) == []
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        stop(proc)
    assert not Path(f"/proc/{proc.pid}").exists()
    assert list(filedir.iterdir()) == []
    assert not out.exists()


def test_nothing_survives_sigkill(probe, tmp_path, filedir):
    """SIGKILL mid-run: its load process, its threads and its file are all gone."""
    cpu = online_cpus()[0]
    args = ["pagefault", "--region", "file", "--dir", str(filedir), "--size", "16M"]
    args += ["--interval", "1ms", "--load", f"spin:5%@{cpu}", "--settle", "100ms", "--quiet"]
    proc, pgid = start_load(probe, [*args, *POLICY], tmp_path, 1)
    try:
        # measuring: the main and the measuring threads (however loaded this machine is)
        assert procfs.wait_for(lambda: len(procfs.threads(proc.pid)) >= 2 or proc.poll())
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
        assert wait_gone(pgid) == []
    finally:
        stop(proc)
    assert not Path(f"/proc/{proc.pid}").exists()
    assert list(filedir.iterdir()) == []


def test_help_says_what_and_how(run_probe):
    cp = run_probe("pagefault", "--help")
    assert cp.returncode == 0
    assert cp.stdout.startswith("usage: rtlab-probe pagefault")
    for word in [*REGIONS, *PROTECTIONS, "getrusage", "CLOCK_MONOTONIC", "mlockall"]:
        assert word in cp.stdout
    for opt in ("--region R", "--protect P", "--size SIZE", "--dir DIR", "--interval DUR"):
        assert opt in cp.stdout


def test_listed_with_its_options(run_probe):
    cp = run_probe("list", "--json")
    assert cp.returncode == 0
    (meter,) = [m for m in json.loads(cp.stdout)["meters"] if m["name"] == "pagefault"]
    assert [o["name"] for o in meter["options"]] == ["region", "protect", "size", "dir", "interval"]
