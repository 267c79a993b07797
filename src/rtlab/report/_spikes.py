"""The report's section on late samples (cases run with the probe's --explain): the causes
ranked per case by `rtlab.analysis.rank_causes` (as `rtlab explain` prints them), the
explained spikes, and a timeline figure of the worst spikes of each case, each cause
beside the audit findings whose check concerns it."""

from __future__ import annotations

from typing import Any

from rtlab.analysis import cause_stack, rank_causes, related_findings, stopped_text
from rtlab.probe import one_line
from rtlab.report._data import CaseData, ExperimentData, SeriesData
from rtlab.report._spikeplot import spike_plot
from rtlab.report._style import Plot, case_title
from rtlab.report._tables import Table
from rtlab.units import format_ns

TITLE = "Why the worst samples were late"
#: Timeline figures per case (its worst spikes) and per report at most.
MAX_FIGURES_PER_CASE = 5
MAX_FIGURES = 40

Explained = tuple[ExperimentData, SeriesData, CaseData]


def _explained(exps: list[ExperimentData]) -> list[Explained]:
    return [(e, s, c) for e in exps for s in e.series for c in s.cases if c.explain is not None]


def _findings(e: ExperimentData) -> list[dict[str, Any]]:
    return list((e.audit or {}).get("findings") or [])


def _audit_cell(found: list[dict[str, Any]]) -> str:
    if not found:
        return ""
    first = f"{found[0].get('id')} {found[0].get('status')} ({found[0].get('title')})"
    return "; ".join([first] + [f"{f.get('id')} {f.get('status')}" for f in found[1:]])


def causes_table(exps: list[ExperimentData]) -> Table:
    """Per explained case, its causes ranked by total time over its spikes."""
    many = len(exps) > 1
    t = Table(
        "causes",
        "Causes of the late samples, ranked by total time over each case's spikes",
        (["setup"] if many else [])
        + ["series", "case", "#", "cause", "who", "total", "share", "spikes", "audit finding"],
        csv_columns=[
            "experiment",
            "setup",
            "series",
            "case",
            "rank",
            "kind",
            "name",
            "irq",
            "vector",
            "pids",
            "policies",
            "works",
            "total_ns",
            "share",
            "spikes",
            "audit",
        ],
    )
    for e, s, c in _explained(exps):
        findings = _findings(e)
        for rank, cause in enumerate(rank_causes(c.spikes), 1):
            found = related_findings(cause.to_dict(), findings)
            who = "; ".join(
                x
                for x in (
                    ("PID " + ", ".join(map(str, cause.pids))) if cause.pids else "",
                    " / ".join(cause.policies),
                    ("work " + ", ".join(cause.works)) if cause.works else "",
                )
                if x
            )
            t.rows.append(
                ([e.setup] if many else [])
                + [s.name, case_title(s, c), str(rank), cause.what, who]
                + [format_ns(cause.total_ns), f"{100 * cause.share:.1f} %", str(cause.spikes)]
                + [_audit_cell(found)]
            )
            t.row_class.append("fail" if any(f.get("status") == "FAIL" for f in found) else "")
            t.csv_rows.append(
                {
                    "experiment": e.id,
                    "setup": e.setup,
                    "series": s.name,
                    "case": c.case.name,
                    "rank": rank,
                    **{k: v for k, v in cause.to_dict().items() if k not in ("pids", "policies")},
                    "pids": " ".join(map(str, cause.pids)),
                    "policies": " ".join(p.replace(" ", ":") for p in cause.policies),
                    "works": " ".join(cause.works),
                    "share": round(cause.share, 6),
                    "audit": " ".join(f"{f.get('id')}:{f.get('status')}" for f in found),
                }
            )
    return _visible(t)


def _visible(t: Table) -> Table:
    """Control characters in names from the trace shown as escapes (the CSV keeps them)."""
    t.rows = [[one_line(c) for c in row] for row in t.rows]
    return t


