"""The facts the readiness audit judges, read through one root (live, tree or sysinfo document).

Every path read here must be collected by `rtlab-probe sysinfo` (probe/src/sysinfo.c);
tests/test_audit_contract.py fails when they drift apart.
"""

from __future__ import annotations

import platform
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from rtlab.errors import UserError
from rtlab.system._board import read_board
from rtlab.system._cmdline import Cmdline
from rtlab.system._cpus import parse_cpumask, system_cpulist
from rtlab.system._isolation import isolated_cpus
from rtlab.system._kconfig_debug import DEBUG_OPTIONS, LATENCY_TRACERS, judge
from rtlab.system._kernel import kernel_config, preempt_model
from rtlab.system._root import Root
from rtlab.system._virt import detected_virtualization, read_hypervisor

CPU = "sys/devices/system/cpu"

# Boot parameters that matter for real-time behaviour, reported as they were given.
RT_PARAMS = (
    "isolcpus", "nohz_full", "nohz", "rcu_nocbs", "rcu_nocb_poll", "irqaffinity", "threadirqs",
    "nosmt", "idle", "intel_idle.max_cstate", "processor.max_cstate", "cpuidle.off", "skew_tick",
    "tsc",
    "nowatchdog", "nmi_watchdog", "nosoftlockup", "housekeeping", "kthread_cpus", "preempt",
    "mitigations", "clocksource", "ftrace", "trace_event", "transparent_hugepage", "mce",
    "intel_pstate", "cpufreq.default_governor", "rcupdate.rcu_normal_after_boot",
    "rt_group_sched", "kmemleak", "debug_pagealloc", "page_poison", "slub_debug", "slab_debug",
    "debug_objects", "no_debug_objects", "kasan",
)  # fmt: skip

# The members of drivers/cpufreq/Kconfig's choice "Default CPUFreq governor".
DEFAULT_GOVERNORS = ("performance", "powersave", "userspace", "ondemand", "conservative",
                     "schedutil")  # fmt: skip

# Further configuration facts some checks use.
CONFIG_FACTS = (
    "CONFIG_NO_HZ_FULL", "CONFIG_RT_GROUP_SCHED", "CONFIG_RCU_NOCB_CPU", "CONFIG_CPU_ISOLATION",
    "CONFIG_IRQ_FORCED_THREADING", "CONFIG_HIGH_RES_TIMERS", "CONFIG_PREEMPT_DYNAMIC",
    "CONFIG_CPU_FREQ", "CONFIG_CPU_IDLE", "CONFIG_TIMERLAT_TRACER", "CONFIG_OSNOISE_TRACER",
    "CONFIG_HWLAT_TRACER", "CONFIG_RT_GROUP_SCHED_DEFAULT_DISABLED",
    *(f"CONFIG_CPU_FREQ_DEFAULT_GOV_{g.upper()}" for g in DEFAULT_GOVERNORS),
)  # fmt: skip

MAX_TASKS_LISTED = 20  # task names kept per list in the facts (counts stay exact)
# CPU numbers kept of thread siblings and IRQ affinities in all (2000 IRQs of 8192 CPUs):
# a forged document of a million short lists ("0-8191") must not expand to billions.
MAX_KEPT_CPUS = 1 << 24
PF_KTHREAD = 0x00200000
SCHED_FIFO, SCHED_RR = 1, 2


@dataclass
class Task:
    pid: int
    comm: str
    policy: int
    ncpus: int  # CPUs it may run on (the lists are not kept: 65536 tasks of 8192 CPUs)


