"""The facts of the application audit: a running process's threads, read twice a window
apart through one root, with the system facts they are judged against.

Per thread (Documentation/filesystems/proc.rst, fs/proc/array.c, kernel/sched/debug.c):
/proc/PID/task/TID/stat fields 3 state, 10 minflt, 12 majflt, 14 utime, 15 stime
(clock ticks of USER_HZ), 39 processor, 40
rt_priority, 41 policy; /proc/PID/task/TID/status Cpus_allowed_list,
voluntary_ctxt_switches, nonvoluntary_ctxt_switches; /proc/PID/task/TID/sched
se.nr_migrations (the file exists only with CONFIG_SCHED_DEBUG, always on kernels
without that option: 6.18). Per process:
/proc/PID/status VmLck and VmRSS, /proc/PID/limits "Max locked memory".

Limits: at most MAX_APP_PIDS processes, MAX_APP_THREADS threads of each (more are left
out and counted), a kernel log of at most MAX_KMSG_RECORDS records.
"""

from __future__ import annotations

import errno
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from rtlab.errors import UserError
from rtlab.system._cpus import format_cpulist, system_cpulist
from rtlab.system._facts import PF_KTHREAD, Facts, _int, _numbered, read_facts
from rtlab.system._facts_rt import IRQ_THREAD, POLICY_NAMES
from rtlab.system._root import Root

MAX_APP_PIDS = 64
MAX_APP_THREADS = 4096
MAX_KMSG_RECORDS = 65536
MIN_WINDOW_S, MAX_WINDOW_S = 0.1, 600.0
USER_HZ = 100  # the clock ticks of /proc/PID/stat times (sysconf(_SC_CLK_TCK) on Linux)
THROTTLING = "sched: RT throttling activated"  # kernel/sched/rt.c, printed once per boot
# Kernel threads whose real-time priority an application thread is judged against.
KERNEL_RT = re.compile(r"(ktimers|ksoftirqd|rcuc|rcub|rcuop|rcuog|migration)/\d+$")


@dataclass(frozen=True)
class ThreadSample:
    tid: int
    comm: str
    state: str
    policy: str
    priority: int
    cpus: list[int] | None  # Cpus_allowed_list
    last_cpu: int | None  # stat field 39, the CPU it last ran on
    minflt: int
    majflt: int
    cpu_ticks: int  # utime + stime
    voluntary: int | None
    nonvoluntary: int | None
    migrations: int | None  # se.nr_migrations; None without /proc/PID/task/TID/sched


@dataclass(frozen=True)
class ProcessSample:
    pid: int
    comm: str
    state: str
    vm_lck_kb: int | None
    vm_rss_kb: int | None
    memlock_limit: str | None  # /proc/PID/limits "Max locked memory" soft limit
    threads: dict[int, ThreadSample]
    threads_left_out: int = 0


@dataclass
class AppThread:
    """One thread over the window: what it is and what happened to it."""

    pid: int
    tid: int
    comm: str
    policy: str
    priority: int
    cpus: list[int] | None
    minflt: int | None  # deltas over the window; None for a thread that began within it
    majflt: int | None
    cpu_s: float | None  # CPU time it used (utime + stime)
    voluntary: int | None
    nonvoluntary: int | None
    migrations: int | None
    cpus_run: list[int] = field(default_factory=list)  # last CPU at the two samples

    @property
    def rt(self) -> bool:
        return self.policy in ("fifo", "rr", "deadline")

    def name(self) -> str:
        return f"{self.comm} ({self.tid})"


@dataclass
class KernelThread:
    comm: str
    pid: int
    policy: str
    priority: int
    cpus: list[int] | None


