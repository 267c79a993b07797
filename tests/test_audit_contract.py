"""The C collector (rtlab-probe sysinfo) gathers every file the Python facts reader reads."""

from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

from rtlab.system import LIVE_ROOT, RecordingRoot, SysRoot, read_facts

ROOT = Path(__file__).resolve().parents[1]
SYSINFO_C = ROOT / "probe" / "src" / "sysinfo.c"
SYSTEMS = Path(__file__).parent / "fixtures" / "systems"


def c_patterns() -> list[list[str]]:
    """The path patterns of si_table in sysinfo.c, split into segments (%r = any release)."""
    text = SYSINFO_C.read_text()
    table = text.split("/* sysinfo-table-begin */")[1].split("/* sysinfo-table-end */")[0]
    patterns = re.findall(r'\{\s*"(/[^"]+)"', table)
    assert len(patterns) > 40, "the table was not found in sysinfo.c"
    return [p.replace("%r", "*").strip("/").split("/") for p in patterns]


def _seg_match(names: list[str], pattern: list[str]) -> bool:
    return all(fnmatchcase(n, p) for n, p in zip(names, pattern, strict=False))


def collected(path: str, patterns: list[list[str]]) -> bool:
    names = path.strip("/").split("/")
    return any(len(p) == len(names) and _seg_match(names, p) for p in patterns)


def listed(path: str, patterns: list[list[str]]) -> bool:
    """A directory the reader lists must be the parent of some collected pattern."""
    names = path.strip("/").split("/")
    return any(len(p) > len(names) and _seg_match(names, p) for p in patterns)


def test_checker_itself_rejects_uncollected_paths():
    pats = c_patterns()
    assert collected("/proc/cmdline", pats) and collected("/proc/42/status", pats)
    assert not collected("/proc/42/environ", pats) and collected("/proc/42/task/1/stat", pats)
    assert not collected("/proc/42/task/1/environ", pats)
    assert listed("/proc/irq", pats) and not listed("/home", pats)


@pytest.mark.parametrize(
    ("root", "rt_cpus"),
    [
        (SysRoot(SYSTEMS / "rt-board"), None),
        (SysRoot(SYSTEMS / "desktop"), [3]),
        (SysRoot(SYSTEMS / "this-vm"), None),
        (LIVE_ROOT, [0]),
        (LIVE_ROOT, None),
    ],
    ids=["rt-board", "desktop", "this-vm", "live-rt-cpus", "live"],
)
def test_every_path_read_is_collected_by_the_probe(root, rt_cpus):
    rec = RecordingRoot(root)
    read_facts(rec, rt_cpus)
    pats = c_patterns()
    missing = sorted({p for p in rec.reads if not collected(p, pats)})
    assert not missing, f"read by the facts reader but not in sysinfo.c: {missing}"
    unlisted = sorted({p for p in rec.lists if not listed(p, pats)})
    assert not unlisted, f"listed by the facts reader but nothing collected below: {unlisted}"
