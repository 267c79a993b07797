"""rtlab._input: every file is read bounded and without blocking, every JSON document is
parsed within its value and nesting limits; bad input is one UserError, never another
exception (generated inputs)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rtlab._input import (
    MAX_JSON_DEPTH,
    check_depth,
    json_values,
    load_json,
    open_regular,
    read_regular,
    size_text,
)
from rtlab.errors import UserError
from tests.test_ingest_hostile import finishes, open_writer


def test_regular_file_within_its_limit(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"x" * 100)
    assert read_regular(p, 100) == b"x" * 100
    with pytest.raises(UserError, match=r"^too large: more than 99 bytes \(100 bytes\)$"):
        read_regular(p, 99)
    assert read_regular(p, 10, truncate=True) == b"x" * 10


def test_proc_files_are_read_and_cut_at_their_limit():
    """/proc files say size 0: read to their end, or refused / cut at the limit."""
    whole = read_regular("/proc/self/status", 1 << 20)
    assert b"Cpus_allowed_list" in whole and len(whole) > 64
    assert read_regular("/proc/self/status", 64, truncate=True) == whole[:64]
    with pytest.raises(UserError, match=r"^too large: more than 64 bytes$"):
        read_regular("/proc/self/status", 64)


@pytest.mark.parametrize("writer", [False, True])
def test_fifo_is_refused_without_blocking(tmp_path, writer):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    keep = os.open(fifo, os.O_RDWR) if writer else None  # with a writer, opens never block
    try:
        with pytest.raises(UserError, match=r"^cannot read \(a FIFO, not a regular file\)$"):
            finishes(lambda: read_regular(fifo, 100), open_writer(fifo))
        with pytest.raises(UserError, match="a FIFO"):
            finishes(lambda: open_regular(fifo), open_writer(fifo))
    finally:
        if keep is not None:
            os.close(keep)


@pytest.mark.parametrize(
    ("path", "kind"), [("/dev/zero", "a character device"), ("/dev/null", "a character device")]
)
def test_devices_are_refused(path, kind):
    if not Path(path).exists():
        pytest.skip(f"{path} does not exist here")
    with pytest.raises(UserError, match=f"^cannot read \\({kind}, not a regular file\\)$"):
        finishes(lambda: read_regular(path, 1 << 30), lambda: None)


def test_directory_socket_missing_and_nul(tmp_path):
    with pytest.raises(UserError, match=r"\(a directory, not a regular file\)"):
        read_regular(tmp_path, 10)
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s"))
        with pytest.raises(UserError, match=r"\(a socket, not a regular file\)"):
            read_regular(tmp_path / "s", 10)
    finally:
        sock.close()
    with pytest.raises(UserError, match=r"^cannot read \(No such file"):
        read_regular(tmp_path / "missing", 10)
    with pytest.raises(UserError, match=r"^cannot read \(embedded null byte\)$"):
        read_regular("a\0b", 10)


def test_size_text():
    assert [size_text(n) for n in (256 << 20, 4096, 1 << 30, 100)] == [
        "256 MiB", "4 KiB", "1 GiB", "100 bytes",
    ]  # fmt: skip


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


def _count(value) -> int:
    if isinstance(value, dict):
        return 1 + sum(_count(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_count(v) for v in value)
    return 1


@given(JSON)
def test_json_values_is_an_upper_bound(value):
    text = json.dumps(value)
    assert json_values(text.encode()) >= _count(value)
    assert load_json(text, _count(value) + 4 * text.count(",") + 8) == value


@given(st.integers(min_value=1, max_value=3000), st.sampled_from("[{"))
def test_any_nesting_is_parsed_or_one_user_error(depth, opener):
    """Never a RecursionError: within the limit parsed, deeper refused (even beyond what
    the parser's recursion can take)."""
    inner = "[]" if opener == "[" else "{}"
    text = (opener + ('"k":' if opener == "{" else "")) * (depth - 1) + inner
    text += ("]" if opener == "[" else "}") * (depth - 1)
    if depth <= MAX_JSON_DEPTH:
        check_depth(load_json(text, 10**6))
    else:
        with pytest.raises(UserError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
            load_json(text, 10**6)


def test_nesting_far_beyond_recursion_is_refused():
    for text in ("[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000):
        with pytest.raises(UserError, match="nested deeper"):
            load_json(text, 10**6)


def test_values_are_counted_before_parsing():
    """Many cheap values (each costs 30-60 bytes parsed) are refused before json.loads
    builds them; brackets and commas inside strings do not count."""
    with pytest.raises(UserError, match=r"^more than 1000 JSON values \(about 150002\)$"):
        load_json("[" + "[]," * 50_000 + "0," * 50_000 + "0]", 1000)
    assert load_json(json.dumps(["[,{" * 10_000]), 5) == ["[,{" * 10_000]


@settings(max_examples=300)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_any_bytes_are_a_document_or_one_user_error(data):
    try:
        load_json(data, 10_000)
    except UserError as e:
        assert "\n" not in str(e)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1" * 5000, "not valid JSON"),  # beyond Python's digit limit
        (b"\xff\xfe\x00", "not valid JSON"),
        ('{"a": 1', "not valid JSON"),
    ],
)
def test_malformed_json_messages(text, why):
    with pytest.raises(UserError, match=why):
        load_json(text, 100)
