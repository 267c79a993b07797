"""Parse `rtla timerlat hist` and `rtla osnoise hist` output.

Layout (one column per CPU and figure; CPUs without samples are left out):

    # RTLA timerlat histogram                    (or: # RTLA osnoise histogram)
    # Time unit is microseconds (us)             (nanoseconds (ns) with -n)
    # Duration:   0 00:01:00
    Index   IRQ-000   Thr-000   Usr-000 ...      (osnoise: CPU-000 ...; --no-irq,
    0         58572         0         0          --no-thread and -u change the set)
    1          1422     57021       312          bucket (index × bucket size), counts;
    ...                                          rows that are all zero are skipped
    over:         0         0         0          unless --with-zeros
    count:    60001     60001     60001          (absent with --no-summary)
    min:          0         1         2          '-' for a figure without samples
    avg:          0         1         2          (osnoise since 6.x: "%.2f")
    max:          3         5         9
    ALL:        IRQ       Thr       Usr          (newer rtla: all CPUs together)
    count:   240004    240004    240004
    min: / avg: / max:
    ...then what _rtla_tail reads (missed events, stop, auto-analysis).

Output without its header (--no-header) cannot be told from other text and output
without its Index column (--no-index) has no bucket bounds: both are refused. The bucket
width rtla does not print is inferred: the greatest common divisor of the printed
indices (a multiple of the real bucket size, so every bucket given contains rtla's).
Only non-zero counts are kept, so memory follows the populated buckets.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any

from rtlab.errors import UserError
from rtlab.ingest._limits import INT32_LIMIT, MAX_BUCKETS, MAX_SAMPLES
from rtlab.ingest._rtla_common import (
    MAX_CPUS,
    Figure,
    Parsed,
    ascending,
    cpu_number,
    decimal,
    duration_ns,
    integer,
    optional,
    short_enough,
)
from rtlab.ingest._rtla_tail import parse_tail
from rtlab.ingest._text import nonblank_lines

HEAD = re.compile(r"# RTLA (timerlat|osnoise) histogram")
_UNIT = re.compile(r"# Time unit is (microseconds \(us\)|nanoseconds \(ns\))")
_DURATION = re.compile(r"# Duration:(.*)")
_COLUMN = re.compile(r"(IRQ|Thr|Usr|CPU)-([0-9]{1,10})")
_KIND = {"IRQ": "irq", "Thr": "thread", "Usr": "user", "CPU": "noise"}
_ALL_KIND = {"IRQ": "irq", "Thr": "thread", "Usr": "user"}
_RANK = {"irq": 0, "thread": 1, "user": 2, "noise": 0}
# A row of plain counts: up to 18 digits is always below 2^63, so no checks needed
_ROW = re.compile(r"[0-9]{1,18}(?:\s+[0-9]{1,18})*")
_SUMMARY = ("count", "min", "avg", "max")

Lines = Iterator[tuple[int, str]]


def _header(lines: Lines) -> tuple[str, int, int | None, int, str]:
    """(tool, unit_ns, duration_ns, line number, line) up to the 'Index' line."""
    tool = unit = dur = None
    for lineno, line in lines:
        if tool is None:
            if m := HEAD.fullmatch(line):
                tool = m.group(1)
            continue  # before the header: a shell prompt, a captured stderr
        if line.startswith("#"):
            if HEAD.fullmatch(line):
                raise UserError(f"line {lineno}: a second '{line}' before any data")
            if m := _UNIT.fullmatch(line):
                unit = 1 if m.group(1).startswith("nano") else 1000
            elif m := _DURATION.fullmatch(line):
                dur = duration_ns(m.group(1))
            continue
        if unit is None:
            raise UserError("no '# Time unit is ...' line after '# RTLA ... histogram'")
        return tool, unit, dur, lineno, line
    if tool is None:
        raise UserError("no '# RTLA timerlat histogram' or '# RTLA osnoise histogram' line")
    raise UserError("truncated histogram: nothing after its '#' header lines")


def _columns(tool: str, lineno: int, line: str) -> tuple[list[int], tuple[str, ...]]:
    short_enough(line, 3 * MAX_CPUS, f"line {lineno}")
    toks = line.split()
    if not toks or toks[0] != "Index":
        if toks and _COLUMN.fullmatch(toks[0]):
            raise UserError(
                f"line {lineno}: no 'Index' column (--no-index): the rows' buckets are unknown"
            )
        raise UserError(f"line {lineno}: expected the 'Index ...' line of column names")
    cpus: list[int] = []
    per_cpu: list[list[str]] = []
    for tok in toks[1:]:
        m = _COLUMN.fullmatch(tok)
        if not m or (m.group(1) == "CPU") != (tool == "osnoise"):
            raise UserError(f"line {lineno}: unexpected column name {tok[:20]!r}")
        cpu, kind = cpu_number(m.group(2), f"line {lineno}"), _KIND[m.group(1)]
        if not cpus or cpu != cpus[-1]:
            cpus.append(cpu)
            per_cpu.append([])
        order = per_cpu[-1]
        if order and _RANK[kind] <= _RANK[order[-1]]:
            raise UserError(f"line {lineno}: column {tok} out of order")
        order.append(kind)
        if len(cpus) > MAX_CPUS:
            raise UserError(f"line {lineno}: more than {MAX_CPUS} CPUs")
    kinds = tuple(per_cpu[0]) if per_cpu else ()
    for cpu, order in zip(cpus, per_cpu, strict=True):
        if tuple(order) != kinds:
            raise UserError(f"line {lineno}: CPU {cpu} has other columns than CPU {cpus[0]}")
    if not cpus:
        raise UserError(
            f"line {lineno}: no CPU column: no CPU had a sample (osnoise: no noise above "
            "the threshold), nothing to import"
        )
    ascending(cpus, f"line {lineno}")
    return cpus, kinds


class _Rows:
    """The histogram rows: the non-zero counts of each column and the indices' gcd."""

    def __init__(self, ncols: int) -> None:
        self.ncols = ncols
        self.columns: list[dict[int, int]] = [{} for _ in range(ncols)]
        self.last = -1
        self.kept = 0
        self.gcd = 0

    def add(self, lineno: int, line: str) -> None:
        where = f"line {lineno}"
        short_enough(line, self.ncols + 1, where)
        if _ROW.fullmatch(line):
            index, *counts = map(int, line.split())
        else:  # the slow way, for the message
            index, *counts = (integer(tok, where) for tok in line.split())
        if len(counts) != self.ncols:
            raise UserError(f"{where}: {len(counts)} counts, expected {self.ncols}")
        if index >= INT32_LIMIT:
            raise UserError(f"{where}: bucket {index} is out of range (at most 2^31 - 1)")
        if index <= self.last:
            raise UserError(f"{where}: bucket {index} after bucket {self.last}")
        self.last = index
        self.gcd = math.gcd(self.gcd, index)
        for column, c in zip(self.columns, counts, strict=True):
            if c:
                column[index] = c
                self.kept += 1
        if self.kept > MAX_BUCKETS:
            raise UserError(f"{where}: more than {MAX_BUCKETS} histogram buckets")


