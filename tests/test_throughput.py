"""rtlab bench throughput: real workloads at a tiny scale, stored and compared."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys

import pytest

from rtlab.errors import UnsupportedError
from rtlab.throughput import WORKLOADS, change_pct

from ._skips import need_tool


def test_change_and_its_interval():
    same = change_pct([10.0, 10.2, 9.8, 10.1, 9.9], [10.1, 9.9, 10.0, 10.2, 9.8])
    assert not same["excludes_zero"] and same["change_lo"] < 0 < same["change_hi"]
    faster = change_pct([10.0, 10.2, 9.8, 10.1, 9.9], [12.0, 12.2, 11.8, 12.1, 11.9])
    assert faster["excludes_zero"] and faster["change_pct"] == pytest.approx(20.0)
    assert faster["change_lo"] <= faster["change_pct"] <= faster["change_hi"]


def test_suite_is_stored_shown_and_compared(rtlab, tmp_path):
    need_tool("hackbench")
    results = tmp_path / "results"
    args = ["bench", "throughput", "--repeat", "2", "--scale", "0.05", "--json",
            "--workloads", "fork-exec,hackbench-pipe", "--results", str(results)]  # fmt: skip
    ids = []
    for _ in range(2):
        rc, out, err = rtlab(*args)
        assert rc == 0, err
        ids.append(json.loads(out)["id"])
    rc, out, _ = rtlab("show", ids[0], "--results", str(results), "--json")
    rows = json.loads(out)["meters"]["throughput"]
    assert [r["workload"] for r in rows] == ["fork-exec", "hackbench-pipe"]
    for r in rows:
        assert r["runs"] == 2 and len(r["values"]) == 2 and r["mean"] > 0
        assert r["ci_low"] <= r["mean"] <= r["ci_high"]
    assert rows[1]["unit"] == "s" and rows[1]["better"] == "lower"
    rc, out, _ = rtlab("show", ids[0], "--results", str(results))
    assert rc == 0 and "What does this setup cost" in out
    rc, out, _ = rtlab("compare", *ids, "--results", str(results), "--json")
    pairs = json.loads(out)["meters"]["throughput"]
    assert len(pairs) == 2 and all("change_pct" in p["change"] for p in pairs)
    assert all("user_s_change_pct" in p["change"] for p in pairs)
    assert all(p["baseline_row"]["user_s"] is not None for p in pairs)
    rc, out, _ = rtlab("compare", *ids, "--results", str(results))
    assert rc == 0 and "change" in out


def test_bad_input_and_missing_tools(rtlab, tmp_path, monkeypatch):
    rc, _, err = rtlab("bench", "throughput", "--workloads", "nonesuch",
                       "--results", str(tmp_path))  # fmt: skip
    assert rc == 2 and "nonesuch" in err and err.count("\n") == 1
    rc, _, err = rtlab("bench", "throughput", "--repeat", "0", "--results", str(tmp_path))
    assert rc == 2 and "--repeat" in err
    monkeypatch.setattr(shutil, "which", lambda name: None)
    rc, _, err = rtlab("bench", "throughput", "--workloads", "iperf3", "--results", str(tmp_path))
    assert rc == 3 and "iperf3" in err
    assert not list(tmp_path.iterdir())  # nothing stored
    assert set(WORKLOADS) >= {"hackbench-pipe", "hackbench-socket", "iperf3", "fork-exec"}


def test_run_throughput_is_the_suite(rtlab, tmp_path, monkeypatch):
    import rtlab.cli.bench as bench
    from rtlab.throughput import Workload

    fake = Workload("fake", "s", False, None, "a workload that takes no time", lambda s: 1.0 + s)
    monkeypatch.setattr(bench, "select_workloads", lambda names: [fake])
    rc, out, err = rtlab(
        "run", "throughput", "--scale", "0.5", "--results", str(tmp_path), "--json"
    )
    assert rc == 0, err
    stored = json.loads(out)
    assert stored["cases"] == 1
    rc, out, _ = rtlab("show", stored["id"], "--results", str(tmp_path), "--json")
    (row,) = json.loads(out)["meters"]["throughput"]
    assert row["workload"] == "fake" and row["runs"] == 5 and row["mean"] == 1.5


# --- the CPU time of each run, user commands, the scheduling policy ------------------------

COMPUTE = f"compute={shlex.quote(sys.executable)} -c 'sum(range(10**7))'"
SYSCALLS = "syscalls=dd if=/dev/zero of=/dev/null bs=512 count=200000"


def _stored(rtlab, results, *args: str) -> dict:
    rc, out, err = rtlab("bench", "throughput", "--json", "--results", str(results), *args)
    assert rc == 0, err
    rc, out, _ = rtlab("show", json.loads(out)["id"], "--results", str(results), "--json")
    return {r["workload"]: r for r in json.loads(out)["meters"]["throughput"]}


def test_user_commands_are_timed_and_their_cpu_time_split(rtlab, tmp_path):
    rows = _stored(rtlab, tmp_path, "--repeat", "3", "--workload", COMPUTE, "--workload", SYSCALLS)
    assert list(rows) == ["compute", "syscalls"]  # no built-in runs beside the commands
    for r in rows.values():
        assert r["runs"] == 3 and r["unit"] == "s" and r["better"] == "lower"
        for key in ("wall_s", "user_s", "system_s"):
            t = r["times"][key]
            assert len(t["values"]) == 3 and all(v >= 0 for v in t["values"])
            assert t["ci_low"] <= t["mean"] <= t["ci_high"]
        assert r["policy"] == "other"
    compute, syscalls = rows["compute"], rows["syscalls"]
    assert compute["user_s"] > compute["system_s"]  # a compute workload runs in user space
    assert syscalls["system_s"] > 0  # 400,000 read/write calls
    # its figure is the command's wall time, inside the run's
    walls = compute["times"]["wall_s"]["values"]
    assert all(v <= w for v, w in zip(compute["values"], walls, strict=True))


def test_a_command_runs_once_per_repetition(rtlab, tmp_path):
    marks = tmp_path / "marks"
    code = f"open({str(marks)!r}, 'a').write('x')"
    command = f"mark={shlex.quote(sys.executable)} -c {shlex.quote(code)}"
    rows = _stored(rtlab, tmp_path / "results", "--repeat", "4", "--workload", command)
    assert rows["mark"]["runs"] == 4 and marks.read_text() == "xxxx"


def test_builtins_and_commands_together_in_process_time_counts(rtlab, tmp_path):
    rows = _stored(rtlab, tmp_path, "--repeat", "2", "--scale", "0.05",
                   "--workloads", "fork-exec", "--workload", "/bin/true")  # fmt: skip
    assert list(rows) == ["fork-exec", "true"]
    # fork-exec spawns from rtlab itself: the spawning's CPU time is rtlab's own
    assert rows["fork-exec"]["user_s"] + rows["fork-exec"]["system_s"] > 0


@pytest.mark.parametrize(
    "args, words",
    [
        (["--workload", ""], "no command"),
        (["--workload", "   "], "no command"),
        (["--workload", "no-such-command-rtlab x"], "command not found"),
        (["--workload", "/nonexistent/tool"], "command not found"),
        (["--workload", "'unterminated"], "quotation"),
        (["--workload", "true", "--workload", "true"], "given twice"),
        (["--workload", "hackbench-pipe=true", "--workloads", "hackbench-pipe"], "given twice"),
        (["--workload", "x" * 5000], "longer than"),
        (["--workload", "false"], "exited 1"),
        (["--workloads", "nonesuch", "--workload", "true"], "unknown workload"),
        (["--workload", "true", "--policy", "fifo:0"], "--policy"),
        (["--workload", "true", "--policy", "deadline"], "--policy"),
    ],
)
def test_bad_commands_and_policies_are_refused(rtlab, tmp_path, args, words):
    if "hackbench-pipe" in args:
        need_tool("hackbench")
    rc, _, err = rtlab("bench", "throughput", "--repeat", "2", "--results", str(tmp_path), *args)
    assert rc == 2 and words in err and err.strip().count("\n") <= 1, err
    assert "Traceback" not in err
    assert not any(tmp_path.glob("*/experiment.json"))  # nothing stored


def _check_fifo(name: str) -> str:
    code = "import os, sys; sys.exit(0 if os.sched_getscheduler(0) == os.SCHED_FIFO else 3)"
    return f"{name}={shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def test_policy_fifo_runs_every_workload_at_fifo(rtlab, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("SCHED_FIFO needs root or CAP_SYS_NICE")
    before = os.sched_getscheduler(0)
    rows = _stored(rtlab, tmp_path, "--repeat", "2", "--policy", "fifo:5",
                   "--workload", _check_fifo("fifo-check"))  # fmt: skip
    assert rows["fifo-check"]["runs"] == 2 and rows["fifo-check"]["policy"] == "fifo:5"
    assert os.sched_getscheduler(0) == before  # rtlab's own policy is put back
    # without --policy the same check fails: the workload really saw the policy
    rc, _, err = rtlab("bench", "throughput", "--workload", _check_fifo("x"),
                       "--results", str(tmp_path))  # fmt: skip
    assert rc == 2 and "exited 3" in err


def test_policy_refused_without_privilege_or_throttling(rtlab, tmp_path, monkeypatch):
    from rtlab import _benchopts
    from rtlab.system import SysRoot

    from .conftest import make_root

    off = SysRoot(make_root(tmp_path, {"proc/sys/kernel/sched_rt_runtime_us": "-1\n"}))
    with pytest.raises(UnsupportedError, match="throttling is off"):
        _benchopts.check_policy(("fifo", 10), off)
    knobs = {"proc/sys/kernel/sched_rt_runtime_us": "950000\n",
             "proc/sys/kernel/sched_rt_period_us": "1000000\n"}  # fmt: skip
    on = SysRoot(make_root(tmp_path / "on", knobs))
    assert _benchopts.rt_throttling(on) == (950000, 1000000)

    def refuse(*_a):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    results = tmp_path / "results"
    rc, _, err = rtlab("bench", "throughput", "--workload", "true", "--policy", "fifo:50",
                       "--results", str(results))  # fmt: skip
    assert rc == 3 and "not permitted" in err and "RLIMIT_RTPRIO" in err
    assert not any(results.glob("*/experiment.json"))
