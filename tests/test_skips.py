"""The two kinds of skip (tests/_skips.py): a skip for what the project sets up fails under
$RTLAB_CI_STRICT=1 as root and stays a skip otherwise; every command the tests look for
is installed by `make debs`; the `tracefs` fixture mounts tracefs where it is absent and
leaves it as it found it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from . import _skips
from ._skips import DEBS, STRICT_ENV, makefile_debs, need_tool, strict
from .conftest import is_root

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = """
import pytest
from tests._skips import need_tool, skip_setup

def test_setup_class():
    skip_setup("stand-in for a package make debs installs")

def test_machine_class():
    pytest.skip("stand-in for hardware this machine lacks")

def test_missing_tool():
    need_tool("stress-ng")
"""


def pytest_run(args: list[str], strict_env: bool, path: str | None = None, cwd: Path = ROOT):
    """Run pytest in a child with or without $RTLAB_CI_STRICT=1 (and PATH if given)."""
    env = {k: v for k, v in os.environ.items() if k != STRICT_ENV}
    env["PYTHONPATH"] = str(ROOT)  # `tests` importable from any directory
    if strict_env:
        env[STRICT_ENV] = "1"
    if path is not None:
        env["PATH"] = path
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_command_looked_for_is_installed_by_make_debs():
    assert set(DEBS.values()) <= set(makefile_debs()), makefile_debs()
    texts = [p.read_text() for p in (ROOT / "tests").rglob("*.py")]
    named = {m for t in texts for m in re.findall(r'need_tool\("([^"]+)"\)', t)}
    from .probe.loadproc import EXTERNAL  # the load backends, looked for by their kind

    assert named and named | set(EXTERNAL.values()) <= set(DEBS)


def test_strict_needs_the_variable_root_and_linux(monkeypatch):
    monkeypatch.setenv(STRICT_ENV, "1")
    monkeypatch.setattr(_skips.os, "geteuid", lambda: 0)
    monkeypatch.setattr(_skips.sys, "platform", "linux")
    assert strict()
    monkeypatch.setattr(_skips.os, "geteuid", lambda: 1000)
    assert not strict()
    monkeypatch.setattr(_skips.os, "geteuid", lambda: 0)
    monkeypatch.setenv(STRICT_ENV, "0")
    assert not strict()
    monkeypatch.delenv(STRICT_ENV)
    assert not strict()


def test_a_setup_skip_fails_under_strict_as_root_and_skips_otherwise(tmp_path):
    (tmp_path / "test_sample.py").write_text(SAMPLE)
    bare = str(tmp_path / "bin")  # no stress-ng here
    args = ["-p", "tests._skips", "--rootdir", str(tmp_path), "test_sample.py"]
    cp = pytest_run(args, strict_env=False, path=bare, cwd=tmp_path)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "3 skipped" in cp.stdout
    assert "not set up: stand-in for a package make debs installs" in cp.stdout
    assert "not set up: stress-ng is not installed (Debian package stress-ng" in cp.stdout
    assert "1 skipped for what this machine lacks" in cp.stdout
    assert "2 skipped for what the project sets up" in cp.stdout
    if not is_root():
        pytest.skip("strictness applies to root only")
    cp = pytest_run(args, strict_env=True, path=bare, cwd=tmp_path)
    assert cp.returncode == 1, cp.stdout + cp.stderr
    assert "2 failed, 1 skipped" in cp.stdout
    assert f"{STRICT_ENV}=1 as root: the project sets this up itself" in cp.stdout
    assert "FAILED test_sample.py::test_missing_tool" in cp.stdout
    assert "2 failed (RTLAB_CI_STRICT=1 as root) for what the project sets up" in cp.stdout


def test_a_test_of_the_suite_without_its_tool_fails_under_strict(tmp_path):
    """hackbench off PATH: the throughput test of the suite skips, or fails when strict."""
    test = "tests/test_throughput.py::test_suite_is_stored_shown_and_compared"
    bare = str(tmp_path)
    cp = pytest_run([test], strict_env=False, path=bare)
    assert cp.returncode == 0 and "1 skipped" in cp.stdout, cp.stdout + cp.stderr
    assert "hackbench is not installed (Debian package rt-tests: make debs)" in cp.stdout
    if not is_root():
        pytest.skip("strictness applies to root only")
    cp = pytest_run([test], strict_env=True, path=bare)
    assert cp.returncode == 1 and "1 failed" in cp.stdout, cp.stdout + cp.stderr


def test_tracefs_is_mounted_for_the_tests_and_unmounted_after(tmp_path):
    """In a private mount namespace without tracefs, an --explain test runs (no skip) and
    tracefs is unmounted again at the end of the session."""
    if not is_root():
        pytest.skip("mounting tracefs needs root")
    unshare = need_tool("unshare")
    script = (
        "umount /sys/kernel/tracing 2>/dev/null; umount /sys/kernel/debug/tracing 2>/dev/null;"
        ' grep -c " tracefs " /proc/self/mounts;'
        ' "$0" -m pytest -q -rs -p no:cacheprovider "$1"; rc=$?;'
        ' grep -c " tracefs " /proc/self/mounts; exit $rc'
    )
    test = "tests/probe/test_explain.py::test_cleanup_command_removes_only_dead_runs"
    cp = subprocess.run(
        [unshare, "--mount", "--propagation", "private", "sh", "-c", script,
         sys.executable, test],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert cp.returncode == 0, cp.stdout + cp.stderr
    lines = cp.stdout.split()
    assert lines[0] == "0" and lines[-1] == "0", cp.stdout  # unmounted before and after
    assert "1 passed" in cp.stdout and "skipped" not in cp.stdout