@dataclass
class AppFacts:
    window_s: float
    processes: list[dict[str, Any]] = field(default_factory=list)  # pid, comm, memory
    threads: list[AppThread] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # threads gone or begun within the window
    sched_file: bool = False  # /proc/PID/task/TID/sched readable (migrations counted)
    irq_threads: list[KernelThread] = field(default_factory=list)
    kernel_rt_threads: list[KernelThread] = field(default_factory=list)
    kernel_log_read: bool = False
    throttling_logged: list[str] = field(default_factory=list)
    system: Facts = field(default_factory=Facts)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        s = self.system
        out["system"] = {
            "kernel_release": s.kernel_release,
            "preempt_model": s.preempt_model,
            "cpus_online": s.cpus_online,
            "isolated_cpus": s.isolated_cpus,
            "isolation_source": s.isolation_source,
            "nohz_full_cpus": s.nohz_full_cpus,
            "sched_rt_runtime_us": s.sched_rt_runtime_us,
            "sched_rt_period_us": s.sched_rt_period_us,
            "irqs": s.irqs,
        }
        return out


def _fields(text: str | None) -> dict[str, str]:
    """KEY -> value of a "Key:\\tvalue" or "key   :   value" file."""
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


def parse_stat(text: str) -> dict[str, Any] | None:
    """comm, state, flags, minflt, majflt, processor, rt_priority, policy of a
    /proc/PID[/task/TID]/stat line (comm may hold spaces and parentheses)."""
    head, _, rest = text.rpartition(")")
    f = rest.split()
    if "(" not in head or len(f) < 39:
        return None
    try:
        return {
            "comm": head.split("(", 1)[1],
            "state": f[3 - 3],
            "flags": int(f[9 - 3]),
            "minflt": int(f[10 - 3]),
            "majflt": int(f[12 - 3]),
            "cpu_ticks": int(f[14 - 3]) + int(f[15 - 3]),
            "processor": int(f[39 - 3]),
            "rt_priority": int(f[40 - 3]),
            "policy": int(f[41 - 3]),
        }
    except ValueError:
        return None


def _memlock_limit(text: str | None) -> str | None:
    for line in (text or "").splitlines():
        if line.startswith("Max locked memory"):
            parts = line[len("Max locked memory") :].split()  # soft, hard, unit
            if len(parts) >= 3 and parts[0].isdigit():
                return f"{parts[0]} {parts[2]}"
            return parts[0] if parts else None
    return None


def _thread(root: Root, base: str, tid: int) -> ThreadSample | None:
    text = root.read(f"{base}/stat")
    stat = parse_stat(text) if text else None
    if stat is None:
        return None
    status = _fields(root.read(f"{base}/status"))
    sched = _fields(root.read(f"{base}/sched"))
    where = f"{root.describe()}: /{base}/status"
    return ThreadSample(
        tid=tid,
        comm=stat["comm"],
        state=stat["state"],
        policy=POLICY_NAMES.get(stat["policy"], str(stat["policy"])),
        priority=stat["rt_priority"],
        cpus=system_cpulist(status.get("Cpus_allowed_list"), where),
        last_cpu=stat["processor"],
        minflt=stat["minflt"],
        majflt=stat["majflt"],
        cpu_ticks=stat["cpu_ticks"],
        voluntary=_int(status.get("voluntary_ctxt_switches")),
        nonvoluntary=_int(status.get("nonvoluntary_ctxt_switches")),
        migrations=_int(sched.get("se.nr_migrations")),
    )


