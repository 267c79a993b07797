"""The audit's advice by situation, on copies of the fixture trees: the preemption model
against the deadline, the tick mode against what the real-time CPUs run, real-time
throttling against the CPU partitioning, the governor's persistent fixes, and the
`--kconfig-variant` fragments."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rtlab.system import Context, SysRoot, read_facts, run_audit
from rtlab.system._kconfig_fragment import kconfig_fragment, settings
from rtlab.tune import plan

SYSTEMS = Path(__file__).parent / "fixtures" / "systems"
DESKTOP_CONFIG = "boot/config-6.1.0-18-amd64"
BOARD_CONFIG = "boot/config-6.6.30-rt30"
US, MS = 1_000, 1_000_000


def tree(tmp_path: Path, name: str, files: dict[str, str] | None = None, config: str = "") -> Path:
    """A copy of fixture tree NAME with FILES replaced and CONFIG lines replacing the kernel
    configuration's lines of the same symbols."""
    root = tmp_path / name
    shutil.copytree(SYSTEMS / name, root)
    for rel, text in (files or {}).items():
        (root / rel).write_text(text)
    if config:
        path = next((root / "boot").glob("config-*"))
        ours = {ln.split("=")[0].removeprefix("# ").split()[0] for ln in config.splitlines()}
        kept = [ln for ln in path.read_text().splitlines()
                if ln.split("=")[0].removeprefix("# ").split(" ")[0] not in ours]  # fmt: skip
        path.write_text("\n".join(kept + config.splitlines()) + "\n")
    return root


def audit(root: Path, rt: list[int] | None = None, deadline_ns: int | None = None):
    facts = read_facts(SysRoot(root), rt)
    return facts, {x.id: x for x in run_audit(facts, Context(deadline_ns=deadline_ns))}


# --- kernel.preempt against the deadline ------------------------------------------------------

FULL = (
    "# CONFIG_PREEMPT_DYNAMIC is not set\n# CONFIG_PREEMPT_VOLUNTARY is not set\nCONFIG_PREEMPT=y"
)


@pytest.mark.parametrize(
    ("system", "config", "deadline_ns", "status"),
    [
        ("rt-board", "", None, "OK"),
        ("rt-board", "", 50 * US, "WARN"),  # tens of µs: borderline even for PREEMPT_RT
        ("rt-board", "", 200 * US, "OK"),
        ("desktop", FULL, None, "INFO"),
        ("desktop", FULL, 50 * US, "FAIL"),
        ("desktop", FULL, 1 * MS, "WARN"),
        ("desktop", FULL, 20 * MS, "OK"),
        ("desktop", "", None, "WARN"),  # dynamic:voluntary
        ("desktop", "", 500 * US, "FAIL"),
        ("desktop", "", 10 * MS, "WARN"),
        ("desktop", "", 200 * MS, "OK"),
    ],
)
def test_the_preemption_model_is_rated_against_the_deadline(
    tmp_path, system, config, deadline_ns, status
):
    _, got = audit(tree(tmp_path, system, config=config), deadline_ns=deadline_ns)
    x = got["kernel.preempt"]
    assert x.status == status, x
    assert "typical: worst case" in x.evidence
    if status in ("WARN", "FAIL") and x.evidence.split(": ")[1].startswith("dynamic:voluntary"):
        assert "preempt=full" in x.fix and "CONFIG_PREEMPT_RT=y" in x.fix
    if status == "OK":
        assert x.fix == ""
    else:  # what settles it: a measurement under load
        arg = "D" if deadline_ns is None else f"{deadline_ns // US}us"
        arg = arg.replace("000us", "ms")
        assert f"rtlab run quick --deadline {arg} under the expected load" in x.fix


def test_a_dynamic_kernel_of_unknown_model_is_not_judged(tmp_path):
    config = "# CONFIG_PREEMPT_VOLUNTARY is not set"  # no default model left to read
    x = audit(tree(tmp_path, "desktop", config=config), deadline_ns=100 * US)[1]["kernel.preempt"]
    assert x.status == "INFO" and "PREEMPT_DYNAMIC kernel running an unknown model" in x.evidence


def test_without_a_deadline_the_generic_kernel_does_not_fail_the_audit(rtlab):
    rc, out, _ = rtlab("audit", "--root", str(SYSTEMS / "this-vm"))
    assert rc == 0 and "kernel.preempt" in out and "below 1 ms" in out
    rc, _, _ = rtlab("audit", "--root", str(SYSTEMS / "this-vm"), "--deadline", "100us")
    assert rc == 1  # dynamic:none cannot plausibly meet 100 µs


# --- timer.mode by situation ------------------------------------------------------------------

SHALLOW = {f"sys/devices/system/cpu/cpu{c}/cpuidle/state{s}/latency": "2"
           for c in range(4) for s in (1, 2, 3)}  # fmt: skip
