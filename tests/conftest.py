from __future__ import annotations

import os
from pathlib import Path

import pytest

from rtlab.cli import main


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