@dataclass
class Facts:
    kernel_release: str | None = None
    kernel_version: str | None = None
    hostname: str | None = None
    arch: str | None = None
    # The board (_board.read_board): rtlab's hash of /etc/machine-id, DMI strings, DT model
    machine_id: str | None = None
    dmi: dict[str, str] = field(default_factory=dict)
    dt_model: str | None = None
    realtime: bool = False
    config_source: str | None = None
    config: dict[str, str] = field(default_factory=dict)  # relevant CONFIG_* only
    debug_options: list[str] = field(default_factory=list)  # active ones (_kconfig_debug.py)
    latency_tracer_options: list[str] = field(default_factory=list)
    debug_options_notes: dict[str, str] = field(default_factory=dict)  # active: boot param, note
    debug_options_off: dict[str, str] = field(default_factory=dict)  # built in, off: why
    preempt_model: str = "unknown"
    preempt_debugfs: str | None = None
    hz: int | None = None
    timer_mode: str | None = None
    hres_active: bool | None = None
    clock_event_handlers: list[str] = field(default_factory=list)
    timer_resolution_ns: int | None = None
    clocksource: str | None = None
    clocksources_available: list[str] = field(default_factory=list)
    cmdline: str | None = None
    rt_params: dict[str, str] = field(default_factory=dict)
    isolcpus_flags: list[str] = field(default_factory=list)
    isolated_cpus: list[int] = field(default_factory=list)
    isolation_source: str | None = None
    isolation_partition: str | None = None  # the cpuset partition's cgroup(s), when that isolates
    nohz_full_cpus: list[int] = field(default_factory=list)
    rcu_nocbs_cpus: list[int] = field(default_factory=list)
    irqaffinity_cpus: list[int] | None = None
    cpus_online: list[int] = field(default_factory=list)
    cpus_possible: list[int] = field(default_factory=list)
    rt_cpus: list[int] = field(default_factory=list)
    rt_cpus_source: str = ""
    smt_active: bool | None = None
    smt_control: str | None = None
    thread_siblings: dict[str, list[int]] = field(default_factory=dict)
    governors: dict[str, str] = field(default_factory=dict)
    cpufreq_driver: str | None = None
    idle_states: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    sched_rt_runtime_us: int | None = None
    sched_rt_period_us: int | None = None
    timer_migration: int | None = None
    numa_balancing: int | None = None
    stat_interval_s: int | None = None
    watchdog: int | None = None
    nmi_watchdog: int | None = None
    watchdog_cpus: list[int] | None = None
    dirty_writeback_centisecs: int | None = None
    thp_enabled: str | None = None
    thp_defrag: str | None = None
    ksm_run: int | None = None
    swap_devices: list[str] | None = None
    irqs: dict[str, dict[str, Any]] = field(default_factory=dict)
    default_irq_affinity: list[int] | None = None
    workqueue_cpus: list[int] | None = None
    writeback_cpus: list[int] | None = None
    mce_check_interval_s: int | None = None
    tracers_available: list[str] | None = None
    current_tracer: str | None = None
    # Processes allowed on the real-time CPUs (only read when those are isolated or given):
    # user processes not under a real-time policy, unbound kernel threads, and the
    # SCHED_FIFO/RR user processes (the real-time workload).
    tasks_read: bool = False
    user_tasks_on_rt: int = 0
    user_tasks_on_rt_names: list[str] = field(default_factory=list)
    kthreads_on_rt: int = 0
    kthreads_on_rt_names: list[str] = field(default_factory=list)
    rt_policy_tasks_on_rt: list[str] = field(default_factory=list)
    # What the system's files say of a hypervisor (_virt.read_hypervisor), and what the
    # fingerprint records: that, or what the host of a vm: target knows (accel, its kernel).
    hypervisor: dict[str, Any] = field(default_factory=dict)
    virtualization: dict[str, Any] = field(default_factory=dict)
    # Memory commitment and OOM policy, and the real-time threads with their priorities
    # (read by _rt_facts for _checks_rt.py).
    overcommit_memory: int | None = None
    overcommit_ratio: int | None = None
    overcommit_kbytes: int | None = None
    oom_kill_allocating_task: int | None = None
    panic_on_oom: int | None = None
    mem_total_kb: int | None = None  # /proc/meminfo MemTotal
    swap_total_kb: int | None = None  # /proc/meminfo SwapTotal
    commit_limit_kb: int | None = None  # /proc/meminfo CommitLimit
    committed_as_kb: int | None = None  # /proc/meminfo Committed_AS
    rcu_kthread_prio: str | None = None  # rcutree.kthread_prio= on the boot line
    rt_threads_read: bool = False
    irq_threads: int = 0  # irq/N-name kernel threads (at any policy)
    irq_thread_prios: dict[str, int] = field(default_factory=dict)  # "fifo:50" -> count
    irq_thread_names: list[str] = field(default_factory=list)
    irq_thread_max_prio: dict[str, int] = field(default_factory=dict)  # CPU -> highest fifo/rr
    rt_kthreads: dict[str, list[str]] = field(default_factory=dict)  # "migration/N" -> prios
    rt_user_threads: int = 0  # SCHED_FIFO/RR threads of user processes
    rt_user_thread_list: list[dict[str, Any]] = field(default_factory=list)  # highest first

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _int(text: str | None) -> int | None:
    try:
        return int(text.split()[0]) if text else None
    except ValueError:
        return None


def _bracketed(text: str | None) -> str | None:
    """The selected word of "always [madvise] never"."""
    if text is None:
        return None
    m = re.search(r"\[(\w[\w+]*)\]", text)
    return m.group(1) if m else text.strip() or None


