"""rtlab partition on fixture trees: cgroup v2 partitions and cgroup v1 cpusets, undo to the
byte, crashes in the middle of create, the audit seeing the partition, and how `rtlab run
--partition` places cases. The live system is tested in test_partition_live.py."""

from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path

import pytest

import rtlab.targets._local as local_target
from rtlab.errors import UnsupportedError, UserError
from rtlab.probecall import Option, Outputs, ProbeCall, probe_argv
from rtlab.records import CaseRecord
from rtlab.system import SysRoot, isolated_cpus, read_facts
from rtlab.system._fingerprint import fingerprint_from_facts
from rtlab.targets import LocalTarget
from rtlab.tune import CRASH_ENV, Changer
from rtlab.tune import _partition_use as use
from rtlab.tune._cgroup import find_hierarchy, format_cpumask
from rtlab.tune._partition import create, load, undo_changes
from rtlab.tune._partition_use import Placement, place_cases, show
from rtlab.tune._rootfs import RootFS
from tests._cgroupfs import (
    NEW_V1,
    NEW_V2,
    PF_KTHREAD,
    PF_NO_SETAFFINITY,
    V1,
    V2,
    fake_rmdir,
    kernel,
    snapshot,
)
from tests.conftest import make_root

from ._skips import skip_setup


@pytest.fixture(autouse=True)
def cgroupfs_rmdir(monkeypatch):
    fake_rmdir(monkeypatch)


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("RTLAB_STATE", str(d))
    return d


def text(root: Path, rel: str) -> str:
    return (root / rel).read_text().strip()


# --- cgroup v2 ----------------------------------------------------------------------------


def test_v2_create_show_undo_leaves_the_tree_byte_identical(tmp_path, state):
    root = make_root(tmp_path, V2)
    before = snapshot(root)
    res = create("2-3", "rt", root, after_mkdir=kernel(NEW_V2))
    p = res.partition
    assert (p.version, p.rt, p.hk, p.hk_cpus) == (2, "sys/fs/cgroup/rt", None, [0, 1])
    assert text(root, "sys/fs/cgroup/rt/cpuset.cpus") == "2-3"
    assert text(root, "sys/fs/cgroup/rt/cpuset.cpus.partition") == "isolated"
    assert res.state == "isolated" and res.moved == 0  # v2: the kernel moves nobody's CPUs
    assert text(root, "proc/irq/10/smp_affinity_list") == "0-1"
    for mask in ("proc/irq/default_smp_affinity", "sys/devices/virtual/workqueue/cpumask",
                 "sys/bus/workqueue/devices/writeback/cpumask"):  # fmt: skip
        assert text(root, mask) == "3", mask
    info = show(load("rt"))
    assert info["cgroup"] == "cgroup v2" and info["state"] == "isolated" and info["exists"]
    assert info["rt_cpus"] == "2-3" and info["changes"] == {"rtlab's": 7}
    outs, complete = undo_changes(load("rt"))
    assert complete, [o.to_dict() for o in outs]
    assert snapshot(root) == before
    assert not (state / "tune" / "partition-rt.jsonl").exists()


def test_v2_isolated_refused_falls_back_to_root(tmp_path, state, monkeypatch):
    root = make_root(tmp_path, V2)
    real = Changer._write

    def old_kernel(self, rel, new):
        if rel.endswith("cpuset.cpus.partition") and new == "isolated":
            raise OSError(errno.EINVAL, "Invalid argument")
        real(self, rel, new)

    monkeypatch.setattr(Changer, "_write", old_kernel)
    res = create("3", "rt", root, after_mkdir=kernel(NEW_V2))
    assert res.state == "root" and res.partition.mode == "root"
    assert undo_changes(load("rt"))[1]


