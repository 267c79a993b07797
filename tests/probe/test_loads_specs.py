"""Load specs: bad ones are one line naming the spec (exit 2); scheduling options are applied."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from .._skips import need_tool
from . import procfs
from .conftest import is_root, online_cpus
from .loadproc import start_load, wait_gone

OFFLINE = len(online_cpus()) + 7

BAD_SPECS = [
    "spin:120%",
    "spin:-5%",
    "spin:lots",
    "spin",
    "spin:50%:10ns",
    "stride:0",
    "stride:line:0",
    "stride:sideways",
    f"spin:50%@{OFFLINE}",
    "teleport:3",
    "ipc:x",
    "ipc:1:carrier-pigeon",
    "io:/nonexistent/dir",
    "io",
    "net:0",
    "timer:0",
    "timer:4:1ns",
    "hackbench:0",
    "stress-ng:everything",
    "iperf3:notanoption",
    "spin:50%,nice=40",
    "spin:50%,policy=fifo:100",
    "spin:50%,policy=deadline:1ms/2ms/3ms",
    "spin:50%,policy=fifo:5,nice=3",
]


@pytest.mark.parametrize("spec", BAD_SPECS)
def test_bad_spec_is_one_line_naming_it(run_probe, spec):
    for args in (["load", spec], ["wakeup", "--load", spec, "--check"]):
        cp = run_probe(*args)
        assert cp.returncode == 2, (args, cp.stderr)
        lines = cp.stderr.strip().splitlines()
        assert len(lines) == 1 and f'"{spec}"' in lines[0], cp.stderr
        if "--check" in args:  # the same refusal, as facts
            refusal = json.loads(cp.stdout)
            assert (refusal["option"], refusal["value"]) == ("load", spec)
            assert lines[0].endswith(refusal["error"])
        else:
            assert cp.stdout == ""


def test_offline_cpu_message_names_the_cpu(run_probe):
    cp = run_probe("load", f"spin:50%@{OFFLINE}")
    assert f"cpu {OFFLINE} is not online" in cp.stderr


def stat_fields(pid: int) -> list[str]:
    text = open(f"/proc/{pid}/stat").read()  # noqa: SIM115
    return text.rpartition(")")[2].split()


def nice_of(pid: int) -> int:
    return int(stat_fields(pid)[19 - 3])


@pytest.mark.parametrize(
    "suffix, policy, prio, nice",
    [
        (",nice=7", 0, 0, 7),
        (",policy=batch,nice=3", 3, 0, 3),
        (",policy=idle", 5, 0, 0),
        (",policy=fifo:7", 1, 7, 0),
        (",policy=rr:3", 2, 3, 0),
    ],
)
def test_scheduling_suffix_is_applied_to_every_worker(probe, tmp_path, suffix, policy, prio, nice):
    if policy in (1, 2) and not is_root():
        pytest.skip("real-time policies for loads need root here")
    cpu = online_cpus()[-1]
    out = tmp_path / "l.json"
    spec = f"spin:5%@{cpu}{suffix}"
    proc, pgid = start_load(probe, ["load", spec, "--json", str(out), "--quiet"], tmp_path, 1)
    try:
        (w,) = [c for c in procfs.children(proc.pid) if c.comm == "rtlab:spin"]
        assert (w.policy, w.rt_priority) == (policy, prio)
        if policy in (0, 3):
            assert nice_of(w.pid) == nice
        assert procfs.cpus_allowed(w.pid) == str(cpu)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    assert wait_gone(pgid) == []
    (ran,) = json.loads(out.read_text())["loads"]
    assert (
        ran["policy"]
        == {
            0: f"other:{nice}",
            3: f"batch:{nice}",
            5: "idle",
            1: f"fifo:{prio}",
            2: f"rr:{prio}",
        }[policy]
    )


def test_scheduling_options_may_come_before_the_cpus(run_probe, tmp_path):
    cpu = online_cpus()[-1]
    for spec in (f"spin:5%,nice=4@{cpu}", f"spin:5%@{cpu},nice=4"):
        out = tmp_path / "l.json"
        cp = run_probe("load", spec, "--duration", "200ms", "--json", str(out), "--quiet")
        assert cp.returncode == 0, cp.stderr
        (ran,) = json.loads(out.read_text())["loads"]
        assert ran["policy"] == "other:4" and ran["workers"] == 1


def test_wakeup_records_the_requested_load_policy(wakeup):
    cp, doc = wakeup(
        "--load", "spin:5%,nice=9", "--settle", "0", "--loops", "20", "--allow-fallback"
    )
    assert cp.returncode == 0, cp.stderr
    (spec,) = doc["params"]["loads"]
    assert spec["policy"] == "other:9" and spec["percent"] == 5.0
    assert spec["work_unit"] == "busy-loop clock read"
    assert spec["processes"] == len(online_cpus())


@pytest.mark.skipif(not is_root(), reason="needs root to switch to an unprivileged user")
def test_refused_load_policy_exits_3_naming_the_spec(probe):
    cp = subprocess.run(
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            str(probe),
            "load",
            "spin:5%,policy=fifo:10",
            "--duration",
            "1s",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )
    assert cp.returncode == 3, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and '"spin:5%,policy=fifo:10"' in lines[0] and "refused" in lines[0]


@pytest.mark.parametrize("spec", ["stress-ng:cpu", "hackbench:1", "iperf3"])
def test_missing_external_tool_exits_3_with_the_reason(probe, tmp_path, spec):
    empty = tmp_path / "bin"
    empty.mkdir()
    cp = subprocess.run(
        [str(probe), "load", spec, "--duration", "1s"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PATH": str(empty)},
    )
    assert cp.returncode == 3, cp.stderr
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not installed" in lines[0] and f'"{spec}"' in lines[0]


def test_stress_ng_refusing_its_arguments_is_bad_input(run_probe):
    need_tool("stress-ng")
    cp = run_probe("load", "stress-ng:--no-such-stressor 1", "--duration", "1s")
    assert cp.returncode == 2, cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1 and "refuses" in cp.stderr
