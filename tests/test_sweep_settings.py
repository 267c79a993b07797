"""Runtime settings as experiment keys: parsed and checked, turned into writes, written
through the settings journal around a case and put back byte for byte, after a refusal
and after a SIGKILL at any write (by `rtlab tune reset` or the next run); and, live, a
real `rtlab run` of a harmless sysctl killed in its case."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rtlab.errors import SettingError, UserError
from rtlab.experiment import expand, parse
from rtlab.measure import Settings, measure
from rtlab.measure import plan as measure_plan
from rtlab.probe import Catalog, load_catalog
from rtlab.records import CaseRecord
from rtlab.runner import Display
from rtlab.store import Store
from rtlab.system import SysRoot
from rtlab.targets import LocalTarget, Target
from rtlab.tune import Journal
from rtlab.tune._settings import KNOB_KEYS, SettingWrite, writes
from rtlab.tune._settings_run import KIND, CaseSettings, check_writes
from tests._cgroupfs import snapshot
from tests._journals import STAT, TIMER, desktop
from tests._journals import state as state
from tests.test_tune_crash import every_crash

FIXTURES = Path(__file__).parent / "fixtures"
RT = "proc/sys/kernel/sched_rt_runtime_us"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(FIXTURES / "probe-list.json")


def toml(sweep: str, defaults: str = "", series: str = "") -> str:
    return f"""