def test_v2_invalid_partition_is_reported_and_put_back(tmp_path, state, monkeypatch):
    root = make_root(tmp_path, V2)
    before = snapshot(root)
    real = Changer._write

    def kernel_says_invalid(self, rel, new):
        if rel.endswith("cpuset.cpus.partition"):
            new = f"{new} invalid (Cpu list in cpuset.cpus not exclusive)"
        real(self, rel, new)

    monkeypatch.setattr(Changer, "_write", kernel_says_invalid)
    with pytest.raises(UnsupportedError, match=r"isolated invalid \(Cpu list .*\).*put back"):
        create("3", "rt", root, after_mkdir=kernel(NEW_V2))
    assert snapshot(root) == before
    assert not (state / "tune" / "partition-rt.jsonl").exists()


def test_v2_enables_the_cpuset_controller_and_disables_it_on_undo(tmp_path, state):
    root = make_root(tmp_path, {**V2, "sys/fs/cgroup/cgroup.subtree_control": "cpu memory\n"})
    create("3", "rt", root, after_mkdir=kernel(NEW_V2))
    assert text(root, "sys/fs/cgroup/cgroup.subtree_control") == "+cpuset"  # as written
    outs, complete = undo_changes(load("rt"))
    assert complete
    assert text(root, "sys/fs/cgroup/cgroup.subtree_control") == "-cpuset"
    assert [o.op for o in outs][-1] == "controller"  # the first change, undone last


def test_v2_without_cpuset_controller_is_unsupported(tmp_path, state):
    root = make_root(tmp_path, {**V2, "sys/fs/cgroup/cgroup.controllers": "cpu io memory\n"})
    with pytest.raises(UnsupportedError, match="no cpuset controller"):
        create("3", "rt", root)


@pytest.mark.parametrize("crash_after", range(1, 8))
def test_v2_undo_after_a_crash_in_create_restores_the_tree(tmp_path, state, crash_after):
    root = make_root(tmp_path, V2)
    before = snapshot(root)
    pid = os.fork()
    if pid == 0:  # the crashing create: SIGKILLed by the Changer after its Nth change
        try:
            os.environ[CRASH_ENV] = str(crash_after)
            create("2-3", "rt", root, after_mkdir=kernel(NEW_V2))
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    outs, complete = undo_changes(load("rt"))
    assert complete, [o.to_dict() for o in outs]
    assert snapshot(root) == before


# --- cgroup v1 ----------------------------------------------------------------------------


def test_v1_create_sets_partrt_like_cpusets_and_undo_restores(tmp_path, state):
    root = make_root(tmp_path, V1)
    before = snapshot(root)
    res = create("2-3", "rt", root, after_mkdir=kernel(NEW_V1))
    base = "sys/fs/cgroup/cpuset"
    assert (res.partition.rt, res.partition.hk) == (f"{base}/rt", f"{base}/rt-hk")
    files = ("cpuset.cpus", "cpuset.mems", "cpuset.cpu_exclusive", "cpuset.sched_load_balance")
    assert [text(root, f"{base}/rt/{f}") for f in files] == ["2-3", "0", "1", "0"]
    assert text(root, f"{base}/rt-hk/cpuset.cpus") == "0-1"
    assert text(root, f"{base}/cpuset.sched_load_balance") == "0"
    assert text(root, "proc/irq/10/smp_affinity_list") == "0-1"
    outs, complete = undo_changes(load("rt"))
    assert complete, [o.to_dict() for o in outs]
    assert snapshot(root) == before


def test_v1_moves_tasks_but_not_per_cpu_kernel_threads(tmp_path, state):
    def stat(pid, comm, flags):
        return f"{pid} ({comm}) S 2 0 0 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0\n"

    kthread = stat(7, "ksoftirqd/3", PF_KTHREAD | PF_NO_SETAFFINITY)
    tasks = {"sys/fs/cgroup/cpuset/tasks": "7\n8\n", "proc/7/stat": kthread}
    root = make_root(tmp_path, {**V1, **tasks, "proc/8/stat": stat(8, "bash", 0)})
    res = create("3", "rt", root, after_mkdir=kernel(NEW_V1))
    assert (res.moved, res.per_cpu, res.refused) == (1, 1, {})
    assert text(root, "sys/fs/cgroup/cpuset/rt-hk/tasks") == "8"
    moves = [e for e in load("rt").journal.entries if e.op == "move"]
    assert [(e["pid"], e["comm"]) for e in moves] == [(8, "bash")]
    assert undo_changes(load("rt"))[1]
    assert text(root, "sys/fs/cgroup/cpuset/tasks") == "8"  # written back (a file here)


