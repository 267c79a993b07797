"""rtlab partition on this machine: a cgroup v1 cpuset partition of the last CPU, created,
shown, joined, measured in and undone (also after a crash in the middle of create), leaving
nothing behind. Needs root and cgroup v1 cpusets at /sys/fs/cgroup/cpuset; every test
undoes its partition in a finally."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rtlab.probe import find_probe
from rtlab.system import LIVE_ROOT, isolated_cpus, read_facts
from rtlab.tune import CRASH_ENV
from tests._skips import skip_setup
from tests.conftest import is_root

CPUSET = Path("/sys/fs/cgroup/cpuset")
SRC = Path(__file__).resolve().parents[1] / "src"
LOCK = "/tmp/rtlab-partition-live.lock"  # serialises these tests between pytest runs

pytestmark = [
    pytest.mark.skipif(not is_root(), reason="needs root (cgroup and IRQ writes)"),
    pytest.mark.skipif(not (CPUSET / "tasks").is_file(), reason="no cgroup v1 cpuset hierarchy"),
    pytest.mark.skipif(
        len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs (one stays housekeeping)"
    ),
]


def last_cpu() -> int:
    text = Path("/sys/devices/system/cpu/online").read_text().strip()
    return int(text.replace("-", ",").split(",")[-1])


def rtlab(state: Path, *args: str, env: dict | None = None, timeout: float = 120):
    """The CLI in a child process (create moves every task, pytest included)."""
    e = {**os.environ, "RTLAB_STATE": str(state), "PYTHONPATH": str(SRC), **(env or {})}
    return subprocess.run([sys.executable, "-m", "rtlab.cli", *args], env=e, text=True,
                          capture_output=True, timeout=timeout)  # fmt: skip


def system_state() -> dict:
    """What the partition changes and undo must restore: our cpuset tree, the root's
    settings, interrupt affinities and workqueue masks."""
    irqs = {}
    for d in Path("/proc/irq").iterdir():
        if d.name.isdigit() and (d / "smp_affinity_list").exists():
            irqs[d.name] = (d / "smp_affinity_list").read_text()
    masks = [Path(p).read_text() for p in ("/proc/irq/default_smp_affinity",
             "/sys/devices/virtual/workqueue/cpumask",
             "/sys/bus/workqueue/devices/writeback/cpumask") if Path(p).exists()]  # fmt: skip
    return {
        "listing": sorted(p.name for p in CPUSET.iterdir()),
        "dirs": sorted(p.name for p in CPUSET.iterdir() if p.is_dir()),
        "load_balance": (CPUSET / "cpuset.sched_load_balance").read_text(),
        "cpus": (CPUSET / "cpuset.cpus").read_text(),
        "irqs": irqs,
        "masks": masks,
    }


@pytest.fixture
def partition(tmp_path):
    """(state dir, RT CPU): a clean start, and the partition undone whatever happens. One
    test at a time on this machine, also across concurrent pytest runs (a lock file)."""
    state = tmp_path / "state"
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        before = system_state()
        assert not (CPUSET / "rt").exists(), "a cpuset 'rt' exists already"
        try:
            yield state, last_cpu(), before
        finally:
            if (state / "tune" / "partition-rt.jsonl").exists():
                rtlab(state, "partition", "undo")
        assert system_state() == before


def test_create_show_run_undo(partition):
    state, cpu, _ = partition
    pinned = subprocess.Popen(["taskset", "-c", "0", "sleep", "300"])
    free = subprocess.Popen(["sleep", "300"])
    try:
        time.sleep(0.1)
        cp = rtlab(state, "partition", "create", "--rt", str(cpu), "--json")
        assert cp.returncode == 0, cp.stderr
        made = json.loads(cp.stdout)
        assert made["version"] == 1 and made["moved"] > 0 and made["per_cpu_kthreads"] > 0
        assert (CPUSET / "rt/cpuset.cpus").read_text().strip() == str(cpu)
        assert (CPUSET / "rt/cpuset.cpu_exclusive").read_text().strip() == "1"
        assert (CPUSET / "rt/cpuset.sched_load_balance").read_text().strip() == "0"
        assert (CPUSET / "cpuset.sched_load_balance").read_text().strip() == "0"
        assert Path(f"/proc/{free.pid}/cpuset").read_text().strip() == "/rt-hk"
        assert cpu not in os.sched_getaffinity(free.pid)

        cp = rtlab(state, "partition", "show", "--json")
        info = json.loads(cp.stdout)
        assert cp.returncode == 0 and info["exists"] and info["cgroup"] == "cgroup v1"
        assert info["rt_cpus"] == str(cpu) and info["hk_tasks"] > 0

        cp = rtlab(state, "partition", "run", "--", "cat", "/proc/self/cpuset")
        assert (cp.returncode, cp.stdout) == (0, "/rt\n"), cp.stderr
        cp = rtlab(state, "partition", "run", "--", "sh", "-c", "exit 7")
        assert cp.returncode == 7

        # The audit, the fingerprint and cpus = "isolated" see the partition.
        iso = isolated_cpus(LIVE_ROOT)
        assert (iso.cpus, iso.source, iso.partition) == ([cpu], "cpuset partition",
                                                         str(CPUSET / "rt"))  # fmt: skip
        assert read_facts(LIVE_ROOT).isolation_partition == str(CPUSET / "rt")

        cp = rtlab(state, "partition", "undo")
        assert cp.returncode == 0, cp.stdout + cp.stderr
        assert not (state / "tune" / "partition-rt.jsonl").exists()
        assert Path(f"/proc/{free.pid}/cpuset").read_text().strip() == "/"
        assert os.sched_getaffinity(pinned.pid) == {0}  # its own affinity survived the trip
        assert os.sched_getaffinity(free.pid) == os.sched_getaffinity(0)
    finally:
        for p in (pinned, free):
            p.kill()
            p.wait()


@pytest.mark.parametrize("crash_after", [1, 5, 9, 30])
def test_undo_after_a_crash_in_create(partition, crash_after):
    state, cpu, _ = partition
    cp = rtlab(state, "partition", "create", "--rt", str(cpu), env={CRASH_ENV: str(crash_after)})
    assert cp.returncode == -9, cp.stderr  # SIGKILLed after its Nth change
    cp = rtlab(state, "partition", "undo", "--json")
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert json.loads(cp.stdout)["restored"]


def _probe_has_cgroup_options() -> bool:
    try:
        cp = subprocess.run([str(find_probe()), "list", "--json"], capture_output=True,
                            text=True, timeout=30)  # fmt: skip
        doc = json.loads(cp.stdout)
    except Exception:  # no probe, or not one that lists its options
        return False
    return "thread-cgroup" in {o["name"] for o in doc["common_options"]}


def _tasks_of(pid: int) -> list[tuple[str, str, str]]:
    """(comm, cpuset, allowed CPUs) of every thread of PID and of its children."""
    out = []
    pids = [pid] + [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    for p in pids:
        for t in Path(f"/proc/{p}/task").iterdir():
            status = (t / "status").read_text()
            allowed = next(ln.split()[1] for ln in status.splitlines()
                           if ln.startswith("Cpus_allowed_list"))  # fmt: skip
            out.append(((t / "comm").read_text().strip(), (t / "cpuset").read_text().strip(),
                        allowed))  # fmt: skip
    return out


def test_run_partition_measures_in_the_partition_and_loads_outside(partition, tmp_path):
    if not _probe_has_cgroup_options():
        skip_setup("the rtlab-probe found has no --thread-cgroup (an older build)")
    state, cpu, _ = partition
    exp = tmp_path / "exp.toml"
    exp.write_text('[[series]]\nname = "iso"\ncpus = "isolated"\nduration = "4s"\n'
                   'settle = "100ms"\nload = "spin:1"\n')  # fmt: skip
    cp = rtlab(state, "partition", "create", "--rt", str(cpu))
    assert cp.returncode == 0, cp.stderr
    env = {**os.environ, "RTLAB_STATE": str(state), "PYTHONPATH": str(SRC)}
    run = subprocess.Popen([sys.executable, "-m", "rtlab.cli", "run", str(exp), "--partition",
                            "--results", str(tmp_path / "res"), "--json"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    seen: list[tuple[str, str, str]] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and run.poll() is None:
            probes = [int(c) for c in _children(run.pid)]
            try:
                seen = [t for p in probes for t in _tasks_of(p)]
            except (OSError, StopIteration):
                seen = []
            spin = any(comm == "rtlab:spin" for comm, _, _ in seen)
            if spin and any(cs == "/rt" for _, cs, _ in seen):  # loads and the measuring thread
                break
            time.sleep(0.1)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 0, err
    probe_threads = [t for t in seen if t[0] == "rtlab-probe"]
    loads = [t for t in seen if t[0] == "rtlab:spin"]
    assert loads and all(cs == "/rt-hk" and str(cpu) not in al.split(",") for _, cs, al in loads)
    assert ("rtlab-probe", "/rt", str(cpu)) in probe_threads  # the measuring thread
    assert any(cs == "/rt-hk" for _, cs, _ in probe_threads)  # the main thread stays out
    stored = json.loads(out)
    manifest = json.loads((Path(stored["path"]) / "experiment.json").read_text())
    assert manifest["cases"][0]["params"]["partition"] == "rt"
    assert any("partition rt" in n for n in manifest["notes"])


def _children(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