[defaults]
loops = 10
{defaults}
[[series]]
name = "s"
{series}
sweep = {{ {sweep} }}
"""


def cases(text: str, catalog: Catalog, tmp_path: Path) -> list:
    root = desktop(tmp_path)
    return expand(parse(text, "t.toml", catalog), root=SysRoot(root)).cases


# --- the keys -----------------------------------------------------------------------------


def test_setting_keys_in_defaults_series_and_sweep(catalog, tmp_path):
    text = toml(
        '"sysctl.kernel.sched_rt_runtime_us" = [950000, -1]',
        defaults='"sysctl.vm.stat_interval" = 3',
        series='"mm.thp" = "never"',
    )
    cs = cases(text, catalog, tmp_path)
    assert [c.name for c in cs] == [
        "sysctl.kernel.sched_rt_runtime_us=950000",
        "sysctl.kernel.sched_rt_runtime_us=-1",
    ]
    assert cs[1].params["sysctl.kernel.sched_rt_runtime_us"] == -1  # as written: an int
    assert cs[0].params["sysctl.vm.stat_interval"] == 3 and cs[0].params["mm.thp"] == "never"
    assert not any("sysctl" in o.name for o in cs[0].call.options)  # no probe option


@pytest.mark.parametrize(
    ("sweep", "says"),
    [
        ('"sysctl.vm..x" = [1]', "not a sysctl name"),
        ('"sysctl.vm/stat_interval" = [1]', "not a sysctl name"),
        ('"sysctl.x" = [1]', "not a sysctl name"),
        ('"sysctl.vm.stat_interval" = [true]', "must be an int or a str, not bool"),
        ('"sysctl.vm.stat_interval" = [[1]]', "must be an int or a str, not array"),
        ('"sysctl.vm.stat_interval" = [1.5]', "not float"),
        ('"sysctl.vm.stat_interval" = [""]', "must not be empty"),
        ('"sysctl.vm.stat_interval" = ["1\\n2"]', "control character"),
        ('"cpu.idle_latency" = ["deep"]', "int >= 0"),
        ('"sysctl.vm.stat_interval" = []', "non-empty list"),
        ('"cpu.governr" = ["performance"]', "unknown key"),
    ],
)
def test_bad_setting_keys_and_values_are_refused(catalog, sweep, says):
    with pytest.raises(UserError, match=says):
        parse(toml(sweep), "t.toml", catalog)


def test_a_scalar_key_takes_no_list(catalog):
    with pytest.raises(UserError, match="not array"):
        parse(toml('"loops" = [1]', series='"sysctl.vm.stat_interval" = [1, 2]'), "t", catalog)


# --- the writes ---------------------------------------------------------------------------


def test_writes_of_sysctls_and_knobs(tmp_path):
    root = SysRoot(desktop(tmp_path))
    p = {"sysctl.vm.stat_interval": 3, "sched.timer_migration": 0, "mm.thp": "never",
         "cpu.governor": "powersave", "cpus_resolved": "2-3", "loops": 5}  # fmt: skip
    ws = writes(p, root)
    assert [(w.key, w.path, w.new, w.compare) for w in ws] == [
        ("sysctl.vm.stat_interval", STAT, "3", "int"),
        ("sched.timer_migration", TIMER, "0", "int"),
        ("mm.thp", "sys/kernel/mm/transparent_hugepage/enabled", "never", "choice"),
        ("cpu.governor", "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor", "powersave",
         "text"),
        ("cpu.governor", "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor", "powersave",
         "text"),
    ]  # fmt: skip
    assert {"cpu.governor", "cpu.idle_latency", "sched.rt_runtime", "vm.stat_interval"} <= set(
        KNOB_KEYS
    )


def test_idle_limit_disables_the_states_above_it(tmp_path):
    root = desktop(tmp_path)
    base = root / "sys/devices/system/cpu/cpu1/cpuidle"
    lat = {s.name: int((s / "latency").read_text()) for s in base.iterdir()}
    ws = writes({"cpu.idle_latency": 10, "cpus_resolved": "1"}, SysRoot(root))
    assert {w.path.split("/")[-2]: w.new for w in ws} == {
        s: "1" if v > 10 else "0" for s, v in lat.items()
    }


def rt_group(tmp_path: Path) -> Path:
    """The desktop tree with a cgroup v1 cpu hierarchy whose root has cpu.rt_runtime_us."""
    root = desktop(tmp_path)
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/mountinfo").write_text(
        "30 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:10 - cgroup cgroup "
        "rw,cpu,cpuacct\n"
    )
    (root / "sys/fs/cgroup/cpu,cpuacct").mkdir(parents=True)
    (root / "sys/fs/cgroup/cpu,cpuacct/cpu.rt_runtime_us").write_text("950000\n")
    (root / RT).write_text("950000\n")
    return root


def test_rt_runtime_moves_the_root_group_first_when_lowered(tmp_path):
    root = SysRoot(rt_group(tmp_path))
    group = "sys/fs/cgroup/cpu,cpuacct/cpu.rt_runtime_us"
    key = "sysctl.kernel.sched_rt_runtime_us"
    assert [w.path for w in writes({key: 800000}, root)] == [group, RT]
    assert [w.path for w in writes({key: 1000000}, root)] == [RT, group]
    assert [w.path for w in writes({key: -1}, root)] == [RT]  # off: the group is left alone
    assert [w.path for w in writes({"sched.rt_runtime": 900000}, root)] == [group, RT]


def test_missing_read_only_and_twice_written_files_are_refused(tmp_path):
    root = desktop(tmp_path)
    with pytest.raises(UserError, match=r"sysctl.vm.nope: no such sysctl on this system"):
        check_writes(writes({"sysctl.vm.nope": 1}, SysRoot(root)), root)
    (root / "proc/sys/kernel/osrelease").chmod(0o444)
    with pytest.raises(UserError, match="osrelease is read-only"):
        check_writes(writes({"sysctl.kernel.osrelease": "x"}, SysRoot(root)), root)
    twice = {"sysctl.kernel.timer_migration": 1, "sched.timer_migration": 0}
    with pytest.raises(UserError, match="both set /proc/sys/kernel/timer_migration"):
        check_writes(writes(twice, SysRoot(root)), root)


# --- applied and put back -----------------------------------------------------------------


def case_writes(root: Path) -> list[SettingWrite]:
    p = {"sysctl.vm.stat_interval": 7, "sched.timer_migration": 0, "mm.thp": "never"}
    return writes(p, SysRoot(root))


def test_applied_around_the_case_and_put_back_byte_for_byte(tmp_path, state):
    root = desktop(tmp_path)
    before = snapshot(root)
    settings = CaseSettings(root)
    with settings.applied(case_writes(root)) as outs:
        assert (root / STAT).read_text() == "7"
        assert (root / TIMER).read_text() == "0"
        assert [o.state for o in outs] == ["changed"] * 3
        assert Journal.load(settings.journal_path()) is not None  # on disk while in effect
    assert snapshot(root) == before
    assert not settings.journal_path().exists()


def test_put_back_on_an_interruption(tmp_path, state):
    root = desktop(tmp_path)
    before = snapshot(root)
    with pytest.raises(KeyboardInterrupt), CaseSettings(root).applied(case_writes(root)):
        raise KeyboardInterrupt
    assert snapshot(root) == before


def einval_on(monkeypatch: pytest.MonkeyPatch, path: str) -> None:
    """The tree's PATH refuses writes as the kernel does a value it rejects."""
    from rtlab.tune._rootfs import RootFS

    real = RootFS.write

    def write(self: RootFS, rel: str, text: str) -> None:
        if rel == path:
            raise OSError(errno.EINVAL, "Invalid argument")
        real(self, rel, text)

    monkeypatch.setattr(RootFS, "write", write)


