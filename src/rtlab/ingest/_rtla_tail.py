"""What rtla prints after its statistics: missed events, the stop, the auto-analysis.

    12 (0.07%) events missed, results might not be accurate
    timerlat hit stop tracing                  ("rtla timerlat hit ..." before 6.x)
    ## CPU 2 hit stop tracing, analyzing it ##
      Previous IRQ interference:              up to      1.10 us   (optional)
      IRQ handler delay:     (exit from idle)     27.49 us (65.52 %)
      IRQ latency:                                 28.13 us
      Timerlat IRQ duration:                        9.59 us (22.85 %)   (thread latency)
      Blocking thread:                              3.79 us (9.03 %)
                           objtool:49256            3.79 us
        Blocking thread stack trace                 ("stacktrace" before 6.5)
                    -> timerlat_irq
      NMI / IRQ / Softirq / Thread interference     0.52 us (1.24 %)
                       local_timer:236              0.52 us
    ------------------------------------------------------------------------
      Thread latency:                              41.96 us (100%)
    Max timerlat IRQ latency from idle: 17.48 us in cpu 1
    Printing CPU tasks:                             (--dump-tasks)
        [000]                     rtla:4711
    Saving trace to timerlat_trace.txt

The auto-analysis values are µs with two decimals whatever the unit of the statistics;
they become ns. Lines that are none of these (a captured stderr, a shell prompt) are
ignored, and so are lines and items past the bounds below, which keep a hostile tail
cheap.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from rtlab.errors import UserError
from rtlab.ingest._limits import INT32_LIMIT, INT64_MAX, MAX_LATENCY_NS
from rtlab.ingest._rtla_common import cpu_number

_US = r"([0-9]{1,15}(?:\.[0-9]{1,9})?) us"
_PCT = r"\s*\(\s*[0-9.]{1,30}\s*%\)"
_MISSED = re.compile(
    r"([0-9]{1,20}) \([0-9.]{1,30}%\) events missed, results might not be accurate"
)
_MISSED_UNKNOWN = "unknown number of events missed, results might not be accurate"
_STOPPED = re.compile(r"(?:rtla )?(?:timerlat|osnoise|hwnoise) hit stop tracing")
_CPU = re.compile(r"## CPU ([0-9]{1,10}) hit stop tracing, analyzing it ##")
_PREVIOUS = re.compile(r"Previous IRQ interference:\s*up to\s+" + _US)
_DELAY = re.compile(r"IRQ handler delay:\s*(\(exit from idle\))?\s*" + _US + _PCT)
_TOTAL = re.compile(r"(IRQ|Thread) latency:\s*" + _US + r"\s*\(100%\)")
_IRQ_LATENCY = re.compile(r"IRQ latency:\s*" + _US)
_IRQ_DURATION = re.compile(r"Timerlat IRQ duration:\s*" + _US + _PCT)
_BLOCKING = re.compile(r"Blocking thread:\s*(?:" + _US + _PCT + r")?")
_STACK = re.compile(r"Blocking thread stack ?trace")
_FRAME = re.compile(r"-> (.{1,512})")
_INTERFERENCE = re.compile(r"(NMI|IRQ|Softirq|Thread) interference\s*" + _US + _PCT)
_ITEM = re.compile(r"(.{0,64}):([0-9]{1,20})(?:\s+" + _US + r")?")
_IDLE = re.compile(r"Max timerlat IRQ latency from idle: " + _US + r" in cpu ([0-9]{1,10})")
_TASK = re.compile(r"\[([0-9]{1,10})\]\s+(.{1,512})")
_SAVING = re.compile(r"Saving trace to (.{1,4096})")
# Bounds: real output has one analysis per CPU that hit, a stack of a few dozen frames
_MAX_ANALYSES = 1 << 16
_MAX_ITEMS = 4096  # per list (stack frames, interference sources)
_MAX_TASKS = 1 << 16
_MAX_LINE = 4096  # characters: longer lines are no rtla output (and would cost regex time)


def _ns(text: str, where: str) -> int:
    ns = round(float(text) * 1000)
    if ns >= MAX_LATENCY_NS:
        raise UserError(f"{where}: {text} us is out of range")
    return ns


def _analysis(cpu: int) -> dict[str, Any]:
    return {
        "cpu": cpu,
        "latency": None,
        "latency_ns": None,
        "irq_handler_delay_ns": None,
        "exit_from_idle": False,
        "irq_latency_ns": None,
        "previous_irq_interference_ns": None,
        "timerlat_irq_duration_ns": None,
        "blocking_thread": None,
        "stack": [],
        "nmi_interference_ns": None,
        "irq_interference": None,
        "softirq_interference": None,
        "thread_interference": None,
    }


class _Tail:
    def __init__(self) -> None:
        self.missed: int | None = 0
        self.stopped = False
        self.analyses: list[dict[str, Any]] = []
        self.idle: dict[str, int] | None = None
        self.tasks: list[dict[str, Any]] = []
        self.trace_file: str | None = None
        self.cur: dict[str, Any] | None = None
        self.section: str | None = None  # where indented lines belong

    def line(self, lineno: int, line: str) -> None:
        where = f"line {lineno}"
        if m := _MISSED.fullmatch(line):
            self.missed = min(int(m.group(1)), INT64_MAX)
        elif line == _MISSED_UNKNOWN:
            self.missed = None
        elif _STOPPED.fullmatch(line):
            self.stopped = True
        elif m := _CPU.fullmatch(line):
            cpu = cpu_number(m.group(1), where)
            self.cur, self.section = None, None
            if len(self.analyses) < _MAX_ANALYSES:
                self.cur = _analysis(cpu)
                self.analyses.append(self.cur)
        elif m := _IDLE.fullmatch(line):
            cpu = cpu_number(m.group(2), where)
            self.idle = {"cpu": cpu, "latency_ns": _ns(m.group(1), where)}
            self.cur, self.section = None, None
        elif line == "Printing CPU tasks:":
            self.cur, self.section = None, "tasks"
        elif m := _SAVING.fullmatch(line):
            self.trace_file = m.group(1).strip()
        elif self.section == "tasks" and (m := _TASK.fullmatch(line)):
            if len(self.tasks) < _MAX_TASKS and int(m.group(1)) < INT32_LIMIT:
                self.tasks.append({"cpu": int(m.group(1)), "task": m.group(2).strip()})
        elif self.cur is not None:
            self._analysis_line(self.cur, line, where)

    def _analysis_line(self, a: dict[str, Any], line: str, where: str) -> None:
        if m := _TOTAL.fullmatch(line):
            a["latency"] = m.group(1).lower()
            a["latency_ns"] = _ns(m.group(2), where)
            self.cur, self.section = None, None
        elif m := _PREVIOUS.fullmatch(line):
            a["previous_irq_interference_ns"] = _ns(m.group(1), where)
        elif m := _DELAY.fullmatch(line):
            a["exit_from_idle"] = m.group(1) is not None
            a["irq_handler_delay_ns"] = _ns(m.group(2), where)
        elif m := _IRQ_LATENCY.fullmatch(line):
            a["irq_latency_ns"] = _ns(m.group(1), where)
        elif m := _IRQ_DURATION.fullmatch(line):
            a["timerlat_irq_duration_ns"] = _ns(m.group(1), where)
        elif m := _BLOCKING.fullmatch(line):
            ns = None if m.group(1) is None else _ns(m.group(1), where)
            a["blocking_thread"] = {"comm": None, "pid": None, "ns": ns}
            self.section = "blocking"
        elif _STACK.fullmatch(line):
            self.section = "stack"
        elif m := _INTERFERENCE.fullmatch(line):
            kind = m.group(1).lower()
            ns = _ns(m.group(2), where)
            if kind == "nmi":
                a["nmi_interference_ns"] = ns
                self.section = None
            else:
                a[f"{kind}_interference"] = {"ns": ns, "sources": []}
                self.section = kind
        elif self.section == "stack" and (m := _FRAME.fullmatch(line)):
            if len(a["stack"]) < _MAX_ITEMS:
                a["stack"].append(m.group(1).strip())
        elif self.section is not None and (m := _ITEM.fullmatch(line)):
            self._item(a, m, where)

    def _item(self, a: dict[str, Any], m: re.Match[str], where: str) -> None:
        name, number = m.group(1).strip(), min(int(m.group(2)), INT64_MAX)
        ns = None if m.group(3) is None else _ns(m.group(3), where)
        if self.section == "blocking" and a["blocking_thread"] is not None:
            a["blocking_thread"].update(comm=name, pid=number)
            if a["blocking_thread"]["ns"] is None:
                a["blocking_thread"]["ns"] = ns
            self.section = None
        elif self.section in ("irq", "softirq", "thread"):
            box = a[f"{self.section}_interference"]
            if len(box["sources"]) < _MAX_ITEMS:
                key = "pid" if self.section == "thread" else "vector"
                label = "comm" if self.section == "thread" else "name"
                box["sources"].append({label: name, key: number, "ns": ns})

    def result(self) -> dict[str, Any]:
        return {
            "missed_events": self.missed,
            "stopped": self.stopped,
            "auto_analysis": self.analyses,
            "max_irq_latency_from_idle": self.idle,
            "cpu_tasks": self.tasks,
            "trace_file": self.trace_file,
        }


def parse_tail(lines: Iterable[tuple[int, str]]) -> dict[str, Any]:
    """The tail's facts: missed_events (0 when none were reported, None when rtla could
    not count them), stopped, auto_analysis (one entry per CPU that hit the stop),
    max_irq_latency_from_idle, cpu_tasks and trace_file."""
    tail = _Tail()
    for lineno, line in lines:
        if len(line) <= _MAX_LINE:
            tail.line(lineno, line)
    return tail.result()
