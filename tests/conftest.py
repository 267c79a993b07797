from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

from rtlab.cli import main

from . import _tracefs
from ._skips import pytest_runtest_makereport as pytest_runtest_makereport
from ._skips import pytest_terminal_summary as pytest_terminal_summary
from ._skips import skip_setup

TRACEFS_BEFORE = pytest.StashKey[bool]()


@pytest.fixture
def rtlab(capsys):
    """Run the rtlab CLI in-process: returns (exit code, stdout, stderr)."""

    def go(*args: str) -> tuple[int, str, str]:
        rc = main(list(args))
        out = capsys.readouterr()
        return rc, out.out, out.err

    return go


def make_root(tmp_path: Path, files: dict[str, str]) -> Path:
    """A fake / tree with FILES (path -> text)."""
    root = tmp_path / "root"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def is_root() -> bool:
    return os.geteuid() == 0


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[TRACEFS_BEFORE] = _tracefs.mounted()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Leave tracefs as it was: unmounted again if the `tracefs` fixture or a probe under
    test mounted it during the session."""
    if session.config.stash.get(TRACEFS_BEFORE, True) or not is_root():
        return
    try:
        _tracefs.umount()
    except OSError as e:
        session.config.get_terminal_writer().line(f"cannot unmount tracefs again: {e}", red=True)


@pytest.fixture(scope="session")
def tracefs() -> Path:
    """The machine's tracefs, mounted at /sys/kernel/tracing (as the probe mounts it) when
    it is not; unmounted again at the end of the session."""
    if not is_root():
        pytest.skip("needs root (tracefs is root's)")
    if not _tracefs.mounted():
        if not _tracefs.in_kernel():
            pytest.skip("this kernel has no tracefs (CONFIG_TRACING)")
        try:
            _tracefs.mount()
        except OSError as e:
            skip_setup(
                f"tracefs is not mounted and cannot be mounted at {e.filename} ({e.strerror})"
            )
    return _tracefs.TRACEFS


def skip_untraced(why: str) -> NoReturn:
    """Skip a test whose probe could not trace. Not root or no tracefs in the kernel: the
    machine's; else setup-class, for the probe mounts tracefs itself as root."""
    __tracebackhide__ = True
    if not is_root() or not _tracefs.in_kernel():
        pytest.skip(why)
    skip_setup(why)
