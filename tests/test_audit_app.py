"""`rtlab audit --pid/--comm`: an application's threads, on fake trees built from this
machine's real /proc files (tests/fixtures/app) and on planted live processes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from rtlab.errors import UserError
from rtlab.system import SysRoot
from rtlab.system._app import parse_stat, read_app_facts, sample_process
from rtlab.system._checks_app import run_app_audit

from .conftest import is_root

FIX = Path(__file__).parent / "fixtures" / "app"
PID = 4242
STAT_FIELDS = {"state": 3, "minflt": 10, "majflt": 12, "utime": 14, "stime": 15,
               "processor": 39, "rt_priority": 40,
               "policy": 41}  # fmt: skip
POLICY = {"other": 0, "fifo": 1, "rr": 2}


def _real(name: str) -> str:
    return (FIX / name).read_text()


def stat_with(text: str, pid: int, **values: Any) -> str:
    """A real stat line with PID and the named fields (1-based, proc.rst) replaced."""
    head, _, rest = text.rstrip("\n").rpartition(")")
    f = rest.split()
    for name, value in values.items():
        f[STAT_FIELDS[name] - 3] = str(value)
    comm = head.split("(", 1)[1]
    return f"{pid} ({comm}) " + " ".join(f) + "\n"


def with_fields(text: str, **values: Any) -> str:
    """A real status/sched file with the named lines' values replaced; each must exist."""
    for key, value in values.items():
        key = key.replace("__", ".")
        text, n = re.subn(rf"^({re.escape(key)}\s*:\s*).*$", rf"\g<1>{value}", text, flags=re.M)
        assert n == 1, f"{key} is not a line of the real file"
    return text


def thread(tid: int, policy: str = "fifo", prio: int = 10, cpus: str = "0-3", **counts: int):
    return {"tid": tid, "policy": policy, "prio": prio, "cpus": cpus, **counts}


def write_tree(
    root: Path,
    threads: list[dict[str, Any]],
    vm_lck_kb: int = 0,
    isolated: str = "",
    irqs: dict[int, str] | None = None,
    irq_thread_cpus: str = "0-3",
    kmsg: str | None = None,
    rt_runtime_us: int = 950000,
    sched: bool = True,
) -> None:
    files: dict[str, str] = {
        "sys/devices/system/cpu/online": "0-3\n",
        "sys/devices/system/cpu/isolated": isolated + "\n",
        "proc/sys/kernel/sched_rt_runtime_us": f"{rt_runtime_us}\n",
        "proc/sys/kernel/sched_rt_period_us": "1000000\n",
        "proc/cmdline": "quiet\n",
        "proc/50/stat": stat_with(_real("irq.stat"), 50),
        "proc/50/status": with_fields(_real("irq.status"), Cpus_allowed_list=irq_thread_cpus),
        "proc/18/stat": stat_with(_real("migration.stat"), 18),
        "proc/18/status": _real("migration.status"),
        f"proc/{PID}/stat": stat_with(_real("app.stat"), PID),
        f"proc/{PID}/status": with_fields(_real("app.status"), VmLck=f"{vm_lck_kb} kB"),
        f"proc/{PID}/limits": _real("app.limits"),
    }
    for n, cpu in (irqs or {}).items():
        files[f"proc/irq/{n}/effective_affinity_list"] = cpu + "\n"
        files[f"proc/irq/{n}/smp_affinity_list"] = cpu + "\n"
    if kmsg is not None:
        files["dev/kmsg"] = kmsg
    for t in threads:
        base = f"proc/{PID}/task/{t['tid']}"
        files[f"{base}/stat"] = stat_with(
            _real("app.stat"),
            t["tid"],
            policy=POLICY[t["policy"]],
            rt_priority=t["prio"],
            minflt=t.get("minflt", 100),
            majflt=t.get("majflt", 0),
            utime=t.get("utime", 5),
            stime=t.get("stime", 5),
            processor=t.get("cpu", 0),
        )
        files[f"{base}/status"] = with_fields(
            _real("app.status"),
            Cpus_allowed_list=t["cpus"],
            voluntary_ctxt_switches=t.get("vol", 10),
            nonvoluntary_ctxt_switches=t.get("nonvol", 0),
        )
        if sched:
            files[f"{base}/sched"] = with_fields(
                _real("app.sched"), se__nr_migrations=t.get("migr", 0)
            )
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def audit(tmp_path: Path, before: list[dict], after: list[dict] | None = None, **kw: Any):
    """The findings (id -> (status, evidence, fix)) over a window in which the tree goes
    from BEFORE to AFTER."""
    root = Path(tempfile.mkdtemp(dir=tmp_path))  # a fresh tree for each audit
    irqs = kw.pop("device_irqs", None)
    write_tree(root, before, **kw)
    facts = read_app_facts(
        SysRoot(root), [PID], 2.0, wait=lambda s: write_tree(root, after or before, **kw)
    )
    return {x.id: (x.status, x.evidence, x.fix) for x in run_app_audit(facts, irqs)}


