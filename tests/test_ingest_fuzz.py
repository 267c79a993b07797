"""Hostile input to rtlab.ingest.read_cyclictest: a usable document or a one-line UserError.

Property tests mutate the real fixtures (JSON trees, bytes, histogram lines); the rest
are the hostile cases named one by one (test_ingest_hostile.py).
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab.analysis import CaseStats, document_case_stats, per_thread_stats
from rtlab.errors import UserError
from rtlab.ingest import read_cyclictest
from tests.test_ingest_cyclictest import check_invariants

FIX = Path(__file__).parent / "fixtures" / "cyclictest"
JSON_BASES = [
    "real-h60.json",
    "real-h3.json",
    "real-nohist.json",
    "real-zero-thread.json",
    "handmade-nsecs.json",
    "handmade-nan-avg.json",
]
TEXT_BASES = ["real-h60.hist", "real-h3.hist", "handmade-H-sparse.hist", "real-stdout-H40.txt"]
INT64 = (-(2**63), 2**63 - 1)
ORDER = ("whisker_low", "q1", "median", "q3", "p90", "p99", "p999", "p9999", "whisker_high")
# RTLAB_FUZZ_EXAMPLES=20000 for a long run; the default keeps the suite fast
EXAMPLES = int(os.environ.get("RTLAB_FUZZ_EXAMPLES", "70"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --------------------------------------------------------------------------- checks


def _ints(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, dict):
        return [i for v in value.values() for i in _ints(v)]
    if isinstance(value, list | tuple):
        return [i for v in value for i in _ints(v)]
    return []


def check_stats(s: CaseStats) -> None:
    assert s.count >= 0
    if s.count == 0:
        return
    assert s.min <= s.max and s.jitter == s.max - s.min
    if not math.isnan(s.mean):
        assert s.min <= s.mean <= s.max
    values = [getattr(s, k) for k in ORDER]
    known = [v for v in values if not math.isnan(v)]
    assert all(s.min <= v <= s.max for v in known)
    if not math.isnan(s.median):
        assert s.q1 <= s.median <= s.q3
    json.dumps(s.to_dict(), allow_nan=False)


def check_document(doc: dict, doc_dir: Path) -> None:
    """An accepted document: valid, int64 throughout, and every statistic computes."""
    check_invariants(doc)
    json.dumps(doc, ensure_ascii=False).encode("utf-8")  # no lone surrogates
    assert all(INT64[0] <= i <= INT64[1] for i in _ints(doc))
    case = document_case_stats(doc, doc_dir)
    check_stats(case)
    assert case.count == sum(t["count"] for t in doc["threads"])
    per = per_thread_stats(doc, doc_dir)
    assert [p.count for p in per] == [t["count"] for t in doc["threads"]]
    for p in per:
        check_stats(p)
    lo, hi = case.min, case.max
    for deadline in (0, int(lo) - 1, int(lo), (int(lo) + int(hi)) // 2, int(hi)):
        s = document_case_stats(doc, doc_dir, deadline_ns=deadline)
        if s.deadline_misses_bounds is not None:
            sure, possible = s.deadline_misses_bounds
            assert 0 <= sure <= possible <= s.count


def outcome(path: Path) -> dict | None:
    """read_cyclictest's document (checked), or None after a proper UserError."""
    try:
        doc = read_cyclictest(path)
    except UserError as e:
        msg = str(e)
        assert msg.startswith(f"{path}: ") and len(msg.splitlines()) == 1, msg
        assert len(msg) < len(str(path)) + 300, msg
        return None
    check_document(doc, path.parent)
    return doc


def write(tmp_path_factory: pytest.TempPathFactory, name: str, data: bytes) -> Path:
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_bytes(data)
    return path


# ------------------------------------------------------------- hostile JSON documents


def load_fixture(name: str) -> Any:
    """A fixture as a JSON tree (cyclictest's bare nan repaired)."""
    text = (FIX / name).read_text()
    return json.loads(re.sub(r"(?<=[:,\[])(\s*)-?nan\b", r"\1NaN", text))


def deep(n: int) -> str:
    return f"__DEEP_{n}__"


def digits(n: int) -> str:
    return f"__DIGITS_{n}__"


def expand(text: str) -> str:
    """Placeholders json.dumps cannot write itself: deep nesting, huge integers."""
    text = re.sub(r'"__DEEP_(\d+)__"', lambda m: "[" * int(m[1]) + "]" * int(m[1]), text)
    return re.sub(r'"__DIGITS_(\d+)__"', lambda m: "9" * int(m[1]), text)


