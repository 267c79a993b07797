"""An imported file as text: read safely, decoded, iterated by line, named in errors.

Shared by the importers. Only a regular file of at most MAX_FILE_BYTES is read (through
rtlab._input.read_regular: a FIFO, device, socket or directory is refused without
blocking). Bytes that are not UTF-8 are
replaced (U+FFFD). Every refusal is a UserError with a one-line reason; `named` puts the
file's name in front of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rtlab._input import read_regular
from rtlab.errors import UserError
from rtlab.ingest._limits import MAX_FILE_BYTES

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


def read_bytes(path: Path) -> bytes:
    """The whole file, which must be a regular file of at most MAX_FILE_BYTES."""
    return read_regular(path, MAX_FILE_BYTES)


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