def sample_process(root: Root, pid: int) -> ProcessSample | None:
    """PID and its threads now, None when it does not exist or is a zombie."""
    base = f"proc/{pid}"
    text = root.read(f"{base}/stat")
    stat = parse_stat(text) if text else None
    if stat is None or stat["state"] in ("Z", "X"):
        return None
    if stat["flags"] & PF_KTHREAD:
        raise UserError(f"PID {pid} ({stat['comm']}) is a kernel thread, not an application")
    status = _fields(root.read(f"{base}/status"))
    tids = sorted(int(t) for t in root.listdir(f"{base}/task") or [] if _numbered(t))
    threads: dict[int, ThreadSample] = {}
    for tid in tids[:MAX_APP_THREADS]:
        t = _thread(root, f"{base}/task/{tid}", tid)
        if t is not None and t.state not in ("Z", "X"):
            threads[tid] = t
    if not tids:  # no task/ directory (a tree of the process only): the leader itself
        t = _thread(root, base, pid)
        threads = {pid: t} if t is not None else {}
    return ProcessSample(
        pid=pid,
        comm=stat["comm"],
        state=stat["state"],
        vm_lck_kb=_int(status.get("VmLck")),
        vm_rss_kb=_int(status.get("VmRSS")),
        memlock_limit=_memlock_limit(root.read(f"{base}/limits")),
        threads=threads,
        threads_left_out=max(0, len(tids) - MAX_APP_THREADS),
    )


def pids_of(root: Root, comm: str) -> list[int]:
    """The live user processes whose /proc/PID/comm is COMM (the kernel keeps 15 bytes)."""
    found = []
    for name in root.listdir("proc") or []:
        if not _numbered(name):
            continue
        text = root.read(f"proc/{name}/stat")
        stat = parse_stat(text) if text else None
        if stat is None or stat["state"] in ("Z", "X") or stat["flags"] & PF_KTHREAD:
            continue
        if stat["comm"] == comm[:15]:
            found.append(int(name))
    return sorted(found)


def _kernel_threads(root: Root, out: AppFacts) -> None:
    """IRQ threads and the kernel's own real-time threads (ktimers/N, rcuc/N, ...)."""
    for name in root.listdir("proc") or []:
        if not _numbered(name):
            continue
        text = root.read(f"proc/{name}/stat")
        stat = parse_stat(text) if text else None
        if stat is None or not stat["flags"] & PF_KTHREAD:
            continue
        comm, policy = stat["comm"], POLICY_NAMES.get(stat["policy"], str(stat["policy"]))
        irq = IRQ_THREAD.match(comm) is not None
        if not irq and not (KERNEL_RT.match(comm) and policy in ("fifo", "rr")):
            continue
        where = f"{root.describe()}: /proc/{name}/status"
        cpus = system_cpulist(
            _fields(root.read(f"proc/{name}/status")).get("Cpus_allowed_list"), where
        )
        t = KernelThread(comm, int(name), policy, stat["rt_priority"], cpus)
        (out.irq_threads if irq else out.kernel_rt_threads).append(t)


def kernel_log(root: Root) -> list[str] | None:
    """The kernel log's messages (/dev/kmsg of the live system, the file dev/kmsg of a
    tree), None when it cannot be read; at most MAX_KMSG_RECORDS records."""
    if not root.live:
        text = root.read("dev/kmsg")
        return None if text is None else text.splitlines()[-MAX_KMSG_RECORDS:]
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    lines: list[str] = []
    try:
        while len(lines) < MAX_KMSG_RECORDS:
            try:
                record = os.read(fd, 8192)
            except OSError as e:
                if e.errno == errno.EPIPE:  # overwritten while read: go on with the next
                    continue
                break  # EAGAIN: the end
            if not record:
                break
            lines.append(record.decode(errors="replace").rstrip("\n"))
    finally:
        os.close(fd)
    return lines


def _kernel(line: str) -> bool:
    """A /dev/kmsg record the kernel wrote (facility 0), not one a process wrote to it."""
    prefix = line.partition(",")[0]
    return prefix.isdigit() and int(prefix) >> 3 == 0


def _record(line: str) -> str:
    """A /dev/kmsg record "LEVEL,SEQ,USEC,FLAGS;TEXT" as "TEXT (at N s after boot)"."""
    head, sep, text = line.partition(";")
    parts = head.split(",")
    if not sep or len(parts) < 3 or not parts[2].isdigit():
        return line.strip()
    return f"{text.strip()} (at {int(parts[2]) / 1e6:.1f} s after boot)"