def _cpulist(root: Root, name: str) -> list[int] | None:
    """The CPU list of file NAME ([] when absent, None when garbled); UserError when it
    names a CPU no Linux has (a forged or damaged sysinfo document or tree)."""
    return system_cpulist(root.read(name) or "", f"{root.describe()}: /{name}")


def _numbered(name: str) -> bool:
    """NAME is a PID, IRQ or state number: ASCII digits ("²" is a digit to str.isdigit)."""
    return 0 < len(name) <= 10 and name.isascii() and name.isdigit()


def _within(kept: int, root: Root) -> None:
    """The CPU numbers kept of thread siblings and IRQ affinities are within the limit."""
    if kept > MAX_KEPT_CPUS:
        raise UserError(
            f"{root.describe()}: thread siblings and IRQ affinities name more than "
            f"{MAX_KEPT_CPUS} CPUs in all"
        )


def _cpumask(root: Root, name: str) -> list[int] | None:
    return parse_cpumask(root.read(name), f"{root.describe()}: /{name}")


def _timer_list(text: str | None, facts: Facts) -> None:
    if text is None:
        return
    hres = [ln.split(":")[1].strip() == "1" for ln in text.splitlines() if "hres_active" in ln]
    facts.hres_active = all(hres) if hres else None
    res = [int(m) for m in re.findall(r"\.resolution:\s*(\d+)\s*nsecs", text)]
    facts.timer_resolution_ns = max(res) if res else None
    handlers: set[str] = set()
    per_cpu = False
    for line in text.splitlines():
        if line.startswith("Per CPU device"):
            per_cpu = True
        elif line.startswith("Broadcast device"):
            per_cpu = False
        elif per_cpu and "event_handler:" in line:
            handlers.add(line.split(":", 1)[1].strip())
    facts.clock_event_handlers = sorted(handlers)


def _irq_names(text: str | None) -> dict[str, str]:
    """IRQ number -> description from /proc/interrupts (the counts are not facts)."""
    names: dict[str, str] = {}
    if not text:
        return names
    lines = text.splitlines()
    ncpu = len(lines[0].split()) if lines else 0
    for line in lines[1:]:
        irq, _, rest = line.partition(":")
        irq = irq.strip()
        if _numbered(irq):
            names[irq] = " ".join(rest.split()[ncpu:])
    return names


def parse_task_stat(text: str) -> tuple[str, int, int] | None:
    """(comm, flags, policy) from /proc/PID/stat; comm may hold spaces and parentheses."""
    sched = parse_task_sched(text)
    return None if sched is None else sched[:3]


def parse_task_sched(text: str) -> tuple[str, int, int, int] | None:
    """(comm, flags, policy, rt_priority) from /proc/PID/stat: fields 9, 41 and 40
    (fs/proc/array.c: ... task_cpu, rt_priority, policy ...)."""
    head, _, rest = text.rpartition(")")
    f = rest.split()
    if "(" not in head or len(f) < 39:
        return None
    try:
        return head.split("(", 1)[1], int(f[9 - 3]), int(f[41 - 3]), int(f[40 - 3])
    except ValueError:
        return None


