"""Every system file is read through one injectable root, so tests use fixture trees."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class SysRoot:
    root: Path = Path("/")

    def path(self, name: str) -> Path:
        return self.root / name.lstrip("/")

    def read(self, name: str) -> str | None:
        """The file's text, stripped, or None when it is absent or unreadable."""
        try:
            return self.path(name).read_text(errors="replace").strip()
        except OSError:
            return None

    def read_gz(self, name: str) -> str | None:
        try:
            with gzip.open(self.path(name), "rt", errors="replace") as f:
                return f.read()
        except (OSError, EOFError):
            return None


#: The running system.
LIVE_ROOT = SysRoot()
