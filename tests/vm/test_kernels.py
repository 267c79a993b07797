"""Every kernel-facing feature on real kernels: Debian's 6.1 PREEMPT_RT and generic
kernels booted in virtual machines (tests/vm/conftest.py), CPU 1 isolated by the boot
line. What these kernels show is asserted; no latency figure is."""

from __future__ import annotations

import json
import platform
import shlex
import signal
import sys

from .conftest import RT_CPU, STATE, Guest, explain_planted, explained_spikes


def findings(audit: dict) -> dict[str, dict]:
    return {f["id"]: f for f in audit["findings"]}


# --- the audit and the fingerprint -----------------------------------------------------------


def test_the_rt_kernel_is_recognised_with_its_tracers_and_isolation(rt_guest: Guest):
    system, audit = rt_guest.target.audit(None)  # type: ignore[attr-defined]
    facts = audit["facts"]
    assert system["kernel_release"] == rt_guest.release
    assert system["preempt_model"] == "rt" and system["realtime"] is True
    assert {"timerlat", "osnoise", "hwlat"} <= set(facts["tracers_available"])
    assert system["isolated_cpus"] == [RT_CPU]
    assert system["nohz_full_cpus"] == [RT_CPU] and system["rcu_nocbs_cpus"] == [RT_CPU]
    f = findings(audit)
    assert f["kernel.preempt"]["status"] == "OK"
    assert f["boot.isolcpus"]["status"] == "OK"
    assert f["trace.available"]["status"] == "OK"
    assert system["virtualization"]["accel"] in ("kvm", "tcg")


def test_the_generic_kernel_is_dynamic_without_the_rt_tracers(generic_guest: Guest):
    system, audit = generic_guest.target.audit(None)  # type: ignore[attr-defined]
    facts = audit["facts"]
    assert system["preempt_model"].startswith("dynamic:") and system["realtime"] is False
    assert not {"timerlat", "osnoise"} & set(facts["tracers_available"] or [])
    assert system["isolated_cpus"] == [RT_CPU] and system["nohz_full_cpus"] == [RT_CPU]
    f = findings(audit)
    assert f["kernel.preempt"]["status"] != "OK"
    assert f["trace.available"]["status"] != "OK"


def test_the_hypervisor_is_stated_inside_the_guest_and_by_its_host(rt_guest: Guest):
    """Inside, the guest's own files name QEMU; the host adds TCG or KVM and its kernel."""
    inside = json.loads(rt_guest.rtlab("audit", "--json", check=False))
    v = inside["facts"]["virtualization"]
    assert v["kind"] == "vm" and v["source"] == "detected on the target", v
    hyp = findings(inside)["cpu.hypervisor"]
    assert "QEMU" in hyp["evidence"] and "flag hypervisor" in hyp["evidence"], hyp
    system, audit = rt_guest.target.audit(None)  # type: ignore[attr-defined]
    host = system["virtualization"]
    assert host["host_kernel"] == platform.release() and host["hypervisor"] == "qemu"
    tcg = host["accel"] == "tcg"
    assert hyp["status"] == ("FAIL" if tcg else "WARN") and v["emulated"] is (True if tcg else None)
    assert findings(audit)["cpu.hypervisor"]["status"] == ("FAIL" if tcg else "WARN")
    # the probe's own document says it too: the CPU's signature under QEMU's emulation
    doc = json.loads(rt_guest.sh(f"{rt_guest.probe} wakeup --loops 5 --policy other "
                                 "--no-mlock --json /dev/stdout --quiet"))  # fmt: skip
    probe_virt = doc["host"]["virtualization"]
    assert probe_virt["kind"] == "vm" and probe_virt["source"] == "cpuid", probe_virt
    assert probe_virt["hypervisor"] == ("tcg" if tcg else "kvm"), probe_virt


# --- spikes explained from the kernel's own trace lines --------------------------------------