def test_a_refused_value_puts_back_what_the_case_changed(tmp_path, state, monkeypatch):
    root = desktop(tmp_path)
    before = snapshot(root)
    einval_on(monkeypatch, TIMER)
    refused = pytest.raises(SettingError, match=r"sched.timer_migration = 0: the kernel refuses")
    with refused, CaseSettings(root).applied(case_writes(root)):
        pytest.fail("the case ran with a setting refused")
    assert snapshot(root) == before  # vm.stat_interval, written first, is back
    assert not CaseSettings(root).journal_path().exists()


def test_the_trial_refuses_before_the_first_case(tmp_path, state, monkeypatch):
    root = desktop(tmp_path)
    before = snapshot(root)
    einval_on(monkeypatch, RT)
    ok = writes({"sysctl.vm.stat_interval": 2}, SysRoot(root))
    bad = writes({"sysctl.kernel.sched_rt_runtime_us": 2000000}, SysRoot(root))
    with pytest.raises(SettingError, match=r"must not exceed kernel\.sched_rt_period_us"):
        CaseSettings(root).trial([ok, bad])
    assert snapshot(root) == before


def test_a_running_case_holds_the_lock(tmp_path, state):
    root = desktop(tmp_path)
    with CaseSettings(root).applied(case_writes(root)):
        busy = pytest.raises(SettingError, match="another rtlab run is changing settings")
        with busy, CaseSettings(root).applied(case_writes(root)):
            pass
        assert CaseSettings(root).leftover() is None  # a live run's: left to it


def test_a_target_that_cannot_apply_settings_refuses_them(catalog, tmp_path):
    class Away(Target):
        name = "board"
        root = catalog = None  # type: ignore[assignment]

        def checker(self, calls):  # type: ignore[no-untyped-def]
            return None

        def run_case(self, *a):  # type: ignore[no-untyped-def]
            raise AssertionError

    cs = cases(toml('"sysctl.vm.stat_interval" = [1]'), catalog, tmp_path)
    with pytest.raises(UserError, match=r"applied on this system only.*not on target board"):
        Away().check_settings(cs, trial=False)
    with pytest.raises(UserError, match="not on target board"):
        Away().case_settings(cs[0])


# --- after a SIGKILL at every write -------------------------------------------------------


@pytest.mark.parametrize("recovery", ["tune reset", "next run"])
def test_a_crash_at_every_write_is_put_back(tmp_path, state, rtlab, recovery):
    root = desktop(tmp_path)
    before = snapshot(root)
    ws = case_writes(root)

    def run_case() -> None:
        with CaseSettings(root).applied(ws):
            pass

    def recover(where: str) -> None:
        if recovery == "tune reset":
            rc, _, err = rtlab("tune", "reset", "--json")
            assert rc == 0, f"reset after a crash at {where}: {err}"
        else:
            CaseSettings(root).recover(lambda text: None)
        assert snapshot(root) == before, f"not byte-identical after a crash at {where}"
        assert not Journal.path_for(KIND).exists(), f"journal left after {where}"

    seen = every_crash(run_case, recover)
    # a header; an intent, a write and an outcome per setting; an undoing line and a write
    # per setting; the journal removed
    assert seen["torn"] >= 1 + 3 * 3 + 2 * 3 + 1, seen


# --- live ---------------------------------------------------------------------------------

LIVE_KEY, LIVE_FILE = "sysctl.vm.stat_interval", Path("/proc/sys/vm/stat_interval")


