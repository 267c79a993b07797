"""rtlab.rawfile: the probe's raw-sample file."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab.errors import UserError
from rtlab.rawfile import HEADER_BYTES, MAGIC, open_samples, read_header, write_raw


def _header(
    magic: bytes = MAGIC,
    version: int = 1,
    header_bytes: int = 64,
    thread: int = 0,
    cpu: int = -1,
    interval: int = 1_000_000,
    sample_bytes: int = 8,
) -> bytes:
    return struct.pack(
        "<8sIIiiqI28x", magic, version, header_bytes, thread, cpu, interval, sample_bytes
    )


def test_round_trip(tmp_path: Path) -> None:
    samples = np.array([5, -3, 0, 2**40 + 7, 2**62, 20_000], dtype=np.int64)
    p = tmp_path / "raw"
    assert write_raw(p, samples, thread_index=3, cpu=2, interval_ns=250_000) == samples.size
    h = read_header(p)
    assert (h.version, h.header_bytes, h.thread_index, h.cpu) == (1, 64, 3, 2)
    assert (h.interval_ns, h.sample_bytes, h.count, h.pinned) == (250_000, 8, 6, True)
    data = open_samples(p)
    assert isinstance(data, np.memmap)
    assert data.dtype == np.dtype("<i8")
    np.testing.assert_array_equal(data, samples)
    assert p.stat().st_size == HEADER_BYTES + 8 * samples.size
    assert not list(tmp_path.glob("*.tmp.*"))


def test_layout_is_the_documented_one(tmp_path: Path) -> None:
    p = tmp_path / "raw"
    write_raw(p, np.array([1, 2], dtype=np.int64), thread_index=1, cpu=-1, interval_ns=1_000)
    raw = p.read_bytes()
    assert raw[:64] == _header(thread=1, cpu=-1, interval=1_000)
    assert raw[64:] == struct.pack("<qq", 1, 2)


def test_write_in_chunks_and_other_dtypes(tmp_path: Path) -> None:
    p = tmp_path / "raw"
    chunks = (np.arange(i * 10, i * 10 + 10, dtype=np.int32) for i in range(5))
    assert write_raw(p, chunks) == 50
    np.testing.assert_array_equal(open_samples(p), np.arange(50))
    h = read_header(p)
    assert (h.thread_index, h.cpu, h.interval_ns, h.pinned) == (0, -1, 1_000_000, False)


def test_empty_file_has_no_samples(tmp_path: Path) -> None:
    p = tmp_path / "raw"
    write_raw(p, np.empty(0, dtype=np.int64))
    assert read_header(p).count == 0
    assert open_samples(p).size == 0


def test_larger_header_is_honoured(tmp_path: Path) -> None:
    p = tmp_path / "raw"
    p.write_bytes(_header(header_bytes=72) + b"\0" * 8 + struct.pack("<qq", 11, 12))
    h = read_header(p)
    assert (h.header_bytes, h.count) == (72, 2)
    np.testing.assert_array_equal(open_samples(p), [11, 12])


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=50),
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.integers(min_value=-1, max_value=4095),
    st.integers(min_value=0, max_value=2**62),
)
def test_round_trip_property(
    tmp_path: Path, values: list[int], thread: int, cpu: int, interval: int
) -> None:
    p = tmp_path / "prop.raw"
    write_raw(
        p, np.array(values, dtype=np.int64), thread_index=thread, cpu=cpu, interval_ns=interval
    )
    h = read_header(p)
    assert (h.thread_index, h.cpu, h.interval_ns, h.count) == (thread, cpu, interval, len(values))
    assert open_samples(p).tolist() == values


BAD_FILES = {
    "empty": (b"", "short file"),
    "short": (MAGIC + b"\1\0\0\0", "short file"),
    "short garbage": (b"GIF89a", "wrong magic"),
    "magic": (_header(magic=b"RTLABRAX") + b"\0" * 8, "wrong magic"),
    "text": (b"latency,ns\n" * 10, "wrong magic"),
    "version": (_header(version=2) + b"\0" * 8, "unknown format version 2"),
    "version 0": (_header(version=0), "unknown format version 0"),
    "header size": (_header(header_bytes=32) + b"\0" * 8, "header size 32"),
    "header beyond end": (_header(header_bytes=4096) + b"\0" * 8, "short file"),
    "sample size": (_header(sample_bytes=4) + b"\0" * 8, "sample size 4"),
    "ragged": (_header() + b"\0" * 12, "not a multiple of 8"),
    "one byte": (_header() + b"\0", "not a multiple of 8"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_files(tmp_path: Path, case: str) -> None:
    content, reason = BAD_FILES[case]
    p = tmp_path / "bad.raw"
    p.write_bytes(content)
    for fn in (read_header, open_samples):
        with pytest.raises(UserError) as e:
            fn(p)
        msg = str(e.value)
        assert str(p) in msg
        assert reason in msg
        assert "\n" not in msg


def test_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.raw"
    with pytest.raises(UserError, match=r"nope\.raw: cannot read"):
        open_samples(p)


def test_directory_is_not_a_raw_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read"):
        read_header(tmp_path)
