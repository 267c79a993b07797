"""rtlab show: statistics per series of one experiment."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console

from rtlab._appaudit import app_audit_lines, read_app_audit
from rtlab.analysis import (
    EXPORT_METRICS,
    METRICS,
    PRODUCTION_HEADERS,
    TABLE_COUNTS,
    TABLE_METRICS,
    Estimate,
    PivotSpec,
    advice_text,
    conditions_summary,
    irq_label,
    parse_pivot,
    pivot,
    production,
    production_row,
)
from rtlab.cli._common import (
    DURATION,
    check_exclusive,
    console,
    line,
    output_options,
    print_csv,
    print_json,
    print_views,
    results_option,
    rich_table,
    store_from,
    verdict,
    verdict_fields,
)
from rtlab.cli._pwcet import (
    CSV_FIELDS,
    cell,
    csv_fields,
    method_text,
    pwcet_options,
    resolve,
    title,
    to_json,
)
from rtlab.errors import UserError
from rtlab.results import (
    CaseConditions,
    all_case_stats,
    by_series,
    case_below,
    case_tail,
    effective_deadline,
    experiment_conditions,
    meter_tables,
    pivot_cases,
    setup_label,
    setup_labels,
    stats_rows,
)
from rtlab.store import ExperimentRecord

if TYPE_CHECKING:
    from rtlab.monitor import MonitorRecord
from rtlab.units import format_ns

CSV_COLUMNS = ["experiment", "series", "case", "label", *EXPORT_METRICS, "deadline_ns"]
#: Kernel messages of a case printed (all of them in --json).
SHOWN_MESSAGES = 5
SHOWN = [METRICS[k] for k in (*TABLE_METRICS, "variance", *TABLE_COUNTS)]


@click.command()
@click.argument("experiment_ids", nargs=-1, required=True)
@click.option(
    "--deadline", type=DURATION, help="count samples above this, e.g. 100us; exit 1 if exceeded"
)
@click.option(
    "--below",
    "bounds",
    type=DURATION,
    multiple=True,
    metavar="B",
    help="add the share of samples at or below B, e.g. 100us (repeatable)",
)
@click.option(
    "--pivot",
    "pivots",
    multiple=True,
    metavar="ROWS:COLS[:STAT]",
    help="a case key on rows, one on columns, a statistic in the cells, e.g. setup:load:p99 "
    "(repeatable; see docs/reports.md)",
)
@pwcet_options
@results_option
@output_options
def show(
    experiment_ids: tuple[str, ...],
    deadline: int | None,
    bounds: tuple[int, ...],
    pivots: tuple[str, ...],
    pwcet: str | None,
    pwcet_rate: str,
    results_dir: str,
    as_json: bool,
    as_csv: bool,
) -> int:
    """Statistics of EXPERIMENT_IDS: a table per series, one row per swept value.

    With a deadline (--deadline, or the experiment's own) the verdict is FAIL, and the
    exit status 1, when any case's maximum exceeds it. With --pwcet P, each case's
    latency exceeded with probability P per activation, or why it has none. With
    --pivot ROWS:COLS[:STAT], a table of STAT (default max) with one case key on rows
    and one on columns over every experiment given, e.g. setup:load:p99 or
    policy:load:below:100us; several experiments need --pivot.
    """
    check_exclusive(as_json, as_csv)
    mon = _monitor(results_dir, experiment_ids)
    if mon is not None:  # `rtlab monitor`: its own view (docs/monitor.md)
        from rtlab.cli._monitor_show import show_monitor

        if as_csv or bounds or pivots or pwcet:
            raise UserError(f"{mon.id} is a monitor: it takes --deadline and --json only")
        return show_monitor(mon, deadline, as_json)
    p, rate = resolve(pwcet, pwcet_rate)
    specs = [parse_pivot(t) for t in pivots]
    if len(experiment_ids) > 1 and not specs:
        raise UserError("several experiments are shown side by side with --pivot ROWS:COLS")
    if as_csv and len(specs) > 1:
        raise UserError("--csv prints one table: give one --pivot")
    store = store_from(results_dir)
    if specs:
        recs = [store.open(i) for i in experiment_ids]
        if len({r.id for r in recs}) < len(recs):
            raise UserError("an experiment is named twice")
        return _show_pivots(recs, specs, deadline, as_json, as_csv)
    rec = store.open(experiment_ids[0])
    stats = all_case_stats(rec, deadline)
    rows = stats_rows(rec, deadline, stats)
    estimates: dict[int, Estimate] = {}
    if p is not None:
        cases = {c.index: c for c in rec.done_cases}
        for row in rows:
            est = case_tail(rec, cases[row["index"]]).estimate(p)
            estimates[row["index"]] = est
            row["pwcet"] = to_json(est, rate)
            row.update(csv_fields(est))
    below_columns = [f"below_{b}ns" for b in bounds]
    shown_shares: dict[tuple[int, str], str] = {}
    if bounds:
        cases = {c.index: c for c in rec.done_cases}
        for row in rows:
            for b, col in zip(bounds, below_columns, strict=True):
                share = case_below(rec, cases[row["index"]], b)
                row[col] = None if math.isnan(share.value) else share.value
                shown_shares[(row["index"], col)] = share.text()
    dl = effective_deadline(rec, deadline)
    virt = rec.manifest.virtualization
    conditions = experiment_conditions(rec)
    status, verdict_line = verdict(rows, dl, virt, conditions)
    views = meter_tables(rec, deadline, stats)
    if as_json:
        print_json(
            {
                "id": rec.id,
                "name": rec.name,
                "complete": rec.complete,
                "setup": setup_label(rec),
                "notes": rec.manifest.notes,
                "deadline_ns": dl,
                **verdict_fields(status, dl, virt, conditions),
                "rows": rows,
                "conditions": [
                    {"index": c.index, "series": c.series, "case": c.case} | c.conditions.to_json()
                    for c in conditions
                ],
                "meters": {view.meter: vrows for view, vrows in views},
                "app_audit": [
                    {"index": c.index, "series": c.series, "case": c.name}
                    | {k: v for k, v in d.items() if k != "facts"}
                    for c in rec.done_cases
                    if (d := read_app_audit(rec.path, c)) is not None
                ],
                "production": [
                    {"index": c.index, "series": c.series, "case": c.name} | p
                    for c, p in _production(rec)
                ],
            }
        )
        return status
    if as_csv:
        print_csv(rows, CSV_COLUMNS + below_columns + (CSV_FIELDS if p is not None else []))
        return status
    out = console()
    pending = sum(not c.done for c in rec.cases)
    out.print(
        line(
            (rec.id, "bold"),
            f"  {rec.name}",
            (f"  incomplete: {pending} case(s) not run" if pending else "", "yellow"),
        )
    )
    out.print(line(f"  system: {setup_label(rec)}"))
    for note in rec.manifest.notes:
        out.print(line(f"  {note}"))
    for series, srows in by_series(rows).items():
        if views and not any(r["count"] for r in srows):
            continue  # no latencies (e.g. throughput): the meter's own table says it all
        swept = rec.series_record(series).swept
        headers = [", ".join(swept) or "case"] + [m.label for m in SHOWN]
        if dl is not None:
            headers[-1] = f"> {format_ns(dl)}"
        headers += [f"≤ {format_ns(b)}" for b in bounds]
        table_rows = [
            [r["label"]]
            + [m.text(r.get(m.key)) for m in SHOWN]
            + [shown_shares[(r["index"], c)] for c in below_columns]
            for r in srows
        ]
        out.print(rich_table(series, headers, table_rows))
    print_views(out, views)
    if p is not None:
        _print_pwcet(out, rows, estimates, p, rate)
    if any(r["count"] and r["median"] is None for r in rows):
        out.print("percentiles unavailable for cases imported without a histogram")
    if rows and not all(r["exact"] for r in rows if r["median"] is not None):
        out.print("percentiles from histograms: within ±0.4 % (probe) or ±0.5 µs (imported)")
    activity = _activity_lines(rec)
    if activity:
        out.print("system activity while measuring (CPU busy %, switches/s, interrupts/s):")
        for text in activity:
            out.print(line(f"  {text}"))
    prod = [production_row(c.series, c.name, p) for c, p in _production(rec)]
    if prod:
        title = "production conditions (% of the measured CPUs' time by category, load average)"
        out.print(rich_table(title, PRODUCTION_HEADERS, prod, 3))
    _print_conditions(out, conditions)
    _print_app_audits(out, rec)
    if verdict_line is not None:
        out.print(verdict_line)
    return status


def _monitor(results_dir: str, ids: tuple[str, ...]) -> MonitorRecord | None:
    """The monitor the only ID names, if it names one."""
    from rtlab.monitor import find_monitor

    return find_monitor(store_from(results_dir), ids[0]) if len(ids) == 1 else None


def _show_pivots(
    recs: list[ExperimentRecord],
    specs: list[PivotSpec],
    deadline: int | None,
    as_json: bool,
    as_csv: bool,
) -> int:
    cases = pivot_cases(recs, deadline)
    tables = [pivot(cases, spec) for spec in specs]
    if as_json:
        setups = setup_labels(recs)
        print_json(
            {
                "experiments": [
                    {"id": r.id, "setup": s, "label": r.manifest.label}
                    for r, s in zip(recs, setups, strict=True)
                ],
                "pivots": [t.to_json() for t in tables],
            }
        )
        return 0
    if as_csv:
        print_csv(tables[0].csv_rows(), tables[0].csv_columns())
        return 0
    out = console()
    for t in tables:
        headers = [" + ".join(t.spec.rows)] + [t.label(c) for c in t.col_labels]
        rows = [
            [t.label(r)] + [t.text(t.cell(i, j)) for j in range(len(t.col_labels))]
            for i, r in enumerate(t.row_labels)
        ]
        out.print(rich_table(t.spec.title, headers, rows))
        if any(not c.exact for c in t.cells.values()):
            out.print("from histograms: percentiles within ±0.4 %; ≈ marks an estimated share")
    return 0


def _print_conditions(out: Console, conditions: list[CaseConditions]) -> None:
    """A line per case of what it really ran with; below a case whose conditions were not
    met or warn, the top interrupts of its isolated or nohz_full CPUs and its kernel log
    (--json has every row). One line when no case recorded any."""
    if not conditions:
        return
    if all(c.conditions.recorded or c.conditions.met for c in conditions) and not any(
        c.conditions.recorded for c in conditions
    ):
        out.print("conditions while measuring: not recorded (older probe documents or imported)")
        return
    out.print("conditions while measuring (read back, interrupts per measured CPU, kernel log):")
    for c in conditions:
        cond = c.conditions
        state = "" if cond.met else "NOT MET: "
        out.print(line(f"  {c.where}: ", (state, "bold red"), conditions_summary(cond)))
        if not cond.warnings and cond.met:
            continue
        for cpu in cond.cpus:
            if cpu["isolated"] or cpu["nohz_full"]:
                top = ", ".join(
                    f"{irq_label(r['irq'], r['name'])} {r['count']:,}" for r in cpu["irqs"][:4]
                )
                out.print(line(f"    CPU {cpu['cpu']} interrupts: {top or 'none'}"))
        for m in cond.messages[:SHOWN_MESSAGES]:
            who = " (logged by user space)" if m["user_space"] else ""
            out.print(line(f"    kernel log: {m['text']}{who}"))
        if len(cond.messages) > SHOWN_MESSAGES:
            out.print(f"    kernel log: {len(cond.messages) - SHOWN_MESSAGES} more (--json)")


def _print_app_audits(out: Console, rec: ExperimentRecord) -> None:
    """The application audit made while each app or attach case ran."""
    audits = [(c, d) for c in rec.done_cases if (d := read_app_audit(rec.path, c)) is not None]
    if not audits:
        return
    out.print("application audit (while the case ran):")
    for c, doc in audits:
        out.print(line(f"  {c.series} / {c.name}:"))
        for status, text in app_audit_lines(doc):
            out.print(line("    ", (status, "bold"), f" {text}"))


def _print_pwcet(
    out: Console,
    rows: list[dict[str, Any]],
    estimates: dict[int, Estimate],
    p: float,
    rate: float,
) -> None:
    table = [
        [r["series"], r["label"], cell(e := estimates[r["index"]]), method_text(e)] for r in rows
    ]
    out.print(line(title(p, rate)))  # a line of its own: a table title would wrap
    out.print(rich_table(None, ["series", "case", "pWCET [interval]", "method"], table, 2))
    for r in rows:
        e = estimates[r["index"]]
        if e.refused is not None:
            out.print(line(f"  {r['series']} / {r['label']}: refused: {e.refused}"))
            helps = advice_text(e.advice, e.advice_activations, rate)
            if helps is not None:
                out.print(line(f"    what would help: {helps}"))


def _num(value: Any, digits: str = ",.0f") -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "?"
    return format(v, digits) if math.isfinite(v) else "?"


def _activity_lines(rec: ExperimentRecord) -> list[str]:
    """One line per finished case when any ran a load: what the system really did."""
    lines: list[str] = []
    loaded = False
    for case in rec.done_cases:
        doc = rec.document(case)
        act = doc.get("activity")
        loaded = loaded or bool(doc.get("loads"))
        if not isinstance(act, dict):
            continue
        busy_pct = act.get("cpu_busy_pct")
        busy = (
            "/".join(_num(v, ".0f") for v in busy_pct.values())
            if isinstance(busy_pct, dict)
            else "?"
        )
        lines.append(
            f"{case.series}: {case.name}  {busy} %  {_num(act.get('ctxt_per_s'))} ctxt/s  "
            f"{_num(act.get('intr_per_s'))} intr/s"
        )
    return lines if loaded else []


def _production(rec: ExperimentRecord) -> list[tuple[Any, dict[str, Any]]]:
    """The finished cases that recorded production conditions, with them (schema 8)."""
    return [(c, p) for c in rec.done_cases if (p := production(rec.document(c)))]
