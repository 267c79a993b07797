"""rtlab explain: why the worst samples of an experiment were late (the probe's --explain)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from rtlab.analysis import (
    CauseTotal,
    cause_stack,
    describe,
    explanation,
    policy_text,
    rank_causes,
    related_findings,
    segments,
    stopped_text,
)
from rtlab.cli._common import (
    console,
    line,
    lit,
    print_json,
    results_option,
    store_from,
)
from rtlab.errors import UserError
from rtlab.records import CaseRecord
from rtlab.results import effective_deadline
from rtlab.store import ExperimentRecord
from rtlab.units import format_ns

#: Stack frames printed per spike at most; --json has them all.
MAX_STACK_ROWS = 16
#: Timeline rows printed per spike at most; --json has them all.
MAX_ROWS = 40


def _ns(v: Any) -> str:
    """A duration from the document, "?" when it is not a number."""
    ok = isinstance(v, int | float) and not isinstance(v, bool)
    return format_ns(v) if ok else "?"


def _items(v: Any) -> list:
    return v if isinstance(v, list) else []


def rerun_hint(rec: ExperimentRecord) -> str:
    """How to get an explanation: run the experiment again with --explain."""
    source = rec.manifest.source
    what = source if source and not source.startswith("import:") else "…"
    return f"rerun with `rtlab run {what} --explain 100us`"


@dataclass
class Explained:
    """One selected case: the document's explanation, its spikes and their ranking."""

    case: CaseRecord
    doc: dict[str, Any]
    explain: dict[str, Any] | None
    spikes: list[dict[str, Any]]
    summary: list[CauseTotal]

    @property
    def title(self) -> str:
        return f"case {self.case.index}: {self.case.series} / {self.case.name}"


def select_cases(rec: ExperimentRecord, text: str | None) -> list[CaseRecord]:
    """Every finished case, or the one CASE names: its number (as in `show --json`'s
    "index"), its name, SERIES/NAME, or its swept value when only one case has it."""
    if text is None:
        if not rec.done_cases:
            raise UserError(f"{rec.id}: no finished case")
        return rec.done_cases
    cases = rec.cases
    if text.isdigit():
        if int(text) >= len(cases):
            raise UserError(f"{rec.id}: no case number {text} (0..{len(cases) - 1})")
        found = [cases[int(text)]]
    else:
        found = (
            [c for c in cases if c.name == text]
            or [c for c in cases if text in (f"{c.series}/{c.name}", f"{c.series} / {c.name}")]
            or [c for c in cases if c.label == text]
        )
    if len(found) > 1:
        which = ", ".join(f"{c.index} ({c.series} / {c.name})" for c in found[:6])
        raise UserError(f"{rec.id}: case {text!r} is ambiguous: {which}; give its number")
    if not found:
        names = ", ".join(f"{c.index} {c.name}" for c in cases[:8])
        more = f" and {len(cases) - 8} more" if len(cases) > 8 else ""
        raise UserError(f"{rec.id}: no case {text!r} (cases: {names or 'none'}{more})")
    case = found[0]
    if not case.done:
        raise UserError(f"{rec.id}: case {case.index} ({case.series} / {case.name}) has not run")
    return found


def explained_cases(rec: ExperimentRecord, cases: list[CaseRecord]) -> list[Explained]:
    out = []
    for case in cases:
        doc = rec.document(case)
        explain, spikes = explanation(doc)
        out.append(Explained(case, doc, explain, spikes, rank_causes(spikes)))
    return out


def _audit_findings(rec: ExperimentRecord) -> list[dict[str, Any]]:
    from rtlab.report._data import load_audit

    audit = load_audit(rec.path)
    return audit["findings"] if audit else []


def _summary_dicts(e: Explained, findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **c.to_dict(),
            "audit": [
                {"id": f.get("id"), "status": f.get("status"), "title": f.get("title")}
                for f in related_findings(c.to_dict(), findings)
            ],
        }
        for c in e.summary
    ]