def _absent(root: Root, pid: int) -> str:
    """Why PID cannot be audited."""
    if root.listdir(f"proc/{pid}") is None:
        return f"no such process on {root.describe()}"
    text = root.read(f"proc/{pid}/stat")
    stat = parse_stat(text) if text else None
    if stat is None:
        return f"/proc/{pid}/stat not readable (no access)"
    return f"{stat['comm']} has exited (state {stat['state']}: a zombie not yet reaped)"


def _delta(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else b - a


def _combine(pid: int, first: ProcessSample, last: ProcessSample, out: AppFacts) -> None:
    out.processes.append(
        {
            "pid": pid,
            "comm": last.comm,
            "threads": len(last.threads),
            "threads_left_out": last.threads_left_out,
            "vm_lck_kb": last.vm_lck_kb,
            "vm_rss_kb": last.vm_rss_kb,
            "memlock_limit": last.memlock_limit,
        }
    )
    gone = sorted(set(first.threads) - set(last.threads))
    if gone:
        names = ", ".join(f"{first.threads[t].comm} ({t})" for t in gone[:8])
        out.notes.append(f"PID {pid}: {len(gone)} threads ended within the window: {names}")
    for tid, b in last.threads.items():
        a = first.threads.get(tid)
        out.threads.append(
            AppThread(
                pid=pid,
                tid=tid,
                comm=b.comm,
                policy=b.policy,
                priority=b.priority,
                cpus=b.cpus,
                minflt=None if a is None else b.minflt - a.minflt,
                majflt=None if a is None else b.majflt - a.majflt,
                cpu_s=None if a is None else (b.cpu_ticks - a.cpu_ticks) / USER_HZ,
                voluntary=None if a is None else _delta(a.voluntary, b.voluntary),
                nonvoluntary=None if a is None else _delta(a.nonvoluntary, b.nonvoluntary),
                migrations=None if a is None else _delta(a.migrations, b.migrations),
                cpus_run=sorted(
                    {c for c in (a.last_cpu if a else None, b.last_cpu) if c is not None}
                ),
            )
        )
        if a is None:
            out.notes.append(f"PID {pid}: thread {b.comm} ({tid}) began within the window")


def read_app_facts(
    root: Root,
    pids: list[int],
    window_s: float,
    wait: Callable[[float], None] = time.sleep,
) -> AppFacts:
    """The facts of processes PIDS over WINDOW_S seconds (WAIT passes the time: tests
    change their tree there). UserError when a process does not exist, is no
    application, or ends within the window."""
    if not pids:
        raise UserError("no process given")
    if len(pids) > MAX_APP_PIDS:
        raise UserError(f"{len(pids)} processes: at most {MAX_APP_PIDS} are audited at once")
    first: dict[int, ProcessSample] = {}
    for pid in pids:
        s = sample_process(root, pid)
        if s is None:
            raise UserError(f"PID {pid}: {_absent(root, pid)}")
        if not s.threads:
            raise UserError(f"PID {pid}: its threads cannot be read (/proc/{pid}/task)")
        first[pid] = s
    wait(window_s)
    out = AppFacts(window_s=window_s)
    for pid in pids:
        last = sample_process(root, pid)
        if last is None or not last.threads:
            raise UserError(
                f"PID {pid} ({first[pid].comm}) ended within the {window_s:g} s window: "
                "nothing to judge"
            )
        _combine(pid, first[pid], last, out)
    out.sched_file = any(t.migrations is not None for t in out.threads)
    out.system = read_facts(root)
    _kernel_threads(root, out)
    log = kernel_log(root)
    out.kernel_log_read = log is not None
    out.throttling_logged = [_record(m) for m in log or [] if _kernel(m) and THROTTLING in m][:8]
    return out


def cpus_text(values: list[int] | None) -> str:
    return format_cpulist(values or []) or "none"