HUGE = [2**31, 2**53, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**30, 10**4000]
ODD_TEXT = [
    "nan",
    "-nan",
    "inf",
    "1e999",
    "1e3",
    " 7 ",
    "99999999999999999999",
    "١٢",
    "\ud800",
    "\x00",
    "a\nb",
    "Mon, 01 Jan 99999 00:00:00 +0000",
    "Sun, 22 Nov 2026 01:04:01 +9999",
    "Sun, 32 Nov 2026 01:04:01 +0000",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "2026-13-01",
]
hostile = st.one_of(
    st.sampled_from(HUGE),
    st.integers(),
    st.floats(),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 0.5, -0.0]),
    st.sampled_from(ODD_TEXT),
    st.text(max_size=8),
    st.none(),
    st.booleans(),
    st.recursive(
        st.integers() | st.text(max_size=3),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
        max_leaves=5,
    ),
    st.integers(900, 3000).map(deep),
    st.integers(4200, 6000).map(digits),
)
KEYS = [
    "cycles",
    "min",
    "max",
    "avg",
    "histogram",
    "cpu",
    "thread",
    "num_threads",
    "resolution_in_ns",
    "start_time",
    "end_time",
    "sysinfo",
    "cmdline:",
    "return_code",
    "rt_test_version:",
    "0",
    "1",
    "2147483648",
    "99999999999999999999",
    "-1",
    "1e3",
    "nan",
]


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, data: st.DataObject) -> Any:
    path = data.draw(st.sampled_from(_paths(doc)))
    op = data.draw(st.sampled_from(["replace", "delete", "add", "wrap", "rekey"]))
    if not path:
        return data.draw(hostile) if op in ("replace", "wrap") else doc
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if op == "replace":
        parent[last] = data.draw(hostile)
    elif op == "delete":
        del parent[last]
    elif op == "wrap":
        parent[last] = data.draw(st.sampled_from([[parent[last]], {"x": parent[last]}]))
    elif op == "add" and isinstance(parent[last], dict):
        parent[last][data.draw(st.sampled_from(KEYS))] = data.draw(hostile)
    elif op == "rekey" and isinstance(parent, dict):
        parent[data.draw(st.sampled_from(KEYS) | st.text(max_size=4))] = parent.pop(last)
    return doc


@FUZZ
@given(data=st.data())
def test_hostile_json_values(tmp_path_factory, data):
    """Replace, delete, add, wrap or rename any value of a real file."""
    name = data.draw(st.sampled_from(JSON_BASES))
    doc = load_fixture(name)
    for _ in range(data.draw(st.integers(1, 3))):
        doc = _mutate(doc, data)
    text = expand(json.dumps(doc))
    outcome(write(tmp_path_factory, name, text.encode("utf-8", "surrogatepass")))


BAD_BYTES = [b"\xff", b"\xfe\xff", b"\x00", b"\xed\xa0\x80", b"\xc0\x80", b"\x80", b"\x1b[2J"]


@FUZZ
@given(data=st.data())
def test_hostile_json_bytes(tmp_path_factory, data):
    """Cut a real file, insert non-UTF-8 or NUL bytes, or blow up a number."""
    name = data.draw(st.sampled_from(JSON_BASES))
    raw = (FIX / name).read_bytes()
    for _ in range(data.draw(st.integers(1, 3))):
        op = data.draw(st.sampled_from(["truncate", "insert", "number"]))
        pos = data.draw(st.integers(0, len(raw)))
        if op == "truncate":
            raw = raw[:pos]
        elif op == "insert":
            raw = (
                raw[:pos]
                + data.draw(st.sampled_from(BAD_BYTES) | st.binary(max_size=4))
                + raw[pos:]
            )
        else:
            numbers = [m.span() for m in re.finditer(rb"-?[0-9]+(\.[0-9]+)?", raw)]
            if numbers:
                a, b = data.draw(st.sampled_from(numbers))
                new = data.draw(st.sampled_from([b"9" * 25, b"9" * 5000, b"-1", b"1e400", b"0.5"]))
                raw = raw[:a] + new + raw[b:]
    outcome(write(tmp_path_factory, name, raw))


# ------------------------------------------------------------ hostile text histograms

ODD_TOKENS = ["9" * 19, "9" * 30, "9" * 5000, "-1", "x", "nan", "١٢", "0\x00", "1e3", "+5"]
ODD_LINES = [
    "# Histogram",
    "# Total: 000000001 000000001",
    "# Min Latencies: 00001",
    "# Max Latencies: 99999999999999999999 99999999999999999999",
    "# Avg Latencies: 9223372036854775807 9223372036854775807",
    "# Histogram Overflows: 9223372036854775807 9223372036854775807",
    "# Thread 0: 00001 00002 # 99999999999999999999 others",
    "# Thread 0: 1 # " + "9" * 5000 + " others",
    "# Thread " + "9" * 5000 + ": 1",
    "2147483648 000001 000001",
    "9223372036854775807 000001 000001",
    "000001\x00000001",
    "\x0c000001 000001 000001",
]


@FUZZ
@given(data=st.data())
def test_hostile_histogram_lines(tmp_path_factory, data):
    """Replace tokens, drop, repeat, swap or insert lines of a real text histogram."""
    name = data.draw(st.sampled_from(TEXT_BASES))
    lines = (FIX / name).read_text().split("\n")
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(lines) - 1))
        op = data.draw(st.sampled_from(["token", "drop", "repeat", "swap", "insert", "column"]))
        if op == "token" and lines[i].split():
            toks = lines[i].split()
            j = data.draw(st.integers(0, len(toks) - 1))
            toks[j] = data.draw(st.sampled_from(ODD_TOKENS) | st.text(max_size=4))
            lines[i] = " ".join(toks)
        elif op == "drop":
            del lines[i]
        elif op == "repeat":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = data.draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "insert":
            lines.insert(i, data.draw(st.sampled_from(ODD_LINES)))
        else:
            lines[i] += " " + data.draw(st.sampled_from(ODD_TOKENS))
        if not lines:
            lines = [""]
    raw = "\n".join(lines).encode("utf-8", "surrogatepass")
    if data.draw(st.booleans()):
        pos = data.draw(st.integers(0, len(raw)))
        raw = raw[:pos] + data.draw(st.sampled_from(BAD_BYTES)) + raw[pos:]
    outcome(write(tmp_path_factory, name, raw))


# ------------------------------------------------------------------ special files
