"""Parse `rtla timerlat top`, `rtla osnoise top` and `rtla hwnoise` output.

timerlat (-u adds the "Ret user" block; -n prints ns):

                                         Timer Latency
      0 00:00:10   |          IRQ Timer Latency (us)        |         Thread Timer Latency (us)
    CPU COUNT      |      cur       min       avg       max |      cur       min       avg       max
      0 #10000     |        1         0         0         3 |        3         2         2        12
      1 #10000     |        -         -         -         - |        3         2         2        12
    ---------------|----------------------------------------|---------------------------------------
    ALL #20000  e0 |                  0         0         3 |                  2         2        12

osnoise (always µs; hwnoise has no IRQ, Softirq and Thread columns):

                                          Operating System Noise
    duration:   0 00:01:00 | time is in us
    CPU Period       Runtime        Noise  % CPU Aval   Max Noise   Max Single          HW ...
      0 #59         53100000       304896    99.42580        6978           56         549 ...

Without -q, top redraws its screen every second ("\\033c" clears it, a terminal also
gets colours): a captured file holds many screens and the last one is the result. The
last screen must be as complete as the one before (as many CPU rows, its ALL line when
that one had one). The ALL line (newer rtla) is a summary and is not read: its count is
rounded to six digits. timerlat top prints one count per CPU, of the IRQ activations;
the thread and user-return figures get the same count (it differs only when events were
lost, by one activation in flight at the stop).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from rtlab.errors import UserError
from rtlab.ingest._rtla_common import (
    MAX_CPUS,
    Figure,
    Parsed,
    ascending,
    cpu_number,
    duration_ns,
    integer,
    optional,
    short_enough,
)
from rtlab.ingest._rtla_tail import parse_tail
from rtlab.ingest._text import nonblank_lines

# The duration before the first '|' ([^|]: no backtracking over long blank runs)
TIMERLAT_HEAD = re.compile(
    r"([^|]*)\|\s*IRQ Timer Latency \((us|ns)\)\s*\|\s*Thread Timer Latency \((?:us|ns)\)"
    r"(\s*\|\s*Ret user Timer Latency \((?:us|ns)\))?"
)
OSNOISE_HEAD = re.compile(r"duration:([^|]*)\|\s*time is in us")
_TIMERLAT_COLS = re.compile(
    r"CPU COUNT\s*\|\s*cur\s+min\s+avg\s+max\s*\|\s*cur\s+min\s+avg\s+max"
    r"(\s*\|\s*cur\s+min\s+avg\s+max)?"
)
_OSNOISE_COLS = re.compile(
    r"CPU Period\s+Runtime\s+Noise\s+% CPU Aval\s+Max Noise\s+Max Single\s+HW\s+NMI"
    r"(\s+IRQ\s+Softirq\s+Thread)?"
)
_TITLES = ("Timer Latency", "Operating System Noise", "Hardware-related Noise")
_CPU_ROW = re.compile(r"([0-9]{1,12}) #([0-9]{1,20})\s*(.*)")
_SEPARATOR = re.compile(r"-+(?:\|-+)+")
_ALL = re.compile(r"ALL #[0-9]{1,20}\s+e[0-9]{1,3}\s*\|.*")
_PCT = re.compile(r"-?[0-9]{1,12}\.-?[0-9]{1,9}")
_MAX_TAIL = 1 << 16  # lines kept after the last screen (an auto-analysis is far shorter)
_INTERFERENCE = ("hw", "nmi", "irq", "softirq", "thread")


@dataclass
class _Screen:
    lineno: int
    unit_ns: int
    duration_ns: int | None
    wide: bool  # timerlat -u (user-return block), osnoise (not hwnoise)
    cols: bool = False  # the column header was seen
    rows: dict[int, Any] | None = None
    last: int = -1  # the last CPU row's CPU
    separator: bool = False
    all_line: bool = False


def _timerlat_row(rest: str, wide: bool, where: str) -> dict[str, Figure]:
    groups = rest.split("|")
    want = 3 if wide else 2
    if len(groups) != want:
        raise UserError(f"{where}: {len(groups)} '|'-separated blocks, expected {want}")
    out = {}
    for kind, group in zip(("irq", "thread", "user"), groups, strict=False):
        toks = group.split()
        if len(toks) != 4:
            raise UserError(f"{where}: {kind} block has {len(toks)} values, expected 4")
        if all(t == "-" for t in toks):
            out[kind] = Figure(count=0)
            continue
        values = [optional(t, where) for t in toks]
        if None in values:
            raise UserError(f"{where}: {kind} block mixes '-' and numbers")
        cur, lo, avg, hi = (v or 0 for v in values)
        out[kind] = Figure(min=lo, mean=float(avg), max=hi, cur=cur)
    return out


def _osnoise_row(rest: str, wide: bool, where: str) -> dict[str, Any]:
    toks = rest.split()
    want = 10 if wide else 7
    if len(toks) != want:
        raise UserError(f"{where}: {len(toks)} values after the period count, expected {want}")
    if not _PCT.fullmatch(toks[2]):
        raise UserError(f"{where}: not a percentage: {toks[2][:20]!r}")
    row: dict[str, Any] = {
        "runtime": integer(toks[0], where),
        "noise": integer(toks[1], where),
        "max_noise": integer(toks[3], where),
        "max_single": integer(toks[4], where),
    }
    row["interference"] = {
        name: integer(tok, where) for name, tok in zip(_INTERFERENCE, toks[5:], strict=False)
    }
    return row


class _TopReader:
    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.head = TIMERLAT_HEAD if tool == "timerlat" else OSNOISE_HEAD
        self.cols = _TIMERLAT_COLS if tool == "timerlat" else _OSNOISE_COLS
        self.screens: list[_Screen] = []  # the last two
        self.count = 0
        self.tail: list[tuple[int, str]] = []

    @property
    def screen(self) -> _Screen | None:
        return self.screens[-1] if self.screens else None

    def start(self, lineno: int, m: re.Match[str]) -> None:
        if self.tool == "timerlat":
            unit, wide = (1 if m.group(2) == "ns" else 1000), m.group(3) is not None
        else:
            unit, wide = 1000, True
        if len(self.screens) == 2:  # only the last two are compared
            self.screens.pop(0)
        self.screens.append(_Screen(lineno, unit, duration_ns(m.group(1)), wide))
        self.count += 1
        self.tail = []

    def line(self, lineno: int, line: str) -> None:
        where = f"line {lineno}"
        s = self.screen
        if m := self.head.fullmatch(line):
            self.start(lineno, m)
        elif s is None:
            return  # before the first screen: a shell prompt, a title
        elif not s.cols:
            m = self.cols.fullmatch(line)
            if not m:
                raise UserError(f"{where}: expected the column header after line {s.lineno}")
            if self.tool == "timerlat" and (m.group(1) is not None) != s.wide:
                raise UserError(f"{where}: the column header does not match line {s.lineno}")
            s.wide = m.group(1) is not None
            s.cols, s.rows = True, {}
        elif s.separator and not s.all_line:
            if not _ALL.fullmatch(line):
                raise UserError(f"{where}: expected the 'ALL #...' line after the separator")
            s.all_line = True
        elif self.tail or s.all_line or line.startswith(_TITLES):
            if len(self.tail) < _MAX_TAIL:
                self.tail.append((lineno, line))
        elif m := _CPU_ROW.fullmatch(line):
            self.row(s, m, where)
        elif _SEPARATOR.fullmatch(line) and self.tool == "timerlat":
            s.separator = True
        elif _ALL.fullmatch(line) and self.tool == "timerlat":
            s.all_line = True
        else:
            self.tail.append((lineno, line))

    def row(self, s: _Screen, m: re.Match[str], where: str) -> None:
        short_enough(m.group(0), 16, where)  # a CPU row has at most 14 values
        if s.rows is None:
            s.rows = {}
        cpu = cpu_number(m.group(1), where)
        if s.rows and cpu <= s.last:
            raise UserError(f"{where}: CPU {cpu} after CPU {s.last}")
        if len(s.rows) >= MAX_CPUS:
            raise UserError(f"{where}: more than {MAX_CPUS} CPUs")
        s.last = cpu
        count = integer(m.group(2), where)
        rest = m.group(3)
        if self.tool == "timerlat":
            if not rest.startswith("|"):
                raise UserError(f"{where}: expected '|' after the count")
            figs = _timerlat_row(rest[1:], s.wide, where)
            for f in figs.values():
                if f.count is None:
                    f.count = count
            s.rows[cpu] = figs
        else:
            row = _osnoise_row(rest, s.wide, where)
            row["periods"] = count
            s.rows[cpu] = row

    def finish(self) -> _Screen:
        s = self.screen
        if s is None:
            raise UserError("no statistics screen")
        if not s.cols:
            raise UserError(f"truncated: no column header after line {s.lineno}")
        if not s.rows:
            raise UserError(f"no CPU rows after line {s.lineno}")
        if s.separator and not s.all_line:
            raise UserError("truncated: no 'ALL #...' line after the separator")
        if len(self.screens) == 2:
            before = self.screens[0]
            if len(s.rows) < len(before.rows or {}) or (before.all_line and not s.all_line):
                raise UserError(
                    f"truncated: the last screen (line {s.lineno}) is shorter than the one "
                    f"before (line {before.lineno})"
                )
        return s


def parse_top(text: str, tool: str) -> Parsed:
    """The last screen of a timerlat or osnoise/hwnoise top output (\\n line ends)."""
    reader = _TopReader(tool)
    for lineno, line in nonblank_lines(text):
        reader.line(lineno, line)
    s = reader.finish()
    rows = s.rows or {}
    cpus = sorted(rows)
    ascending(cpus, f"line {s.lineno}")
    tail = parse_tail(iter(reader.tail))
    if tool == "timerlat":
        kinds = ("irq", "thread", "user") if s.wide else ("irq", "thread")
        figures = {(cpu, k): rows[cpu][k] for cpu in cpus for k in kinds}
        return Parsed(
            tool="timerlat",
            mode="top",
            unit_ns=s.unit_ns,
            duration_ns=s.duration_ns,
            cpus=cpus,
            kinds=kinds,
            figures=figures,
            screens=reader.count,
            tail=tail,
        )
    noise = {cpu: rows[cpu] for cpu in cpus}
    figures = {(cpu, "noise"): Figure(max=noise[cpu]["max_single"]) for cpu in cpus}
    return Parsed(
        tool="osnoise" if s.wide else "hwnoise",
        mode="top",
        unit_ns=1000,
        duration_ns=s.duration_ns,
        cpus=cpus,
        kinds=("noise",),
        figures=figures,
        screens=reader.count,
        noise=noise,
        tail=tail,
    )
