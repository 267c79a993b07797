"""The real-time policy checks on fixture trees: RCU boosting on PREEMPT_RT, memory
overcommit and the OOM killer, IRQ threads and the priorities of real-time user threads."""

from __future__ import annotations

from pathlib import Path

import pytest

from rtlab.system import Context, SysRoot, read_facts, run_audit
from rtlab.system._kconfig_fragment import kconfig_fragment, settings

from .conftest import make_root

RELEASE = "6.6.30-rt30"
KTHREAD, USER = 0x00208040, 0x00400100  # kthreadd's and systemd's flags (PF_KTHREAD or not)
FIFO, RR, OTHER = 1, 2, 0


def stat(pid: int, comm: str, flags: int, prio: int = 0, policy: int = OTHER) -> str:
    """A /proc/PID/stat line: rt_priority and policy are fields 40 and 41."""
    return f"{pid} ({comm}) S 2 {pid} {pid} 0 -1 {flags} " + "0 " * 30 + f"{prio} {policy} 0 0 0"


def task(files: dict[str, str], pid: int, comm: str, cpus: str, **kw) -> None:
    flags = kw.pop("flags", USER)
    base = kw.pop("base", f"proc/{pid}")
    files[f"{base}/stat"] = stat(int(base.rsplit("/", 1)[1]), comm, flags, **kw)
    files[f"{base}/status"] = f"Name:\t{comm}\nCpus_allowed_list:\t{cpus}\n"


def audit(tmp_path: Path, files: dict[str, str], rt: list[int] | None = None):
    base = {
        "sys/devices/system/cpu/online": "0-3",
        "proc/cmdline": "quiet",
        "proc/sys/kernel/osrelease": RELEASE,
    }
    facts = read_facts(SysRoot(make_root(tmp_path, {**base, **files})), rt)
    return facts, {f.id: f for f in run_audit(facts, Context())}


# RCU_BOOST


@pytest.mark.parametrize(
    ("realtime", "config", "status"),
    [
        ("1", "CONFIG_PREEMPT_RT=y\nCONFIG_RCU_BOOST=y\nCONFIG_RCU_BOOST_DELAY=500\n", "OK"),
        ("1", "CONFIG_PREEMPT_RT=y\n# CONFIG_RCU_BOOST is not set\n", "WARN"),
        (None, "CONFIG_PREEMPT_VOLUNTARY=y\n", "INFO"),
    ],
    ids=["rt-boost", "rt-no-boost", "generic"],
)
def test_rcu_boost_on_preempt_rt(tmp_path, realtime, config, status):
    files = {f"boot/config-{RELEASE}": config, "proc/cmdline": "rcutree.kthread_prio=10"}
    if realtime:
        files["sys/kernel/realtime"] = realtime
    task(files, 30, "rcub/0", "0-3", flags=KTHREAD, prio=10, policy=FIFO)
    facts, got = audit(tmp_path, files)
    x = got["kernel.rcu_boost"]
    assert x.status == status
    fragment = settings(kconfig_fragment(facts, list(got.values()), "tree", "test"))
    assert ("CONFIG_RCU_BOOST=y" in fragment) == (status == "WARN")
    if status == "INFO":
        assert "not a PREEMPT_RT kernel" in x.evidence and x.fix == ""
        return
    assert f"/boot/config-{RELEASE}: CONFIG_RCU_BOOST=" in x.evidence
    assert "rcutree.kthread_prio=10" in x.evidence and "rcub/N threads at fifo:10" in x.evidence
    if status == "OK":
        assert "CONFIG_RCU_BOOST_DELAY=500 (ms)" in x.evidence
    else:
        assert "CONFIG_RCU_BOOST=not set" in x.evidence and "CONFIG_RCU_BOOST=y" in x.fix


# Overcommit and OOM

MEMINFO = "MemTotal: 4000000 kB\nSwapTotal: 1000000 kB\nCommitLimit: {limit} kB\n"
MEMINFO += "Committed_AS: {used} kB\n"


