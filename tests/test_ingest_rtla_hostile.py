"""rtlab.ingest.rtla on hostile input: damaged tables and screens, special files, long
lines, mutated fixtures (property test), and the `rtlab import rtla` command. Every bad
file is one line and stores nothing."""

from __future__ import annotations

import json
import os
import re
import socket

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab.analysis import document_case_stats
from rtlab.errors import UserError
from rtlab.ingest import _rtla_hist, read_rtla

from .test_ingest_rtla import BROKEN, FIX, GOOD, check_invariants, one_line_error


def hist(rows: str, *, columns: str = "IRQ-000   Thr-000", summary: str = "") -> str:
    return (
        "# RTLA timerlat histogram\n# Time unit is microseconds (us)\n# Duration:   0 00:00:01\n"
        f"Index   {columns}\n{rows}{summary}"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (hist("0 1 -2\nover: 0 0\n"), "line 5: negative number -2"),
        (hist("0 1 x\nover: 0 0\n"), "line 5: not a number: 'x'"),
        (hist("3 1 1\n2 1 1\nover: 0 0\n"), "line 6: bucket 2 after bucket 3"),
        (hist("2147483648 1 1\nover: 0 0\n"), "bucket 2147483648 is out of range"),
        (hist("0 1 1\nover: 0\n"), "'over:' has 1 values, expected 2"),
        (hist("", columns="Thr-001   Thr-000"), "CPU 0 after CPU 1"),
        (hist("", columns="Thr-000   IRQ-000"), "column IRQ-000 out of order"),
        (hist("", columns="IRQ-000   Thr-000   IRQ-001"), "CPU 1 has other columns than CPU 0"),
        (hist("", columns="CPU-000"), "unexpected column name 'CPU-000'"),
        (hist("", columns="IRQ-9999999999"), "number 9999999999 is out of range"),
        (
            hist("1 5 5\nover: 0 0\n", summary="count: 5 5\nmin: 3 1\navg: 1 1\nmax: 1 1\n"),
            "min 3 is larger than max 1",
        ),
        (
            hist("1 5 5\nover: 0 0\n", summary="count: 5 5\nmin: 1 1\navg: 9 1\nmax: 2 1\n"),
            "avg 9.0 is outside min 1 .. max 2",
        ),
        (
            hist("7 5 5\nover: 0 0\n", summary="count: 5 5\nmin: 1 1\navg: 1 1\nmax: 2 1\n"),
            "CPU 0 irq: bucket 7 lies outside min 1 .. max 2",
        ),
        (
            hist("1 5 5\nover: 0 0\n", summary="count: 5 5\nmin: - 1\navg: - 1\nmax: - 1\n"),
            "5 samples but no min/max",
        ),
        (
            hist(
                "1 5 5\nover: 0 0\n", summary="count: 5 5\nmin: 1 1\navg: 1 1\nmax: 1 1\nALL: IRQ\n"
            ),
            "'ALL:' columns 'IRQ' do not match",
        ),
        (hist("1 5 5\nover: 1 0\n"), "samples above the histogram's range and no summary"),
        (hist("0" + " 1" * 100_000 + "\nover: 0 0\n"), "a line of 200001 characters, too long"),
        (hist("1 0 0\nover: 0 0\n"), r"no samples \(no CPU has a thread latency sample\)"),
        ("# RTLA timerlat histogram\nIndex   IRQ-000\n", "no '# Time unit is ...' line"),
        ("# RTLA osnoise histogram\n# Time unit is microseconds (us)\n", "truncated histogram"),
    ],
)
def test_hostile_histograms(tmp_path, text, message):
    path = tmp_path / "run.txt"
    path.write_text(text)
    assert re.search(message, one_line_error(path)), one_line_error(path)


HEAD2 = (
    "  0 00:00:01   |          IRQ Timer Latency (us)        |         Thread Timer Latency (us)"
)
COLS = "CPU COUNT      |" + "      cur       min       avg       max |" * 2
ROW0 = "  0 #100       |        1         0         1         3 |        3         2         2 12\n"


def top(rows: str, *, head: str = "") -> str:
    return f"{head}                     Timer Latency\n{HEAD2}\n{COLS[:-2]}\n{rows}"


ROW1 = ROW0.replace("  0 #", "  1 #")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (top(ROW1 + ROW0), "CPU 0 after CPU 1"),
        (top(ROW0.replace(" 12\n", " -\n")), "thread block mixes '-' and numbers"),
        (top(ROW0.replace("|        3", "|        3  4")), "thread block has 5 values"),
        (top(""), "no CPU rows"),
        (top(ROW0 + ROW1) + top(ROW0), "the last screen .* is shorter than the one before"),
        (top(ROW0 + "-----|-----|-----\n"), r"truncated: no 'ALL #\.\.\.' line"),
        (
            top(ROW0 + "-----|-----|-----\nALL #100 e0 | 0 0 0 | 2 2 2\n") + top(ROW0),
            "shorter than the one before",
        ),
        (top("").replace("CPU COUNT", "CPU CNT"), "expected the column header"),
        (top(ROW0.replace("#100", "#99999999999999999999")), "out of range"),
    ],
)
def test_hostile_tops(tmp_path, text, message):
    path = tmp_path / "run.txt"
    path.write_text(text)
    assert re.search(message, one_line_error(path)), one_line_error(path)