def test_bad_input_is_a_user_error(tmp_path, state):
    root = make_root(tmp_path, V1)
    with pytest.raises(UserError, match="CPU 7 is not online"):
        create("7", "rt", root)
    with pytest.raises(UserError, match="every online CPU"):
        create("0-3", "rt", root)
    with pytest.raises(UserError, match="letters, digits"):
        create("3", "../x", root)
    create("3", "rt", root, after_mkdir=kernel(NEW_V1))
    with pytest.raises(UserError, match="exists already"):
        create("2", "rt", root)


def test_hierarchy_detection_prefers_v1_cpuset_and_unescapes(tmp_path):
    root = make_root(tmp_path, {
        "proc/mounts": "cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n"
                       "cgroup /sys/fs/my\\040cpus cgroup rw,cpuset 0 0\n",
        "sys/fs/cgroup/unified/cgroup.controllers": "\n",
    })  # fmt: skip
    h = find_hierarchy(root)
    assert h is not None and (h.version, h.mount) == (1, "sys/fs/my cpus")
    assert format_cpumask([0, 1]) == "3" and format_cpumask([0, 40]) == "100,00000001"


# --- the audit and the fingerprint --------------------------------------------------------


def test_the_audit_sees_a_v1_partition_as_isolation(tmp_path, state):
    root = make_root(tmp_path, V1)
    create("2-3", "rt", root, after_mkdir=kernel(NEW_V1))
    (root / "sys/fs/cgroup/cpuset/rt/cpuset.effective_cpus").write_text("2-3\n")  # the kernel
    iso = isolated_cpus(SysRoot(root))
    assert (iso.cpus, iso.source, iso.partition) == ([2, 3], "cpuset partition",
                                                     "/sys/fs/cgroup/cpuset/rt")  # fmt: skip
    assert "/sys/fs/cgroup/cpuset/rt" in iso.describe()
    facts = read_facts(SysRoot(root))
    assert facts.isolated_cpus == [2, 3] and facts.rt_cpus == [2, 3]
    assert facts.rt_cpus_source == "isolated (cpuset partition /sys/fs/cgroup/cpuset/rt)"
    fp = fingerprint_from_facts(facts.to_dict())
    assert fp["isolation_partition"] == "/sys/fs/cgroup/cpuset/rt"


def test_only_a_valid_isolated_v2_partition_counts(tmp_path):
    files = {**V2, "sys/fs/cgroup/rt/cpuset.cpus.effective": "3\n"}
    for state, counted in (("isolated", True), ("isolated invalid (Parent is not a partition "
                           "root)", False), ("root", False), ("member", False)):  # fmt: skip
        tree = {**files, "sys/fs/cgroup/rt/cpuset.cpus.partition": state + "\n"}
        root = make_root(tmp_path / state.split()[-1][:6], tree)
        iso = isolated_cpus(SysRoot(root))
        assert iso.kernel_isolated is counted, state
        if counted:
            assert (iso.cpus, iso.partition) == ([3], "/sys/fs/cgroup/rt")


# --- rtlab run --partition ----------------------------------------------------------------


def case(i: int, cpus: str | None, loads: tuple[str, ...] = ()) -> CaseRecord:
    options = [Option("cpus", cpus, "cpus")] if cpus else []
    options += [Option("load", spec, "load") for spec in loads]
    return CaseRecord(index=i, series="s", name=f"c{i}", swept={}, params={"cpus_resolved": cpus},
                      call=ProbeCall("wakeup", tuple(options)))  # fmt: skip


