"""An imported file as text: read safely, decoded, iterated by line, named in errors.

Shared by the importers. Only a regular file of at most MAX_FILE_BYTES is read: a FIFO,
device, socket or directory is refused before it is opened, and the file is opened
non-blocking in case one was swapped in after the check. Bytes that are not UTF-8 are
replaced (U+FFFD). Every refusal is a UserError with a one-line reason; `named` puts the
file's name in front of it.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rtlab.errors import UserError
from rtlab.ingest._limits import MAX_FILE_BYTES

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}
_TEXT_LINE = re.compile(r"^[^\S\n]*+\S[^\n]*", re.MULTILINE)  # a line that is not blank


def display_name(path: Path | str) -> str:
    """The path as one printable line (repr when it holds control characters)."""
    name = str(path)
    return name if name.isprintable() else repr(name)


def clean_text(text: str) -> str:
    """The string with lone surrogates (JSON \\ud800 escapes, undecodable file names)
    replaced: encodable as UTF-8."""
    return text.encode("utf-8", "replace").decode("utf-8")


@contextmanager
def named(path: Path | str) -> Iterator[None]:
    """Re-raise a UserError of the block as one line starting with the file's name."""
    try:
        yield
    except UserError as e:
        msg = " ".join(str(e).split())
        raise UserError(f"{display_name(path)}: {msg}") from None


def read_text(path: Path) -> str:
    """The whole file decoded as UTF-8, undecodable bytes replaced."""
    return read_bytes(path).decode("utf-8", errors="replace")


def read_bytes(path: Path) -> bytearray:
    """The whole file, which must be a regular file of at most MAX_FILE_BYTES."""
    try:
        _check_regular(os.stat(path))
        # O_NONBLOCK: a FIFO swapped in after the stat must not block the open, and a
        # /proc file that waits for data (kmsg) fails instead of blocking the read
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
        try:
            _check_regular(os.fstat(fd))
            data = bytearray()
            while len(data) <= MAX_FILE_BYTES:  # st_size is 0 for /proc files: read on
                chunk = os.read(fd, min(16 << 20, MAX_FILE_BYTES + 1 - len(data)))
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
    except (OSError, ValueError) as e:  # ValueError: a NUL in the path
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise UserError(f"cannot read: {why}") from None
    if len(data) > MAX_FILE_BYTES:
        raise UserError(f"file is larger than {MAX_FILE_BYTES >> 20} MiB")
    return data


def _check_regular(st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "a special file")
        raise UserError(f"cannot read: {kind}, not a regular file")
    if st.st_size > MAX_FILE_BYTES:
        raise UserError(f"file is larger than {MAX_FILE_BYTES >> 20} MiB ({st.st_size} bytes)")


def newlines(text: str) -> str:
    """The text with \\r\\n and \\r line ends turned into \\n."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def nonblank_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, stripped line) of the lines that are not blank, lazily: millions of
    blank lines cost no Python step each. TEXT must have \\n line ends (`newlines`)."""
    lineno, pos = 1, 0
    for m in _TEXT_LINE.finditer(text):
        lineno += text.count("\n", pos, m.start())
        pos = m.start()
        yield lineno, m.group().strip()