def test_a_top_before_junk_and_after_it_reads(tmp_path):
    """A shell prompt before, a warning after: ignored."""
    path = tmp_path / "run.txt"
    path.write_text(top(ROW0, head="$ rtla timerlat top -q\n") + "some warning \xff\n")
    doc = read_rtla(path)
    check_invariants(doc)
    assert doc["threads"][0]["count"] == 100


def test_undecodable_bytes_and_nul_are_survived(tmp_path):
    base = (FIX / "timerlat-hist-auto-analysis.txt").read_bytes()
    path = tmp_path / "run.txt"
    path.write_bytes(base.replace(b"objtool", b"obj\xff\x00tool"))
    doc = read_rtla(path)
    check_invariants(doc)
    assert doc["import"]["auto_analysis"][0]["blocking_thread"]["comm"] == "obj\ufffd\x00tool"


def test_special_files_are_refused(tmp_path):
    fifo = tmp_path / "run.txt"
    os.mkfifo(fifo)
    assert "cannot read (a FIFO, not a regular file)" in one_line_error(fifo)
    assert "cannot read (a directory" in one_line_error(tmp_path)
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s"))
        assert "cannot read (a socket" in one_line_error(tmp_path / "s")
    finally:
        sock.close()
    assert "No such file" in one_line_error(tmp_path / "missing.txt")


def test_too_many_buckets_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(_rtla_hist, "MAX_BUCKETS", 3)
    rows = "".join(f"{b} 1 1\n" for b in range(5))
    path = tmp_path / "run.txt"
    path.write_text(hist(rows + "over: 0 0\n"))
    assert re.search(r"line 6: more than 3 histogram buckets$", one_line_error(path))


def test_a_hostile_long_line_is_cheap(tmp_path):
    """No regex backtracks over a long run of blanks."""
    path = tmp_path / "run.txt"
    path.write_text(
        hist("0 1 1\nover: 0 0\n")
        + "IRQ handler delay:"
        + " " * 2_000_000
        + "x\n"
        + "  " * 1_000_000
        + "IRQ Timer Latency ("
        + " " * 2_000_000
        + "\n"
    )
    doc = read_rtla(path)
    assert doc["threads"][0]["count"] == 1


# ------------------------------------------------------------------ property test


@settings(
    max_examples=int(os.environ.get("RTLAB_FUZZ_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    base=st.sampled_from([p.name for p in GOOD]),
    edits=st.lists(
        st.tuples(
            st.sampled_from(["drop", "dup", "token", "cut"]),
            st.integers(0, 10_000),
            st.sampled_from(["-", "x", "0", "-1", "99999999999999999999", "|", "ALL:", "#", ""]),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_mutated_fixtures_give_a_document_or_one_line(tmp_path, base, edits):
    lines = (FIX / base).read_text().splitlines()
    for op, at, tok in edits:
        if not lines:
            break
        i = at % len(lines)
        if op == "drop":
            del lines[i]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "cut":
            lines = lines[: i + 1]
            lines[-1] = lines[-1][: at % (len(lines[-1]) + 1)]
        else:
            words = lines[i].split(" ")
            words[at % len(words)] = tok
            lines[i] = " ".join(words)
    path = tmp_path / "run.txt"
    path.write_text("\n".join(lines))
    try:
        doc = read_rtla(path)
    except UserError as e:
        assert len(str(e).splitlines()) == 1
        return
    check_invariants(doc)
    document_case_stats(doc, tmp_path)


# ------------------------------------------------------------------ the command


def test_import_rtla_then_show(rtlab, tmp_path):
    files = [
        str(FIX / n) for n in ("timerlat-hist.txt", "timerlat-top.txt", "osnoise-top-5.17.txt")
    ]
    rc, out, err = rtlab("import", "rtla", *files, "--results", str(tmp_path), "--json")
    assert rc == 0, err
    info = json.loads(out)
    assert info["cases"] == 3
    rc, out, err = rtlab("show", info["id"], "--results", str(tmp_path), "--json")
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    assert [r["case"] for r in rows] == [
        "timerlat-hist.txt",
        "timerlat-top.txt",
        "osnoise-top-5.17.txt",
    ]
    assert rows[0]["count"] == 80012 and rows[0]["median"] is not None
    assert rows[1]["count"] == 40000 and rows[1]["median"] is None  # top: no histogram
    # the report takes cases without a histogram too (their summary only)
    html = tmp_path / "report.html"
    rc, _, err = rtlab("report", info["id"], "--results", str(tmp_path), "-o", str(html))
    assert rc == 0, err
    assert "timerlat-top.txt" in html.read_text()


@pytest.mark.parametrize("bad", BROKEN[:4], ids=lambda p: p.name)
def test_import_rtla_refuses_and_stores_nothing(rtlab, tmp_path, bad):
    results = tmp_path / "r"
    rc, _, err = rtlab(
        "import", "rtla", str(FIX / "timerlat-hist.txt"), str(bad), "--results", str(results)
    )
    assert rc == 2 and bad.name in err and len(err.strip().splitlines()) == 1
    assert not results.exists()
