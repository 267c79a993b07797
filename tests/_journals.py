"""Journals written by hand for the hostile-input tests, and the tree they act on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from rtlab.tune import CRASH_AT_ENV, STATE_ENV
from tests._cgroupfs import fake_rmdir

SYSTEMS = Path(__file__).parent / "fixtures" / "systems"
STAT = "proc/sys/vm/stat_interval"
TIMER = "proc/sys/kernel/timer_migration"


def header(root: Path | str, kind: str = "tune") -> dict[str, Any]:
    return {"journal": 1, "kind": kind, "root": str(root), "created_utc": "2026-01-01T00:00:00"}


def intent(seq: int, path: str = STAT, **fields: Any) -> dict[str, Any]:
    """A file change of vm.stat_interval (1 -> 10), FIELDS replacing or adding fields."""
    rec = {"seq": seq, "op": "file", "path": path, "original": "1\n", "new": "10",
           "compare": "int", "check": "vm.stat_interval", "why": ""}  # fmt: skip
    rec.update(fields)
    return {k: v for k, v in rec.items() if v is not ...}  # ...: leave the field out


def write_journal(state: Path, records: list[Any], kind: str = "tune") -> Path:
    """The journal of KIND in STATE with RECORDS (dicts as JSON lines, str/bytes as is)."""
    path = state / "tune" / f"{kind}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    out = bytearray()
    for r in records:
        if isinstance(r, dict):
            out += (json.dumps(r) + "\n").encode()
        else:
            out += r.encode() if isinstance(r, str) else r
    path.write_bytes(bytes(out))
    return path


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """$RTLAB_STATE in TMP_PATH, no crash hook set, the fake cgroupfs's rmdir (import it
    as `state as state` to use it)."""
    d = tmp_path / "state"
    monkeypatch.setenv(STATE_ENV, str(d))
    monkeypatch.delenv(CRASH_AT_ENV, raising=False)
    fake_rmdir(monkeypatch)
    return d


def refused(result: tuple[int, str, str], *says: str) -> None:
    """A CLI result that is one line on stderr, exit 2, saying SAYS, and no traceback."""
    rc, _, err = result
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for s in says:
        assert s in err, err


def desktop(tmp_path: Path) -> Path:
    """A copy of the desktop fixture tree (with min-frequency files to write), and next to
    it OUTSIDE, whose files no test may see changed (outside/victim, outside/kernel/
    timer_migration, outside/tasks)."""
    root = tmp_path / "root"
    shutil.copytree(SYSTEMS / "desktop", root)
    base = root / "sys/devices/system/cpu/cpu3/cpufreq"
    (base / "cpuinfo_max_freq").write_text("4000000\n")
    (base / "scaling_min_freq").write_text("800000\n")
    make_outside(tmp_path)
    return root


def make_outside(tmp_path: Path) -> Path:
    """TMP_PATH/outside: files holding rtlab's values, as they would be if a link were
    followed (victim "10", kernel/timer_migration "0"), and an empty tasks file."""
    outside = tmp_path / "outside"
    (outside / "kernel").mkdir(parents=True)
    (outside / "victim").write_text("10\n")
    (outside / "kernel" / "timer_migration").write_text("0\n")
    (outside / "tasks").write_text("")
    return outside


def files(d: Path) -> dict[str, bytes | None]:
    """Every file's bytes and every directory (None) under D, links not followed."""
    return {
        str(p.relative_to(d)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(d.rglob("*"))
    }
