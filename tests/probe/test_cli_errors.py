"""Bad input: one line naming the option, exit 2, nothing written."""

from __future__ import annotations

import pytest

from .conftest import online_cpus

TOO_HIGH_CPU = str(max(online_cpus()) + 97)

BAD = [
    (["wakeup", "--interval", "0"], "--interval"),
    (["wakeup", "--interval", "1"], "--interval"),  # no unit
    (["wakeup", "--interval", "abc"], "--interval"),
    (["wakeup", "--interval"], "--interval"),
    (["wakeup", "--distance", "-1ms"], "--distance"),
    (["wakeup", "--policy", "fifo:200"], "--policy"),
    (["wakeup", "--policy", "fifo:0"], "--policy"),
    (["wakeup", "--policy", "other:-21"], "--policy"),
    (["wakeup", "--policy", "deadline:1ms"], "--policy"),
    (["wakeup", "--policy", "deadline:2ms/1ms/1ms"], "--policy"),
    (["wakeup", "--policy", "lottery"], "--policy"),
    (["wakeup", "--cpus", "7-3"], "--cpus"),
    (["wakeup", "--cpus", TOO_HIGH_CPU], "--cpus"),
    (["wakeup", "--cpus", "x"], "--cpus"),
    (["wakeup", "--main-cpus", TOO_HIGH_CPU], "--main-cpus"),
    (["wakeup", "--threads", "0"], "--threads"),
    (["wakeup", "--loops", "0"], "--loops"),
    (["wakeup", "--duration", "10"], "--duration"),
    (["wakeup", "--deadline", "0"], "--deadline"),
    (["wakeup", "--threshold", "0"], "--deadline"),  # an alias: named by its option
    (["wakeup", "--dma-latency", "-5us"], "--dma-latency"),
    (["wakeup", "--dma-latency", "10"], "--dma-latency"),  # no unit
    (["wakeup", "--dma-latency", "1500ns"], "--dma-latency"),  # not whole us
    (["wakeup", "--dma-latency", "2147483648us"], "--dma-latency"),
    (["wakeup", "--cpus", "0", "--threads", "2"], "--cpus"),
    (["wakeup", "--loops", "5", "--duration", "1s"], "--loops"),
    (["wakeup", "--quiet=yes"], "--quiet"),
    (["wakeup", "--no-such-option"], "--no-such-option"),
    (["wakeup", "stray"], "stray"),
    (["wakeup", "--load", "bogus:1"], "bogus"),
    (["wakeup", "--load", "forkcopy"], "forkcopy"),
    (["wakeup", "--load", "forkcopy:x"], "forkcopy:x"),
    (["wakeup", "--load", "forkcopy:2:0"], "forkcopy:2:0"),
    (["wakeup", "--load", "forkcopy:2:1Q"], "forkcopy:2:1Q"),
    (["wakeup", "--load", f"forkcopy:1@{TOO_HIGH_CPU}"], f"forkcopy:1@{TOO_HIGH_CPU}"),
    (["wakeup", "--json", "/nonexistent-dir/x.json"], "--json"),
    (["wakeup", "--raw", "/nonexistent-dir/x.raw", "--loops", "5"], "--raw"),
    (["wakeup", "--json", "/proc/rtlab-x"], "--json"),
    (["wakeup", "--progress", "/nonexistent-dir/p.jsonl"], "--progress"),
    (["nosuchmeter"], "nosuchmeter"),
    (["load"], "load"),
    (["load", "bogus:1"], "bogus"),
    (["load", "forkcopy:1", "--duration", "0"], "--duration"),
    (["list", "--bogus"], "--bogus"),
    (["list", "--json", "--bogus"], "--bogus"),
]


@pytest.mark.parametrize(("args", "named"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_exit_2(run_probe, tmp_path, args, named):
    out = tmp_path / "doc.json"
    extra = ["--json", str(out)] if args[0] == "wakeup" and "--json" not in args else []
    cp = run_probe(*args, *extra)
    assert cp.returncode == 2, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1, cp.stderr
    assert named in lines[0]
    assert "Traceback" not in cp.stderr
    assert cp.stdout == ""
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_no_arguments_prints_usage_and_exits_2(run_probe):
    cp = run_probe()
    assert cp.returncode == 2
    assert "usage" in cp.stderr


def test_help_lists_every_option(run_probe):
    cp = run_probe("wakeup", "--help")
    assert cp.returncode == 0
    for opt in (
        "--cpus",
        "--threads",
        "--main-cpus",
        "--interval",
        "--distance",
        "--loops",
        "--duration",
        "--policy",
        "--allow-fallback",
        "--raw",
        "--no-mlock",
        "--dma-latency",
        "--deadline",
        "--quiet",
        "--load",
        "--settle",
        "--json",
    ):
        assert opt in cp.stdout, opt
    assert "--threshold" not in cp.stdout  # an alias of --deadline: accepted, not shown


def test_version(run_probe):
    cp = run_probe("--version")
    assert cp.returncode == 0
    assert cp.stdout.startswith("rtlab-probe ")


def test_list_json_names_meters_and_loads(run_probe):
    import json

    cp = run_probe("list", "--json")
    assert cp.returncode == 0
    doc = json.loads(cp.stdout)
    assert {"wakeup", "periodic", "response", "noise"} <= {m["name"] for m in doc["meters"]}
    assert doc["meters"][0]["name"] == "wakeup"
    assert "forkcopy" in [ld["name"] for ld in doc["loads"]]
    interval = next(o for o in doc["meters"][0]["options"] if o["name"] == "interval")
    assert interval["type"] == "duration" and interval["min_ns"] >= 1