# The real files' names: a misspelled field in the reader fails here.


def test_real_files_parse():
    stat = parse_stat(_real("app.stat"))
    assert stat is not None and stat["policy"] == 1 and stat["rt_priority"] == 10
    irq = parse_stat(_real("irq.stat"))
    assert irq is not None and irq["comm"].startswith("irq/") and irq["rt_priority"] == 50


def test_real_fields_read(tmp_path):
    root = tmp_path / "root"
    write_tree(root, [thread(PID)], vm_lck_kb=64)
    s = sample_process(SysRoot(root), PID)
    assert s is not None and s.vm_lck_kb == 64 and s.vm_rss_kb is not None
    assert s.memlock_limit is not None
    t = s.threads[PID]
    assert (t.policy, t.priority, t.cpus) == ("fifo", 10, [0, 1, 2, 3])
    assert t.voluntary == 10 and t.nonvoluntary == 0 and t.migrations == 0


# One finding of each kind.


def test_other_policy_warns(tmp_path):
    got = audit(tmp_path, [thread(PID, "other", 0)])
    assert got["app.priority"][0] == "WARN" and "no thread runs" in got["app.priority"][2]


def test_below_irq_thread_warns(tmp_path):
    got = audit(tmp_path, [thread(PID, prio=10)])
    assert got["app.priority"][0] == "WARN" and "irq/24-ACPI:Ged" in got["app.priority"][2]
    many = [thread(PID + i, prio=10) for i in range(20)]
    fix = audit(tmp_path, many)["app.priority"][2]
    assert fix.count("below irq/24") == 1 and "and 12 more" in fix  # one fix for all alike


def test_above_irq_threads_ok_and_99_warns(tmp_path):
    assert audit(tmp_path, [thread(PID, prio=60)])["app.priority"][0] == "OK"
    got = audit(tmp_path, [thread(PID, prio=99)])
    assert got["app.priority"][0] == "WARN" and "chrt -f -p 98" in got["app.priority"][2]


def test_irq_thread_elsewhere_not_compared(tmp_path):
    got = audit(tmp_path, [thread(PID, prio=10, cpus="3")], irq_thread_cpus="0")
    assert got["app.priority"][0] == "OK"


def test_above_device_irq_thread_warns(tmp_path):
    got = audit(tmp_path, [thread(PID, prio=60)], device_irqs=[24])
    assert got["app.priority"][0] == "WARN" and "its device's irq/24" in got["app.priority"][2]


def test_other_helper_thread_is_info(tmp_path):
    got = audit(tmp_path, [thread(PID, "other", 0), thread(PID + 1, prio=60)])
    assert got["app.priority"][0] == "INFO"


def test_affinity(tmp_path):
    got = audit(tmp_path, [thread(PID, prio=60, cpus="0-3")])
    assert got["app.affinity"][0] == "WARN" and "no CPU is isolated" in got["app.affinity"][2]
    got = audit(tmp_path, [thread(PID, prio=60, cpus="3")], isolated="3", irqs={30: "0"})
    assert got["app.affinity"][0] == "OK"
    got = audit(tmp_path, [thread(PID, prio=60, cpus="3")], isolated="3", irqs={30: "3"})
    assert got["app.affinity"][0] == "WARN" and "30" in got["app.affinity"][1]
    got = audit(tmp_path, [thread(PID, prio=60, cpus="2-3")], isolated="3")
    assert got["app.affinity"][0] == "WARN" and "not isolated" in got["app.affinity"][2]