def _values(line: str, label: str, ncols: int, lineno: int) -> list[str]:
    short_enough(line, ncols + 1, f"line {lineno}")
    toks = line[len(label) + 1 :].split()
    if len(toks) != ncols:
        raise UserError(f"line {lineno}: '{label}:' has {len(toks)} values, expected {ncols}")
    return toks


def _summary(
    lines: Lines, first: tuple[int, str] | None, ncols: int
) -> tuple[dict[str, list[str]] | None, tuple[int, str] | None]:
    """count/min/avg/max after 'over:' (None with --no-summary) and the next line."""
    if first is None or not first[1].startswith("count:"):
        return None, first
    out: dict[str, list[str]] = {}
    nxt: tuple[int, str] | None = first
    for label in _SUMMARY:
        if nxt is None or not nxt[1].startswith(label + ":"):
            raise UserError(f"truncated summary: no '{label}:' line")
        out[label] = _values(nxt[1], label, ncols, nxt[0])
        nxt = next(lines, None)
    return out, nxt


def _figure(
    hist: dict[int, int], over: int, summary: dict[str, list[str]] | None, i: int, where: str
) -> Figure:
    binned = sum(hist.values())
    if summary is None:
        return Figure(count=binned + over, hist=hist, over=over)
    count = integer(summary["count"][i], where)
    if count != binned + over:
        raise UserError(
            f"{where}: count {count} but its rows and 'over:' sum to {binned + over} "
            "(missing rows?)"
        )
    if not count:
        return Figure(count=0, hist=hist, over=over)
    lo, hi = optional(summary["min"][i], where), optional(summary["max"][i], where)
    mean = decimal(summary["avg"][i], where)
    if lo is None or hi is None:
        raise UserError(f"{where}: {count} samples but no min/max")
    return Figure(count=count, min=lo, mean=mean, max=hi, hist=hist, over=over)


