"""--check checks everything that needs no measuring; a refusal is one line on stderr and
the same facts as one JSON line on stdout. Outputs are checked before measuring."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from .._skips import need_tool

# Long enough that a run which started measuring could not return in time.
LONG = ("--duration", "30s", "--policy", "other", "--quiet")
QUICK_S = 10  # a refusal before measuring returns well within this


def refusal(cp: subprocess.CompletedProcess, prefix: str = "rtlab-probe wakeup: ") -> dict:
    """The JSON line of a refused --check, checked against the stderr line."""
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1, cp.stderr
    out = cp.stdout.splitlines()
    assert len(out) == 1, cp.stdout
    doc = json.loads(out[0])
    assert set(doc) == {"error", "option", "value"}
    assert lines[0] == prefix + doc["error"]
    return doc


@pytest.mark.parametrize(
    ("args", "option", "value"),
    [
        (["--interval", "0"], "interval", "0"),
        (["--interval=5"], "interval", "5"),
        (["--load", "spin:120%"], "load", "spin:120%"),
        (["--load", "bogus:1"], "load", "bogus:1"),
        (["--no-such-option"], None, "--no-such-option"),
        (["stray"], None, "stray"),
        (["--quiet=yes"], "quiet", "yes"),
        (["--threshold", "0"], "deadline", "0"),
        (["--dma-latency", "10"], "dma-latency", "10"),
        (["--cpus", "0", "--threads", "2"], None, None),
        (["--loops", "5", "--duration", "1s"], None, None),
    ],
)
def test_refusal_is_json_on_stdout(run_probe, args, option, value):
    cp = run_probe("wakeup", *args, "--check")
    assert cp.returncode == 2, cp.stderr
    doc = refusal(cp)
    assert (doc["option"], doc["value"]) == (option, value)


def test_check_anywhere_in_the_arguments(run_probe):
    """Parsing stops at the first refusal; --check after it still asks for JSON."""
    cp = run_probe("wakeup", "--check", "--interval", "0")
    assert cp.returncode == 2
    assert refusal(cp)["option"] == "interval"
    cp = run_probe("wakeup", "--interval", "0")  # no --check: no JSON
    assert cp.returncode == 2 and cp.stdout == ""


def test_unknown_command_with_check(run_probe):
    cp = run_probe("nosuchmeter", "--check")
    assert cp.returncode == 2
    doc = refusal(cp, prefix="rtlab-probe: ")
    assert (doc["option"], doc["value"]) == (None, "nosuchmeter")


def test_accepted_check_prints_nothing_and_leaves_nothing(run_probe, tmp_path):
    cp = run_probe(
        "wakeup",
        "--check",
        "--threads",
        "2",
        "--json",
        str(tmp_path / "r.json"),
        "--raw",
        str(tmp_path / "r.raw"),
        "--progress",
        str(tmp_path / "p.jsonl"),
    )
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == "" and cp.stderr == ""
    assert list(tmp_path.iterdir()) == []


def test_stress_ng_refusing_its_arguments_fails_check(run_probe):
    need_tool("stress-ng")
    spec = "stress-ng:--no-such-stressor 1"
    cp = run_probe("wakeup", "--load", spec, "--check", timeout=30)
    assert cp.returncode == 2, cp.stderr
    doc = refusal(cp)
    assert (doc["option"], doc["value"]) == ("load", spec)
    assert "refuses" in doc["error"]
    cp = run_probe("wakeup", "--load", "stress-ng:cpu:1", "--check", timeout=30)
    assert cp.returncode == 0, cp.stderr
    assert cp.stdout == ""


def test_missing_tool_fails_check_with_exit_3(probe, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    cp = subprocess.run(
        [str(probe), "wakeup", "--load", "hackbench:1", "--check"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PATH": str(empty)},
    )
    assert cp.returncode == 3, cp.stderr
    doc = refusal(cp)
    assert (doc["option"], doc["value"]) == ("load", "hackbench:1")
    assert "is not installed" in doc["error"]


def bad_outputs(tmp_path):
    """(option, path) pairs that cannot be written, and why."""
    (tmp_path / "adir").mkdir()
    return [
        ("--json", str(tmp_path / "adir")),  # an existing directory
        ("--json", str(tmp_path / "missing" / "r.json")),  # in a directory that does not exist
        ("--json", "/proc/rtlab-x"),  # where nothing can be created
        ("--raw", str(tmp_path / "adir")),
        ("--raw", str(tmp_path / "missing" / "r.raw")),
        ("--raw", "/proc/rtlab-x"),
        ("--progress", str(tmp_path / "adir")),
        ("--progress", str(tmp_path / "missing" / "p.jsonl")),
        ("--progress", "/proc/rtlab-x"),
    ]


@pytest.mark.parametrize("index", range(9))
def test_unwritable_output_is_refused_before_measuring(run_probe, tmp_path, index):
    flag, path = bad_outputs(tmp_path)[index]
    before = sorted(p.name for p in tmp_path.iterdir())
    start = time.monotonic()
    cp = run_probe("wakeup", *LONG, flag, path, timeout=60)
    took = time.monotonic() - start
    assert cp.returncode == 2, cp.stderr
    assert took < QUICK_S, f"refused only after {took:.1f} s: it measured first"
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and flag in lines[0] and path in lines[0]
    assert cp.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written
    assert list((tmp_path / "adir").iterdir()) == []

    cp = run_probe("wakeup", *LONG, flag, path, "--check")
    assert cp.returncode == 2
    assert refusal(cp)["option"] == flag[2:] and refusal(cp)["value"] == path
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_raw_file_of_a_second_thread_is_checked(run_probe, tmp_path):
    (tmp_path / "r.raw.1").mkdir()  # thread 1 writes FILE.1
    start = time.monotonic()
    cp = run_probe("wakeup", *LONG, "--threads", "2", "--raw", str(tmp_path / "r.raw"))
    assert cp.returncode == 2 and time.monotonic() - start < QUICK_S
    assert "r.raw.1" in cp.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.raw.1"]


def test_load_command_checks_its_json_before_running(run_probe, tmp_path):
    start = time.monotonic()
    cp = run_probe("load", "spin:5%", "--duration", "30s", "--json", str(tmp_path), "--quiet")
    assert cp.returncode == 2 and time.monotonic() - start < QUICK_S
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "--json" in lines[0]
    assert list(tmp_path.iterdir()) == []