@click.command()
@click.argument("experiment_id")
@click.argument("case", required=False)
@results_option
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout")
def explain(experiment_id: str, case: str | None, results_dir: str, as_json: bool) -> int:
    """Why the worst samples of EXPERIMENT_ID were late, from cases run with the probe's
    --explain: causes ranked over all spikes, then each spike's verdict and timeline.

    CASE picks one case: its number, name, SERIES/NAME or swept value. Exit 2 when no
    selected case was run with --explain.
    """
    rec = store_from(results_dir).open(experiment_id)
    cases = explained_cases(rec, select_cases(rec, case))
    if not any(e.explain is not None for e in cases):
        if len(cases) == 1:
            raise UserError(
                f"{rec.id}: {cases[0].title} was run without --explain; {rerun_hint(rec)}"
            )
        raise UserError(f"{rec.id}: no case was run with --explain; {rerun_hint(rec)}")
    findings = _audit_findings(rec)
    if as_json:
        print_json(
            {
                "id": rec.id,
                "cases": [
                    {
                        "case": {
                            "index": e.case.index,
                            "series": e.case.series,
                            "name": e.case.name,
                            "label": e.case.label,
                            "meter": e.doc.get("meter"),
                        },
                        "explain": e.explain,
                        "spikes": e.spikes,
                        "summary": _summary_dicts(e, findings),
                    }
                    for e in cases
                ],
            }
        )
        return 0
    out = console()
    out.print(line((rec.id, "bold"), f"  {rec.name}"))
    deadline = effective_deadline(rec, None)
    for e in cases:
        _print_case(out, e, findings, deadline)
    return 0


def _print_case(
    out: Console, e: Explained, findings: list[dict[str, Any]], deadline: int | None
) -> None:
    ex = e.explain
    out.print()
    if ex is None:
        out.print(line((e.title, "bold"), ": run without --explain"))
        return
    if ex.get("status") != "ok":
        out.print(line((e.title, "bold"), f": explanation unavailable: {ex.get('reason') or '?'}"))
        return
    threshold = _ns(ex.get("threshold_ns"))
    marked = ex.get("marked")
    out.print(
        line(
            (e.title, "bold"),
            f": {len(e.spikes)} spike(s) explained of {marked if marked is not None else '?'} "
            f"sample(s) over {threshold}",
        )
    )
    cpus = ",".join(str(c) for c in _items(ex.get("cpus"))) or "?"
    traced = f"  traced CPUs {cpus}, {len(_items(ex.get('events')))} event(s)"
    traced += f", trace clock {ex.get('trace_clock') or '?'}, {ex.get('lost_events') or 0} lost"
    out.print(line(traced))
    if _items(ex.get("missing_events")):
        out.print(line("  events not available: " + ", ".join(map(str, ex["missing_events"]))))
    if not e.spikes:
        out.print(line(f"  no sample over {threshold}: nothing to explain"))
        return
    _print_summary(out, e, findings)
    threads = e.doc.get("threads") or []
    for n, s in enumerate(e.spikes, 1):
        _print_spike(out, n, len(e.spikes), s, threads, deadline)


def _detail(c: CauseTotal) -> str:
    parts = []
    if c.pids:
        shown = ", ".join(map(str, c.pids[:4])) + (", …" if len(c.pids) > 4 else "")
        parts.append(f"PID {shown}")
    if c.policies:
        parts.append(" / ".join(c.policies))
    if c.works:
        parts.append("work " + ", ".join(c.works))
    return "; ".join(parts)


def _print_summary(out: Console, e: Explained, findings: list[dict[str, Any]]) -> None:
    total = sum(s.get("latency_ns") or 0 for s in e.spikes)
    rows: list[list[str]] = []
    first: dict[Any, dict[str, Any]] = {}  # finding id -> finding
    for i, c in enumerate(e.summary, 1):
        found = related_findings(c.to_dict(), findings)
        if found:  # the most direct finding of each cause gets its fix printed below
            first.setdefault(found[0].get("id"), found[0])
        audit = ", ".join(f"{f.get('id')} {f.get('status')}" for f in found[:2])
        audit += f" (+{len(found) - 2})" if len(found) > 2 else ""
        rows.append(
            [
                str(i),
                c.what,
                _detail(c),
                format_ns(c.total_ns),
                f"{100 * c.share:.1f} %",
                str(c.spikes),
                audit,
            ]
        )
    title = f"causes over {len(e.spikes)} spike(s), {format_ns(total)} of latency in all"
    out.print(_table(title, ["#", "cause", "<who", "total", "share", "spikes", "<audit"], rows))
    for f in first.values():
        fix = f"; fix: {f['fix']}" if f.get("fix") else ""
        out.print(line(f"  audit {f.get('id')} {f.get('status')}: {f.get('title')}{fix}"))


