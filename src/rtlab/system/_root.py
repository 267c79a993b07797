"""Every system file is read through one injectable root, so tests use fixture trees.

Three roots share one interface (read, read_gz, listdir): the live system or a directory
tree (SysRoot), a document written by `rtlab-probe sysinfo --json` (SnapshotRoot), and a
wrapper that records what was read (RecordingRoot, for captures and the contract test).

Limits (docs/audit.md, "Limits"): a file is read up to MAX_SYSTEM_FILE_BYTES (the rest of
a longer one is left out: /proc and /sys files do not tell their size) and only when it
is a regular file (a FIFO or device in a tree reads as absent, never blocks); a gzip'd
file (the kernel configuration) may inflate to MAX_SYSTEM_FILE_BYTES, more is an error;
a directory lists its first MAX_DIR_ENTRIES entries. A sysinfo document is at most
MAX_SYSINFO_BYTES with MAX_SYSINFO_VALUES JSON values, nested as JSON allows
(rtlab._input.MAX_JSON_DEPTH).
"""

from __future__ import annotations

import base64
import binascii
import os
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from rtlab._input import check_depth, load_json, read_regular, size_text
from rtlab.errors import UserError

#: Bytes of one system file read (more is left out), and of an inflated gzip'd file.
MAX_SYSTEM_FILE_BYTES = 16 << 20
#: Entries of one directory listed (the probe's sysinfo keeps 8192 files per pattern).
MAX_DIR_ENTRIES = 1 << 16
#: A sysinfo document: its size (the probe writes at most 64 MiB of file contents) and
#: its JSON values (one per file and key; a big system's document has ~100000).
MAX_SYSINFO_BYTES = 128 << 20
MAX_SYSINFO_VALUES = 1 << 20


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
        """The file's text, stripped, or None when it is absent, unreadable or no regular
        file; at most MAX_SYSTEM_FILE_BYTES of it."""
        try:
            data = read_regular(self.path(name), MAX_SYSTEM_FILE_BYTES, truncate=True)
        except UserError:
            return None
        return data.decode(errors="replace").strip()

    def read_gz(self, name: str) -> str | None:
        """The inflated text of a gzip'd file, None when absent or not gzip; UserError
        when it inflates to more than MAX_SYSTEM_FILE_BYTES."""
        try:
            data = read_regular(self.path(name), MAX_SYSTEM_FILE_BYTES)
        except UserError:
            return None
        return gunzip_text(data, f"{self.describe()}: /{name.lstrip('/')}")

    def listdir(self, name: str) -> list[str] | None:
        """Sorted names of the first MAX_DIR_ENTRIES entries of directory NAME, or None
        when it is absent."""
        try:
            with os.scandir(self.path(name)) as it:
                names = [e.name for _, e in zip(range(MAX_DIR_ENTRIES), it, strict=False)]
        except (OSError, ValueError):
            return None
        return sorted(names)

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
        return None if data is None else gunzip_text(data, f"{self.source}: {_key(name)}")

    @cached_property
    def _dirs(self) -> dict[str, set[str]]:
        """Directory -> the names in it, built once: a listing costs its own entries."""
        dirs: dict[str, set[str]] = {}
        for path in (*self.files, *self.binary):
            parts = path.strip("/").split("/")
            for i in range(len(parts)):
                dirs.setdefault("/" + "/".join(parts[:i]), set()).add(parts[i])
        return dirs

    def listdir(self, name: str) -> list[str] | None:
        found = self._dirs.get(_key(name).rstrip("/") or "/")
        return sorted(found)[:MAX_DIR_ENTRIES] if found else None

    def describe(self) -> str:
        return self.source


def gunzip_text(data: bytes, where: str) -> str | None:
    """The text of gzip DATA (members concatenated, as gzip does), None when it is no
    gzip stream; UserError naming WHERE when it inflates to more than
    MAX_SYSTEM_FILE_BYTES (a gzip bomb), found before more is inflated."""
    out: list[bytes] = []
    size = 0
    rest = data
    try:
        while rest:
            z = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
            chunk = z.decompress(rest, MAX_SYSTEM_FILE_BYTES + 1 - size)
            while True:
                size += len(chunk)
                out.append(chunk)
                if size > MAX_SYSTEM_FILE_BYTES:
                    raise UserError(
                        f"{where}: inflates to more than {size_text(MAX_SYSTEM_FILE_BYTES)}"
                    )
                if z.eof or not z.unconsumed_tail:
                    break
                chunk = z.decompress(z.unconsumed_tail, MAX_SYSTEM_FILE_BYTES + 1 - size)
            if not z.eof:
                return None  # truncated stream
            rest = z.unused_data.lstrip(b"\0")  # padding after a member, as gzip allows
    except zlib.error:
        return None
    return b"".join(out).decode(errors="replace")


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
    name = str(p) if str(p).isprintable() else repr(str(p))
    try:
        data = read_regular(p, MAX_SYSINFO_BYTES)
    except UserError as e:
        raise UserError(f"{name}: {e}") from None
    return snapshot_from_bytes(data, name)


def snapshot_from_bytes(data: bytes, source: str) -> SnapshotRoot:
    """A sysinfo document as written (a file's bytes, a target's output), within the
    limits of a sysinfo document; UserError naming SOURCE when it is not one."""
    if len(data) > MAX_SYSINFO_BYTES:
        raise UserError(f"{source}: larger than a sysinfo document may be ({len(data)} bytes)")
    try:
        doc = load_json(data, MAX_SYSINFO_VALUES)
    except UserError as e:
        raise UserError(f"{source}: {e}") from None
    return snapshot_from_document(doc, source)


def snapshot_from_document(doc: Any, source: str) -> SnapshotRoot:
    """A sysinfo document already parsed (e.g. from a target); SOURCE names it."""
    check_depth(doc)
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
    uname = doc.get("uname")
    if not isinstance(uname, dict):
        uname = {}
    scalars = {k: str(v) for k, v in uname.items() if isinstance(v, str | int | float)}
    return SnapshotRoot(files, binary, source, scalars)


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
