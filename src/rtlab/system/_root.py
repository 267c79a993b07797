"""Every system file is read through one injectable root, so tests use fixture trees.

Three roots share one interface (read, read_gz, listdir): the live system or a directory
tree (SysRoot), a document written by `rtlab-probe sysinfo --json` (SnapshotRoot), and a
wrapper that records what was read (RecordingRoot, for captures and the contract test).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rtlab.errors import UserError


class Root(Protocol):
    @property
    def live(self) -> bool: ...
    def read(self, name: str) -> str | None: ...
    def read_gz(self, name: str) -> str | None: ...
    def listdir(self, name: str) -> list[str] | None: ...
    def describe(self) -> str: ...


@dataclass(frozen=True)
class SysRoot:
    root: Path = Path("/")

    @property
    def live(self) -> bool:
        return self.root == Path("/")

    def path(self, name: str) -> Path:
        return self.root / name.lstrip("/")

    def read(self, name: str) -> str | None:
        """The file's text, stripped, or None when it is absent or unreadable."""
        try:
            return self.path(name).read_text(errors="replace").strip()
        except (OSError, ValueError):
            return None

    def read_gz(self, name: str) -> str | None:
        try:
            with gzip.open(self.path(name), "rt", errors="replace") as f:
                return f.read()
        except (OSError, EOFError, zlib.error):
            return None

    def listdir(self, name: str) -> list[str] | None:
        """Sorted entry names of directory NAME, or None when it is absent."""
        try:
            return sorted(os.listdir(self.path(name)))
        except OSError:
            return None

    def describe(self) -> str:
        return "this system" if self.live else str(self.root)


#: The running system.
LIVE_ROOT = SysRoot()


def _key(name: str) -> str:
    return "/" + name.strip("/")


@dataclass(frozen=True)
class SnapshotRoot:
    """Files captured by `rtlab-probe sysinfo --json FILE`: read-only, same interface."""

    files: dict[str, str]
    binary: dict[str, bytes] = field(default_factory=dict)
    source: str = "sysinfo document"
    uname: dict[str, str] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return False

    def read(self, name: str) -> str | None:
        text = self.files.get(_key(name))
        return None if text is None else text.strip()

    def read_gz(self, name: str) -> str | None:
        data = self.binary.get(_key(name))
        if data is None:
            return None
        try:
            return gzip.decompress(data).decode(errors="replace")
        except (OSError, EOFError, zlib.error):
            return None

    def listdir(self, name: str) -> list[str] | None:
        prefix = _key(name).rstrip("/") + "/"
        found = {
            path[len(prefix) :].split("/", 1)[0]
            for path in (*self.files, *self.binary)
            if path.startswith(prefix)
        }
        return sorted(found) if found else None

    def describe(self) -> str:
        return self.source


def _str_map(doc: dict[str, Any], key: str, where: str) -> dict[str, str]:
    value = doc.get(key, {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and k.startswith("/") and isinstance(v, str) for k, v in value.items()
    ):
        raise UserError(f'{where}: "{key}" is not an object of absolute paths to strings')
    return value


def load_snapshot(path: str | Path) -> SnapshotRoot:
    """Read a sysinfo document; UserError naming the file when it is not one."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except OSError as e:
        raise UserError(f"{p}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{p}: not a JSON document ({e})") from None
    return snapshot_from_document(doc, str(p))


def snapshot_from_document(doc: Any, source: str) -> SnapshotRoot:
    """A sysinfo document already parsed (e.g. from a target); SOURCE names it."""
    if not isinstance(doc, dict) or doc.get("kind") != "sysinfo":
        raise UserError(f'{source}: not a sysinfo document (expected "kind": "sysinfo")')
    if doc.get("schema") != 1:
        raise UserError(f"{source}: sysinfo schema {doc.get('schema')!r} is not supported (1 is)")
    files = _str_map(doc, "files", source)
    binary: dict[str, bytes] = {}
    for name, text in _str_map(doc, "base64", source).items():
        try:
            binary[name] = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise UserError(f'{source}: "{name}" is not valid base64') from None
    uname = doc.get("uname") if isinstance(doc.get("uname"), dict) else {}
    return SnapshotRoot(files, binary, source, {k: str(v) for k, v in uname.items()})


@dataclass
class RecordingRoot:
    """Wraps a root and remembers every path read or listed (captures, contract test)."""

    inner: Any
    reads: list[str] = field(default_factory=list)
    lists: list[str] = field(default_factory=list)

    @property
    def live(self) -> bool:
        return self.inner.live

    def read(self, name: str) -> str | None:
        self.reads.append(_key(name))
        return self.inner.read(name)

    def read_gz(self, name: str) -> str | None:
        self.reads.append(_key(name))
        return self.inner.read_gz(name)

    def listdir(self, name: str) -> list[str] | None:
        self.lists.append(_key(name))
        return self.inner.listdir(name)

    def describe(self) -> str:
        return self.inner.describe()
