"""A crash at every write of `tune apply`, `tune reset`, `partition create` and `partition
undo`, at every phase of it (before, inside: opened and truncated, torn: half the bytes,
after), then reset/undo: the fixture tree comes back byte-identical, exit 0, no journal.

Each crash is a SIGKILL from the RTLAB_TUNE_CRASH_AT hook in a forked child; N runs from
1 until the command ends without being killed, so every write it makes is covered.
"""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.tune import CRASH_AT_ENV
from rtlab.tune._crash import PHASES
from rtlab.tune._partition import create
from tests._cgroupfs import NEW_V1, NEW_V2, V1, V2, kernel, snapshot
from tests._journals import desktop
from tests._journals import state as state
from tests.conftest import make_root

SYSTEMS = Path(__file__).parent / "fixtures" / "systems"


def killed_at(n: int, phase: str, fn: Callable[[], object]) -> bool:
    """Run FN in a child that SIGKILLs itself at write N, PHASE: True when it was killed,
    False when FN ended first (N is past its last write)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            os.environ[CRASH_AT_ENV] = f"{n}:{phase}"
            fn()
        except BaseException:  # the parent sees it as exit 3
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        assert os.WTERMSIG(status) == signal.SIGKILL
        return True
    assert os.WEXITSTATUS(status) == 0, f"the command failed at {n}:{phase}"
    return False


def every_crash(fn: Callable[[], object], recover: Callable[[str], None]) -> dict[str, int]:
    """Crash FN at every write and phase, RECOVER after each (given "N:PHASE"); the number
    of writes seen per phase."""
    seen = {}
    for phase in PHASES:
        for n in itertools.count(1):
            if not killed_at(n, phase, fn):
                recover("no crash")  # FN ran to its end: the next phase starts afresh
                break
            recover(f"{n}:{phase}")
        seen[phase] = n - 1
    assert len(set(seen.values())) == 1, seen  # every phase of every write
    return seen


def quiet(*args: str) -> Callable[[], int]:
    def run() -> int:
        rc = main(list(args))
        assert rc in (0, 1)
        return rc

    return run


def restored(root: Path, before: dict, state: Path, capsys, *cmd: str) -> Callable[[str], None]:
    def check(where: str) -> None:
        capsys.readouterr()
        rc = main(list(cmd))
        err = capsys.readouterr().err
        assert rc == 0, f"{' '.join(cmd)} after a crash at {where}: exit {rc} {err}"
        assert snapshot(root) == before, f"not byte-identical after a crash at {where}"
        assert not list((state / "tune").glob("*.jsonl")), f"journal left after {where}"

    return check


def test_crash_at_every_write_of_apply(tmp_path, state, capsys):
    root = desktop(tmp_path)
    before = snapshot(root)
    apply = quiet("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--json")
    seen = every_crash(apply, restored(root, before, state, capsys, "tune", "reset", "--json"))
    # a header, then an intent, a write and an outcome per change (the plan has 20)
    assert seen["torn"] >= 1 + 3 * 20, seen


def test_crash_at_every_write_of_reset(tmp_path, state, capsys):
    root = desktop(tmp_path)
    before = snapshot(root)
    apply = quiet("tune", "apply", "--root", str(root), "--rt-cpus", "3", "--json")
    check = restored(root, before, state, capsys, "tune", "reset", "--json")

    def crash_reset(where: str) -> None:
        check(where)
        apply()  # the next crash starts from an applied tree again

    apply()
    seen = every_crash(quiet("tune", "reset", "--json"), crash_reset)
    # an "undoing" line and a write per change, then the journal removed
    assert seen["torn"] >= 2 * 20 + 1, seen
    check("the end")


CGROUPS = {
    "v1": (V1, NEW_V1),
    "v2": (V2, NEW_V2),
}


@pytest.mark.parametrize("version", sorted(CGROUPS))
def test_crash_at_every_write_of_partition_create(tmp_path, state, capsys, version):
    files, new = CGROUPS[version]
    root = make_root(tmp_path, files)
    before = snapshot(root)
    seen = every_crash(
        lambda: create("2-3", "rt", root, after_mkdir=kernel(new)),
        restored(root, before, state, capsys, "partition", "undo", "--json"),
    )
    # header, partition record, mkdir(s), cpuset files, IRQ and workqueue masks
    assert seen["torn"] >= (20 if version == "v1" else 14), seen


@pytest.mark.parametrize("version", sorted(CGROUPS))
def test_crash_at_every_write_of_partition_undo(tmp_path, state, capsys, version):
    files, new = CGROUPS[version]
    root = make_root(tmp_path, files)
    before = snapshot(root)
    check = restored(root, before, state, capsys, "partition", "undo", "--json")

    def make() -> None:
        create("2-3", "rt", root, after_mkdir=kernel(new))

    def crash_undo(where: str) -> None:
        check(where)
        make()

    make()
    seen = every_crash(quiet("partition", "undo", "--json"), crash_undo)
    assert seen["torn"] >= (12 if version == "v1" else 8), seen
    check("the end")