@pytest.mark.skipif(os.geteuid() != 0, reason="writes a sysctl: needs root")
def test_live_run_killed_in_its_case_is_put_back(tmp_path, state):
    """A real `rtlab run` sweeping vm.stat_interval (the vmstat update interval: harmless)
    is SIGKILLed in its case; `rtlab tune reset` then puts the value back. The value is
    also put back by value in any case, so the host keeps its own."""
    original = LIVE_FILE.read_text()
    new = 7 if original.strip() != "7" else 8
    exp = tmp_path / "e.toml"
    exp.write_text(f'[defaults]\nmeter = "wakeup"\nduration = "60s"\n[[series]]\nname = "s"\n'
                   f'sweep = {{ "{LIVE_KEY}" = [{new}] }}\n')  # fmt: skip
    rtlab = [sys.executable, "-m", "rtlab.cli"]
    env = {**os.environ, "RTLAB_STATE": str(state)}
    proc = subprocess.Popen([*rtlab, "run", str(exp), "--results", str(tmp_path / "r")],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while LIVE_FILE.read_text().strip() != str(new):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the setting never took effect"
            time.sleep(0.05)
        time.sleep(1)  # the probe measures
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert LIVE_FILE.read_text().strip() == str(new)  # left in effect by the kill
        status = subprocess.run([*rtlab, "tune", "status", "--json"], env=env,
                                capture_output=True, text=True, check=True)  # fmt: skip
        assert f'"check": "{LIVE_KEY}"' in status.stdout
        reset = subprocess.run([*rtlab, "tune", "reset"], env=env, capture_output=True,
                               text=True)  # fmt: skip
        assert reset.returncode == 0, reset.stderr
        assert LIVE_FILE.read_text() == original  # byte for byte
        assert not (state / "tune" / "settings.jsonl").exists()
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        if LIVE_FILE.read_text() != original:
            LIVE_FILE.write_text(original)


# --- through the runner -------------------------------------------------------------------


class TreeTarget(LocalTarget):
    """This machine's probe, with the settings written in a fixture tree: each case notes
    the value its file holds while it runs."""

    def __init__(self, tree: Path) -> None:
        super().__init__()
        self.tree = tree
        self.seen: list[str] = []

    def check_settings(self, cases: list[CaseRecord], trial: bool) -> None:
        pass  # the kernel takes every value at first, as far as this run can tell

    def case_settings(self, case: CaseRecord) -> contextlib.AbstractContextManager[Any]:
        return CaseSettings(self.tree).applied(writes(case.params, SysRoot(self.tree)))

    def recover_settings(self, say: Any) -> None:
        CaseSettings(self.tree).recover(say)

    def run_case(self, case, call, document, raw, on_progress=None):  # type: ignore[no-untyped-def]
        self.seen.append((self.tree / STAT).read_text())
        return super().run_case(case, call, document, raw, on_progress)


RUN = """
[defaults]
meter = "wakeup"
policy = "other"
loops = 20
interval = "1ms"
[[series]]
name = "s"
sweep = { "sysctl.vm.stat_interval" = [2, 3, 4] }
"""


def run_tree(tmp_path: Path, target: TreeTarget) -> Store:
    exp_file = tmp_path / "e.toml"
    exp_file.write_text(RUN)
    store = Store(tmp_path / "results")
    exp = measure_plan(str(exp_file), target, Settings(), lambda text: None)
    measure(store, exp, target, Settings(), Display(), lambda text: None)
    return store


def test_each_case_runs_with_its_value_and_a_refusal_midway_stops_the_run(tmp_path, state,
                                                                          monkeypatch):  # fmt: skip
    tree = desktop(tmp_path)
    before = snapshot(tree)
    target = TreeTarget(tree)
    from rtlab.tune._rootfs import RootFS

    real = RootFS.write

    def write(self: RootFS, rel: str, text: str) -> None:
        if rel == STAT and text == "3":
            raise OSError(errno.EINVAL, "Invalid argument")
        real(self, rel, text)

    monkeypatch.setattr(RootFS, "write", write)
    with pytest.raises(SettingError) as e:
        run_tree(tmp_path, target)
    msg = str(e.value)
    assert "case 1 (sysctl.vm.stat_interval=3)" in msg and "the kernel refuses it" in msg
    assert "the run stopped, 1 of 3 cases kept" in msg and "rtlab run --resume" in msg
    assert target.seen == ["2"]  # the first case ran with its value; the second never ran
    assert snapshot(tree) == before
    (rec,) = Store(tmp_path / "results").experiments()
    assert [c.status for c in rec.cases] == ["done", "failed", "pending"]
