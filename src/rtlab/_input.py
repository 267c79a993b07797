"""Reading what rtlab is given: files and JSON documents, bounded and never blocking.

Every file a user names (an experiment, a targets file, an imported document, a sysinfo
document, a file of a `--root` tree) is read by `read_regular`: opened non-blocking, so a
FIFO or a terminal never hangs the read, and refused unless it is a regular file; at most
MAX_BYTES of it are read (more is an error, or, for files of /proc and /sys, which report
a size of 0 or 4096 whatever they hold, the first MAX_BYTES when `truncate` is set).

`load_json` parses a document whose size the caller has bounded, refusing before parsing
one with more JSON values than the caller allows (each costs 30 to 60 bytes of memory
once parsed) and after parsing one nested deeper than MAX_JSON_DEPTH (rtlab's own
documents nest fewer than 10 levels). Every refusal is a UserError with a one-line reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, BinaryIO

from rtlab.errors import UserError

#: Nesting of arrays and objects any JSON document rtlab reads may have.
MAX_JSON_DEPTH = 64

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFLNK: "a symbolic link",
}
_CHUNK = 1 << 20
# A JSON string (escapes included): removed before counting the structure's values.
_JSON_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"', re.DOTALL)


def size_text(n: int) -> str:
    """A byte count as people write a limit: "256 MiB", "4 KiB", "100 bytes"."""
    for shift, unit in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, for a message: "a FIFO", "a directory"."""
    return _KINDS.get(stat.S_IFMT(mode), "a special file")


def _check_regular(st: os.stat_result, max_bytes: int | None, truncate: bool) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"cannot read ({file_kind(st.st_mode)}, not a regular file)")
    if max_bytes is not None and st.st_size > max_bytes and not truncate:
        raise UserError(f"too large: more than {size_text(max_bytes)} ({st.st_size} bytes)")


def open_regular(path: Path | str, max_bytes: int | None = None) -> BinaryIO:
    """PATH opened for reading, unbuffered; UserError unless it is a regular file (of at
    most MAX_BYTES by its size, when given).

    The open is non-blocking (a FIFO is not waited for, a /proc file that waits for data
    fails instead of blocking a read) and the type is checked on the open descriptor, so
    a FIFO swapped in after an earlier check is refused too.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        with contextlib.suppress(OSError, ValueError):  # say what it is (a socket: ENXIO)
            _check_regular(os.stat(path), None, False)
        raise UserError(f"cannot read ({_why(e)})") from None
    try:
        _check_regular(os.fstat(fd), max_bytes, False)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb", buffering=0)


def read_regular(path: Path | str, max_bytes: int, *, truncate: bool = False) -> bytes:
    """The bytes of the regular file PATH (see open_regular), at most MAX_BYTES of them:
    a larger file is refused, or with TRUNCATE cut to its first MAX_BYTES."""
    with open_regular(path, None if truncate else max_bytes) as f:
        parts: list[bytes] = []
        got = 0
        try:
            while got <= max_bytes:  # /proc and /sys files say 0 or 4096: read to the end
                chunk = f.read(min(_CHUNK, max_bytes + 1 - got))
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
        except OSError as e:
            raise UserError(f"cannot read ({_why(e)})") from None
    data = b"".join(parts)
    if len(data) > max_bytes:
        if not truncate:
            raise UserError(f"too large: more than {size_text(max_bytes)}")
        data = data[:max_bytes]
    return data


def _why(e: Exception) -> str:
    return e.strerror if isinstance(e, OSError) and e.strerror else str(e)


def json_values(data: bytes | bytearray) -> int:
    """An upper bound of the number of values of the JSON text DATA (its strings do not
    count their commas and brackets): separators plus containers plus one."""
    bare = _JSON_STRING.sub(b"", data)
    return bare.count(b",") + bare.count(b"[") + bare.count(b"{") + 1


def load_json(data: bytes | bytearray | str, max_values: int) -> Any:
    """The JSON document DATA; UserError when it is not JSON, has more than MAX_VALUES
    values or is nested deeper than MAX_JSON_DEPTH. The caller bounds its size."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    values = json_values(raw)
    if values > max_values:
        raise UserError(f"more than {max_values} JSON values (about {values})")
    try:
        doc = json.loads(data)
    except RecursionError:
        raise UserError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as e:
        raise UserError(f"not valid JSON (line {e.lineno} column {e.colno}: {e.msg})") from None
    except ValueError as e:  # bad UTF-8, an integer beyond Python's digit limit
        raise UserError(f"not valid JSON ({' '.join(str(e).split())[:200]})") from None
    check_depth(doc)
    return doc


def check_depth(doc: Any, max_depth: int = MAX_JSON_DEPTH) -> None:
    """UserError when DOC (parsed JSON) nests lists and dicts deeper than MAX_DEPTH.
    Iterative: a document too deep for recursion is measured all the same."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > max_depth:
            raise UserError(f"JSON nested deeper than {max_depth} levels")
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
