"""Every path a journal names stays inside its root: `..`, absolute paths, symbolic links
planted after apply, hard links, and generated journals (hypothesis) never make reset or
undo write, remove or move anything outside the tree; the live root is written only under
/proc and /sys (and a partition's cgroup mount)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab.cli import main
from rtlab.tune import STATE_ENV
from rtlab.tune._rootfs import Refused, RootFS
from tests._cgroupfs import fake_rmdir
from tests._journals import (
    STAT,
    TIMER,
    desktop,
    files,
    header,
    intent,
    make_outside,
    refused,
    write_journal,
)
from tests._journals import state as state
from tests.conftest import make_root


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("../outside/victim", "'..'"),
        ("proc/../../outside/victim", "'..'"),
        ("proc/sys/vm/../../../../outside/victim", "'..'"),
        ("/etc/passwd", "absolute"),
        ("proc/sys/./vm/stat_interval", "'.'"),
        ("proc//sys/vm/stat_interval", "empty component"),
        ("outside/victim", "not under /proc, /sys"),
        ("proc/sys/vm/stat\ninterval", "control character"),
        ("", "not a path"),
        (7, "not a path"),
    ],
)
def test_a_journal_path_leaving_the_root_is_a_bad_journal(tmp_path, state, rtlab, path, says):
    root = desktop(tmp_path)
    write_journal(state, [header(root), intent(1, path), {"seq": 1, "state": "done"}])
    before, outside = files(root), files(tmp_path / "outside")
    for cmd in (("tune", "reset", "--root", str(root)), ("tune", "status"), ("tune", "reset")):
        refused(rtlab(*cmd), "tune.jsonl:2: damaged journal record", says)
    assert files(root) == before and files(tmp_path / "outside") == outside
    assert (state / "tune" / "tune.jsonl").exists()  # kept: reset did nothing


PART = {"name": "rt", "version": 1, "mount": "sys/fs/cgroup/cpuset",
        "rt": "sys/fs/cgroup/cpuset/rt", "hk": "sys/fs/cgroup/cpuset/rt-hk",
        "rt_cpus": "3", "hk_cpus": "0-2", "mode": "exclusive"}  # fmt: skip


CG = "sys/fs/cgroup/cpuset"
MOVE = {"op": "move", "pid": 1, "start": None, "comm": "init", "original": f"{CG}/tasks",
        "new": f"{CG}/rt/tasks"}  # fmt: skip
CONTROL = {"op": "controller", "path": "sys/fs/cgroup/cpuset/cgroup.subtree_control",
           "controller": "cpuset", "original": None, "new": "+cpuset"}  # fmt: skip
AFFINITY = {"op": "affinity", "pid": 1, "start": None, "comm": "", "original": "0-3", "new": "0",
            "compare": "list"}  # fmt: skip


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({"op": "mkdir", "path": "../outside/x"}, "'..'"),
        ({"op": "mkdir", "path": "sys/fs/cgroup/cpuset/other"}, "not the partition's cgroup"),
        ({**MOVE, "new": "../../outside/tasks"}, "'..'"),
        ({**MOVE, "new": "proc/sys/vm/x/tasks"}, "not under /sys/fs/cgroup/cpuset"),
        ({**MOVE, "new": "sys/fs/cgroup/cpuset/rt/x"}, "not a tasks or cgroup.procs"),
        ({**MOVE, "pid": True}, "not a task ID"),
        ({**MOVE, "pid": 2**40}, "not a task ID"),
        ({**CONTROL, "path": "proc/sys/vm/stat_interval"}, "cgroup.subtree_control"),
        (AFFINITY, "not one of a partition journal's"),
    ],
)
def test_a_partition_journal_leaving_its_cgroups_is_a_bad_journal(tmp_path, state, rtlab,
                                                                   record, says):  # fmt: skip
    root = desktop(tmp_path)
    recs = [header(root, "partition-rt"), {"seq": 1, "op": "partition", **PART},
            {"seq": 2, **record}]  # fmt: skip
    write_journal(state, recs, "partition-rt")
    outside = files(tmp_path / "outside")
    refused(rtlab("partition", "undo", "--json"), "partition-rt.jsonl:3", says)
    refused(rtlab("partition", "show"), "partition-rt.jsonl:3", says)
    assert files(tmp_path / "outside") == outside


@pytest.mark.parametrize(
    "meta",
    [
        {**PART, "rt": "sys/fs/cgroup/cpuset/../../../outside"},
        {**PART, "rt": "sys/fs/cgroup/cpuset/other"},
        {**PART, "mount": "../outside", "rt": "../outside/rt", "hk": "../outside/rt-hk"},
        {**PART, "name": "other", "rt": "sys/fs/cgroup/cpuset/other", "hk": None},
        {**PART, "version": 3},
        {**PART, "rt_cpus": "0-99999999999"},
    ],
)
def test_a_bad_partition_record_is_a_bad_journal(tmp_path, state, rtlab, meta):
    root = desktop(tmp_path)
    write_journal(state, [header(root, "partition-rt"), {"seq": 1, "op": "partition", **meta}],
                  "partition-rt")  # fmt: skip
    refused(rtlab("partition", "undo"), "partition-rt.jsonl:2: damaged journal record")


def apply(rtlab, root: Path, only: str = "vm.stat_interval,sched.timer_migration") -> None:
    rc, _, err = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--only", only)
    assert rc == 0, err


def test_a_symlink_planted_after_apply_is_not_followed(tmp_path, state, rtlab):
    root = desktop(tmp_path)
    apply(rtlab, root)
    (root / STAT).unlink()
    (root / STAT).symlink_to(tmp_path / "outside" / "victim")  # holds rtlab's "10"
    outside = files(tmp_path / "outside")
    rc, out, err = rtlab("tune", "status", "--json")
    states = {c["target"]: c for c in json.loads(out)["changes"]}
    assert states[STAT]["state"] == "gone" and "symbolic link" in states[STAT]["detail"]
    rc, out, err = rtlab("tune", "reset", "--json")
    assert rc == 1, err
    res = json.loads(out)
    assert not res["restored"] and res["journal_kept"]
    (bad,) = [o for o in res["outcomes"] if o["target"] == STAT]
    assert bad["state"] == "failed" and "symbolic link" in bad["detail"]
    assert (root / TIMER).read_text() == "1\n"  # the other change was restored
    assert files(tmp_path / "outside") == outside


def test_a_directory_symlink_leading_out_is_not_followed(tmp_path, state, rtlab):
    root = desktop(tmp_path)
    apply(rtlab, root)
    (root / "proc/sys/kernel").rename(root / "proc/sys/kernel.real")
    (root / "proc/sys/kernel").symlink_to(tmp_path / "outside" / "kernel")
    outside = files(tmp_path / "outside")
    rc, out, _ = rtlab("tune", "reset", "--json")
    assert rc == 1
    (bad,) = [o for o in json.loads(out)["outcomes"] if o["target"] == TIMER]
    assert bad["state"] == "failed" and "leads out of" in bad["detail"]
    assert files(tmp_path / "outside") == outside
    assert (root / STAT).read_text() == "1\n"


def test_symlinks_inside_the_tree_are_followed_like_sysfs(tmp_path, state, rtlab):
    """sys/bus/workqueue/devices/writeback is a link into sys/devices/ on a real system."""
    root = desktop(tmp_path)
    wb = root / "sys/bus/workqueue/devices/writeback"
    real = root / "sys/devices/virtual/workqueue/writeback"
    real.mkdir(parents=True)
    (real / "cpumask").write_bytes((wb / "cpumask").read_bytes())
    (wb / "cpumask").unlink()
    wb.rmdir()
    wb.symlink_to(os.path.relpath(real, wb.parent))
    before = files(root)
    apply(rtlab, root, "workqueue.writeback")
    assert (real / "cpumask").read_text().strip() == "7"
    assert rtlab("tune", "reset")[0] == 0
    assert files(root) == before


def test_a_hard_link_to_a_file_outside_is_not_written(tmp_path, state, rtlab):
    root = desktop(tmp_path)
    victim = tmp_path / "outside" / "victim"
    victim.write_text("1\n")
    (root / STAT).unlink()
    os.link(victim, root / STAT)
    rc, out, _ = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--only",
                       "vm.stat_interval", "--json")  # fmt: skip
    assert rc == 1
    (o,) = json.loads(out)["outcomes"]
    assert o["state"] == "refused" and "hard link" in o["detail"]
    assert victim.read_text() == "1\n"


def test_the_live_root_is_written_only_under_proc_and_sys(tmp_path):
    """Refused before anything is opened: nothing here touches the live system."""
    live = RootFS("/")
    never = f"tmp/rtlab-never-{os.getpid()}"
    for write in (lambda: live.write(f"{never}/x", "1"), lambda: live.mkdir(never),
                  lambda: live.rmdir("tmp"), lambda: live.write("etc/hostname", "x")):  # fmt: skip
        with pytest.raises(Refused, match="rtlab writes only under /proc, /sys"):
            write()
    # /proc/self/root leads to "/": the directory's real path is checked, not its name
    with pytest.raises(Refused, match="leads out of this system"):
        live.write(f"proc/self/root/{never}", "1")
    with pytest.raises(Refused, match=r"'\.\.'"):
        live.write(f"proc/../{never}", "1")
    assert not Path("/", never).exists()
    part = RootFS("/", ("dev/cpuset",))  # a partition's cgroup mount elsewhere
    assert part.writable == ("proc", "sys", "dev/cpuset")


def test_a_live_journal_naming_other_files_is_a_bad_journal(tmp_path, state, rtlab):
    never = f"etc/rtlab-never-{os.getpid()}"  # absent: even a reset that went on would not write
    write_journal(state, [header("/"), intent(1, never), {"seq": 1, "state": "done"}])
    for cmd in (("tune", "status"), ("tune", "reset")):
        refused(rtlab(*cmd), "not under /proc, /sys")
    meta = {**PART, "mount": "etc", "rt": "etc/rt", "hk": "etc/rt-hk"}
    write_journal(state, [header("/", "partition-rt"), {"seq": 1, "op": "partition", **meta}],
                  "partition-rt")  # fmt: skip
    refused(rtlab("partition", "undo"), "/etc is not a cgroup mount")
    assert not Path("/", never).exists()


# --- generated journals -------------------------------------------------------------------

# Names a journal may hold, some leading out of the tree (links), some not regular files;
# and, rarely drawn, names a journal may not hold.
NAMES = [STAT, TIMER, "proc/sys/vm/link", "proc/sys/dirlink/timer_migration", "proc/sys/vm/fifo",
         "proc/sys/vm/hard", "sys/fs/cgroup/cpuset/rt", "sys/fs/cgroup/cpuset/rt/tasks",
         "sys/fs/cgroup/cpuset/tasks", "sys/fs/cgroup/cpuset/dirlink/tasks"]  # fmt: skip
BAD_NAMES = ["../outside/victim", "proc/../../outside/victim", "/etc/passwd", "proc/sys/./x",
             "outside/victim", ""]  # fmt: skip
PATHS = st.one_of(st.sampled_from(NAMES), st.sampled_from(NAMES), st.sampled_from(BAD_NAMES))
VALUES = st.one_of(
    PATHS,
    st.text(max_size=12),
    st.integers(-(2**70), 2**70),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=True),
    st.lists(st.integers(), max_size=3),
)
# what the links and hard links in hostile_tree() lead to hold: rtlab's value, if followed
LINKED = {"proc/sys/vm/link": "10", "proc/sys/vm/hard": "10",
          "proc/sys/dirlink/timer_migration": "0"}  # fmt: skip
KEYS = ["seq", "op", "path", "original", "new", "compare", "check", "why", "state", "pid",
        "start", "comm", "readback", "error", "controller"]  # fmt: skip


@st.composite
def journal_records(draw, kind: str, live: bool) -> list[dict]:
    """Intents (each perhaps with its outcome) well-formed but for hostile paths, then a
    few fields replaced by values of any type, or dropped."""
    ops = ["file", "mkdir", "move", "controller"] if kind != "tune" else ["file"]
    ops += ["affinity"] if live and kind == "tune" else []
    recs: list[dict] = []
    first = 1 if kind == "tune" else 2  # 1 is the partition record
    for seq in range(first, first + draw(st.integers(0, 4))):
        op = draw(st.sampled_from(ops))
        rec = {"seq": seq, "op": op}
        if op in ("file", "mkdir", "controller"):
            rec["path"] = draw(PATHS)
        if op == "file":
            held = LINKED.get(rec["path"]) or draw(st.sampled_from(["10", "0"]))
            rec |= {"original": draw(st.sampled_from(["1\n", "0\n", ""])), "new": held,
                    "compare": draw(st.sampled_from(["int", "text", "list"]))}  # fmt: skip
        elif op == "controller":
            rec |= {"controller": "cpuset", "original": None, "new": "+cpuset"}
        elif op in ("move", "affinity"):
            rec |= {"pid": draw(st.integers(1, 5)), "start": None, "comm": "x"}
            if op == "move":
                rec |= {"original": draw(PATHS),
                        "new": draw(PATHS)}  # fmt: skip
            else:
                rec |= {"original": "0-3", "new": "0", "compare": "list"}
        recs.append(rec)
        if draw(st.booleans()):
            state = draw(st.sampled_from(["done", "refused", "undoing"]))
            recs.append({"seq": seq, "state": state, **({"error": "x"} if state == "refused"
                                                         else {})})  # fmt: skip
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2])) if recs else 0):
        rec = recs[draw(st.integers(0, len(recs) - 1))]
        if draw(st.booleans()):
            rec[draw(st.sampled_from(KEYS))] = draw(VALUES)  # a field of another type
        else:
            rec.pop(draw(st.sampled_from(sorted(rec))))
    return recs


def hostile_tree(base: Path) -> Path:
    """A tree with links and special files pointing out, next to outside/."""
    root = make_root(base, {STAT: "1\n", TIMER: "1\n"})
    make_outside(base)
    vm = root / "proc/sys/vm"
    (vm / "link").symlink_to(base / "outside" / "victim")
    (root / "proc/sys/dirlink").symlink_to(base / "outside" / "kernel")
    os.mkfifo(vm / "fifo")
    (base / "outside" / "linked").write_text("10\n")
    os.link(base / "outside" / "linked", vm / "hard")
    cg = root / "sys/fs/cgroup/cpuset"
    (cg / "rt").mkdir(parents=True)
    (cg / "tasks").write_text("1\n")
    (cg / "rt" / "tasks").write_text("")
    (cg / "dirlink").symlink_to(base / "outside")  # outside/tasks
    return root


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.data(), kind=st.sampled_from(["tune", "partition-rt"]),
       root_is_tree=st.sampled_from([True, True, True, False]))  # fmt: skip
def test_generated_journals_never_write_outside_nor_crash(monkeypatch, capsys, data, kind,
                                                          root_is_tree):  # fmt: skip
    recs = data.draw(journal_records(kind, not root_is_tree))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = hostile_tree(base)
        state = base / "state"
        monkeypatch.setenv(STATE_ENV, str(state))
        fake_rmdir(monkeypatch)
        first = [{"seq": 1, "op": "partition", **PART}] if kind != "tune" else []
        write_journal(state, [header(root if root_is_tree else "/", kind), *first, *recs], kind)
        outside = files(base / "outside")
        victim = os.stat(base / "outside" / "victim")
        cmds = [["tune", "status"], ["tune", "reset", "--json"]]
        if kind != "tune":
            cmds = [["partition", "show"], ["partition", "undo", "--json"]]
        for cmd in cmds:
            if not root_is_tree and cmd[1] in ("reset", "undo"):
                continue  # a journal of the live root is only read here, never acted on
            rc = main(cmd)
            err = capsys.readouterr().err
            assert rc in (0, 1, 2), (cmd, rc, err)
            assert "Traceback" not in err
            if rc == 2:
                assert len(err.strip().splitlines()) == 1, err
        assert files(base / "outside") == outside
        assert os.stat(base / "outside" / "victim").st_mtime_ns == victim.st_mtime_ns
        assert sorted(p.name for p in base.iterdir()) == ["outside", "root", "state"]