PERIODIC = "CONFIG_HZ_PERIODIC=y\n# CONFIG_NO_HZ_IDLE is not set"
NOHZ_FULL = "CONFIG_NO_HZ_FULL=y\n# CONFIG_NO_HZ_IDLE is not set\nCONFIG_RCU_NOCB_CPU=y"
ISOLATED = {"proc/cmdline": "quiet isolcpus=managed_irq,domain,3 rcu_nocbs=3"}


def test_periodic_ticks_are_the_default_advice(tmp_path):
    _, got = audit(tree(tmp_path, "desktop", config=PERIODIC), [3])
    assert got["timer.mode"].status == "OK"


def test_tickless_idle_is_fine_with_shallow_idle_states(tmp_path):
    _, got = audit(tree(tmp_path, "desktop", SHALLOW), [3])
    x = got["timer.mode"]
    assert x.status == "OK" and "shallow" in x.evidence


@pytest.mark.parametrize(("rt", "status"), [(None, "INFO"), ([3], "WARN")])
def test_tickless_idle_with_deep_idle_states_states_the_wake_cost(tmp_path, rt, status):
    facts, got = audit(tree(tmp_path, "desktop"), rt)
    x = got["timer.mode"]
    assert x.status == status
    assert "restarts the tick" in x.evidence and "exit latency (deepest enabled: 250 us)" in (
        x.evidence
    )
    assert "nohz=off" in x.fix and "CONFIG_HZ_PERIODIC=y" in x.fix and "nohz_full" not in x.fix
    lines = settings(kconfig_fragment(facts, list(got.values()), "t", "0"))
    assert "CONFIG_HZ_PERIODIC=y" in lines and "# CONFIG_NO_HZ_IDLE is not set" in lines
    assert "CONFIG_NO_HZ_FULL=y" not in lines


def test_nohz_full_built_but_not_booted_behaves_like_tickless_idle(tmp_path):
    _, got = audit(tree(tmp_path, "desktop", SHALLOW, config=NOHZ_FULL), [3])
    x = got["timer.mode"]
    assert "no nohz_full= on CPUs 3: behaves like NO_HZ_IDLE there" in x.evidence
    assert x.status == "OK"  # shallow idle states, CPU 3 not isolated: nothing to change


def test_nohz_off_keeps_the_tick_periodic(tmp_path):
    root = tree(tmp_path, "desktop", {"proc/cmdline": "quiet nohz=off"})
    x = audit(root, [3])[1]["timer.mode"]
    assert x.status == "OK" and "nohz=off" in x.evidence


def test_isolated_cpus_are_offered_full_dynticks_for_one_busy_task(tmp_path):
    built = "CONFIG_CPU_ISOLATION=y\nCONFIG_RCU_NOCB_CPU=y"
    facts, got = audit(tree(tmp_path, "desktop", {**SHALLOW, **ISOLATED}, config=built))
    x = got["timer.mode"]
    assert x.status == "INFO" and "isolated: meant for one busy task each" in x.evidence
    assert "one busy task that never sleeps" in x.fix
    assert "CONFIG_NO_HZ_FULL=y" in x.fix and "nohz_full=3 rcu_nocbs=3" in x.fix
    assert got["boot.nohz_full"].status == "INFO" and "busy task" in got["boot.nohz_full"].fix
    assert got["boot.isolcpus"].status == "OK"
    lines = settings(kconfig_fragment(facts, list(got.values()), "t", "0"))
    assert "CONFIG_NO_HZ_FULL=y" in lines and "CONFIG_HZ_PERIODIC=y" not in lines


def test_full_dynticks_booted_on_isolated_cpus_is_ok(tmp_path):
    _, got = audit(tree(tmp_path, "rt-board"))
    assert got["timer.mode"].status == got["boot.nohz_full"].status == "OK"
    assert "nohz_full=3 rcu_nocbs=3" in got["timer.mode"].evidence


# --- sched.rt_runtime and sched.rt_throttling_isolated ----------------------------------------

RUNTIME = "proc/sys/kernel/sched_rt_runtime_us"


def test_throttling_stays_on_without_isolated_cpus(tmp_path):
    _, got = audit(tree(tmp_path, "desktop"), [3])
    assert got["sched.rt_runtime"].status == "OK"
    assert "shared with other work" in got["sched.rt_runtime"].evidence
    assert got["sched.rt_throttling_isolated"].status == "INFO"  # pipewire, CPU 3 shared
    assert "isolate CPUs 3 first" in got["sched.rt_throttling_isolated"].fix
    off = audit(tree(tmp_path / "off", "desktop", {RUNTIME: "-1"}), [3])[1]
    assert off["sched.rt_runtime"].status == "WARN"
    assert "sched_rt_runtime_us=950000" in off["sched.rt_runtime"].fix
    assert off["sched.rt_throttling_isolated"].status == "OK"


