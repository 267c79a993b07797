"""The probe's binary raw-sample file (docs/result-format.md, "Raw-sample file").

A 64-byte little-endian header followed by int64 latency samples in ns, in cycle order::

    0  8  magic b"RTLABRAW"        24 8  i64 interval (activation period), ns
    8  4  u32 format version (1)   32 4  u32 bytes per sample (8)
    12 4  u32 header size (64)     36 28 reserved, zero
    16 4  i32 thread index         64 .. i64 samples
    20 4  i32 CPU, -1 = unpinned
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rtlab.errors import UserError

__all__ = [
    "HEADER_BYTES",
    "MAGIC",
    "SAMPLE_BYTES",
    "VERSION",
    "RawHeader",
    "open_samples",
    "read_header",
    "write_raw",
]

MAGIC = b"RTLABRAW"
VERSION = 1
HEADER_BYTES = 64
SAMPLE_BYTES = 8
SAMPLE_DTYPE = np.dtype("<i8")

_HEADER = struct.Struct("<8sIIiiqI28x")
assert _HEADER.size == HEADER_BYTES


@dataclass(frozen=True)
class RawHeader:
    """Header of one raw-sample file, plus what the file size says."""

    path: Path
    version: int
    header_bytes: int  # samples start at this offset
    thread_index: int
    cpu: int  # -1 when the thread was not pinned
    interval_ns: int
    sample_bytes: int
    count: int  # samples in the file: (size - header_bytes) / sample_bytes

    @property
    def pinned(self) -> bool:
        return self.cpu >= 0


def _bad(path: Path, reason: str) -> UserError:
    return UserError(f"{path}: bad raw-sample file: {reason}")


def read_header(path: str | os.PathLike[str]) -> RawHeader:
    """Read and check the header of a raw-sample file; UserError when it is not valid."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            head = f.read(HEADER_BYTES)
            size = os.fstat(f.fileno()).st_size
    except OSError as e:
        raise UserError(f"{p}: cannot read raw-sample file: {e.strerror or e}") from None
    if not MAGIC.startswith(head[: len(MAGIC)]):
        raise _bad(p, "wrong magic (not an RTLABRAW file)")
    if len(head) < HEADER_BYTES:
        raise _bad(p, f"short file ({size} bytes, header needs {HEADER_BYTES})")
    magic, version, header_bytes, thread, cpu, interval, sample_bytes = _HEADER.unpack(head)
    if magic != MAGIC:
        raise _bad(p, "wrong magic (not an RTLABRAW file)")
    if version != VERSION:
        raise _bad(p, f"unknown format version {version} (this rtlab reads {VERSION})")
    if header_bytes < HEADER_BYTES:
        raise _bad(p, f"header size {header_bytes} is below {HEADER_BYTES}")
    if sample_bytes != SAMPLE_BYTES:
        raise _bad(p, f"unsupported sample size {sample_bytes} bytes (expected {SAMPLE_BYTES})")
    if size < header_bytes:
        raise _bad(p, f"short file ({size} bytes, header says {header_bytes})")
    if (size - header_bytes) % SAMPLE_BYTES:
        raise _bad(
            p,
            f"{size - header_bytes} bytes after the header is not a multiple of {SAMPLE_BYTES}",
        )
    return RawHeader(
        path=p,
        version=version,
        header_bytes=header_bytes,
        thread_index=thread,
        cpu=cpu,
        interval_ns=interval,
        sample_bytes=sample_bytes,
        count=(size - header_bytes) // SAMPLE_BYTES,
    )


def open_samples(path: str | os.PathLike[str]) -> np.ndarray:
    """Memory-map the samples of a raw-sample file read-only as little-endian int64.

    Returns an ``np.memmap`` (dtype ``<i8``); an empty file gives an empty in-memory
    array because a zero-length mapping is not possible.
    """
    h = read_header(path)
    if h.count == 0:
        return np.empty(0, dtype=SAMPLE_DTYPE)
    return np.memmap(h.path, dtype=SAMPLE_DTYPE, mode="r", offset=h.header_bytes, shape=(h.count,))


def write_raw(
    path: str | os.PathLike[str],
    samples: np.ndarray | Iterable[np.ndarray],
    thread_index: int = 0,
    cpu: int = -1,
    interval_ns: int = 1_000_000,
) -> int:
    """Write a raw-sample file; return the number of samples written.

    ``samples`` is one array or an iterable of arrays (chunks), converted to ``<i8``.
    The file is written as ``PATH.tmp.<pid>`` and renamed over PATH, like the probe does.
    """
    p = Path(path)
    tmp = p.with_name(f"{p.name}.tmp.{os.getpid()}")
    chunks: Iterable[np.ndarray] = [samples] if isinstance(samples, np.ndarray) else samples
    n = 0
    try:
        with open(tmp, "wb") as f:
            f.write(
                _HEADER.pack(
                    MAGIC, VERSION, HEADER_BYTES, thread_index, cpu, interval_ns, SAMPLE_BYTES
                )
            )
            for chunk in chunks:
                a = np.ascontiguousarray(np.asarray(chunk), dtype=SAMPLE_DTYPE).reshape(-1)
                a.tofile(f)
                n += a.size
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return n
