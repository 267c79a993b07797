"""Parse cyclictest's text histogram (`-h N` / `-H N` to stdout or `--histfile=FILE`).

Layout (rt-tests 2.x):

    # Histogram
    000000 000000	000000            bucket (µs, or ns with -N), one count per thread,
    000001 000003	000001            plus a summary column with -H and several threads
    ...
    # Total: 000000300 000000285      (absent in older versions)
    # Min Latencies: 00004 00007
    # Avg Latencies: 00005 00015      (truncated to whole units)
    # Max Latencies: 00011 00135 00135
    # Histogram Overflows: 00000 00015 00015
    # Histogram Overflow at cycle number:
    # Thread 0:
    # Thread 1: 00000 00005 ... # 00012 others

Some versions print every bucket, others skip rows that are zero for all threads. Lines
before "# Histogram" (a captured stdout: status lines, "policy: ...") are ignored, and so
are lines after the summary that are not part of it. Lines end at \\n, \\r\\n or \\r. The
text is scanned without splitting it into a list of lines and only non-zero counts are
kept, so memory follows the populated buckets, not the number of lines. Every number
must fit int64. Raises UserError with a one-line reason (the caller adds the file name).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from rtlab.errors import UserError
from rtlab.ingest._limits import INT64_MAX, MAX_BUCKETS
from rtlab.ingest._text import newlines, nonblank_lines

_NUM = re.compile(r"-?[0-9]{1,30}")
# A row of plain counts: up to 18 digits is always below 2^63, so no checks needed
_ROW = re.compile(r"[0-9]{1,18}(?:\s+[0-9]{1,18})+")
_HEAD = "# Histogram"
# "# Key: values" summary lines; values are one count per thread (+ summary column).
_SUMMARY = {"Total", "Min Latencies", "Avg Latencies", "Max Latencies", "Histogram Overflows"}
_REQUIRED = ("Min Latencies", "Avg Latencies", "Max Latencies", "Histogram Overflows")
_THREAD = re.compile(r"Thread ([0-9]{1,9})")
_OTHERS = re.compile(r"\s*([0-9]{1,30})\s+others\s*")


def _count(tok: str, where: str) -> int:
    if not _NUM.fullmatch(tok):
        raise UserError(f"{where}: non-numeric field {tok[:20]!r}")
    value = int(tok)
    if value < 0:
        raise UserError(f"{where}: negative count {tok}")
    if value > INT64_MAX:
        raise UserError(f"{where}: number {tok} is out of range")
    return value


def _fields(text: str, where: str) -> list[int]:
    return [_count(tok, where) for tok in text.split()]


def _head_lines(text: str) -> Iterator[int]:
    """Line numbers of the "# Histogram" lines (of a text with newline line ends)."""
    lineno, pos, at = 1, 0, text.find(_HEAD)
    while at >= 0:
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        if text[start:end].strip() == _HEAD:
            lineno += text.count("\n", pos, start)
            pos = start
            yield lineno
        at = text.find(_HEAD, end)


def looks_like_histogram(text: str) -> bool:
    return next(_head_lines(newlines(text)), None) is not None


def _overflow_cycles(rest: str, where: str) -> tuple[list[int], int]:
    """'00000 00005 # 00012 others' -> ([0, 5], 12)."""
    listed, _, others = rest.partition("#")
    cycles = _fields(listed, where)
    more = 0
    if others.strip():
        m = _OTHERS.fullmatch(others)
        if not m:
            raise UserError(f"{where}: unexpected {others.strip()[:30]!r}")
        more = _count(m.group(1), where)
    return cycles, more


class _Rows:
    """The histogram rows, kept as the non-zero counts of each column."""

    def __init__(self) -> None:
        self.first: tuple[int, int] | None = None  # (line number, count columns)
        self.bucket = -1  # the last bucket seen
        self.columns: list[dict[int, int]] = []
        self.kept = 0  # non-zero counts in columns
        self.not_sum: tuple[int, int] | None = None  # (line, last column) not the row's sum

    def add(self, lineno: int, line: str) -> None:
        where = f"line {lineno}"
        if _ROW.fullmatch(line):
            bucket, *counts = map(int, line.split())
        else:  # the slow way, for the message
            toks = line.split()
            if len(toks) < 2:
                raise UserError(f"{where}: not a histogram row: {line[:40]!r}")
            bucket, *counts = (_count(tok, where) for tok in toks)
        if self.first is not None and bucket <= self.bucket:
            raise UserError(f"{where}: bucket {bucket} after bucket {self.bucket}")
        if self.first is None:
            self.first = (lineno, len(counts))
            self.columns = [{} for _ in counts]
        elif len(counts) != self.first[1]:
            raise UserError(f"{where}: {len(counts)} count columns, expected {self.first[1]}")
        self.bucket = bucket
        if not any(counts):
            return
        if self.not_sum is None and len(counts) > 1 and counts[-1] != sum(counts[:-1]):
            self.not_sum = (lineno, counts[-1])
        for column, c in zip(self.columns, counts, strict=True):
            if c:
                column[bucket] = c
                self.kept += 1
        if self.kept > 2 * MAX_BUCKETS:  # the -H summary column may double them
            raise UserError(f"{where}: more than {MAX_BUCKETS} histogram buckets")


def parse_histogram(text: str) -> dict[str, Any]:
    """Return {"threads": [raw thread, ...]} with index, cpu (None), count, min, max, mean
    (whole units as printed), hist {bucket: count} (no zero counts), overflow, and the
    overflow cycle numbers (overflow_cycles, overflow_cycles_omitted)."""
    text = newlines(text)
    heads = _head_lines(text)
    head = next(heads, None)
    if head is None:
        raise UserError("no '# Histogram' line (not a cyclictest histogram?)")
    second = next(heads, None)
    if second is not None:
        raise UserError(f"line {second}: a second '# Histogram' (concatenated runs?)")
    rows = _Rows()
    summary: dict[str, tuple[int, list[int]]] = {}
    oflow: dict[int, tuple[list[int], int]] = {}
    in_rows = True
    for lineno, line in nonblank_lines(text):
        where = f"line {lineno}"
        if lineno <= head:
            continue
        if line.startswith("#"):
            key, colon, rest = line[1:].strip().partition(":")
            key = key.strip()
            if colon and key in _SUMMARY:
                if key in summary:
                    raise UserError(f"{where}: second '# {key}:' line")
                summary[key] = (lineno, _fields(rest, where))
                in_rows = False
            elif colon and (m := _THREAD.fullmatch(key)) and not in_rows:
                oflow[int(m.group(1))] = _overflow_cycles(rest, where)
            continue
        if in_rows:  # else trailing output after the summary
            rows.add(lineno, line)

    for key in _REQUIRED:
        if key not in summary:
            raise UserError(f"truncated histogram: no '# {key}:' line")
    nthreads = len(summary["Min Latencies"][1])
    if nthreads == 0:
        raise UserError(f"line {summary['Min Latencies'][0]}: no values")
    for key in summary:
        lineno, values = summary[key]
        allowed = (
            (nthreads,) if key in ("Min Latencies", "Avg Latencies") else (nthreads, nthreads + 1)
        )
        if len(values) not in allowed:
            raise UserError(
                f"line {lineno}: '# {key}:' has {len(values)} values, "
                f"expected {nthreads} (one per thread)"
            )
    columns: list[dict[int, int]] = [{} for _ in range(nthreads)]
    if rows.first is not None:
        lineno, width = rows.first
        if width not in (nthreads, nthreads + 1):
            raise UserError(
                f"line {lineno}: {width} count columns, expected {nthreads} (one per thread)"
            )
        if width == nthreads + 1 and rows.not_sum is not None:  # -H summary column
            lineno, last = rows.not_sum
            raise UserError(
                f"line {lineno}: last column {last} is not the sum of the thread columns"
            )
        columns = rows.columns[:nthreads]

    threads = []
    for i, hist in enumerate(columns):
        binned = sum(hist.values())
        if "Total" in summary and summary["Total"][1][i] != binned:
            raise UserError(
                f"thread {i}: '# Total:' is {summary['Total'][1][i]} but its column "
                f"sums to {binned} (missing rows?)"
            )
        overflow = summary["Histogram Overflows"][1][i]
        count = binned + overflow
        lo, hi = summary["Min Latencies"][1][i], summary["Max Latencies"][1][i]
        if count and lo > hi:
            raise UserError(f"thread {i}: min {lo} is larger than max {hi}")
        cycles, omitted = oflow.get(i, ([], 0))
        threads.append(
            {
                "index": i,
                "cpu": None,
                "count": count,
                "min": lo if count else None,
                "max": hi if count else None,
                "mean": float(summary["Avg Latencies"][1][i]) if count else None,
                "hist": hist,
                "overflow": overflow,
                "overflow_cycles": cycles,
                "overflow_cycles_omitted": omitted,
            }
        )
    return {"threads": threads}