def test_throttling_off_is_advised_only_for_isolated_cpus_with_its_cost(tmp_path):
    _, got = audit(tree(tmp_path, "desktop", ISOLATED))
    x = got["sched.rt_runtime"]
    assert x.status == "INFO" and "sched_rt_runtime_us=-1" in x.fix
    assert "runaway" in x.fix and "housekeeping CPUs 0-2" in x.fix
    assert "cpu.rt_runtime_us" in x.fix  # the desktop kernel has RT_GROUP_SCHED
    assert got["sched.rt_throttling_isolated"].status == "WARN"  # pipewire on isolated CPU 3
    assert got["sched.rt_throttling_isolated"].fix == x.fix
    board = audit(tree(tmp_path, "rt-board"))[1]  # isolated, throttling off
    assert board["sched.rt_runtime"].status == board["sched.rt_throttling_isolated"].status == "OK"


def test_tune_writes_unthrottled_only_for_isolated_cpus(tmp_path):
    shared = plan(tree(tmp_path, "desktop"), rt_cpus=[3], allow_rt_unthrottled=True)
    assert not [w for w in shared.writes if w.path.endswith("sched_rt_runtime_us")]
    isolated = plan(tree(tmp_path / "i", "desktop", ISOLATED), allow_rt_unthrottled=True)
    assert [w.new for w in isolated.writes if w.path.endswith("sched_rt_runtime_us")] == ["-1"]


# --- cpu.governor: runtime and persistent forms -----------------------------------------------


def test_governor_fix_names_the_boot_parameter_and_the_kconfig_default(tmp_path):
    root = tree(tmp_path, "desktop", config="CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL=y")
    facts, got = audit(root, [3])
    x = got["cpu.governor"]
    assert x.status == "WARN" and "echo performance >" in x.fix
    assert "cpufreq.default_governor=performance (Linux 5.9 and later)" in x.fix
    assert "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE=y" in x.fix and "CONFIG_CPU_FREQ " in x.fix
    assert "CONFIG_CPU_IDLE" in got["cpu.idle_latency"].fix
    lines = settings(kconfig_fragment(facts, list(got.values()), "t", "0"))
    assert "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE=y" in lines
    assert "# CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL is not set" in lines
    assert not [ln for ln in lines if ln.startswith("# CONFIG_CPU_FREQ ")]  # an option only


@pytest.mark.parametrize(("release", "offered"), [("6.1.0-18-amd64", True), ("5.4.0-1", False)])
def test_tune_offers_the_governor_boot_parameter_from_5_9(tmp_path, release, offered):
    root = tree(tmp_path, "desktop", {"proc/sys/kernel/osrelease": release})
    line = plan(root, rt_cpus=[3]).boot.cmdline.split()
    assert ("cpufreq.default_governor=performance" in line) is offered


# --- --kconfig-variant ------------------------------------------------------------------------


def test_debug_variant_adds_the_tracers_and_keeps_the_hooks(tmp_path):
    root = tree(tmp_path, "desktop", config="CONFIG_IRQSOFF_TRACER=y")
    facts, got = audit(root)
    plain = settings(kconfig_fragment(facts, list(got.values()), "t", "0"))
    text = kconfig_fragment(facts, list(got.values()), "t", "0", "debug")
    debug = settings(text)
    assert "# CONFIG_IRQSOFF_TRACER is not set" in plain
    assert "# CONFIG_IRQSOFF_TRACER is not set" not in debug
    for symbol in ("FTRACE", "TIMERLAT_TRACER", "OSNOISE_TRACER", "HWLAT_TRACER"):
        assert f"CONFIG_{symbol}=y" in debug
    assert "# CONFIG_DEBUG_KMEMLEAK is not set" in debug  # debug options go in every variant
    assert "--kconfig-variant debug" in text and "# variant debug: " in text


def test_production_variant_removes_the_tracers(tmp_path):
    facts, got = audit(tree(tmp_path, "desktop"))
    text = kconfig_fragment(facts, list(got.values()), "t", "0", "production")
    lines = settings(text)
    assert "# CONFIG_TIMERLAT_TRACER is not set" in lines  # built in the desktop kernel
    assert "# CONFIG_OSNOISE_TRACER is not set" in lines
    assert not [ln for ln in lines if ln.endswith("_TRACER=y") or ln == "CONFIG_FTRACE=y"]
    assert "# CONFIG_DEBUG_KMEMLEAK is not set" in lines


def test_kconfig_variant_on_the_command_line(rtlab, tmp_path):
    desktop = str(SYSTEMS / "desktop")
    rc, out, _ = rtlab("audit", "--root", desktop, "--kconfig", "-", "--kconfig-variant", "debug")
    assert rc == 1 and "CONFIG_HWLAT_TRACER=y" in out and "variant debug" in out
    rc, out, err = rtlab("audit", "--root", desktop, "--kconfig-variant", "production")
    assert rc == 2 and out == "" and "--kconfig-variant needs --kconfig" in err
    rc, out, err = rtlab("audit", "--root", desktop, "--kconfig", "-", "--kconfig-variant", "x")
    assert rc == 2 and out == "" and "--kconfig-variant" in err