def test_memlock(tmp_path):
    got = audit(tmp_path, [thread(PID)], vm_lck_kb=0)
    assert got["app.memlock"][0] == "WARN" and "MCL_FUTURE" in got["app.memlock"][1]
    rss = int(re.search(r"VmRSS:\s*(\d+)", _real("app.status")).group(1))
    assert audit(tmp_path, [thread(PID)], vm_lck_kb=rss)["app.memlock"][0] == "OK"


def test_faults(tmp_path):
    got = audit(tmp_path, [thread(PID)], [thread(PID, majflt=3)])
    assert got["app.faults"][0] == "FAIL" and "(4242) 3" in got["app.faults"][1]
    got = audit(tmp_path, [thread(PID)], [thread(PID, minflt=150)])
    assert got["app.faults"][0] == "WARN" and "(4242) 50" in got["app.faults"][1]
    before = [thread(PID, prio=60), thread(PID + 1, "other", 0)]
    after = [thread(PID, prio=60), thread(PID + 1, "other", 0, minflt=500)]
    assert audit(tmp_path, before, after)["app.faults"][0] == "OK"
    after = [thread(PID, prio=60), thread(PID + 1, "other", 0, majflt=1)]
    assert audit(tmp_path, before, after)["app.faults"][0] == "WARN"


def test_switches(tmp_path):
    got = audit(tmp_path, [thread(PID, prio=60)], [thread(PID, prio=60, vol=20, nonvol=4)])
    assert got["app.switches"][0] == "INFO" and "(4242) 10/4" in got["app.switches"][1]
    busy = [thread(PID, prio=60, vol=10, utime=150, stime=60)]  # 2.0 s of CPU in 2 s
    got = audit(tmp_path, [thread(PID, prio=60)], busy)
    assert got["app.switches"][0] == "WARN" and "never slept" in got["app.switches"][2]
    got = audit(tmp_path, [thread(PID, prio=60)], [thread(PID, prio=60, vol=10)])  # blocked
    assert got["app.switches"][0] == "OK" and "did not run" in got["app.switches"][1]


def test_migrations(tmp_path):
    got = audit(tmp_path, [thread(PID, prio=60)], [thread(PID, prio=60, migr=7)])
    assert got["app.migrations"][0] == "WARN" and "(4242) 7" in got["app.migrations"][1]
    got = audit(tmp_path, [thread(PID, prio=60, cpus="3")], sched=False)
    assert got["app.migrations"][0] == "OK" and "not readable" in got["app.migrations"][1]
    got = audit(tmp_path, [thread(PID, prio=60)], sched=False)
    assert got["app.migrations"][0] == "INFO"


def test_throttling(tmp_path):
    kernel = "4,344,157315833,-;sched: RT throttling activated\n"
    got = audit(tmp_path, [thread(PID, prio=60)], kmsg=kernel)
    assert got["app.throttling"][0] == "WARN" and "157.3 s after boot" in got["app.throttling"][1]
    user = "12,364,26708052992,-;someone: sched: RT throttling activated\n"
    assert audit(tmp_path, [thread(PID, prio=60)], kmsg=user)["app.throttling"][0] == "OK"
    assert audit(tmp_path, [thread(PID, prio=60)])["app.throttling"][0] == "INFO"  # no log
    got = audit(tmp_path, [thread(PID, prio=60)], kmsg=kernel, rt_runtime_us=-1)
    assert got["app.throttling"][0] == "OK"


def test_thread_begun_within_window_is_noted(tmp_path):
    root = tmp_path / "root"
    write_tree(root, [thread(PID)])
    facts = read_app_facts(
        SysRoot(root), [PID], 1.0, wait=lambda s: write_tree(root, [thread(PID), thread(4300)])
    )
    assert any("4300" in n and "began" in n for n in facts.notes)
    assert [t.minflt for t in facts.threads if t.tid == 4300] == [None]


# Bad input: one line, exit 2.