@pytest.fixture
def fake_partition(tmp_path, state, monkeypatch):
    root = make_root(tmp_path, V1)
    create("3", "rt", root, after_mkdir=kernel(NEW_V1))
    p = load("rt")
    pl = Placement(p, "/hk/cgroup.procs", (Option("thread-cgroup", "/rt/tasks", "partition"),))
    monkeypatch.setattr(use, "placement", lambda part: pl)
    return pl


def test_named_partition_takes_every_case_and_refuses_other_cpus(fake_partition):
    cases = [case(0, "3"), case(1, None, ("spin:1@0",))]
    notes: list[str] = []
    place_cases(cases, "rt", notes)
    assert [c.params["partition"] for c in cases] == ["rt", "rt"] and len(notes) == 1
    with pytest.raises(UserError, match="measures on CPUs 0-1, not on the partition"):
        place_cases([case(0, "0-1")], "rt", [])
    with pytest.raises(UserError, match="pins load 'spin:1@2-3' onto the real-time CPUs"):
        place_cases([case(0, "3", ("spin:1@2-3",))], "rt", [])
    with pytest.raises(UserError, match="pins load 'spin:1@0,3,policy=fifo:1'"):
        place_cases([case(0, "3", ("spin:1@0,3,policy=fifo:1",))], "rt", [])
    with pytest.raises(UserError, match="no partition 'other'"):
        place_cases([case(0, "3")], "other", [])


def test_without_a_name_only_cases_pinned_inside_a_partition_use_it(fake_partition, monkeypatch):
    cases = [case(0, "3"), case(1, "0"), case(2, None)]
    notes: list[str] = []
    place_cases(cases, None, notes)
    assert [c.params.get("partition") for c in cases] == ["rt", None, None]
    calls = []

    def probe(call, outputs, on_progress=None, probe=None, cgroup=None):
        calls.append((probe_argv(call), cgroup))

    monkeypatch.setattr(local_target, "run_probe", probe)
    here = LocalTarget(Path("/bin/true"))
    for c in cases:
        assert c.call is not None
        here.run_case(c, c.call, Path(f"cases/{c.slug}.json"), None)
    assert calls[0] == (["wakeup", "--cpus", "3", "--thread-cgroup", "/rt/tasks"],
                        "/hk/cgroup.procs")  # fmt: skip
    assert calls[1] == (["wakeup", "--cpus", "0"], None)
    assert calls[2] == (["wakeup"], None)


# --- the command line ---------------------------------------------------------------------


def test_cli_exit_codes(tmp_path, state, rtlab):
    root = make_root(tmp_path, V1)
    rc, _, err = rtlab("partition", "create", "--rt", "9", "--root", str(root))
    assert rc == 2 and "CPU 9 is not online" in err and len(err.strip().splitlines()) == 1
    assert rtlab("partition", "create", "--rt", "0-3", "--root", str(root))[0] == 2
    bare = make_root(tmp_path / "bare", {"sys/devices/system/cpu/online": "0-1\n"})
    rc, _, err = rtlab("partition", "create", "--rt", "1", "--root", str(bare))
    assert rc == 3 and "no cpuset controller" in err
    assert rtlab("partition", "run")[0] == 2
    rc, _, err = rtlab("partition", "run", "--", "no-such-command-rtlab")
    assert rc == 2 and "command not found" in err
    rc, _, err = rtlab("partition", "show", "--name", "nope")
    assert rc == 2 and "no partition 'nope'" in err
    assert rtlab("partition", "undo", "--name", "nope")[0] == 0
    rc, _, err = rtlab("run", "--partition", "quick")
    assert rc == 2 and "before --partition" in err


