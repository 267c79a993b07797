"""Facts of the real-time policy checks (_checks_rt.py): RCU priority boosting, memory
commitment and OOM policy, and the SCHED_FIFO/RR threads with their priorities.

Every path read here is collected by `rtlab-probe sysinfo` (probe/src/sysinfo.c).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rtlab.system._cmdline import Cmdline
from rtlab.system._cpus import format_cpulist, system_cpulist
from rtlab.system._facts import (
    MAX_TASKS_LISTED,
    PF_KTHREAD,
    SCHED_FIFO,
    SCHED_RR,
    _int,
    _numbered,
    _within,
    parse_task_sched,
)
from rtlab.system._root import Root

if TYPE_CHECKING:
    from rtlab.system._facts import Facts

RCU_CONFIG = ("CONFIG_RCU_BOOST", "CONFIG_RCU_BOOST_DELAY")  # kernel/rcu/Kconfig
VM = "proc/sys/vm"
MAX_THREADS_READ = 65536  # /proc/PID/task/TID/stat files read in all
MAX_RT_LISTED = 256  # user real-time threads kept (the count stays exact)
MAX_KTHREAD_GROUPS = 64  # kernel thread names kept ("migration/N")
IRQ_THREAD = re.compile(r"irq/\d+-")  # kernel/irq/manage.c: "irq/%d-%s", "irq/%d-s-%s"
POLICY_NAMES = {
    0: "other", SCHED_FIFO: "fifo", SCHED_RR: "rr", 3: "batch", 5: "idle", 6: "deadline",
}  # fmt: skip


def _meminfo_kb(text: str | None, key: str) -> int | None:
    for line in (text or "").splitlines():
        name, _, rest = line.partition(":")
        if name == key:
            return _int(rest)
    return None


def _cpus(root: Root, status: str) -> list[int] | None:
    for line in (root.read(status) or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            text = line.split(":", 1)[1].strip()
            return system_cpulist(text, f"{root.describe()}: /{status}")
    return None


def _threads(root: Root, pid: str, kthread: bool) -> list[str]:
    """The /proc directories of PID's threads: its own for a kernel thread (never more than
    one), task/TID for a user process (its leader's own when task/ is not readable)."""
    if kthread:
        return [f"proc/{pid}"]
    tids = [t for t in root.listdir(f"proc/{pid}/task") or [] if _numbered(t)]
    return [f"proc/{pid}/task/{t}" for t in sorted(tids, key=int)] or [f"proc/{pid}"]


def _kthread(root: Root, f: Facts, comm: str, policy: str, prio: int, base: str) -> int:
    """Record kernel thread COMM; the CPU numbers kept of it."""
    rt = policy in ("fifo", "rr")
    if IRQ_THREAD.match(comm):
        f.irq_threads += 1
        key = f"{policy}:{prio}" if rt else policy
        f.irq_thread_prios[key] = f.irq_thread_prios.get(key, 0) + 1
        if len(f.irq_thread_names) < MAX_TASKS_LISTED:
            f.irq_thread_names.append(comm)
        cpus = _cpus(root, f"{base}/status") if rt else None
        for cpu in cpus or []:
            f.irq_thread_max_prio[str(cpu)] = max(prio, f.irq_thread_max_prio.get(str(cpu), 0))
        return len(cpus or [])
    if rt:
        group = re.sub(r"\d+", "N", comm)
        if group in f.rt_kthreads or len(f.rt_kthreads) < MAX_KTHREAD_GROUPS:
            prios = f.rt_kthreads.setdefault(group, [])
            if f"{policy}:{prio}" not in prios:
                prios.append(f"{policy}:{prio}")
    return 0


def _rt_threads(root: Root, f: Facts) -> None:
    read = kept = 0
    users: list[dict] = []
    oom_adj: dict[str, int | None] = {}
    for pid in root.listdir("proc") or []:
        if not _numbered(pid):
            continue
        stat = root.read(f"proc/{pid}/stat")
        leader = parse_task_sched(stat) if stat else None
        if leader is None:
            continue
        kthread = bool(leader[1] & PF_KTHREAD)
        for base in _threads(root, pid, kthread):
            if read >= MAX_THREADS_READ:
                break
            read += 1
            text = stat if base == f"proc/{pid}" else root.read(f"{base}/stat")
            parsed = parse_task_sched(text) if text else None
            if parsed is None:
                continue
            comm, _, policy_no, prio = parsed
            policy = POLICY_NAMES.get(policy_no, str(policy_no))
            if kthread:
                kept += _kthread(root, f, comm, policy, prio, base)
                _within(kept, root)
                continue
            if policy_no not in (SCHED_FIFO, SCHED_RR):
                continue
            f.rt_user_threads += 1
            if pid not in oom_adj:
                oom_adj[pid] = _int(root.read(f"proc/{pid}/oom_score_adj"))
            cpus = _cpus(root, f"{base}/status")
            users.append(
                {
                    "pid": int(pid),
                    "tid": int(base.rsplit("/", 1)[1]),
                    "comm": comm,
                    "policy": policy,
                    "priority": prio,
                    "cpus": None if cpus is None else format_cpulist(cpus),
                    "oom_score_adj": oom_adj[pid],
                }
            )
    users.sort(key=lambda t: (-t["priority"], t["pid"], t["tid"]))
    f.rt_user_thread_list = users[:MAX_RT_LISTED]
    f.irq_thread_prios = dict(sorted(f.irq_thread_prios.items()))
    f.irq_thread_max_prio = dict(sorted(f.irq_thread_max_prio.items(), key=lambda kv: int(kv[0])))
    f.rt_threads_read = read > 0  # a captured tree holds no process: nothing was read


def read_rt_facts(root: Root, f: Facts, config: dict[str, str]) -> None:
    f.config.update({k: config[k] for k in RCU_CONFIG if k in config})
    f.rcu_kthread_prio = Cmdline.parse(f.cmdline).get("rcutree.kthread_prio")
    f.overcommit_memory = _int(root.read(f"{VM}/overcommit_memory"))
    f.overcommit_ratio = _int(root.read(f"{VM}/overcommit_ratio"))
    f.overcommit_kbytes = _int(root.read(f"{VM}/overcommit_kbytes"))
    f.oom_kill_allocating_task = _int(root.read(f"{VM}/oom_kill_allocating_task"))
    f.panic_on_oom = _int(root.read(f"{VM}/panic_on_oom"))
    meminfo = root.read("proc/meminfo")
    f.mem_total_kb = _meminfo_kb(meminfo, "MemTotal")
    f.swap_total_kb = _meminfo_kb(meminfo, "SwapTotal")
    f.commit_limit_kb = _meminfo_kb(meminfo, "CommitLimit")
    f.committed_as_kb = _meminfo_kb(meminfo, "Committed_AS")
    _rt_threads(root, f)