def vm(mode: int, ratio: int = 50, used: int = 1_000_000, limit: int = 3_000_000, **kw):
    return {
        "proc/sys/vm/overcommit_memory": str(mode),
        "proc/sys/vm/overcommit_ratio": str(ratio),
        "proc/sys/vm/overcommit_kbytes": "0",
        "proc/sys/vm/oom_kill_allocating_task": str(kw.get("kill_allocating", 0)),
        "proc/sys/vm/panic_on_oom": str(kw.get("panic", 0)),
        "proc/meminfo": MEMINFO.format(limit=limit, used=used),
    }


@pytest.mark.parametrize(
    ("files", "status", "fix"),
    [
        (vm(2), "OK", ""),
        (vm(0), "INFO", "vm.overcommit_memory=2 vm.overcommit_ratio=50"),
        (vm(1, used=4_000_000), "WARN", "vm.overcommit_ratio=100"),
        (vm(2, used=2_900_000), "INFO", "close to the commit limit: sysctl vm.overcommit_ratio=66"),
        ({}, "INFO", ""),
    ],
    ids=["never", "heuristic", "always", "never-near-limit", "unreadable"],
)
def test_overcommit(tmp_path, files, status, fix):
    _, got = audit(tmp_path, files)
    x = got["vm.overcommit"]
    assert x.status == status
    assert fix in x.fix
    if files:
        mode = files["proc/sys/vm/overcommit_memory"]
        assert x.evidence.startswith(f"/proc/sys/vm/overcommit_memory: {mode} (")
        assert "Committed_AS" in x.evidence
        if mode != "2":
            assert "oom_score_adj" in x.fix
    else:
        assert x.evidence == "/proc/sys/vm/overcommit_memory not readable"


def test_ratio_beyond_ram_and_swap_says_commit_less(tmp_path):
    _, got = audit(tmp_path, vm(0, used=8_000_000))
    assert "vm.overcommit_ratio=225" in got["vm.overcommit"].fix
    assert "commit less" in got["vm.overcommit"].fix


@pytest.mark.parametrize(
    ("adj", "kw", "status", "fix"),
    [
        ("-1000", {}, "OK", ""),
        ("0", {}, "INFO", "echo -1000 > /proc/$PID/oom_score_adj"),
        ("0", {"kill_allocating": 1}, "INFO", "sysctl vm.oom_kill_allocating_task=0"),
        ("-1000", {"panic": 1}, "INFO", "vm.panic_on_oom=0"),
    ],
    ids=["protected", "exposed", "kill-allocating", "panic"],
)
def test_oom_policy(tmp_path, adj, kw, status, fix):
    files = vm(2, **kw)
    task(files, 900, "control-loop", "3", prio=80, policy=FIFO)
    files["proc/900/oom_score_adj"] = adj
    _, got = audit(tmp_path, files)
    x = got["vm.oom"]
    assert x.status == status and fix in x.fix
    assert "/proc/sys/vm/oom_kill_allocating_task:" in x.evidence
    assert ("control-loop (900): 0" in x.evidence) == (adj == "0")
    if adj == "0":
        assert "900" in x.fix


# IRQ threads and real-time priorities


def machine(*user: tuple[int, str, str, int], irq_cpus: str = "0-3") -> dict[str, str]:
    """Two IRQ threads at fifo:50 (and 51) on IRQ_CPUS, the migration threads, and USER
    real-time processes (pid, comm, cpus, fifo priority)."""
    files: dict[str, str] = {}
    task(files, 31, "migration/3", "3", flags=KTHREAD, prio=99, policy=FIFO)
    task(files, 50, "irq/24-eth0", irq_cpus, flags=KTHREAD, prio=50, policy=FIFO)
    task(files, 51, "irq/25-s-mmc0", irq_cpus, flags=KTHREAD, prio=51, policy=FIFO)
    task(files, 1, "systemd", "0-3")
    for pid, comm, cpus, prio in user:
        task(files, pid, comm, cpus, prio=prio, policy=FIFO)
    return files


