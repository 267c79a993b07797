"""rtlab-probe sysinfo: the document feeds the same facts reader as the live system."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.cli import main as rtlab_main
from rtlab.system import LIVE_ROOT, load_snapshot, read_facts

# Facts that change between two reads of a live system (processes come and go).
VOLATILE_FACTS = {
    "user_tasks_on_rt",
    "user_tasks_on_rt_names",
    "kthreads_on_rt",
    "kthreads_on_rt_names",
    "rt_policy_tasks_on_rt",
    "committed_as_kb",  # memory committed changes with every process started
    "rt_user_threads",  # user processes at real-time policies come and go
    "rt_user_thread_list",
}
VOLATILE_FINDINGS = {
    "tasks.user",
    "tasks.kthreads",
    "sched.rt_throttling_isolated",
    "vm.overcommit",  # its evidence quotes Committed_AS
    "vm.oom",  # names the real-time processes of the moment
    "tasks.rt_priority",
}


def sysinfo(run_probe, path: Path) -> dict:
    cp = run_probe("sysinfo", "--json", str(path))
    assert cp.returncode == 0, cp.stderr
    return json.loads(path.read_text())


def test_document_shape(run_probe, tmp_path):
    doc = sysinfo(run_probe, tmp_path / "si.json")
    assert (doc["schema"], doc["tool"], doc["kind"]) == (1, "rtlab-probe", "sysinfo")
    assert doc["uname"]["release"] == os.uname().release
    assert doc["files"]["/proc/cmdline"] == Path("/proc/cmdline").read_text()
    assert doc["files"]["/proc/sys/kernel/osrelease"].strip() == os.uname().release
    if Path("/proc/config.gz").exists():
        assert "/proc/config.gz" in doc["base64"]
    # Per-process status is cut to the lines the reader needs.
    status = doc["files"][f"/proc/{os.getpid()}/status"]
    assert {ln.split(":")[0] for ln in status.splitlines()} == {"Name", "Cpus_allowed_list"}
    assert (tmp_path / "si.json").stat().st_size < 16 << 20


def _audit_json(capsys, *args: str) -> tuple[int, dict]:
    rc = rtlab_main(["audit", "--json", *args])
    return rc, json.loads(capsys.readouterr().out)


def _stable(doc: dict) -> tuple[dict, dict]:
    facts = {k: v for k, v in doc["facts"].items() if k not in VOLATILE_FACTS}
    findings = {f["id"]: f for f in doc["findings"] if f["id"] not in VOLATILE_FINDINGS}
    return facts, findings


@pytest.mark.parametrize("rt_cpus", [None, "last"])
def test_audit_from_document_matches_live_audit(run_probe, tmp_path, capsys, rt_cpus):
    path = tmp_path / "si.json"
    sysinfo(run_probe, path)
    last = LIVE_ROOT.read("sys/devices/system/cpu/online").replace(",", "-").split("-")[-1]
    args = ["--rt-cpus", last] if rt_cpus else []
    rc_live, live = _audit_json(capsys, *args)
    rc_doc, from_doc = _audit_json(capsys, "--from", str(path), *args)
    assert _stable(from_doc) == _stable(live)
    assert rc_doc == rc_live
    assert from_doc["facts"]["tasks_read"] == bool(rt_cpus)


def test_snapshot_facts_equal_live_facts(run_probe, tmp_path):
    path = tmp_path / "si.json"
    sysinfo(run_probe, path)
    last = [sorted(os.sched_getaffinity(0))[-1]]
    a = read_facts(load_snapshot(path), last).to_dict()
    b = read_facts(LIVE_ROOT, last).to_dict()
    assert {k: v for k, v in a.items() if k not in VOLATILE_FACTS} == {
        k: v for k, v in b.items() if k not in VOLATILE_FACTS
    }
    assert a["hres_active"] is not None and a["clock_event_handlers"]


NAME_SETTER = r"""
import ctypes, sys, time
libc = ctypes.CDLL(None)
libc.prctl(15, ctypes.c_char_p(sys.argv[1].encode()), 0, 0, 0)  # PR_SET_NAME
print("ready", flush=True)
time.sleep(60)
"""


def test_hostile_process_names_are_escaped(run_probe, tmp_path):
    name = 'q"u\\o\x01t\te}'
    proc = subprocess.Popen(
        [sys.executable, "-c", NAME_SETTER, name], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "ready"
        doc = sysinfo(run_probe, tmp_path / "si.json")  # json.loads: strict, valid JSON
    finally:
        proc.kill()
        proc.wait(timeout=10)
    stat = doc["files"][f"/proc/{proc.pid}/stat"]
    assert stat.startswith(f"{proc.pid} ({name}) ")
    raw = (tmp_path / "si.json").read_text()
    assert "\\u0001" in raw and '\\"u' in raw


def test_stdout_output(run_probe):
    cp = run_probe("sysinfo", "--json", "-")
    assert cp.returncode == 0 and json.loads(cp.stdout)["kind"] == "sysinfo"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--json FILE is required"),
        (("--json",), 'unexpected argument "--json"'),
        (("--bogus",), 'unexpected argument "--bogus"'),
        (("--json", "/nonexistent/dir/si.json"), "/nonexistent/dir/si.json"),
    ],
)
def test_bad_usage(run_probe, args, message):
    cp = run_probe("sysinfo", *args)
    assert cp.returncode == 2 and message in cp.stderr and cp.stdout == ""
    assert cp.stderr.count("\n") == 1


def test_document_is_written_whole(run_probe, tmp_path):
    path = tmp_path / "si.json"
    sysinfo(run_probe, path)
    assert not [p for p in tmp_path.iterdir() if p != path]  # no temporary file left


def test_process_document_feeds_the_application_audit(run_probe, tmp_path):
    """`sysinfo --pid`: only the processes' files and the kernel log; the application
    audit reads the same facts from it as from the live files."""
    from rtlab.system._app import sample_process

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        path = tmp_path / "p.json"
        cp = run_probe(
            "sysinfo", "--json", str(path), "--pid", str(sleeper.pid), "--pid", "2147483647"
        )
        assert cp.returncode == 0, cp.stderr
        doc = json.loads(path.read_text())
        snap = load_snapshot(path)
        live = sample_process(LIVE_ROOT, sleeper.pid)
        got = sample_process(snap, sleeper.pid)
        has_sched = Path(f"/proc/{sleeper.pid}/task/{sleeper.pid}/sched").exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert doc["pids"] == [sleeper.pid, 2147483647] and doc["base64"] == {}
    base = f"/proc/{sleeper.pid}"
    task = f"{base}/task/{sleeper.pid}"
    mine = {f"{base}/{n}" for n in ("stat", "status", "limits")}
    mine |= {f"{task}/{n}" for n in ("stat", "status")}
    mine |= {f"{task}/sched"} if has_sched else set()
    assert set(doc["files"]) - {"/dev/kmsg"} == mine  # nothing of the absent process
    if os.access("/dev/kmsg", os.R_OK):
        assert doc["files"]["/dev/kmsg"].split(";", 1)[0].count(",") >= 3  # PRIO,SEQ,TS,FLAGS
    assert got is not None and live is not None
    assert (got.comm, got.vm_lck_kb, got.memlock_limit, sorted(got.threads)) == (
        live.comm,
        live.vm_lck_kb,
        live.memlock_limit,
        sorted(live.threads),
    )


@pytest.mark.parametrize("value", ["0", "-3", "x", "1e3", "99999999999", ""])
def test_bad_pid(run_probe, tmp_path, value):
    cp = run_probe("sysinfo", "--json", str(tmp_path / "p.json"), "--pid", value)
    assert cp.returncode == 2 and "--pid" in cp.stderr and "not a process ID" in cp.stderr
    assert not (tmp_path / "p.json").exists()


def test_too_many_pids(run_probe, tmp_path):
    args = [a for p in range(1, 66) for a in ("--pid", str(p))]
    cp = run_probe("sysinfo", "--json", str(tmp_path / "p.json"), *args)
    assert cp.returncode == 2 and "at most 64" in cp.stderr