def test_cli_needs_root_on_the_live_system(state, rtlab, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    rc, _, err = rtlab("partition", "create", "--rt", "1")
    assert rc == 3 and "needs root" in err


def test_cli_create_show_undo_json_on_a_tree(tmp_path, state, rtlab, monkeypatch):
    root = make_root(tmp_path, V2)
    real = RootFS.mkdir

    def mkdir(self: RootFS, rel: str) -> None:  # the fake kernel behind the CLI
        real(self, rel)
        if not self.live and "fs/cgroup" in rel:
            kernel(NEW_V2)(self.root / rel)

    monkeypatch.setattr(RootFS, "mkdir", mkdir)
    rc, out, _ = rtlab("partition", "create", "--rt", "3", "--root", str(root), "--json")
    assert rc == 0 and json.loads(out)["state"] == "isolated"
    rc, out, _ = rtlab("partition", "create", "--rt", "2", "--root", str(root))
    assert rc == 2
    rc, out, _ = rtlab("partition", "show", "--json")
    assert rc == 0 and json.loads(out)["rt_path"] == "/sys/fs/cgroup/rt"
    rc, out, _ = rtlab("partition", "show")
    assert rc == 0 and "real-time CPUs 3" in out and "isolated" in out
    rc, _, err = rtlab("partition", "run", "--", "true")
    assert rc == 2 and "not this system" in err
    rc, out, _ = rtlab("partition", "undo")
    assert rc == 0 and "Everything put back" in out
    assert not (root / "sys/fs/cgroup/rt").exists()


# --- the probe's side: --thread-cgroup and --load-cgroup ----------------------------------


def _probe_with_cgroup_options():
    import subprocess

    from rtlab.probe import find_probe

    try:
        probe = find_probe()
    except UserError as e:
        skip_setup(f"rtlab-probe not found: {e}")
    doc = json.loads(subprocess.run([str(probe), "list", "--json"], capture_output=True,
                                    text=True, timeout=30).stdout)  # fmt: skip
    if "thread-cgroup" not in {o["name"] for o in doc["common_options"]}:
        skip_setup("the rtlab-probe found is an older build without --thread-cgroup")
    return probe


@pytest.mark.parametrize(
    ("option", "extra", "says"),
    [
        ("--thread-cgroup", [], "--thread-cgroup: thread 0 cannot join {f} (No such file"),
        ("--load-cgroup", ["--load", "spin:10%", "--settle", "0"],
         'load "spin:10%": --load-cgroup {f} refused (No such file'),
    ],
)  # fmt: skip
def test_probe_cannot_join_a_missing_cgroup_file(tmp_path, option, extra, says):
    import subprocess

    probe = _probe_with_cgroup_options()
    missing = tmp_path / "no" / "tasks"
    cp = subprocess.run([str(probe), "wakeup", "--loops", "5", "--policy", "other", option,
                         str(missing), *extra, "--quiet"], capture_output=True, text=True,
                        timeout=60)  # fmt: skip
    assert cp.returncode == 3, cp.stderr
    assert says.format(f=missing) in cp.stderr and len(cp.stderr.strip().splitlines()) == 1


def test_probe_threads_and_loads_write_their_ids(tmp_path):
    """On a plain file the joins are visible as the IDs written (the last one stays)."""
    import subprocess

    probe = _probe_with_cgroup_options()
    tasks, procs = tmp_path / "tasks", tmp_path / "procs"
    tasks.write_text("")
    procs.write_text("")
    cp = subprocess.run([str(probe), "wakeup", "--loops", "5", "--policy", "other",
                         "--thread-cgroup", str(tasks), "--load-cgroup", str(procs),
                         "--load", "spin:10%", "--settle", "0", "--json", str(tmp_path / "d.json"),
                         "--quiet"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    assert tasks.read_text().isdigit() and procs.read_text() == "0"  # 0: the writing process


def test_run_probe_refuses_a_cgroup_it_cannot_start_in(tmp_path):
    from rtlab.probe import find_probe, run_probe

    try:
        find_probe()
    except UserError as e:
        skip_setup(f"rtlab-probe not found: {e}")
    missing = tmp_path / "gone" / "cgroup.procs"
    with pytest.raises(UnsupportedError, match=f"cannot start the probe in {missing} \\(No such"):
        call = ProbeCall("wakeup", (Option("loops", "1"),))
        run_probe(call, Outputs(str(tmp_path / "d.json")), cgroup=str(missing))
