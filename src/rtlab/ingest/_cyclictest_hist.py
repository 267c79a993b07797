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
are lines after the summary that are not part of it. Raises UserError with a one-line
reason (the caller adds the file name).
"""

from __future__ import annotations

import re
from typing import Any

from rtlab.errors import UserError

_NUM = re.compile(r"-?[0-9]{1,30}")
# "# Key: values" summary lines; values are one count per thread (+ summary column).
_SUMMARY = {"Total", "Min Latencies", "Avg Latencies", "Max Latencies", "Histogram Overflows"}
_REQUIRED = ("Min Latencies", "Avg Latencies", "Max Latencies", "Histogram Overflows")
_THREAD = re.compile(r"Thread (\d+)")


def _count(tok: str, where: str) -> int:
    if not _NUM.fullmatch(tok):
        raise UserError(f"{where}: non-numeric field {tok[:20]!r}")
    value = int(tok)
    if value < 0:
        raise UserError(f"{where}: negative count {tok}")
    return value


def _fields(text: str, where: str) -> list[int]:
    return [_count(tok, where) for tok in text.split()]


def looks_like_histogram(text: str) -> bool:
    return any(line.strip() == "# Histogram" for line in text.splitlines())


def _overflow_cycles(rest: str, where: str) -> tuple[list[int], int]:
    """'00000 00005 # 00012 others' -> ([0, 5], 12)."""
    listed, _, others = rest.partition("#")
    cycles = _fields(listed, where)
    more = 0
    if others.strip():
        m = re.fullmatch(r"\s*(\d+)\s+others\s*", others)
        if not m:
            raise UserError(f"{where}: unexpected {others.strip()[:30]!r}")
        more = int(m.group(1))
    return cycles, more


def parse_histogram(text: str) -> dict[str, Any]:
    """Return {"threads": [raw thread, ...]} with index, cpu (None), count, min, max, mean
    (whole units as printed), hist {bucket: count} (no zero counts), overflow, and the
    overflow cycle numbers (overflow_cycles, overflow_cycles_omitted)."""
    lines = text.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip() == "# Histogram"]
    if not heads:
        raise UserError("no '# Histogram' line (not a cyclictest histogram?)")
    if len(heads) > 1:
        raise UserError(f"line {heads[1] + 1}: a second '# Histogram' (concatenated runs?)")
    rows: list[tuple[int, int, list[int]]] = []  # (line number, bucket, counts)
    summary: dict[str, tuple[int, list[int]]] = {}
    oflow: dict[int, tuple[list[int], int]] = {}
    in_rows = True
    for lineno, raw in enumerate(lines[heads[0] + 1 :], start=heads[0] + 2):
        line = raw.strip()
        where = f"line {lineno}"
        if not line:
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
        if not in_rows:
            continue  # trailing output after the summary
        toks = line.split()
        if len(toks) < 2:
            raise UserError(f"{where}: not a histogram row: {line[:40]!r}")
        bucket = _count(toks[0], where)
        if rows and bucket <= rows[-1][1]:
            raise UserError(f"{where}: bucket {bucket} after bucket {rows[-1][1]}")
        rows.append((lineno, bucket, [_count(tok, where) for tok in toks[1:]]))

    if rows:
        width = len(rows[0][2])
        for lineno, _, counts in rows:
            if len(counts) != width:
                raise UserError(f"line {lineno}: {len(counts)} count columns, expected {width}")
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
    if rows:
        width = len(rows[0][2])
        if width not in (nthreads, nthreads + 1):
            raise UserError(
                f"line {rows[0][0]}: {width} count columns, expected {nthreads} (one per thread)"
            )
        if width == nthreads + 1:  # -H summary column: must be the sum; dropped
            for lineno, _, counts in rows:
                if counts[-1] != sum(counts[:-1]):
                    raise UserError(
                        f"line {lineno}: last column {counts[-1]} is not the sum "
                        "of the thread columns"
                    )

    threads = []
    for i in range(nthreads):
        hist = {bucket: counts[i] for _, bucket, counts in rows if counts[i]}
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
