"""rtlab tune apply / status / reset on fixture trees: undo is exact, whatever happened.

Each test works on its own copy of a fixture tree and its own journal ($RTLAB_STATE in
tmp_path). "Identical" means every file's bytes and the set of files and directories.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.tune import (
    CHANGED,
    FOREIGN,
    REFUSED_NOW,
    RESTORED,
    SKIPPED,
    STATE_ENV,
    Changer,
    Journal,
    apply_plan,
    plan,
)
from tests._journals import desktop

SYSTEMS = Path(__file__).parent / "fixtures" / "systems"
SRC = Path(__file__).resolve().parents[1] / "src"
TIMER = "proc/sys/kernel/timer_migration"
STAT = "proc/sys/vm/stat_interval"
IRQ16 = "proc/irq/16/smp_affinity_list"


@pytest.fixture
def state(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv(STATE_ENV, str(d))
    return d


def tree(tmp_path: Path, name: str = "desktop") -> Path:
    if name == "desktop":
        return desktop(tmp_path)  # min frequency has files to write
    root = tmp_path / "root"
    shutil.copytree(SYSTEMS / name, root)
    return root


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every directory (None), by path under ROOT."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


def journal_lines(state: Path) -> list[str]:
    path = state / "tune" / "tune.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def apply(rtlab, root: Path, *extra: str) -> tuple[int, dict]:
    rc, out, err = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--json", *extra)
    assert rc in (0, 1), err
    return rc, json.loads(out)


def test_apply_then_reset_is_byte_identical(tmp_path, state, rtlab):
    root = tree(tmp_path)
    before = snapshot(root)
    rc, doc = apply(rtlab, root)
    assert rc == 0 and doc["not_made"] == 0
    changed = [o for o in doc["outcomes"] if o["state"] == CHANGED]
    assert len(changed) >= 18
    assert (root / TIMER).read_text().strip() == "0"
    assert (root / STAT).read_text().strip() == "10"
    assert (root / "sys/devices/system/cpu/cpu3/cpufreq/scaling_min_freq").read_text() == "4000000"
    assert snapshot(root) != before
    assert doc["summary"].startswith("tuned: governor, min frequency, idle states, IRQs")
    # status: every change rtlab's
    rc, out, _ = rtlab("tune", "status", "--json")
    st = json.loads(out)
    assert rc == 0 and st["root"] == str(root.resolve())
    assert {c["state"] for c in st["changes"]} == {"rtlab's"} and len(st["changes"]) == len(changed)
    rc, out, err = rtlab("tune", "reset", "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["restored"] and not res["journal_kept"]
    assert snapshot(root) == before
    assert not (state / "tune" / "tune.jsonl").exists()


def test_reset_restores_in_reverse_order(tmp_path, state, rtlab):
    root = tree(tmp_path)
    apply(rtlab, root)
    journalled = [json.loads(x)["path"] for x in journal_lines(state)[1:] if '"op"' in x]
    rc, out, _ = rtlab("tune", "reset", "--json")
    assert rc == 0
    assert [o["target"] for o in json.loads(out)["outcomes"]] == journalled[::-1]


def test_reapply_is_idempotent(tmp_path, state, rtlab):
    root = tree(tmp_path)
    apply(rtlab, root)
    lines = journal_lines(state)
    after = snapshot(root)
    rc, doc = apply(rtlab, root)
    assert rc == 0
    assert journal_lines(state) == lines  # no new journal entry
    assert snapshot(root) == after
    assert not [o for o in doc["outcomes"] if o["state"] == CHANGED]


def test_write_refused_midway_rest_applied_and_reset_restores_all(tmp_path, state, rtlab,
                                                                   monkeypatch):  # fmt: skip
    root = tree(tmp_path)
    before = snapshot(root)
    real = Changer._write

    def refuse_irq16(self, rel, text):
        if rel == IRQ16 and text != (root / IRQ16).read_text():
            raise OSError(errno.EIO, os.strerror(errno.EIO))  # as a managed IRQ does
        return real(self, rel, text)

    monkeypatch.setattr(Changer, "_write", refuse_irq16)
    rc, doc = apply(rtlab, root)
    assert rc == 1 and doc["not_made"] == 1
    (bad,) = [o for o in doc["outcomes"] if o["state"] == REFUSED_NOW]
    assert bad["target"] == IRQ16 and "Input/output error" in bad["detail"]
    # the writes after it were made
    assert (root / TIMER).read_text() == "0"
    assert (root / "proc/irq/130/smp_affinity_list").read_text() == "0-2"
    # the journal recorded the refusal, not a change
    recs = [json.loads(x) for x in journal_lines(state)]
    seq = next(r["seq"] for r in recs if r.get("path") == IRQ16)
    assert {"seq": seq, "state": "refused", "error": "Input/output error"} in recs
    # re-applying does not try it again (and adds nothing to the journal)
    lines = journal_lines(state)
    rc, doc = apply(rtlab, root)
    assert rc == 1 and journal_lines(state) == lines
    (skip,) = [o for o in doc["outcomes"] if o["target"] == IRQ16]
    assert skip["state"] == SKIPPED and "refused before" in skip["detail"]
    rc, _, err = rtlab("tune", "reset")
    assert rc == 0, err
    assert snapshot(root) == before


def test_target_gone_between_plan_and_apply(tmp_path, state):
    root = tree(tmp_path)
    before = snapshot(root)
    p = plan(root, rt_cpus=[3])
    (root / STAT).unlink()
    (root / STAT).mkdir()  # no longer a readable file
    j = Journal.open_or_create("tune", str(root.resolve()))
    outs = apply_plan(p, Changer(root, j))
    (gone,) = [o for o in outs if o.target == STAT]
    assert gone.state == SKIPPED and gone.detail.startswith("not readable (")
    assert sum(o.state == CHANGED for o in outs) == len(p.writes) - 1
    (root / STAT).rmdir()
    (root / STAT).write_bytes(before[STAT])
    outs = Changer(root, Journal.load(j.path)).reset()
    assert all(o.state == RESTORED for o in outs)
    assert snapshot(root) == before


def test_kernel_holding_another_value_is_put_back_and_reported(tmp_path, state, rtlab,
                                                              monkeypatch):  # fmt: skip
    root = tree(tmp_path)
    before = snapshot(root)
    real = Changer._write

    def clamp(self, rel, text):  # the kernel takes the write but keeps something else
        return real(self, rel, "0-3\n" if rel == IRQ16 and text == "0-2" else text)

    monkeypatch.setattr(Changer, "_write", clamp)
    rc, doc = apply(rtlab, root)
    assert rc == 1
    (bad,) = [o for o in doc["outcomes"] if o["target"] == IRQ16]
    assert bad["state"] == REFUSED_NOW and "holds" in bad["detail"]
    assert (root / IRQ16).read_bytes() == before[IRQ16]  # put back at once
    rc, out, _ = rtlab("tune", "status", "--json")
    states = {c["target"]: c["state"] for c in json.loads(out)["changes"]}
    assert states[IRQ16] == RESTORED
    assert rtlab("tune", "reset")[0] == 0
    assert snapshot(root) == before


def test_value_changed_by_someone_else_is_flagged_and_left(tmp_path, state, rtlab):
    root = tree(tmp_path)
    before = snapshot(root)
    apply(rtlab, root)
    (root / STAT).write_text("30\n")  # an administrator's own choice
    rc, out, _ = rtlab("tune", "status", "--json")
    states = {c["target"]: c["state"] for c in json.loads(out)["changes"]}
    assert states[STAT] == FOREIGN
    assert states[TIMER] == "rtlab's"
    rc, out, _ = rtlab("tune", "status")
    assert "changed by someone else" in out
    rc, out, _ = rtlab("tune", "reset", "--json")
    assert rc == 1
    res = json.loads(out)
    assert not res["restored"] and res["journal_kept"]
    assert (root / STAT).read_text() == "30\n"  # left alone
    assert (root / TIMER).read_bytes() == before[TIMER]  # the rest restored
    rc, out, _ = rtlab("tune", "reset")
    assert rc == 1 and "not restored" in out
    (root / STAT).write_bytes(before[STAT])  # the administrator puts it back
    assert rtlab("tune", "reset")[0] == 0
    assert snapshot(root) == before


@pytest.mark.parametrize("n", [1, 2, 7, 19])
def test_crash_after_nth_write_reset_restores_exactly(tmp_path, state, rtlab, n):
    root = tree(tmp_path)
    before = snapshot(root)
    env = {**os.environ, STATE_ENV: str(state), "RTLAB_TUNE_CRASH_AFTER": str(n),
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    cp = subprocess.run(
        [sys.executable, "-m", "rtlab.cli", "tune", "apply", "--root", str(root), "--rt-cpus", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp.returncode == -signal.SIGKILL, cp.stderr
    recs = [json.loads(x) for x in journal_lines(state)[1:]]
    intents = [r for r in recs if "op" in r]
    assert len(intents) == n
    assert not any(r.get("seq") == n and "state" in r for r in recs)  # the write in flight
    assert snapshot(root) != before
    rc, out, err = rtlab("tune", "reset", "--json")
    assert rc == 0, err
    assert len(json.loads(out)["outcomes"]) == n
    assert snapshot(root) == before


def test_only_filters_the_writes(tmp_path, state, rtlab):
    root = tree(tmp_path)
    before = snapshot(root)
    rc, doc = apply(rtlab, root, "--only", "sched.timer_migration,vm.stat_interval")
    assert rc == 0
    assert sorted(o["target"] for o in doc["outcomes"]) == [TIMER, STAT]
    now = snapshot(root)
    assert {k for k in now if now[k] != before[k]} == {TIMER, STAT}
    assert doc["summary"] == "tuned: timer migration, vmstat"
    rtlab("tune", "reset")
    assert snapshot(root) == before


def test_only_unknown_id_exit_2_naming_it(tmp_path, state, rtlab):
    root = tree(tmp_path)
    before = snapshot(root)
    rc, _, err = rtlab("tune", "apply", "--root", str(root), "--only", "vm.stat_interval,vm.nope")
    assert rc == 2 and "vm.nope" in err and len(err.strip().splitlines()) == 1
    assert snapshot(root) == before and not journal_lines(state)


def test_dry_run_writes_nothing(tmp_path, state, rtlab):
    root = tree(tmp_path)
    before = snapshot(root)
    rc, out, err = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--dry-run")
    assert rc == 0, err
    assert "Dry run: nothing written" in out and "/proc/sys/vm/stat_interval" in out
    rc, out, _ = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--dry-run",
                       "--json")  # fmt: skip
    assert json.loads(out)["dry_run"] is True
    assert snapshot(root) == before
    assert not state.exists()


def test_apply_never_writes_boot_changes(tmp_path, state, rtlab):
    root = tree(tmp_path)
    before = snapshot(root)
    rc, out, _ = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3")
    assert rc == 0
    assert "isolcpus=managed_irq,domain,3" in out and "never written" in out
    assert (root / "proc/cmdline").read_bytes() == before["proc/cmdline"]
    written = {json.loads(x)["path"] for x in journal_lines(state)[1:] if '"op"' in x}
    now = snapshot(root)
    assert {k for k in now if now[k] != before[k]} == written
    assert not any(p.startswith("boot/") or p == "proc/cmdline" for p in written)


def test_tasks_on_a_tree_are_listed_but_not_moved(tmp_path, state, rtlab):
    root = tree(tmp_path)
    rc, doc = apply(rtlab, root)
    tasks = [o for o in doc["outcomes"] if o["op"] == "affinity"]
    assert tasks and all(o["state"] == SKIPPED for o in tasks)
    assert rc == 0  # not counted as writes not made
    assert not any('"affinity"' in x for x in journal_lines(state))


def test_journal_is_for_one_root(tmp_path, state, rtlab):
    a = tree(tmp_path)
    b = tmp_path / "other"
    shutil.copytree(SYSTEMS / "desktop", b)
    apply(rtlab, a, "--only", "vm.stat_interval")
    rc, _, err = rtlab("tune", "apply", "--root", str(b), "--only", "vm.stat_interval")
    assert rc == 2 and "reset it first" in err
    rc, _, err = rtlab("tune", "status", "--root", str(b))
    assert rc == 2 and "is for root" in err
    assert rtlab("tune", "status", "--root", str(a))[0] == 0
    assert rtlab("tune", "reset", "--root", str(a))[0] == 0


def test_nothing_to_change_leaves_no_journal(tmp_path, state, rtlab):
    root = tree(tmp_path, "rt-board")
    rc, doc = apply(rtlab, root, "--only", "sched.timer_migration")
    assert rc == 0 and doc["journal"] is None and not doc["outcomes"]
    assert not journal_lines(state)


def test_status_and_reset_without_a_journal(tmp_path, state, rtlab):
    rc, out, _ = rtlab("tune", "status")
    assert rc == 0 and "Nothing tuned" in out
    rc, out, _ = rtlab("tune", "status", "--json")
    assert json.loads(out) == {"journal": None, "root": None, "changes": [], "settings": []}
    rc, out, _ = rtlab("tune", "reset")
    assert rc == 0 and "Nothing to reset" in out


def test_damaged_journal_is_one_line_exit_2(tmp_path, state, rtlab):
    (state / "tune").mkdir(parents=True)
    (state / "tune" / "tune.jsonl").write_text('{"not": "a journal"}\n')
    rc, _, err = rtlab("tune", "status")
    assert rc == 2 and "not an rtlab journal" in err