def test_irq_threads_summarised(tmp_path):
    facts, got = audit(tmp_path, machine())
    x = got["irq.threads"]
    assert x.status == "OK"
    assert "2 IRQ threads at fifo:50 x1, fifo:51 x1 (irq/24-eth0, irq/25-s-mmc0)" in x.evidence
    assert "migration/N fifo:99" in x.evidence and "stop class" in x.evidence
    assert facts.irq_thread_max_prio == {str(c): 51 for c in range(4)}
    assert got["tasks.rt_priority"].status == "INFO"  # no real-time user thread
    assert "nothing to compare" in got["tasks.rt_priority"].evidence


def test_no_threaded_irqs(tmp_path):
    files: dict[str, str] = {}
    task(files, 1, "systemd", "0-3")
    task(files, 31, "migration/3", "3", flags=KTHREAD, prio=99, policy=FIFO)
    _, got = audit(tmp_path, files)
    x = got["irq.threads"]
    assert x.status == "INFO" and "threadirqs" in x.fix
    assert x.evidence.startswith("/proc/PID/stat: 0 IRQ threads")


@pytest.mark.parametrize(
    ("prio", "status", "fix", "evidence"),
    [
        (99, "WARN", "chrt -f -p 98 900 (control-loop)", "control-loop (900) fifo:99 CPUs 3"),
        (
            80,
            "INFO",
            "raise the IRQ thread of your device with chrt -f -p PRIO PID",
            "51 on CPUs 0-3",
        ),
    ],
    ids=["at-99", "above-the-irq-threads-of-its-cpus"],
)
def test_user_thread_flagged(tmp_path, prio, status, fix, evidence):
    _, got = audit(tmp_path, machine((900, "control-loop", "3", prio)))
    x = got["tasks.rt_priority"]
    assert x.status == status and fix in x.fix and evidence in x.evidence


@pytest.mark.parametrize(
    ("prio", "irq_cpus"),
    [(40, "0-3"), (80, "0-2")],
    ids=["below-the-irq-threads", "irq-threads-elsewhere"],
)
def test_user_thread_fine(tmp_path, prio, irq_cpus):
    _, got = audit(tmp_path, machine((900, "control-loop", "3", prio), irq_cpus=irq_cpus))
    x = got["tasks.rt_priority"]
    assert x.status == "OK" and x.fix == ""
    assert f"control-loop (900) fifo:{prio} CPUs 3" in x.evidence


def test_real_time_thread_that_is_not_the_main_thread_is_seen(tmp_path):
    """The main thread of a measuring program runs SCHED_OTHER; its worker is fifo:99."""
    files = {**machine(), **vm(2)}
    task(files, 700, "cyclictest", "0-3")
    task(files, 700, "cyclictest", "0-3", base="proc/700/task/700")
    task(files, 700, "cyclictest", "2", base="proc/700/task/701", prio=99, policy=FIFO)
    files["proc/700/oom_score_adj"] = "0"
    facts, got = audit(tmp_path, files)
    assert facts.rt_user_threads == 1
    assert facts.rt_user_thread_list[0] == {
        "pid": 700,
        "tid": 701,
        "comm": "cyclictest",
        "policy": "fifo",
        "priority": 99,
        "cpus": "2",
        "oom_score_adj": 0,
    }
    assert got["tasks.rt_priority"].status == "WARN"
    assert "chrt -f -p 98 701 (cyclictest)" in got["tasks.rt_priority"].fix
    assert "cyclictest (700): 0" in got["vm.oom"].evidence


def test_kernel_threads_are_not_user_threads(tmp_path):
    facts, _ = audit(tmp_path, machine())
    assert facts.rt_user_threads == 0 and facts.irq_threads == 2
    assert facts.rt_kthreads == {"migration/N": ["fifo:99"]}