def test_process_ending_within_window(tmp_path):
    root = tmp_path / "root"
    write_tree(root, [thread(PID)])

    def end(_: float) -> None:
        for p in sorted((root / f"proc/{PID}").rglob("*"), reverse=True):
            p.unlink() if p.is_file() else p.rmdir()

    with pytest.raises(UserError, match="ended within the 2 s window"):
        read_app_facts(SysRoot(root), [PID], 2.0, wait=end)


def test_zombie_refused(tmp_path):
    root = tmp_path / "root"
    write_tree(root, [thread(PID)])
    (root / f"proc/{PID}/stat").write_text(stat_with(_real("app.stat"), PID, state="Z"))
    with pytest.raises(UserError, match="has exited"):
        read_app_facts(SysRoot(root), [PID], 1.0, wait=lambda s: None)


def test_cli_bad_input(rtlab, tmp_path):
    write_tree(tmp_path / "root", [thread(PID)])
    for args, words in [
        (["--pid", "999999999"], "no such process"),
        (["--comm", "no-such-name-x"], "no process of that name"),
        (["--pid", "2", "--root", str(tmp_path / "nowhere")], "not a directory"),
        (["--pid", "50", "--root", str(tmp_path / "root")], "kernel thread"),
        (["--pid", "1", "--window", "1h"], "out of range"),
        (["--pid", "1", "--target", "ssh://x", "--root", "/"], "--target excludes --root"),
        (["--pid", "1", "--from", "x.json"], "not with --from"),
        (["--irq", "3"], "--irq needs --pid"),
    ]:
        rc, _, err = rtlab("audit", *args)
        assert rc == 2 and words in err and "Traceback" not in err, (args, err)
        assert len(err.strip().splitlines()) == 1, err


def test_cli_json_on_tree(rtlab, tmp_path):
    write_tree(tmp_path / "root", [thread(PID, prio=10)], kmsg="")
    rc, out, _ = rtlab("audit", "--root", str(tmp_path / "root"), "--pid", str(PID), "--json",
                       "--window", "100ms")  # fmt: skip
    doc = json.loads(out)
    ids = [x["id"] for x in doc["findings"]]
    assert ids == ["app.priority", "app.affinity", "app.memlock", "app.faults",
                   "app.switches", "app.migrations", "app.throttling"]  # fmt: skip
    assert set(doc["findings"][0]) == {"id", "status", "title", "evidence", "fix", "why"}
    assert doc["facts"]["threads"][0]["tid"] == PID and rc == 0


# Live: planted misconfigured processes, stopped by PID.

PLANTED = r"""
import ctypes, mmap, os, sys, time
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(sys.argv[1])))
if sys.argv[2] == "lock":
    assert ctypes.CDLL(None, use_errno=True).mlockall(3) == 0  # MCL_CURRENT | MCL_FUTURE
if sys.argv[3] == "major":  # a file on disk, dropped from the page cache in each round
    fd = os.open(sys.argv[4], os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, b"x" * (1 << 20))
    os.fsync(fd)
print("ready", flush=True)
while True:
    if sys.argv[3] == "fault":
        m = mmap.mmap(-1, 64 * 4096)
        for i in range(0, len(m), 4096):
            m[i] = 1  # a fresh page: a minor fault each
        m.close()
    if sys.argv[3] == "major":
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        m = mmap.mmap(fd, 1 << 20, prot=mmap.PROT_READ)
        sum(m[i] for i in range(0, len(m), 4096))  # read back from disk: major faults
        m.close()
    time.sleep(0.002)
"""


