"""rtlab audit on fixture trees: exact findings, JSON shape, exit codes, bad input."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from rtlab.system import (
    STATUSES,
    Context,
    SnapshotRoot,
    SysRoot,
    read_facts,
    run_audit,
)
from rtlab.system._checks import CHECKS

from .conftest import make_root

SYSTEMS = Path(__file__).parent / "fixtures" / "systems"
IDS = [c.id for c in CHECKS]


def expect(**not_ok: str) -> dict[str, str]:
    """Every check OK except NOT_OK (id with '.' written as '__')."""
    statuses = {i: "OK" for i in IDS}
    for key, status in not_ok.items():
        name = key.replace("__", ".")
        assert name in statuses, name
        statuses[name] = status
    return statuses


NOT_APPLICABLE_WITHOUT_RT_CPUS = dict(
    boot__nohz_full="INFO",
    boot__rcu_nocbs="INFO",
    boot__irqaffinity="INFO",
    cpu__smt_sibling="INFO",
    irq__affinity="INFO",
    irq__default_affinity="INFO",
    tasks__user="INFO",
    tasks__kthreads="INFO",
    workqueue__cpumask="INFO",
    workqueue__writeback="INFO",
    sched__rt_throttling_isolated="INFO",
)
UNTUNED_BOOT = dict(
    boot__isolcpus="WARN",
    boot__isolcpus_flags="INFO",
    boot__nohz_full_config="INFO",
    boot__rcu_nocbs_nohz="INFO",
    boot__rcu_nocb_poll="INFO",
    boot__threadirqs="INFO",
    boot__skew_tick="INFO",
    boot__cstate_limit="INFO",
    boot__tsc_reliable="INFO",
)

RT_BOARD = expect(
    boot__tsc_reliable="INFO",  # arch_sys_counter: not applicable
    sched__numa_balancing="INFO",  # not a NUMA kernel: file absent
    mm__ksm="INFO",  # no KSM
    mce__check_interval="INFO",  # not x86
    cpu__hypervisor="INFO",  # arm64: no cpuinfo flag, no DMI, the device tree names a board
)
RT_BOARD_50US = {**RT_BOARD, "kernel.preempt": "WARN"}  # borderline even for PREEMPT_RT
DESKTOP = expect(
    **NOT_APPLICABLE_WITHOUT_RT_CPUS,
    **UNTUNED_BOOT,
    kernel__preempt="WARN",  # voluntary, no deadline given: the typical figures, measure
    kernel__debug_options="FAIL",
    kernel__rt_group_sched="INFO",
    timer__hz="INFO",
    timer__mode="INFO",  # NO_HZ_IDLE with 250 µs C-states, no real-time CPU given
    cpu__smt="WARN",  # every CPU is affected: no real-time CPU given is no reason to go quiet
    cpu__governor="WARN",
    cpu__idle_latency="WARN",
    sched__timer_migration="WARN",
    sched__numa_balancing="WARN",
    vm__stat_interval="INFO",
    vm__dirty_writeback="INFO",
    watchdog__soft="INFO",
    watchdog__nmi="WARN",
    mm__thp="WARN",
    mm__swap="WARN",
    mce__check_interval="INFO",
    trace__available="INFO",
    kernel__rcu_boost="INFO",  # not PREEMPT_RT: not applicable
    irq__threads="INFO",  # no threaded IRQ
    vm__overcommit="INFO",  # heuristic overcommit
    vm__oom="INFO",  # pipewire (rr:20) not at oom_score_adj -1000
)
DESKTOP_RT_CPU_3 = {
    **DESKTOP,
    **{
        "kernel.preempt": "FAIL",  # voluntary cannot plausibly meet 100 µs
        "timer.mode": "WARN",  # tickless idle with deep C-states on a given real-time CPU
        "boot.nohz_full": "INFO",  # not isolated: full dynticks is not advised
        "boot.rcu_nocbs": "WARN",
        "boot.irqaffinity": "WARN",
        "cpu.smt_sibling": "FAIL",
        "cpu.idle_latency": "FAIL",
        "irq.affinity": "FAIL",
        "irq.default_affinity": "WARN",
        "tasks.user": "WARN",
        "tasks.kthreads": "WARN",
        "workqueue.cpumask": "WARN",
        "workqueue.writeback": "WARN",
        "sched.rt_throttling_isolated": "INFO",  # not isolated: throttling stays on
    },
}
THIS_VM = expect(
    **NOT_APPLICABLE_WITHOUT_RT_CPUS,
    **UNTUNED_BOOT,
    kernel__preempt="WARN",  # PREEMPT_DYNAMIC booted as "none", no deadline given
    kernel__rt_group_sched="INFO",
    timer__hz="INFO",
    cpu__governor="INFO",  # no cpufreq in the VM
    cpu__idle_latency="INFO",  # no cpuidle driver
    sched__timer_migration="WARN",
    vm__stat_interval="INFO",
    vm__dirty_writeback="INFO",
    watchdog__soft="INFO",
    mce__check_interval="INFO",
    trace__current="INFO",  # tracefs not mounted
    trace__available="INFO",
    cpu__hypervisor="WARN",  # a KVM guest: the hypervisor flag, kvm-clock
    cpu__steal="WARN",  # with steal time
    kernel__rcu_boost="INFO",  # not PREEMPT_RT
    irq__threads="INFO",  # no process captured
    tasks__rt_priority="INFO",
    vm__overcommit="INFO",  # not captured
    vm__oom="INFO",
)


def audit_json(rtlab, *args: str) -> tuple[int, dict]:
    rc, out, err = rtlab("audit", "--json", *args)
    assert err == "", err
    return rc, json.loads(out)


def statuses(doc: dict) -> dict[str, str]:
    return {f["id"]: f["status"] for f in doc["findings"]}


@pytest.mark.parametrize(
    ("system", "args", "want", "rc"),
    [
        ("rt-board", (), RT_BOARD, 0),
        ("rt-board", ("--rt-cpus", "3", "--deadline", "50us"), RT_BOARD_50US, 0),
        ("desktop", (), DESKTOP, 1),
        ("desktop", ("--rt-cpus", "3", "--deadline", "100us"), DESKTOP_RT_CPU_3, 1),
        ("this-vm", (), THIS_VM, 0),
    ],
)
def test_exact_findings(rtlab, system, args, want, rc):
    got_rc, doc = audit_json(rtlab, "--root", str(SYSTEMS / system), *args)
    assert statuses(doc) == want
    assert got_rc == rc


def test_at_least_40_distinct_checks():
    assert len(IDS) == len(set(IDS)) >= 40


def test_json_shape_and_findings_carry_evidence_fix_and_why(rtlab):
    _, doc = audit_json(rtlab, "--root", str(SYSTEMS / "desktop"), "--rt-cpus", "3")
    assert set(doc) == {"facts", "findings"}
    for f in doc["findings"]:
        assert set(f) == {"id", "status", "title", "evidence", "fix", "why"}
        assert f["status"] in STATUSES and f["title"] and f["evidence"] and f["why"]
        if f["status"] in ("WARN", "FAIL"):
            assert f["fix"], f["id"]
        if f["status"] == "OK":
            assert f["fix"] == ""
    facts = doc["facts"]
    for key in (
        "kernel_release",
        "preempt_model",
        "hz",
        "timer_mode",
        "hres_active",
        "isolated_cpus",
        "nohz_full_cpus",
        "rcu_nocbs_cpus",
        "smt_active",
        "governors",
    ):
        assert key in facts, key
    assert facts["preempt_model"] == "dynamic:voluntary" and facts["hz"] == 250
    assert facts["smt_active"] is True and facts["hres_active"] is True
    assert facts["governors"] == {str(c): "ondemand" for c in range(4)}
    assert facts["debug_options"] == ["CONFIG_DEBUG_KMEMLEAK"]
    assert facts["irqs"]["130"]["effective"] == [3]


def test_board_facts(rtlab):
    _, doc = audit_json(rtlab, "--root", str(SYSTEMS / "rt-board"))
    f = doc["facts"]
    assert (f["preempt_model"], f["hz"], f["timer_mode"]) == ("rt", 1000, "NO_HZ_FULL")
    assert f["isolated_cpus"] == [3] and f["nohz_full_cpus"] == [3] and f["rcu_nocbs_cpus"] == [3]
    assert f["smt_active"] is False and f["rt_cpus"] == [3]
    assert f["isolcpus_flags"] == ["managed_irq", "domain"]
    assert f["rt_policy_tasks_on_rt"] == ["control-loop"] and f["user_tasks_on_rt"] == 0
    assert "timerlat" in f["tracers_available"] and f["current_tracer"] == "nop"


def test_evidence_names_what_was_read(rtlab):
    _, doc = audit_json(rtlab, "--root", str(SYSTEMS / "desktop"), "--rt-cpus", "3")
    by_id = {f["id"]: f for f in doc["findings"]}
    assert "130 (IR-PCI-MSI 1048576-edge nvme0q1)" in by_id["irq.affinity"]["evidence"]
    assert "CONFIG_DEBUG_KMEMLEAK=y" in by_id["kernel.debug_options"]["evidence"]
    assert "cpu3=ondemand" in by_id["cpu.governor"]["evidence"]
    assert "1,3" in by_id["cpu.smt_sibling"]["evidence"]
    assert "isolate siblings 1" in by_id["cpu.smt_sibling"]["fix"]
    assert "pipewire" in by_id["sched.rt_throttling_isolated"]["evidence"]
    assert "echo 0-2 > /proc/irq/$i/smp_affinity_list" in by_id["irq.affinity"]["fix"]


def test_human_output_lists_fixes(rtlab):
    rc, out, err = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--deadline", "100us")
    assert rc == 1 and err == ""
    assert "What to change" in out and "FAIL kernel.debug_options" in out
    assert "rebuild without CONFIG_DEBUG_KMEMLEAK" in out and "why:" in out
    assert "deadline 100 µs" in out


def _facts_rule(files: dict[str, str], tmp_path: Path, rt: list[int] | None = None):
    base = {"sys/devices/system/cpu/online": "0-3", "proc/cmdline": "quiet"}
    root = SysRoot(make_root(tmp_path, {**base, **files}))
    facts = read_facts(root, rt)
    return {f.id: f for f in run_audit(facts, Context())}


def test_nohz_full_cpus_missing_from_rcu_nocbs(tmp_path):
    got = _facts_rule({"proc/cmdline": "nohz_full=2-3 rcu_nocbs=3"}, tmp_path)
    assert got["boot.rcu_nocbs_nohz"].status == "WARN"
    assert "add CPUs 2" in got["boot.rcu_nocbs_nohz"].fix


def test_nohz_full_without_kernel_support_fails(tmp_path):
    files = {"proc/cmdline": "nohz_full=3", "proc/sys/kernel/osrelease": "6.1"}
    files["boot/config-6.1"] = "CONFIG_NO_HZ_IDLE=y\nCONFIG_HZ=250\n"
    assert _facts_rule(files, tmp_path)["boot.nohz_full_config"].status == "FAIL"


@pytest.mark.parametrize("built", [True, False])
def test_isolcpus_and_rcu_nocbs_need_their_kernel_options(tmp_path, built):
    """Without CPU_ISOLATION / RCU_NOCB_CPU the kernel does not parse isolcpus= /
    rcu_nocbs= (kernel/sched/isolation.c, kernel/rcu/tree_nocb.h are not built): the boot
    line alone is not isolation."""
    files = {"proc/cmdline": "isolcpus=managed_irq,domain,3 nohz_full=3 rcu_nocbs=3"}
    files["proc/sys/kernel/osrelease"] = "6.1"
    config = "CONFIG_NO_HZ_FULL=y\nCONFIG_HZ=250\n"
    if built:
        config += "CONFIG_CPU_ISOLATION=y\nCONFIG_RCU_NOCB_CPU=y\n"
    files["boot/config-6.1"] = config
    got = _facts_rule(files, tmp_path, [3])
    if built:
        assert got["boot.isolcpus"].status == got["boot.rcu_nocbs"].status == "OK"
    else:
        assert got["boot.isolcpus"].status == got["boot.rcu_nocbs"].status == "WARN"
        assert "CONFIG_CPU_ISOLATION=y" in got["boot.isolcpus"].fix
        assert "CONFIG_RCU_NOCB_CPU=y" in got["boot.rcu_nocbs"].fix
        assert "CONFIG_RCU_NOCB_CPU not set" in got["boot.rcu_nocbs"].evidence


def test_irqaffinity_including_the_rt_cpu_fails(tmp_path):
    got = _facts_rule({"proc/cmdline": "isolcpus=3 irqaffinity=0-3"}, tmp_path)
    assert got["boot.irqaffinity"].status == "FAIL"
    assert got["boot.irqaffinity"].fix == "boot with irqaffinity=0-2"


def test_isolated_by_cpuset_partition_is_recognised(tmp_path):
    got = _facts_rule(
        {
            "sys/fs/cgroup/rt/cpuset.cpus.partition": "isolated",
            "sys/fs/cgroup/rt/cpuset.cpus.effective": "2-3",
        },
        tmp_path,
    )
    assert got["boot.isolcpus"].status == "OK"
    assert "cpuset partition" in got["boot.isolcpus"].evidence


def _snapshot_of(tree: Path) -> SnapshotRoot:
    """What rtlab-probe sysinfo would write for TREE, built here (gzip files as base64)."""
    files, binary = {}, {}
    for p in tree.rglob("*"):
        if p.is_file():
            name = "/" + str(p.relative_to(tree))
            data = p.read_bytes()
            if name.endswith(".gz"):
                binary[name] = data
            else:
                files[name] = data.decode()
    return SnapshotRoot(files, binary)


@pytest.mark.parametrize("system", ["rt-board", "desktop", "this-vm"])
def test_snapshot_root_reads_the_same_facts_as_the_tree(system):
    tree = SYSTEMS / system
    assert read_facts(_snapshot_of(tree), [3] if system != "this-vm" else None) == read_facts(
        SysRoot(tree), [3] if system != "this-vm" else None
    )


def _sysinfo_doc(tree: Path) -> dict:
    snap = _snapshot_of(tree)
    return {
        "schema": 1,
        "tool": "rtlab-probe",
        "kind": "sysinfo",
        "files": snap.files,
        "base64": {k: base64.b64encode(v).decode() for k, v in snap.binary.items()},
        "truncated": [],
    }


def test_from_document_gives_the_same_audit_as_root(rtlab, tmp_path):
    doc = tmp_path / "sysinfo.json"
    doc.write_text(json.dumps(_sysinfo_doc(SYSTEMS / "this-vm")))
    rc1, a = audit_json(rtlab, "--from", str(doc))
    rc2, b = audit_json(rtlab, "--root", str(SYSTEMS / "this-vm"))
    assert (rc1, a) == (rc2, b)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not valid JSON"),
        ('{"kind": "wakeup", "schema": 1}', "not a sysinfo document"),
        ('{"kind": "sysinfo", "schema": 9, "files": {}}', "schema 9 is not supported"),
        ('{"kind": "sysinfo", "schema": 1, "files": []}', '"files" is not an object'),
        ('{"kind": "sysinfo", "schema": 1, "files": {"rel": "x"}}', '"files" is not an object'),
        ('{"kind": "sysinfo", "schema": 1, "base64": {"/a.gz": "@@"}}', "not valid base64"),
    ],
)
def test_malformed_from_file_is_one_line_exit_2(rtlab, tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    rc, out, err = rtlab("audit", "--from", str(bad))
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and str(bad) in err and message in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--root", "/nonexistent/tree"), "--root /nonexistent/tree: not a directory"),
        (("--from", "/nonexistent/doc.json"), "/nonexistent/doc.json"),
        (("--rt-cpus", "x"), "--rt-cpus x"),
        (("--rt-cpus", "3-1"), "--rt-cpus 3-1"),
        (("--rt-cpus", "9"), "CPU 9 not online (online: 0-3)"),
        (("--deadline", "fast"), "fast"),
    ],
)
def test_bad_input_exit_2(rtlab, args, message):
    full = args if args[0] in ("--root", "--from") else ("--root", str(SYSTEMS / "desktop"), *args)
    rc, out, err = rtlab("audit", *full)
    assert rc == 2 and out == "" and message in err and err.count("\n") == 1


def test_root_that_is_not_a_system_tree(rtlab, tmp_path):
    rc, _, err = rtlab("audit", "--root", str(tmp_path))
    assert rc == 2 and "neither proc/ nor sys/" in err


THREAD_FACTS = (
    "rt_threads_read", "irq_threads", "irq_thread_prios", "irq_thread_names",
    "irq_thread_max_prio", "rt_kthreads", "rt_user_threads", "rt_user_thread_list",
)  # fmt: skip
THREAD_CHECKS = ("irq.threads", "tasks.rt_priority", "vm.oom")


def _without_threads(doc: dict) -> dict:
    facts = {k: v for k, v in doc["facts"].items() if k not in THREAD_FACTS}
    return {**doc, "facts": facts, "findings": [
        f for f in doc["findings"] if f["id"] not in THREAD_CHECKS
    ]}  # fmt: skip


def test_capture_copies_what_the_audit_reads(rtlab, tmp_path):
    dest = tmp_path / "copy"
    rc, out, _ = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--capture", str(dest))
    assert rc == 0 and "copied into" in out
    assert not list(dest.glob("proc/[0-9]*"))  # per-process files stay out
    _, a = audit_json(rtlab, "--root", str(dest))
    _, b = audit_json(rtlab, "--root", str(SYSTEMS / "desktop"))
    # Threads are read on every system: the copy, without them, says they were not read.
    assert not a["facts"]["rt_threads_read"] and b["facts"]["rt_threads_read"]
    assert statuses(a)["tasks.rt_priority"] == "INFO" and statuses(b)["tasks.rt_priority"] == "OK"
    assert _without_threads(a) == _without_threads(b)
    rc, _, err = rtlab("audit", "--root", str(SYSTEMS / "desktop"), "--capture", str(dest))
    assert rc == 2 and "not an empty directory" in err


def test_capture_fixture_holds_no_process_or_environment_files():
    names = [str(p.relative_to(SYSTEMS / "this-vm")) for p in (SYSTEMS / "this-vm").rglob("*")]
    assert not [n for n in names if n.split("/")[1:2] and n.split("/")[1].isdigit()]
    assert not [n for n in names if "environ" in n or "/etc/" in n]
    assert gzip.decompress((SYSTEMS / "this-vm/proc/config.gz").read_bytes()).startswith(b"#")