def _table(title: str | None, headers: list[str], rows: list[list[str]]) -> Table:
    """A table whose columns are right-aligned unless the header starts with "<", like
    the cause or the audit findings (the first column is the row's label)."""
    table = Table(title=lit(title) if title else None, title_justify="left", header_style="bold")
    for i, h in enumerate(headers):
        left = h.startswith("<") or (i == 1 and h == "cause")
        table.add_column(lit(h.lstrip("<")), justify="left" if left else "right", no_wrap=i < 2)
    for r in rows:
        table.add_row(*[lit(c) for c in r])
    return table


def _rel(ns: int) -> str:
    return ("+" if ns > 0 else "") + format_ns(ns) if ns else "0"


def _print_spike(
    out: Console, n: int, of: int, s: dict[str, Any], threads: list[Any], deadline: int | None
) -> None:
    latency = s.get("latency_ns") or 0
    out.print()
    out.print(line((f"spike {n} of {of}: ", "bold"), (str(s.get("verdict") or "?"), "bold")))
    idx = s.get("thread")
    t = threads[idx] if isinstance(idx, int) and 0 <= idx < len(threads) else {}
    tid = f" (TID {t['tid']})" if isinstance(t, dict) and t.get("tid") is not None else ""
    text = f"  latency {format_ns(latency)}"
    if deadline is not None:
        text += f" (deadline {format_ns(deadline)})"
    text += f", cycle {s.get('cycle')}, thread {idx}{tid} on CPU {s.get('cpu')}"
    if s.get("t_ns") is not None:
        text += f", {_ns(s['t_ns'])} after it started"
    out.print(line(text))
    steps = []
    if s.get("woken_ns") is not None:
        steps.append(f"woken after {_ns(s['woken_ns'])}")
    if s.get("switched_in_ns") is not None:
        steps.append(f"switched in after {_ns(s['switched_in_ns'])}")
    text = f"unexplained {format_ns(s.get('unexplained_ns') or 0)}"
    if s.get("unexplained_idle_ns"):
        text += f" ({_ns(s['unexplained_idle_ns'])} of it with the CPU idle)"
    steps.append(text)
    out.print(line("  " + ", ".join(steps)))
    if s.get("events_lost"):
        out.print(line(("  trace events were lost around this spike", "yellow")))
    if s.get("window_truncated"):
        out.print(line(("  the look-back window was cut short", "yellow")))
    if s.get("timeline_dropped"):
        out.print(line(("  the earliest timeline segments were dropped", "yellow")))
    segs = segments(s)
    shown = segs if len(segs) <= MAX_ROWS else [g for g in segs if g["end_ns"] > 0][:MAX_ROWS]
    rows = [
        [
            _rel(g["start_ns"]),
            _rel(g["end_ns"]),
            format_ns(g["end_ns"] - g["start_ns"]),
            _what(g),
        ]
        for g in shown
    ]
    out.print(_table(None, ["start", "end", "duration", "<what"], rows))
    if len(shown) < len(segs):
        out.print(line(f"  {len(segs) - len(shown)} more segment(s): rtlab explain --json"))
    _print_stack(out, s)


def _print_stack(out: Console, s: dict[str, Any]) -> None:
    """The kernel stack of the main cause: the code the timer interrupt stopped."""
    st = cause_stack(s)
    if st is None:
        return
    if st.unavailable or st.user:
        out.print(line(("  kernel stack of the main cause: ", "bold"), stopped_text(st)))
        return
    at = f", {_ns(st.at_ns)} after the activation" if st.at_ns is not None else ""
    out.print(line(("  kernel stack of the main cause", "bold"), f" (timer interrupt{at}):"))
    for f in st.stopped[:MAX_STACK_ROWS]:
        out.print(line(f"    {f}"))
    more = len(st.stopped) - MAX_STACK_ROWS
    if more > 0 or st.truncated:
        out.print(
            line(
                f"    … {max(more, 0)} more frame(s){' (cut by the probe)' if st.truncated else ''}"
            )
        )


def _what(g: dict) -> str:
    text = describe(g)
    if g.get("pid") is not None:
        text += f" (PID {g['pid']}"
        p = policy_text(g)
        text += f", {p})" if p else ")"
    return text
