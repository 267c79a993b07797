"""Hostile input to rtlab.ingest.read_cyclictest named one by one: special files,
out-of-range values, wrong types (the property tests are in test_ingest_fuzz.py)."""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rtlab.errors import UserError
from rtlab.ingest import _cyclictest_hist, _text, cyclictest, read_cyclictest
from rtlab.ingest._limits import MAX_BUCKETS
from tests.test_ingest_fuzz import (
    FIX,
    deep,
    digits,
    expand,
    outcome,
)


def finishes(fn: Callable[[], Any], unblock: Callable[[], None], seconds: float = 20.0) -> Any:
    """fn() in a thread: fails (after calling unblock) when it is still running later."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed to the test below
            box["error"] = e

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        unblock()
        pytest.fail(f"still blocked after {seconds} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


def open_writer(fifo: Path) -> Callable[[], None]:
    def unblock() -> None:  # a writer lets a blocked open for reading return
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    return unblock


def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"run\.json: cannot read \(a FIFO, not a regular file\)$"):
        finishes(lambda: read_cyclictest(fifo), open_writer(fifo))


def test_fifo_with_a_writer_is_refused_without_blocking(tmp_path):
    """A FIFO that a writer holds open (so an open would not block either) is refused by
    its type on the open descriptor, before any read waits for data."""
    fifo = tmp_path / "run.json"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR)  # a reader and a writer: opens never block
    try:
        with pytest.raises(UserError, match=r"cannot read \(a FIFO"):
            finishes(lambda: read_cyclictest(fifo), lambda: None)
    finally:
        os.close(keep)


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom", "/dev/null"])
def test_character_devices_are_refused(device):
    if not Path(device).exists():
        pytest.skip(f"{device} does not exist here")
    with pytest.raises(UserError, match=f"^{device}: cannot read \\(a character device"):
        finishes(lambda: read_cyclictest(Path(device)), lambda: None)


def test_directory_and_socket_are_refused(tmp_path):
    with pytest.raises(UserError, match=r"cannot read \(a directory, not a regular file\)"):
        read_cyclictest(tmp_path)
    import socket

    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s"))
        with pytest.raises(UserError, match=r"cannot read \(a socket"):
            read_cyclictest(tmp_path / "s")
    finally:
        sock.close()


def test_too_large_files_are_refused(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(_text.MAX_FILE_BYTES + 1)  # sparse: costs no disk
    with pytest.raises(UserError, match=r"too large: more than 256 MiB \(268435457 bytes\)$"):
        read_cyclictest(big)
    # a file whose size the stat does not tell (/proc) is cut off while reading
    monkeypatch.setattr(_text, "MAX_FILE_BYTES", 8)
    with pytest.raises(UserError, match="too large: more than 8 bytes"):
        read_cyclictest(Path("/proc/self/status"))


def test_odd_path_names_give_one_line(tmp_path):
    path = tmp_path / "a\nb.json"
    path.write_bytes(b"[1]")
    with pytest.raises(UserError) as info:
        read_cyclictest(path)
    assert len(str(info.value).splitlines()) == 1 and "\\n" in str(info.value)
    with pytest.raises(UserError, match=r"cannot read \(embedded null byte\)"):
        read_cyclictest(Path("x\0y"))


# --------------------------------------------------------- hostile values, one by one


def thread_json(**fields: Any) -> dict:
    t = {"cycles": 10, "min": 5, "max": 9, "avg": 6.5, "histogram": {"5": 4, "9": 6}}
    t.update(fields)
    return {k: v for k, v in t.items() if v is not ...}


def json_file(tmp_path: Path, doc: dict | str) -> Path:
    path = tmp_path / "run.json"
    text = doc if isinstance(doc, str) else expand(json.dumps(doc))
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    return path


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"cycles": 2**63}, "thread 0: cycles is out of range"),
        ({"cycles": 2**53 + 1}, "thread 0: cycles 9007199254740993 is out of range"),
        ({"cycles": 1e300}, "thread 0: cycles is out of range"),
        ({"cycles": math.nan}, "thread 0: cycles is not an integer: nan"),
        ({"cycles": "nan"}, "thread 0: cycles is not an integer: nan"),
        ({"cycles": -1}, "thread 0: cycles is negative: -1"),
        ({"cycles": [10]}, "thread 0: cycles is not a number: a list"),
        ({"cycles": {"a": 1}}, "thread 0: cycles is not a number: an object"),
        ({"cycles": True}, "thread 0: cycles is not a number: True"),
        ({"cycles": 10**4000}, "thread 0: cycles is out of range: a 4001-digit integer"),
        ({"cycles": digits(5000)}, "invalid JSON: Exceeds the limit (4300 digits)"),
        ({"cycles": "١٠"}, "thread 0: cycles is not a number: '١٠'"),
        ({"cycles": "x" * 1000}, "thread 0: cycles is not a number: 'xxxxxxxxxx"),
        ({"min": deep(950)}, "JSON nested deeper than 64 levels"),
        ({"max": 2**62 // 1000 + 1}, "thread 0: max 4611686018427388 is out of range"),
        ({"min": -(2**62) // 1000}, "thread 0: min -4611686018427388 is out of range"),
        ({"avg": 10**30}, "thread 0: avg is out of range"),
        ({"avg": 1e300}, "thread 0: avg 1e+300 is out of range"),
        ({"avg": 10.0}, "thread 0: avg 10.0 is outside min 5 .. max 9"),
        ({"avg": [6]}, "thread 0: avg is not a number: a list"),
        ({"histogram": {"2147483648": 1}}, "thread 0: histogram bucket 2147483648 is out of"),
        ({"histogram": {"-1": 1}}, "thread 0: histogram bucket is negative: -1"),
        ({"histogram": {"5": 2**63}}, "thread 0: histogram count of bucket 5 is out of range"),
        ({"histogram": {"5": 1.5}}, "thread 0: histogram count of bucket 5 is not an integer"),
        ({"histogram": [1, 2]}, "thread 0: 'histogram' is not an object"),
        ({"cpu": 2**31}, "thread 0: cpu 2147483648 is out of range"),
        ({"cpu": "one"}, "thread 0: cpu is not a number: 'one'"),
    ],
)
def test_out_of_range_and_wrong_types_in_a_thread(tmp_path, fields, reason):
    path = json_file(tmp_path, {"thread": {"0": thread_json(**fields)}})
    with pytest.raises(UserError) as info:
        read_cyclictest(path)
    assert str(info.value).startswith(f"{path}: {reason}"), str(info.value)


@pytest.mark.parametrize(
    ("top", "reason"),
    [
        ({"start_time": "Mon, 01 Jan 99999 00:00:00 +0000"}, "start_time is not a valid date"),
        ({"end_time": "Sun, 22 Nov 2026 01:04:01 +9999"}, "end_time is not a valid date"),
        ({"start_time": "Sun, 31 Feb 2026 01:04:01 +0000"}, "start_time is not a valid date"),
        ({"start_time": "0001-01-01T00:00:00+01:00"}, "start_time is not a valid date"),
        ({"end_time": "9999-12-31T23:59:59-01:00"}, "end_time is not a valid date"),
        ({"start_time": -62135596800}, "start_time is not a string: -62135596800"),
        ({"start_time": 1e300}, "start_time is not a string: 1e+300"),
        ({"cmdline:": ["cyclictest"]}, "cmdline is not a string: a list"),
        ({"cmdline:": "cyclictest " * 10_000}, "cmdline is longer than 65536 characters"),
        ({"rt_test_version:": {"v": 2}}, "rt_test_version is not a version string"),
        ({"rt_test_version:": math.nan}, "rt_test_version is not a version string"),
        ({"return_code": "0"}, "return_code is not an integer: '0'"),
        ({"sysinfo": "Linux"}, "sysinfo is not an object"),
        ({"sysinfo": {"nodename": ["vm"]}}, "sysinfo.nodename is not a string: a list"),
        ({"sysinfo": {"realtime": 2**40}}, "sysinfo.realtime is out of range"),
        ({"resolution_in_ns": "1"}, "resolution_in_ns is not 0 or 1: '1'"),
        ({"resolution_in_ns": 1000}, "resolution_in_ns is not 0 or 1: 1000"),
        ({"num_threads": "two"}, "num_threads is not a number"),
        ({"thread": {"2147483648": thread_json()}}, "thread 2147483648: thread number is out"),
        ({"thread": {"99999999999999999999": thread_json()}}, "thread key is out of range"),
        ({"thread": {"0": thread_json(cycles=2**52), "1": thread_json(cycles=2**52 + 1)}},
         "9007199254740993 samples over all threads: more than 2^53"),
    ],
)  # fmt: skip
def test_out_of_range_and_wrong_types_at_the_top(tmp_path, top, reason):
    doc: dict[str, Any] = {"thread": {"0": thread_json()}}
    doc.update(top)
    path = json_file(tmp_path, doc)
    with pytest.raises(UserError) as info:
        read_cyclictest(path)
    assert str(info.value).startswith(f"{path}: {reason}"), str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"thread": ' + "[" * 5000 + "]" * 5000 + "}",
        "[{}," * 1_000_001 + "{}]",
        '"thread"',
        "{" + '"thread": {"0": {"cycles": 1, "min": 1, "max": 1}}' + "\x00}",
        '{"thread": {"0": {"cycles": 1, "min": 1, "max": 1, "avg": 1}}, "cmdline:": "a\x00"}',
    ],
)
def test_hostile_json_structure(tmp_path, text):
    path = json_file(tmp_path, text)
    with pytest.raises(UserError) as info:
        read_cyclictest(path)
    assert len(str(info.value).splitlines()) == 1


def test_tolerated_values_give_a_valid_document(tmp_path):
    """Documented tolerance: nan/inf avg = unknown mean, unknown date format = null,
    cpu -1 = not pinned, numbers as strings; text is cleaned to encodable Unicode."""
    doc = {
        "start_time": "So, 22 Mär 2026 01:04:01 +0000",  # a localized date: unknown
        "end_time": "2026-11-22T01:04:01+01:00",
        "rt_test_version:": 2.4,
        "sysinfo": {"nodename": "\ud800vm", "realtime": True},
        "thread": {
            "0": thread_json(avg=math.inf, cpu=-1, cycles="10", min=5.0),
            "1": thread_json(avg=math.nan, histogram={"5": "4", "9": 6.0}),
        },
    }
    out = outcome(json_file(tmp_path, doc))
    assert out is not None
    assert out["start_utc"] is None and out["end_utc"] == "2026-11-22T00:04:01.000Z"
    assert out["version"] == "2.4" and out["host"]["uname"]["nodename"] == "?vm"
    assert out["host"]["realtime"] == 1
    assert [t["mean_ns"] for t in out["threads"]] == [None, None]
    assert [t["cpu"] for t in out["threads"]] == [None, None]


def test_non_utf8_bytes_are_replaced(tmp_path):
    path = tmp_path / "run.json"
    doc = json.dumps({"sysinfo": {"nodename": "@@"}, "thread": {"0": thread_json()}})
    path.write_bytes(doc.encode().replace(b"@@", b"v\xffm"))
    assert outcome(path)["host"]["uname"]["nodename"] == "v\ufffdm"


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("# Thread 0: 00001 # " + "9" * 5000 + " others", "line 11: unexpected '999"),
        ("# Thread 0: 99999999999999999999 00002", "line 11: number 99999999999999999999 is out"),
    ],
)
def test_hostile_overflow_cycle_lines(tmp_path, line, reason):
    text = (FIX / "real-h3.hist").read_text().split("\n")
    at = next(i for i, s in enumerate(text) if s.startswith("# Thread 0:"))
    text[at] = line
    path = tmp_path / "run.hist"
    path.write_text("\n".join(text))
    with pytest.raises(UserError) as info:
        read_cyclictest(path)
    assert str(info.value).startswith(f"{path}: {reason}"), str(info.value)


def test_hostile_histogram_values(tmp_path):
    base = (FIX / "real-h3.hist").read_text()
    path = tmp_path / "run.hist"
    path.write_text(base.replace("# Max Latencies: 00071", "# Max Latencies: 9223372036854775"))
    with pytest.raises(UserError, match="thread 0: max 9223372036854775 is out of range"):
        read_cyclictest(path)
    path.write_text(
        base.replace("# Histogram Overflows: 00050", "# Histogram Overflows: 2" + "0" * 18)
    )
    with pytest.raises(UserError, match="thread 0: cycles 2000000000000000000 is out of range"):
        read_cyclictest(path)
    path.write_text(base.replace("# Avg Latencies: 00021", "# Avg Latencies: 00072"))
    with pytest.raises(UserError, match=r"thread 0: avg 72\.0 is outside min"):
        read_cyclictest(path)


def test_too_many_values_are_refused_before_parsing(tmp_path):
    """json.loads would spend ~150 bytes on each: counted first."""
    path = json_file(tmp_path, '{"x": [' + "0," * (MAX_BUCKETS + 70_000) + "0]}")
    with pytest.raises(UserError, match=r"JSON values: more than the 4194304 histogram buckets"):
        read_cyclictest(path)


def test_too_many_buckets_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(cyclictest, "MAX_BUCKETS", 3)
    doc = {"thread": {"0": thread_json(histogram={"5": 1, "6": 1, "7": 1, "9": 7})}}
    with pytest.raises(UserError, match=r"4 histogram buckets over all threads: more than 3$"):
        read_cyclictest(json_file(tmp_path, doc))
    # the text parser stops as soon as it holds too many (the file may be huge)
    monkeypatch.setattr(_cyclictest_hist, "MAX_BUCKETS", 2)
    rows = "".join(f"{b:06d} 000001\n" for b in range(10))
    path = tmp_path / "run.hist"
    path.write_text("# Histogram\n" + rows + "# Min Latencies: 0\n")
    with pytest.raises(UserError, match=r"line 6: more than 2 histogram buckets$"):
        read_cyclictest(path)


def test_blank_lines_are_cheap(tmp_path):
    """Millions of empty lines are skipped without a Python step each."""
    path = tmp_path / "run.hist"
    base = (FIX / "real-h3.hist").read_text()
    path.write_text("\n" * 5_000_000 + base.replace("\n", "\r\n\n\n"))
    doc = outcome(path)
    assert doc is not None and doc["threads"][0]["count"] == 50
    path.write_text(base.replace("# Min", "\n" * 1000 + "# Min").replace("00012", "0001x"))
    with pytest.raises(UserError, match=r"line 1006: non-numeric field '0001x'"):
        read_cyclictest(path)