def test_a_planted_fifo_thread_is_named_as_the_cause(guest: Guest):
    """A SCHED_FIFO 80 spinner on the measured CPU (3 ms every 30 ms) delays a fifo:50
    wake-up: the explanation names it, by name and PID, from real trace lines. Under
    emulation a few of the worst samples are the emulator's own gaps (no event while
    the thread ran), so the 40 worst are explained: the spinner's ~130 spikes outnumber
    those."""
    pid, doc = explain_planted(guest, "rtlab-plant")
    spikes = explained_spikes(doc)
    named = [
        s
        for s in spikes
        if s["causes"]
        and s["causes"][0]["kind"] == "thread"
        and s["causes"][0]["name"] == "rtlab-plant"
        and s["causes"][0]["pid"] == pid
    ]
    assert len(named) * 2 > len(spikes), " | ".join(s["verdict"] for s in spikes)
    assert named[0]["causes"][0]["policy"] == "fifo"


# --- partitions and tuning on the kernels' own cgroup v2 and sysctls ------------------------


CGROUP_FILES = (
    "cat /sys/fs/cgroup/cgroup.subtree_control; "
    "ls /sys/fs/cgroup; "
    "for f in /proc/irq/default_smp_affinity /sys/devices/virtual/workqueue/cpumask; "
    'do echo "$f $(cat $f 2>/dev/null)"; done; '
    'for d in /proc/irq/[0-9]*; do echo "$d $(cat $d/smp_affinity_list 2>/dev/null)"; done'
)


def test_a_cgroup_v2_partition_is_made_used_and_undone(guest: Guest):
    before = guest.sh(CGROUP_FILES)
    made = json.loads(guest.rtlab("partition", "create", "--rt", str(RT_CPU), "--json"))
    assert made["version"] == 2, made
    shown = json.loads(guest.rtlab("partition", "show", "--json"))
    assert shown["exists"] and shown["cgroup"] == "cgroup v2", shown
    assert shown["state"] in ("isolated", "root"), shown  # as this kernel allows
    inside = guest.rtlab("partition", "run", "--", "cat", "/proc/self/cgroup")
    assert "/rt" in inside
    guest.rtlab("partition", "undo")
    assert guest.sh(CGROUP_FILES) == before


def test_a_crashed_partition_create_is_undone(rt_guest: Guest):
    """SIGKILLed inside its 3rd write: undo puts every file back (the journal is the same on
    both kernels: the RT one only)."""
    guest = rt_guest
    before = guest.sh(CGROUP_FILES)
    crashed = guest.target.shell(  # type: ignore[attr-defined]
        f"RTLAB_STATE={STATE} RTLAB_TUNE_CRASH_AT=3:inside {shlex.quote(sys.executable)} "
        f"-m rtlab.cli partition create --rt {RT_CPU}"
    )
    assert crashed.status == 128 + signal.SIGKILL, crashed  # killed, as a shell reports it
    guest.rtlab("partition", "undo")
    assert guest.sh(CGROUP_FILES) == before


TUNED_FILES = (
    "for f in /proc/sys/kernel/timer_migration /proc/sys/vm/stat_interval "
    "/proc/sys/vm/dirty_writeback_centisecs /proc/sys/kernel/watchdog_cpumask "
    "/proc/sys/kernel/sched_rt_runtime_us /sys/kernel/mm/ksm/run; "
    'do echo "$f $(cat $f 2>/dev/null)"; done'
)


def test_tuning_applies_and_resets_byte_for_byte(guest: Guest):
    before = guest.sh(TUNED_FILES)
    applied = json.loads(guest.rtlab("tune", "apply", "--rt-cpus", str(RT_CPU), "--json",
                                     check=False))  # fmt: skip
    assert any(o["state"] == "changed" for o in applied["outcomes"]), applied
    assert guest.sh(TUNED_FILES) != before
    guest.rtlab("tune", "reset")
    assert guest.sh(TUNED_FILES) == before
