"""Journals and trees as hostile input: bounded, never blocking, one line and exit 2 (or the
documented code), never a traceback or exit 4. Torn journals are recovered; an immutable
journal ends reset cleanly."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab.tune import SKIPPED, STATE_ENV, Changer, Journal, apply_plan, plan
from rtlab.tune._journal import MAX_JOURNAL_BYTES, MAX_LINE_BYTES
from tests._cgroupfs import NEW_V2, V2, kernel
from tests._cgroupfs import snapshot as tree_snapshot
from tests._journals import (
    STAT,
    TIMER,
    desktop,
    files,
    header,
    intent,
    refused,
    write_journal,
)
from tests._journals import state as state
from tests.conftest import make_root


class Hung(Exception):
    pass


@contextlib.contextmanager
def no_hang(seconds: int = 30) -> Iterator[None]:
    """Fail instead of blocking forever (a FIFO opened for reading waits for a writer)."""

    def alarm(signum, frame):
        raise Hung(f"blocked for {seconds} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


TUNE = [("tune", "status"), ("tune", "reset"), ("tune", "status", "--json")]


# --- the journal ----------------------------------------------------------------------------


def test_a_journal_nested_100000_deep_is_refused(tmp_path, state, rtlab):
    root = desktop(tmp_path)
    deep = '{"seq":1,"op":"file","path":' + "[" * 100_000 + "]" * 100_000 + "}\n"
    write_journal(state, [header(root), deep])
    for cmd in TUNE:
        refused(rtlab(*cmd), "tune.jsonl:2: a line longer than")
    shallow = '{"seq":1,"op":"file","path":' + "[" * 20_000 + "]" * 20_000 + "}\n"
    assert len(shallow) < MAX_LINE_BYTES  # within a line: the parser's depth refuses it
    write_journal(state, [header(root), shallow])
    for cmd in TUNE:
        refused(rtlab(*cmd), "tune.jsonl:2: damaged journal line")


@pytest.mark.parametrize(
    ("record", "says"),
    [
        (intent(1, new=...), "no 'new'"),
        (intent(1, original=None), "'original': not a string"),
        (intent(1, compare="float"), "'compare': not one of"),
        (intent(1, extra=1), "unknown field 'extra'"),
        (intent(1, op="rm"), "op 'rm' is not one of a tune journal's"),
        ({**intent(1), "seq": "1"}, "sequence number"),
        ({"seq": 9, "state": "done"}, "the outcome of no intent"),
        ({"seq": 1, "state": "gone"}, "state 'gone' is not one of"),
        ([1, 2], "not a JSON object"),
    ],
)
def test_a_record_against_the_schema_is_refused(tmp_path, state, rtlab, record, says):
    root = desktop(tmp_path)
    line = json.dumps(record) + "\n"
    write_journal(
        state, [header(root), intent(1), line] if "state" in line else [header(root), line]
    )
    before = files(root)
    for cmd in TUNE:
        refused(rtlab(*cmd), "damaged journal record", says)
    assert files(root) == before


@pytest.mark.parametrize(
    ("head", "says"),
    [
        ({"journal": 2, "kind": "tune", "root": "/", "created_utc": ""}, "not an rtlab journal"),
        ({"journal": True, "kind": "tune", "root": "/", "created_utc": ""}, "not an rtlab"),
        ({"journal": 1, "kind": "partition-rt", "root": "/", "created_utc": ""}, "of kind"),
        ({"journal": 1, "kind": "tune", "root": "/a/../b", "created_utc": ""}, "normalized"),
        ({"journal": 1, "kind": "tune", "root": "tree", "created_utc": ""}, "absolute"),
        ({"journal": 1, "kind": "tune", "root": "/", "created_utc": 0}, "'created_utc'"),
    ],
)
def test_a_bad_header_is_refused(state, rtlab, head, says):
    write_journal(state, [head])
    for cmd in TUNE:
        refused(rtlab(*cmd), says)


def test_a_journal_that_is_no_regular_file_is_refused_without_blocking(tmp_path, state, rtlab):
    path = state / "tune" / "tune.jsonl"
    path.parent.mkdir(parents=True)
    cases = {
        "FIFO": lambda: os.mkfifo(path),
        "symbolic link": lambda: path.symlink_to("/dev/zero"),
        "directory": lambda: path.mkdir(),
    }
    if os.geteuid() == 0:  # a device node of its own: /dev/zero's numbers
        cases["character device"] = lambda: os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))
    for what, make in cases.items():
        make()
        with no_hang():
            for cmd in (*TUNE, ("tune", "apply", "--root", str(desktop(tmp_path / what)))):
                refused(rtlab(*cmd), "tune.jsonl: cannot read the journal", what)
        (path.rmdir if what == "directory" else path.unlink)()


def test_a_journal_larger_than_the_limit_is_refused_unread(tmp_path, state, rtlab):
    path = write_journal(state, [header(desktop(tmp_path))])
    os.truncate(path, 64 << 30)  # sparse: 64 GiB that take no space
    for cmd in TUNE:
        refused(rtlab(*cmd), f"larger than {MAX_JOURNAL_BYTES >> 20} MiB")


def test_a_partition_journal_that_is_dev_zero_is_refused(state, rtlab):
    path = state / "tune" / "partition-rt.jsonl"
    path.parent.mkdir(parents=True)
    path.symlink_to("/dev/zero")
    for cmd in (("partition", "show"), ("partition", "undo"), ("partition", "undo", "--json")):
        refused(rtlab(*cmd), "symbolic link")


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(data=st.binary(max_size=400) | st.text(max_size=300).map(str.encode))
def test_any_bytes_as_a_journal_are_exit_0_or_2(tmp_path, monkeypatch, capsys, data):
    from rtlab.cli import main

    state = tmp_path / "fuzz-state"
    monkeypatch.setenv(STATE_ENV, str(state))
    path = write_journal(state, [header("/nonexistent/tree"), data])
    for cmd in (["tune", "status"], ["tune", "reset"]):
        rc = main(cmd)
        err = capsys.readouterr().err
        assert rc in (0, 1, 2) and "Traceback" not in err, (rc, err)
        assert rc != 2 or len(err.strip().splitlines()) == 1
    path.unlink(missing_ok=True)


# --- torn journals ------------------------------------------------------------------------


@pytest.mark.parametrize("torn", [b"", b'{"journal":1,"ki', b'{"journal":1,"kind":"tune","root"'])
def test_a_torn_first_line_is_a_journal_of_nothing(tmp_path, state, rtlab, torn):
    root = desktop(tmp_path)
    before = files(root)
    path = write_journal(state, [torn])
    rc, out, _ = rtlab("tune", "status")
    assert rc == 0 and "Nothing tuned" in out
    rc, _, err = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3")
    assert rc == 0, err
    assert Journal.load(path) is not None  # a new journal, whole lines only
    assert rtlab("tune", "reset")[0] == 0
    assert files(root) == before and not path.exists()
    write_journal(state, [torn])
    rc, out, _ = rtlab("tune", "reset")
    assert rc == 0 and "Nothing to reset" in out and not path.exists()  # the leftover removed


def test_a_torn_last_line_is_cut_off_before_the_next_append(tmp_path, state, rtlab):
    root = desktop(tmp_path)
    before = files(root)
    rc, _, _ = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--only",
                     "vm.stat_interval")  # fmt: skip
    assert rc == 0
    path = state / "tune" / "tune.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"seq":2,"op":"file","path":"proc/sys/ker')  # killed while appending
    assert rtlab("tune", "status")[0] == 0
    rc, _, err = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--only",
                       "sched.timer_migration")  # fmt: skip
    assert rc == 0, err
    lines = path.read_text().splitlines()
    assert all(isinstance(json.loads(x), dict) for x in lines)  # the torn line is gone
    assert len(Journal.load(path).entries) == 2
    assert rtlab("tune", "reset")[0] == 0
    assert files(root) == before


def test_a_tail_that_is_not_a_line_is_a_damaged_journal(tmp_path, state, rtlab):
    write_journal(state, [header(desktop(tmp_path)), b"\x00" * 100])
    for cmd in TUNE:
        refused(rtlab(*cmd), "damaged journal")


def test_a_partition_create_killed_before_its_first_change_blocks_nothing(tmp_path, state, rtlab):
    root = make_root(tmp_path, V2)
    before = tree_snapshot(root)
    path = write_journal(state, [header(root.resolve(), "partition-rt")], "partition-rt")
    rc, out, _ = rtlab("partition", "undo")
    assert rc == 0 and "Nothing to undo" in out and not path.exists()
    write_journal(state, [b'{"journal":1,'], "partition-rt")
    from rtlab.tune._partition import create

    create("3", "rt", root, after_mkdir=kernel(NEW_V2))
    assert rtlab("partition", "undo")[0] == 0
    assert tree_snapshot(root) == before


# --- the tree -----------------------------------------------------------------------------


def special(path: Path, what: str) -> None:
    path.unlink()
    if what == "FIFO":
        os.mkfifo(path)
    elif what == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    else:
        os.mknod(path, stat.S_IFCHR | 0o600, os.makedev(1, 5))


SPECIALS = ["FIFO", "link to /dev/zero"] + (["device"] if os.geteuid() == 0 else [])


@pytest.mark.parametrize("what", SPECIALS)
def test_a_tree_file_that_is_no_regular_file_is_never_opened(tmp_path, state, rtlab, what):
    root = desktop(tmp_path)
    rc, _, _ = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--only",
                     "vm.stat_interval")  # fmt: skip
    assert rc == 0
    special(root / STAT, what)
    with no_hang():
        rc, out, _ = rtlab("tune", "status", "--json")
        (c,) = json.loads(out)["changes"]
        assert rc == 0 and c["state"] == "gone" and "not readable" in c["detail"]
        rc, out, _ = rtlab("tune", "reset", "--json")
    assert rc == 1 and json.loads(out)["journal_kept"]


@pytest.mark.parametrize("what", SPECIALS)
def test_a_special_file_swapped_in_before_apply_is_skipped(tmp_path, state, what):
    root = desktop(tmp_path)
    p = plan(root, rt_cpus=[3], only=["vm.stat_interval"])
    special(root / STAT, what)
    with no_hang():
        outs = apply_plan(p, Changer(root, Journal.open_or_create("tune", str(root.resolve()))))
    (o,) = outs
    assert o.state == SKIPPED and "not readable" in o.detail


@pytest.mark.parametrize("what", SPECIALS)
def test_a_special_file_as_a_kernel_file_under_root_is_read_as_absent(tmp_path, state, rtlab,
                                                                      what):  # fmt: skip
    root = desktop(tmp_path)
    special(root / STAT, what)
    with no_hang():
        rc, out, err = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--json")
    assert rc in (0, 1) and "Traceback" not in err, err
    assert STAT not in {o["target"] for o in json.loads(out)["outcomes"]}
    assert rtlab("tune", "reset")[0] == 0


def test_huge_values_in_the_tree_are_bounded(tmp_path, state, rtlab):
    root = desktop(tmp_path)
    rc, _, _ = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--only",
                     "vm.stat_interval,sched.timer_migration")  # fmt: skip
    assert rc == 0
    (root / STAT).write_text("1" * (64 << 10))
    os.truncate(root / "proc/sys/kernel/timer_migration", 8 << 30)  # sparse 8 GiB
    out = rtlab("tune", "status", "--json")[1]
    changes = json.loads(out)["changes"]
    assert len(changes) == 2
    assert all(c["state"] == "gone" and "larger than 8192 bytes" in c["detail"] for c in changes)


def test_a_cpu_list_of_billions_of_cpus_is_bad_input(tmp_path, state, rtlab):
    root = make_root(tmp_path, V2)
    refused(
        rtlab("partition", "create", "--rt", "0-99999999999", "--root", str(root)), "beyond 8191"
    )
    (root / "sys/devices/system/cpu/online").write_text("0-4000000000\n")
    refused(rtlab("partition", "create", "--rt", "1", "--root", str(root)), "online", "beyond 8191")


# --- an immutable journal -----------------------------------------------------------------


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """PATH with the immutable attribute (chattr +i), removed again on the way out."""
    cp = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if cp.returncode != 0:
        pytest.skip(f"chattr +i not possible here: {cp.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_an_immutable_journal_reset_restores_then_says_so(tmp_path, state, rtlab):
    root = desktop(tmp_path)
    before = files(root)
    rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--only", "vm.stat_interval")
    path = state / "tune" / "tune.jsonl"
    with immutable(path):
        timer = (root / TIMER).read_bytes()
        rc, out, err = rtlab("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--only",
                             "sched.timer_migration")  # fmt: skip
        refused((rc, out, err), "cannot write the journal (Operation not permitted)")
        assert (root / TIMER).read_bytes() == timer  # not journalled: not written
        assert rtlab("tune", "reset", "--json")[0] == 1
        res = json.loads(rtlab("tune", "reset", "--json")[1])
        assert res["restored"] and res["journal_kept"]
        assert "Operation not permitted" in res["journal_error"]
        rc, out, err = rtlab("tune", "reset")
        assert rc == 1 and "Everything restored" in out and "could not be removed" in out
        assert len(err.strip().splitlines()) == 1 and "remove it by hand" in err
        assert files(root) == before  # everything restored all the same
    rc, out, _ = rtlab("tune", "reset")
    assert rc == 0 and "Everything restored" in out and not path.exists()


def test_an_immutable_partition_journal_undo_puts_back_then_says_so(tmp_path, state, rtlab):
    from rtlab.tune._partition import create

    root = make_root(tmp_path, V2)
    before = tree_snapshot(root)
    create("3", "rt", root, after_mkdir=kernel(NEW_V2))
    path = state / "tune" / "partition-rt.jsonl"
    with immutable(path):
        rc, out, err = rtlab("partition", "undo", "--json")
        assert rc == 1 and "could not be removed" in err
        res = json.loads(out)
        assert res["restored"] and res["journal_kept"] and res["journal_error"]
        assert tree_snapshot(root) == before
    assert rtlab("partition", "undo")[0] == 0 and not path.exists()
