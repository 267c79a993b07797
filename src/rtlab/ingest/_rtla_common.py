"""What the rtla parsers share: the raw figures they return and how they read numbers.

A figure is one latency series of one CPU as rtla printed it (timerlat's IRQ, thread or
user-return latency, osnoise's noise samples), in rtla's time unit (µs, or ns with -n).
Raises UserError with a one-line reason (the caller adds the file name).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from rtlab.errors import UserError
from rtlab.ingest._limits import INT64_MAX
from rtlab.system._cpus import MAX_CPUS

# A printed number: plain digits (counts, µs/ns values), at most 20 of them (2^64 - 1)
_INT = re.compile(r"[0-9]{1,20}")
_DECIMAL = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,9})?")
# "  0 00:01:00": days, then hours:minutes:seconds (rtla's get_duration)
_DURATION = re.compile(r"([0-9]{1,9}) ([0-9]{2}):([0-9]{2}):([0-9]{2})")
# Characters a printed value may take with its blanks: a longer line is refused before it
# is split (a hostile line of millions of numbers must not become a list of them)
CHARS_PER_VALUE = 64
# rtla's column kinds: timerlat IRQ, thread, user-return latency; osnoise noise
KINDS = ("irq", "thread", "user", "noise")


@dataclass
class Figure:
    """One CPU's latency series in rtla's unit: None where rtla printed '-' or nothing."""

    count: int | None = None
    min: int | None = None
    mean: float | None = None
    max: int | None = None
    hist: dict[int, int] | None = None  # bucket index as printed -> non-zero count
    over: int = 0  # samples above the histogram's range
    cur: int | None = None  # top: the last sample


@dataclass
class Parsed:
    """What a parser read from one file; `figures` maps (cpu, kind) to a Figure."""

    tool: str  # "timerlat", "osnoise" or "hwnoise"
    mode: str  # "hist" or "top"
    unit_ns: int  # 1000 (µs) or 1 (ns, -n)
    duration_ns: int | None
    cpus: list[int]
    kinds: tuple[str, ...]  # the figures each CPU has, in order
    figures: dict[tuple[int, str], Figure]
    bucket_width: int | None = None  # hist: the bucket width in units, None if unknown
    summary: bool = True  # hist: count/min/avg/max lines were printed
    screens: int = 1  # top: screens in the file (the last one is read)
    noise: dict[int, dict[str, Any]] = field(default_factory=dict)  # osnoise top: totals
    tail: dict[str, Any] = field(default_factory=dict)  # see _rtla_tail


def integer(tok: str, where: str, *, limit: int = INT64_MAX) -> int:
    """A non-negative printed integer of at most LIMIT."""
    if not _INT.fullmatch(tok):
        if tok.startswith("-") and _INT.fullmatch(tok[1:]):
            raise UserError(f"{where}: negative number {tok}")
        raise UserError(f"{where}: not a number: {tok[:20]!r}")
    value = int(tok)
    if value > limit:
        raise UserError(f"{where}: number {tok} is out of range")
    return value


def optional(tok: str, where: str) -> int | None:
    """An integer, or None for rtla's '-' (no samples)."""
    return None if tok == "-" else integer(tok, where)


def decimal(tok: str, where: str) -> float | None:
    """A printed decimal ("%9.2f") or integer, None for '-'."""
    if tok == "-":
        return None
    if not _DECIMAL.fullmatch(tok):
        raise UserError(f"{where}: not a number: {tok[:20]!r}")
    return float(tok)


def cpu_number(tok: str, where: str) -> int:
    """A CPU number: below MAX_CPUS (8192, the largest NR_CPUS Linux has), as every CPU
    number rtlab reads."""
    return integer(tok, where, limit=MAX_CPUS - 1)


def duration_ns(text: str) -> int | None:
    """rtla's "  0 00:01:00" (days hh:mm:ss) in ns; None when it is not one."""
    m = _DURATION.fullmatch(text.strip())
    if not m:
        return None
    d, h, mi, s = (int(g) for g in m.groups())
    if h > 23 or mi > 59 or s > 60:
        return None
    return (((d * 24 + h) * 60 + mi) * 60 + s) * 1_000_000_000


def ascending(cpus: list[int], where: str) -> None:
    """CPUs are printed in ascending order, each once."""
    for a, b in itertools.pairwise(cpus):
        if b <= a:
            raise UserError(f"{where}: CPU {b} after CPU {a}")
    if len(cpus) > MAX_CPUS:
        raise UserError(f"{where}: more than {MAX_CPUS} CPUs")


def short_enough(line: str, values: int, where: str) -> None:
    """Refuse LINE when it is longer than VALUES printed values can be."""
    if len(line) > (values + 1) * CHARS_PER_VALUE:
        raise UserError(f"{where}: a line of {len(line)} characters, too long for {values} values")
