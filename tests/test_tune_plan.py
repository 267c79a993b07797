"""rtlab tune plan: which writes the audit's findings lead to, per profile, and the boot line.

Every test plans on a copy of a fixture tree; nothing here writes to the tree.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rtlab.errors import UserError
from rtlab.tune import CHANGED, Outcome, plan, tuning_summary
from rtlab.tune._plan import KNOBS, TUNABLE, check_ids

SYSTEMS = Path(__file__).parent / "fixtures" / "systems"
CPU3 = "sys/devices/system/cpu/cpu3"


def tree(tmp_path: Path, name: str = "desktop") -> Path:
    root = tmp_path / "root"
    shutil.copytree(SYSTEMS / name, root)
    return root


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def by_path(p) -> dict[str, str]:
    return {w.path: w.new for w in p.writes}


def test_desktop_latency_plan_fixes_every_runtime_finding(tmp_path):
    root = tree(tmp_path)
    p = plan(root, rt_cpus=[3])
    w = by_path(p)
    assert w[f"{CPU3}/cpufreq/scaling_governor"] == "performance"
    # latency profile without a deadline: every state but state0 (POLL)
    assert {f"{CPU3}/cpuidle/state{i}/disable" for i in (1, 2, 3)} <= set(w)
    assert f"{CPU3}/cpuidle/state0/disable" not in w
    assert not any("cpu0/" in k or "cpu1/" in k or "cpu2/" in k for k in w)  # RT CPU 3 only
    for irq in ("0", "8", "16", "130", "131"):
        assert w[f"proc/irq/{irq}/smp_affinity_list"] == "0-2"
    assert w["proc/irq/default_smp_affinity"] == "7"
    assert w["sys/devices/virtual/workqueue/cpumask"] == "7"
    assert w["sys/bus/workqueue/devices/writeback/cpumask"] == "7"
    assert w["proc/sys/kernel/timer_migration"] == "0"
    assert w["proc/sys/vm/stat_interval"] == "10"
    assert w["proc/sys/vm/dirty_writeback_centisecs"] == "1500"
    assert w["proc/sys/kernel/watchdog_cpumask"] == "0-2"
    assert w["proc/sys/kernel/nmi_watchdog"] == "0"
    assert w["sys/kernel/mm/transparent_hugepage/enabled"] == "never"
    assert w["proc/sys/kernel/numa_balancing"] == "0"
    # OK in the audit: not planned, and said so
    assert "sys/kernel/mm/transparent_hugepage/defrag" not in w
    assert "sys/kernel/mm/ksm/run" not in w
    notes = {(n.check, n.family): n.reason for n in p.notes}
    assert "OK" in notes[("mm.ksm", "KSM")]
    # CPU 3 is not isolated: throttling stays on, as the audit advises
    assert "proc/sys/kernel/sched_rt_runtime_us" not in w
    assert "OK" in notes[("sched.rt_runtime", "RT throttling")]
    # every write names its check, which is a check tune knows
    assert all(x.check in TUNABLE and x.why for x in p.writes)


def test_current_values_are_those_of_the_tree(tmp_path):
    p = plan(tree(tmp_path), rt_cpus=[3])
    cur = {w.path: w.current for w in p.writes}
    assert cur["proc/sys/vm/stat_interval"] == "1"
    assert cur["sys/kernel/mm/transparent_hugepage/enabled"] == "[always] madvise never"


def test_balanced_profile_is_gentler(tmp_path):
    p = plan(tree(tmp_path), rt_cpus=[3], profile="balanced")
    w = by_path(p)
    assert w["sys/kernel/mm/transparent_hugepage/enabled"] == "madvise"
    # only states above the audit's 100 µs default: C10 (250 µs)
    idle = sorted(k for k in w if "cpuidle" in k)
    assert idle == [f"{CPU3}/cpuidle/state3/disable"]
    assert any(n.family == "min frequency" and "balanced" in n.reason for n in p.notes)


def test_deadline_decides_which_idle_states_go(tmp_path):
    p = plan(tree(tmp_path), rt_cpus=[3], deadline_ns=50_000)
    idle = sorted(k for k in by_path(p) if "cpuidle" in k)
    assert idle == [f"{CPU3}/cpuidle/state2/disable", f"{CPU3}/cpuidle/state3/disable"]


def test_thp_defrag_balanced_takes_the_audits_value(tmp_path):
    root = tree(tmp_path)
    (root / "sys/kernel/mm/transparent_hugepage/defrag").write_text(
        "[always] defer defer+madvise madvise never\n"
    )
    defrag = "sys/kernel/mm/transparent_hugepage/defrag"
    assert by_path(plan(root, rt_cpus=[3], profile="balanced"))[defrag] == "defer+madvise"
    assert by_path(plan(root, rt_cpus=[3]))[defrag] == "never"


def test_min_frequency_is_the_maximum_the_kernel_allows(tmp_path):
    root = tree(tmp_path)
    base = root / CPU3 / "cpufreq"
    (base / "cpuinfo_max_freq").write_text("4000000\n")
    (base / "scaling_max_freq").write_text("3500000\n")
    (base / "scaling_min_freq").write_text("800000\n")
    p = plan(root, rt_cpus=[3])
    (mf,) = [w for w in p.writes if w.path.endswith("scaling_min_freq")]
    assert (mf.new, mf.check, mf.family) == ("3500000", "cpu.governor", "min frequency")
    assert "no audit check of its own" in mf.why
    balanced = plan(root, rt_cpus=[3], profile="balanced")
    assert not any(w.path.endswith("scaling_min_freq") for w in balanced.writes)


def test_rt_throttling_only_for_isolated_cpus_when_allowed_with_a_warning(tmp_path):
    root = tree(tmp_path)
    shared = plan(root, rt_cpus=[3], allow_rt_unthrottled=True)
    assert "proc/sys/kernel/sched_rt_runtime_us" not in by_path(shared)  # CPU 3 is shared
    (root / "proc/cmdline").write_text("quiet isolcpus=managed_irq,domain,3 rcu_nocbs=3\n")
    refused = plan(root, rt_cpus=[3])
    assert "proc/sys/kernel/sched_rt_runtime_us" not in by_path(refused)
    notes = {(n.check, n.family): n.reason for n in refused.notes}
    assert "--allow-rt-unthrottled" in notes[("sched.rt_runtime", "RT throttling")]
    p = plan(root, rt_cpus=[3], allow_rt_unthrottled=True)
    assert by_path(p)["proc/sys/kernel/sched_rt_runtime_us"] == "-1"
    assert any("runaway SCHED_FIFO" in w for w in p.warnings)


def test_tasks_movable_kernel_threads_and_non_rt_processes(tmp_path):
    p = plan(tree(tmp_path), rt_cpus=[3])
    moves = {(t.comm, t.kind): (t.current, t.new) for t in p.tasks}
    assert moves[("kthreadd", "kernel thread")] == ("0-3", "0-2")
    assert moves[("kswapd0", "kernel thread")] == ("0-3", "0-2")
    assert moves[("firefox", "process")] == ("0-3", "0-2")
    names = {t.comm for t in p.tasks}
    assert "ksoftirqd/3" not in names  # per-CPU (PF_NO_SETAFFINITY, one CPU)
    assert "pipewire" not in names  # SCHED_RR: the real-time workload


def test_no_rt_cpus_given_plans_no_cpu_moves(tmp_path):
    p = plan(tree(tmp_path))  # desktop: nothing isolated, so "every CPU"
    w = by_path(p)
    assert not any(k.startswith("proc/irq/") for k in w)
    assert "proc/sys/kernel/watchdog_cpumask" not in w
    assert not p.tasks
    reasons = {n.check: n.reason for n in p.notes}
    assert "could not run" in reasons["irq.affinity"]
    # the per-CPU knobs that apply to every CPU still plan
    assert w[f"{CPU3}/cpufreq/scaling_governor"] == "performance"
    assert "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor" in w


def test_tuned_board_plans_little(tmp_path):
    p = plan(tree(tmp_path, "rt-board"))  # CPU 3 isolated, everything else in place
    assert {w.check for w in p.writes} <= {"cpu.idle_latency"}
    assert not p.tasks  # control-loop is SCHED_FIFO, kernel threads per-CPU or off CPU 3


def test_boot_changes_are_the_exact_command_line(tmp_path):
    root = tree(tmp_path)
    before = files(root)
    p = plan(root, rt_cpus=[3])
    line = p.boot.cmdline.split()
    for param in ("isolcpus=managed_irq,domain,3", "rcu_nocbs=3", "irqaffinity=0-2",
                  "cpufreq.default_governor=performance"):  # fmt: skip
        assert param in line
    assert len([x for x in line if x.startswith("isolcpus=")]) == 1  # merged, not repeated
    # full dynticks only for one busy task per CPU: advice, never on the line by itself
    assert not [x for x in line if x.startswith("nohz_full=")]
    assert any(c.check == "boot.nohz_full" and "busy task" in c.text for c in p.boot.advice)
    assert "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE=y" in p.boot.kconfig
    assert "CONFIG_PREEMPT_RT=y" in p.boot.kconfig
    # the debug options the audit found, switched off (their names come from the audit)
    assert any("KMEMLEAK" in x and x.endswith(" is not set") for x in p.boot.kconfig)
    assert files(root) == before  # printed, never written


def test_boot_merges_cpu_lists_of_the_same_parameter(tmp_path):
    from rtlab.tune._boot import CMDLINE, Boot, BootChange

    texts = ["rcu_nocbs=3", "rcu_nocbs=2", "isolcpus=domain,3", "isolcpus=managed_irq,domain,2"]
    b = Boot([BootChange(CMDLINE, t, "check", "") for t in texts])
    assert b.cmdline == "rcu_nocbs=2-3 isolcpus=domain,managed_irq,2-3"


def test_only_keeps_those_checks_and_no_boot(tmp_path):
    p = plan(tree(tmp_path), rt_cpus=[3], only=["sched.timer_migration", "vm.stat_interval"])
    assert sorted(by_path(p)) == ["proc/sys/kernel/timer_migration", "proc/sys/vm/stat_interval"]
    assert not p.tasks and not p.boot.changes


def test_only_names_the_bad_id():
    with pytest.raises(UserError, match=r"nope\.nope: not an audit check ID"):
        check_ids(["sched.timer_migration", "nope.nope"])
    with pytest.raises(UserError, match=r"boot\.isolcpus: no runtime knob"):
        check_ids(["boot.isolcpus"])
    assert check_ids([" mm.ksm", ""]) == ["mm.ksm"]


def test_tuning_summary_names_the_families_in_plan_order():
    outs = [
        Outcome("file", "proc/irq/5/smp_affinity_list", CHANGED, check="irq.affinity"),
        Outcome("file", "sys/x/cpuidle/state2/disable", CHANGED, check="cpu.idle_latency"),
        Outcome("file", "sys/x/cpufreq/scaling_governor", CHANGED, check="cpu.governor"),
        Outcome("file", "proc/sys/kernel/nmi_watchdog", "refused", check="watchdog.nmi"),
    ]
    assert tuning_summary(outs) == "tuned: governor, idle states, IRQs"
    assert tuning_summary([]) == "untuned"
    assert len({kn.family for kn in KNOBS}) >= 15


def test_plan_cli_text_and_json(tmp_path, rtlab):
    root = tree(tmp_path)
    before = files(root)
    rc, out, err = rtlab("tune", "plan", "--root", str(root), "--rt-cpus", "3")
    assert rc == 0, err
    assert "/proc/sys/kernel/timer_migration" in out
    assert "isolcpus=managed_irq,domain,3 rcu_nocbs=3" in out
    assert "never written" in out
    rc, out, err = rtlab("tune", "plan", "--root", str(root), "--rt-cpus", "3", "--json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["rt_cpus"] == "3" and doc["housekeeping"] == "0-2" and doc["profile"] == "latency"
    assert {"path", "current", "new", "compare", "check", "family", "why"} <= set(doc["writes"][0])
    assert "rcu_nocbs=3" in doc["boot"]["cmdline"] and "nohz_full" not in doc["boot"]["cmdline"]
    assert files(root) == before


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--only", "nope.x"], "nope.x"),
        (["--only", "boot.nohz_full"], "boot.nohz_full"),
        (["--rt-cpus", "9"], "--rt-cpus 9"),
        (["--profile", "fast"], "fast"),
        (["--deadline", "0"], "--deadline"),
    ],
)
def test_plan_bad_input_is_one_line_exit_2(tmp_path, rtlab, args, needle):
    rc, _, err = rtlab("tune", "plan", "--root", str(tree(tmp_path)), *args)
    assert rc == 2
    assert needle in err and len(err.strip().splitlines()) == 1


def test_plan_root_that_is_no_tree(tmp_path, rtlab):
    rc, _, err = rtlab("tune", "plan", "--root", str(tmp_path))
    assert rc == 2 and "not a system tree" in err