def _check_all(
    lines: Lines,
    head: tuple[int, str],
    figures: dict[tuple[int, str], Figure],
    cpus: list[int],
    kinds: tuple[str, ...],
) -> tuple[int, str] | None:
    """The 'ALL:' section of newer rtla: its counts, min and max must match the CPUs'."""
    lineno, line = head
    names = line.split()[1:]
    if tuple(_ALL_KIND.get(n) for n in names) != kinds:
        raise UserError(f"line {lineno}: 'ALL:' columns {' '.join(names)[:40]!r} do not match")
    summary, nxt = _summary(lines, next(lines, None), len(kinds))
    if summary is None:
        raise UserError(f"line {lineno}: truncated: no 'count:' line after 'ALL:'")
    for i, kind in enumerate(kinds):
        figs = [figures[cpu, kind] for cpu in cpus]
        count = sum(f.count or 0 for f in figs)
        where = f"'ALL:' {kind}"
        if integer(summary["count"][i], where) != count:
            raise UserError(f"{where}: count {summary['count'][i]} is not the CPUs' sum {count}")
        mins = [f.min for f in figs if f.count and f.min is not None]
        maxs = [f.max for f in figs if f.count and f.max is not None]
        if mins and (
            optional(summary["min"][i], where) != min(mins)
            or optional(summary["max"][i], where) != max(maxs)
        ):
            raise UserError(f"{where}: min/max do not match the CPUs'")
    return nxt


def parse_hist(text: str) -> Parsed:
    """The figures of a timerlat or osnoise histogram (TEXT with \\n line ends)."""
    lines = nonblank_lines(text)
    tool, unit, dur, lineno, line = _header(lines)
    cpus, kinds = _columns(tool, lineno, line)
    ncols = len(cpus) * len(kinds)
    rows = _Rows(ncols)
    over: list[int] | None = None
    for lineno, line in lines:
        if line.startswith("over:"):
            over = [integer(t, f"line {lineno}") for t in _values(line, "over", ncols, lineno)]
            break
        if line.startswith(("count:", "min:", "avg:", "max:", "#")):
            break
        rows.add(lineno, line)
    if over is None:
        raise UserError("truncated histogram: no 'over:' line after the rows")
    summary, nxt = _summary(lines, next(lines, None), ncols)
    figures: dict[tuple[int, str], Figure] = {}
    total = 0
    for c, cpu in enumerate(cpus):
        for k, kind in enumerate(kinds):
            i = c * len(kinds) + k
            where = f"CPU {cpu} {kind}"
            figures[cpu, kind] = fig = _figure(rows.columns[i], over[i], summary, i, where)
            total += fig.count or 0
            if total > MAX_SAMPLES:
                raise UserError("more than 2^53 samples over all CPUs")
    if nxt is not None and nxt[1].startswith("ALL:"):
        if summary is None:
            raise UserError(f"line {nxt[0]}: 'ALL:' without the per-CPU summary")
        nxt = _check_all(lines, nxt, figures, cpus, kinds)
    tail = _tail(nxt, lines)
    return Parsed(
        tool=tool,
        mode="hist",
        unit_ns=unit,
        duration_ns=dur,
        cpus=cpus,
        kinds=kinds,
        figures=figures,
        bucket_width=rows.gcd or None,
        summary=summary is not None,
        tail=tail,
    )


def _tail(first: tuple[int, str] | None, lines: Lines) -> dict[str, Any]:
    def rest() -> Lines:
        if first is not None:
            yield first
        yield from lines

    def checked() -> Lines:
        for lineno, line in rest():
            if HEAD.fullmatch(line):
                raise UserError(f"line {lineno}: a second '{line}' (concatenated runs?)")
            if line.startswith(("over:", "count:", "Index")):
                raise UserError(f"line {lineno}: unexpected {line[:30]!r} after the summary")
            yield lineno, line

    return parse_tail(checked())