def _status_cpus(text: str | None, where: str) -> list[int] | None:
    for line in (text or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return system_cpulist(line.split(":", 1)[1].strip(), where)
    return None


def _tasks(root: Root, facts: Facts) -> None:
    rt = set(facts.rt_cpus)
    users: list[Task] = []
    kthreads: list[Task] = []
    for name in root.listdir("proc") or []:
        if not _numbered(name):
            continue
        stat = root.read(f"proc/{name}/stat")
        parsed = parse_task_stat(stat) if stat else None
        status = f"proc/{name}/status"
        cpus = _status_cpus(root.read(status), f"{root.describe()}: /{status}")
        if parsed is None or cpus is None or rt.isdisjoint(cpus):
            continue
        comm, flags, policy = parsed
        task = Task(int(name), comm, policy, len(cpus))
        if flags & PF_KTHREAD:
            if task.ncpus > 1:  # per-CPU kernel threads belong there
                kthreads.append(task)
        else:
            users.append(task)
    facts.tasks_read = True
    others = [t for t in users if t.policy not in (SCHED_FIFO, SCHED_RR)]
    facts.user_tasks_on_rt = len(others)
    facts.user_tasks_on_rt_names = sorted({t.comm for t in others})[:MAX_TASKS_LISTED]
    facts.kthreads_on_rt = len(kthreads)
    facts.kthreads_on_rt_names = sorted({t.comm for t in kthreads})[:MAX_TASKS_LISTED]
    facts.rt_policy_tasks_on_rt = sorted(
        {t.comm for t in users if t.policy in (SCHED_FIFO, SCHED_RR)}
    )[:MAX_TASKS_LISTED]


def _cpus_facts(root: Root, facts: Facts) -> None:
    kept = 0
    for cpu in facts.cpus_online:
        base = f"{CPU}/cpu{cpu}"
        sib = _cpulist(root, f"{base}/topology/thread_siblings_list")
        if sib:
            facts.thread_siblings[str(cpu)] = sib
            kept += len(sib)
            _within(kept, root)
        gov = root.read(f"{base}/cpufreq/scaling_governor")
        if gov:
            facts.governors[str(cpu)] = gov
        facts.cpufreq_driver = facts.cpufreq_driver or root.read(f"{base}/cpufreq/scaling_driver")
        states: list[dict[str, Any]] = []
        for state in root.listdir(f"{base}/cpuidle") or []:
            if not state.startswith("state"):
                continue
            d = f"{base}/cpuidle/{state}"
            states.append(
                {
                    "state": state,
                    "name": root.read(f"{d}/name"),
                    "latency_us": _int(root.read(f"{d}/latency")),
                    "disabled": root.read(f"{d}/disable") == "1",
                }
            )
        if states:
            states.sort(key=lambda s: int(s["state"][5:]) if _numbered(s["state"][5:]) else 0)
            facts.idle_states[str(cpu)] = states


def _irqs(root: Root, facts: Facts) -> None:
    names = _irq_names(root.read("proc/interrupts"))
    kept = sum(map(len, facts.thread_siblings.values()))
    for irq in root.listdir("proc/irq") or []:
        if not _numbered(irq):
            continue
        aff = _cpulist(root, f"proc/irq/{irq}/smp_affinity_list")
        eff = _cpulist(root, f"proc/irq/{irq}/effective_affinity_list")
        if aff is None and eff is None:
            continue
        kept += len(aff or ()) + len(eff or ())
        _within(kept, root)
        facts.irqs[irq] = {"name": names.get(irq, ""), "affinity": aff, "effective": eff}
    facts.irqs = dict(sorted(facts.irqs.items(), key=lambda kv: int(kv[0])))
    facts.default_irq_affinity = _cpumask(root, "proc/irq/default_smp_affinity")


def _tracing(root: Root, facts: Facts) -> None:
    for base in ("sys/kernel/tracing", "sys/kernel/debug/tracing"):
        tracers = root.read(f"{base}/available_tracers")
        if tracers is not None:
            facts.tracers_available = sorted(tracers.split())
            facts.current_tracer = root.read(f"{base}/current_tracer")
            return


def read_facts(root: Root, rt_cpus: list[int] | None = None) -> Facts:
    """Every fact the audit uses. RT_CPUS overrides the real-time CPUs (else the isolated ones)."""
    f = Facts()
    f.kernel_release = root.read("proc/sys/kernel/osrelease")
    f.kernel_version = root.read("proc/sys/kernel/version")
    f.hostname = root.read("proc/sys/kernel/hostname")
    f.arch = root.read("proc/sys/kernel/arch") or (platform.machine() if root.live else None)
    board = read_board(root)
    f.machine_id, f.dmi, f.dt_model = board["machine_id"], board["dmi"], board["dt_model"]
    realtime = root.read("sys/kernel/realtime")
    f.realtime = realtime == "1"
    config, f.config_source = kernel_config(root, f.kernel_release or "")
    if config is not None:
        f.config = {k: config[k] for k in CONFIG_FACTS if k in config}
        f.hz = _int(config.get("CONFIG_HZ"))
        for key, mode in (
            ("CONFIG_NO_HZ_FULL", "NO_HZ_FULL"),
            ("CONFIG_NO_HZ_IDLE", "NO_HZ_IDLE"),
            ("CONFIG_HZ_PERIODIC", "HZ_PERIODIC"),
        ):
            if config.get(key) == "y":
                f.timer_mode = mode
                break
    cmdline = Cmdline.parse(root.read("proc/cmdline"))
    f.cmdline = root.read("proc/cmdline")
    if config is not None:
        debug = judge(DEBUG_OPTIONS, config, cmdline)
        tracers = judge(LATENCY_TRACERS, config, cmdline)
        f.debug_options, f.latency_tracer_options = debug.active, tracers.active
        f.debug_options_notes = {**debug.why, **tracers.why}
        f.debug_options_off = debug.off
    f.preempt_debugfs = root.read("sys/kernel/debug/sched/preempt")
    f.preempt_model = preempt_model(
        f.kernel_version or "", config, realtime, f.preempt_debugfs, cmdline.get("preempt")
    )
    _timer_list(root.read("proc/timer_list"), f)
    cs = "sys/devices/system/clocksource/clocksource0"
    f.clocksource = root.read(f"{cs}/current_clocksource")
    f.clocksources_available = (root.read(f"{cs}/available_clocksource") or "").split()

    f.rt_params = {p: v for p in RT_PARAMS if (v := cmdline.get(p)) is not None}
    iso_param = cmdline.isolcpus()
    f.isolcpus_flags = iso_param[0] if iso_param else []
    f.cpus_online = _cpulist(root, f"{CPU}/online") or []
    f.cpus_possible = _cpulist(root, f"{CPU}/possible") or []
    iso = isolated_cpus(root)
    f.isolated_cpus = iso.cpus if iso.kernel_isolated else []
    f.isolation_source = iso.source if iso.kernel_isolated else None
    f.isolation_partition = iso.partition if iso.kernel_isolated else None
    nohz = cmdline.cpus("nohz_full")
    if nohz is None:
        sysfs = root.read(f"{CPU}/nohz_full")
        nohz = _cpulist(root, f"{CPU}/nohz_full") if sysfs != "(null)" else None
    f.nohz_full_cpus = nohz or []
    f.rcu_nocbs_cpus = cmdline.cpus("rcu_nocbs") or []
    f.irqaffinity_cpus = cmdline.cpus("irqaffinity")
    if rt_cpus is not None:
        f.rt_cpus, f.rt_cpus_source = sorted(rt_cpus), "--rt-cpus"
    elif f.isolated_cpus:
        where = f" {f.isolation_partition}" if f.isolation_partition else ""
        f.rt_cpus, f.rt_cpus_source = f.isolated_cpus, f"isolated ({f.isolation_source}{where})"
    else:
        f.rt_cpus, f.rt_cpus_source = f.cpus_online, "all online CPUs (none isolated)"

    smt = root.read(f"{CPU}/smt/active")
    f.smt_active = None if smt is None else smt == "1"
    f.smt_control = root.read(f"{CPU}/smt/control")
    _cpus_facts(root, f)
    if f.smt_active is None and f.thread_siblings:
        f.smt_active = any(len(s) > 1 for s in f.thread_siblings.values())

    f.sched_rt_runtime_us = _int(root.read("proc/sys/kernel/sched_rt_runtime_us"))
    f.sched_rt_period_us = _int(root.read("proc/sys/kernel/sched_rt_period_us"))
    f.timer_migration = _int(root.read("proc/sys/kernel/timer_migration"))
    f.numa_balancing = _int(root.read("proc/sys/kernel/numa_balancing"))
    f.stat_interval_s = _int(root.read("proc/sys/vm/stat_interval"))
    f.watchdog = _int(root.read("proc/sys/kernel/watchdog"))
    f.nmi_watchdog = _int(root.read("proc/sys/kernel/nmi_watchdog"))
    f.watchdog_cpus = _cpulist(root, "proc/sys/kernel/watchdog_cpumask")
    f.dirty_writeback_centisecs = _int(root.read("proc/sys/vm/dirty_writeback_centisecs"))
    f.thp_enabled = _bracketed(root.read("sys/kernel/mm/transparent_hugepage/enabled"))
    f.thp_defrag = _bracketed(root.read("sys/kernel/mm/transparent_hugepage/defrag"))
    f.ksm_run = _int(root.read("sys/kernel/mm/ksm/run"))
    swaps = root.read("proc/swaps")
    if swaps is not None:
        f.swap_devices = [ln.split()[0] for ln in swaps.splitlines()[1:] if ln.strip()]
    _irqs(root, f)
    f.workqueue_cpus = _cpumask(root, "sys/devices/virtual/workqueue/cpumask")
    f.writeback_cpus = _cpumask(root, "sys/bus/workqueue/devices/writeback/cpumask")
    f.mce_check_interval_s = _int(
        root.read("sys/devices/system/machinecheck/machinecheck0/check_interval")
    )
    _tracing(root, f)
    from rtlab.system._facts_rt import read_rt_facts  # it imports this module's helpers

    read_rt_facts(root, f, config or {})
    f.hypervisor = read_hypervisor(root, f.clocksources_available)
    f.virtualization = detected_virtualization(f.hypervisor)
    if rt_cpus is not None or f.isolated_cpus:
        _tasks(root, f)
    return f