def _planted(prio: int, lock: str, fault: str, path: str = ""):
    p = subprocess.Popen(
        [sys.executable, "-c", PLANTED, str(prio), lock, fault, path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = p.stdout.readline() if p.stdout else ""
    if line.strip() != "ready":
        p.kill()
        p.wait()
        pytest.skip(f"cannot set up the planted process here: {p.stderr.read().strip()[-200:]}")
    return p


def _live(rtlab, p) -> dict[str, tuple[str, str, str]]:
    rc, out, err = rtlab("audit", "--pid", str(p.pid), "--json", "--window", "1s")
    assert rc in (0, 1), err
    return {x["id"]: (x["status"], x["evidence"], x["fix"]) for x in json.loads(out)["findings"]}


@pytest.mark.skipif(not is_root(), reason="SCHED_FIFO and mlockall need root")
def test_live_misconfigured(rtlab):
    p = _planted(10, "nolock", "fault")
    try:
        got = _live(rtlab, p)
        irq = [t for t in _irq_threads() if t[1] > 10]
    finally:
        p.kill()
        p.wait()
    assert got["app.memlock"][0] == "WARN"
    assert got["app.faults"][0] in ("WARN", "FAIL")  # minor faults in a fifo thread
    assert got["app.affinity"][0] == "WARN"  # not pinned to one isolated CPU
    if irq:  # a threaded IRQ handler above fifo:10 on its CPUs
        assert got["app.priority"][0] == "WARN" and "below irq/" in got["app.priority"][2]


@pytest.mark.skipif(not is_root(), reason="SCHED_FIFO and mlockall need root")
def test_live_major_faults_fail(rtlab, tmp_path):
    if os.statvfs(tmp_path).f_blocks == 0 or "tmpfs" in _fs_type(tmp_path):
        pytest.skip(f"{tmp_path} is not on a disk: its pages are never read back")
    p = _planted(10, "nolock", "major", str(tmp_path / "data"))
    try:
        got = _live(rtlab, p)
    finally:
        p.kill()
        p.wait()
    assert got["app.faults"][0] == "FAIL" and "mlockall" in got["app.faults"][2], got


def _fs_type(path: Path) -> str:
    """The file system type of the mount PATH is on (/proc/self/mounts)."""
    best, kind = "", ""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        parts = line.split()
        if len(parts) > 2 and str(path).startswith(parts[1]) and len(parts[1]) >= len(best):
            best, kind = parts[1], parts[2]
    return kind


@pytest.mark.skipif(not is_root(), reason="SCHED_FIFO and mlockall need root")
def test_live_locked_quiet(rtlab):
    p = _planted(60, "lock", "quiet")
    try:
        time.sleep(0.2)  # let it settle after mlockall
        got = _live(rtlab, p)
    finally:
        p.kill()
        p.wait()
    assert got["app.memlock"][0] == "OK"
    assert got["app.priority"][0] == "OK"
    assert "(" in got["app.switches"][1] and got["app.switches"][0] != "WARN"  # it sleeps


def _irq_threads() -> list[tuple[str, int]]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            stat = parse_stat(Path(f"/proc/{pid}/stat").read_text())
        except OSError:
            continue
        if stat and stat["comm"].startswith("irq/") and stat["policy"] in (1, 2):
            out.append((stat["comm"], stat["rt_priority"]))
    return out


def test_fault_and_time_fields_are_the_kernels():
    """Fields 10 and 12 of /proc/self/stat are this process's minor and major faults, as
    getrusage counts them (read after: never fewer), 14 and 15 its CPU time."""
    import resource

    stat = parse_stat(Path("/proc/self/stat").read_text())
    usage = resource.getrusage(resource.RUSAGE_SELF)
    assert stat is not None
    assert stat["minflt"] <= usage.ru_minflt <= stat["minflt"] + 10_000
    assert stat["majflt"] <= usage.ru_majflt <= stat["majflt"] + 100
    times = os.times()  # fields 14 + 15: user and system time in ticks of 1/100 s
    assert stat["cpu_ticks"] / 100 <= times.user + times.system + 0.02
    assert times.user + times.system <= stat["cpu_ticks"] / 100 + 5


def test_live_process_ending_within_window(rtlab):
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    try:
        rc, _, err = rtlab("audit", "--pid", str(p.pid), "--window", "2s")
    finally:
        p.kill()
        p.wait()
    assert rc == 2 and f"PID {p.pid} (python" in err and "ended within the 2 s window" in err


def test_live_zombie_is_not_alive(rtlab):
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        p.kill()  # not reaped yet: a zombie
        for _ in range(500):
            stat = parse_stat(Path(f"/proc/{p.pid}/stat").read_text())
            if stat and stat["state"] == "Z":
                break
            time.sleep(0.01)
        rc, _, err = rtlab("audit", "--pid", str(p.pid))
    finally:
        p.wait()
    assert rc == 2 and "has exited" in err and "zombie" in err, err