def spikes_table(exps: list[ExperimentData]) -> Table:
    """Every explained spike with its verdict, worst first within each case."""
    many = len(exps) > 1
    t = Table(
        "spikes",
        "Explained spikes, worst first",
        (["setup"] if many else [])
        + ["series", "case", "#", "latency", "cycle", "thread / CPU", "verdict", "unexplained"]
        + ["kernel stack of the main cause"],
        csv_columns=[
            "experiment",
            "setup",
            "series",
            "case",
            "rank",
            "thread",
            "cpu",
            "cycle",
            "t_ns",
            "latency_ns",
            "unexplained_ns",
            "unexplained_idle_ns",
            "woken_ns",
            "switched_in_ns",
            "events_lost",
            "window_truncated",
            "verdict",
            "cause_stack",
            "cause_stack_unavailable",
        ],
    )
    for e, s, c in _explained(exps):
        for rank, sp in enumerate(c.spikes, 1):
            notes = [("events lost" if sp.get("events_lost") else "")]
            notes.append("window cut short" if sp.get("window_truncated") else "")
            verdict = str(sp.get("verdict") or "")
            if any(notes):
                verdict += " (" + ", ".join(n for n in notes if n) + ")"
            t.rows.append(
                ([e.setup] if many else [])
                + [s.name, case_title(s, c), str(rank), format_ns(sp.get("latency_ns"))]
                + [str(sp.get("cycle")), f"{sp.get('thread')} / {sp.get('cpu')}", verdict]
                + [format_ns(sp.get("unexplained_ns") or 0), _stack_cell(sp)]
            )
            t.csv_rows.append(
                {
                    "experiment": e.id,
                    "setup": e.setup,
                    "series": s.name,
                    "case": c.case.name,
                    "rank": rank,
                    **{k: sp.get(k) for k in t.csv_columns[5:-2]},
                    **_stack_csv(sp),
                }
            )
    return _visible(t)


def _stack_cell(sp: dict[str, Any]) -> str:
    st = cause_stack(sp)
    return "" if st is None else stopped_text(st)


def _stack_csv(sp: dict[str, Any]) -> dict[str, Any]:
    """The whole stack, frames joined by ';' (innermost first), or why there is none."""
    st = cause_stack(sp)
    return {
        "cause_stack": ";".join(st.frames) if st else "",
        "cause_stack_unavailable": (st.unavailable or "") if st else "",
    }


def _notes(explained: list[Explained], many: bool) -> list[str]:
    notes = []
    for e, s, c in explained:
        where = (f"{e.setup}: " if many else "") + f"{s.name} / {case_title(s, c)}"
        ex = c.explain or {}
        if ex.get("status") != "ok":
            notes.append(f"{where}: no explanation ({ex.get('reason') or 'unavailable'})")
        elif not c.spikes:
            dl = ex.get("threshold_ns")
            over = f" over {format_ns(dl)}" if isinstance(dl, int | float) else ""
            notes.append(f"{where}: no sample{over}")
    return notes


def spike_parts(
    exps: list[ExperimentData],
) -> tuple[str, list[tuple[str, Plot]], list[Table]] | None:
    """(intro, timeline figures, tables) of the section, or None when no case has a spike."""
    explained = _explained(exps)
    if not any(c.spikes for _, _, c in explained):
        return None
    many = len(exps) > 1
    plots: list[tuple[str, Plot]] = []
    left = 0
    for i, e in enumerate(exps):
        findings = _findings(e)
        for _, s, c in [x for x in explained if x[0] is e]:
            for n, sp in enumerate(c.spikes[:MAX_FIGURES_PER_CASE], 1):
                if len(plots) >= MAX_FIGURES:
                    left += 1
                    continue
                title = (
                    (f"{e.setup}: " if many else "")
                    + f"{s.name} / {case_title(s, c)}: spike {n}, "
                    + f"{format_ns(sp.get('latency_ns'))} late"
                )
                plot = spike_plot(sp, title, e.deadline_ns, findings)
                plots.append((f"fig-spike-{i}-{c.case.index}-{n}", plot))
    intro = (
        "For the cases run with the probe's --explain: each late sample's latency split "
        "into what ran on its CPU (threads, interrupts, softirqs, timers) and the time no "
        "traced event covers (unexplained: interrupts off, non-preemptible kernel code, an "
        "idle state waking up, SMI or hypervisor). The causes are ranked by their total time "
        "over a case's spikes; 'audit finding' names the FAIL and WARN findings of the "
        "experiment's audit whose check concerns the cause. Timelines of the "
        f"{MAX_FIGURES_PER_CASE} worst spikes of each case follow, one lane per thread, "
        "interrupt, softirq, timer, idle and unexplained time, in µs relative to the "
        "intended activation. The spikes table's last column is the kernel code the timer "
        "interrupt stopped while the main cause held the CPU (the innermost frames of its "
        "kernel stack), 'user space', or why there is no stack."
    )
    notes = _notes(explained, many)
    if left:
        notes.append(f"{left} more spike timeline(s) not drawn (at most {MAX_FIGURES})")
    if notes:
        intro += " " + one_line("; ".join(notes)) + "."
    return intro, plots, [causes_table(exps), spikes_table(exps)]
