"""rtlab show: statistics per series of one experiment."""

from __future__ import annotations

import click

from rtlab.cli._common import (
    DURATION,
    check_exclusive,
    console,
    fmt,
    output_options,
    print_csv,
    print_json,
    results_option,
    rich_table,
    store_from,
)
from rtlab.results import COLUMNS, by_series, setup_label, stats_rows
from rtlab.units import format_ns

CSV_COLUMNS = [
    "experiment",
    "series",
    "case",
    "label",
    "count",
    "min",
    "mean",
    "median",
    "p90",
    "p99",
    "p999",
    "p9999",
    "max",
    "jitter",
    "stddev",
    "q1",
    "q3",
    "overruns",
    "deadline_ns",
    "deadline_misses",
    "exact",
]


@click.command()
@click.argument("experiment_id")
@click.option("--deadline", type=DURATION, help="count samples above this, e.g. 100us")
@results_option
@output_options
def show(
    experiment_id: str, deadline: int | None, results_dir: str, as_json: bool, as_csv: bool
) -> None:
    """Statistics of EXPERIMENT_ID: a table per series, one row per swept value."""
    check_exclusive(as_json, as_csv)
    rec = store_from(results_dir).open(experiment_id)
    rows = stats_rows(rec, deadline)
    if as_json:
        print_json(
            {
                "id": rec.id,
                "name": rec.name,
                "complete": rec.complete,
                "setup": setup_label(rec),
                "notes": rec.manifest.get("notes", []),
                "rows": rows,
            }
        )
        return
    if as_csv:
        print_csv(rows, CSV_COLUMNS)
        return
    out = console()
    pending = sum(c.status != "done" for c in rec.cases)
    out.print(
        f"[bold]{rec.id}[/bold]  {rec.name}"
        + (f"  [yellow]incomplete: {pending} case(s) not run[/yellow]" if pending else "")
    )
    out.print(f"  system: {setup_label(rec)}")
    for note in rec.manifest.get("notes", []):
        out.print(f"  {note}")
    dl = deadline if deadline is not None else rec.manifest.get("deadline_ns")
    for series, srows in by_series(rows).items():
        swept = next(
            (s["swept"] for s in rec.manifest.get("series", []) if s["name"] == series), []
        )
        headers = [", ".join(swept) or "case"] + [h for _, h, _ in COLUMNS]
        if dl is not None:
            headers[-1] = f"> {format_ns(dl)}"
        table_rows = [[r["label"]] + [fmt(r.get(k), dur) for k, _, dur in COLUMNS] for r in srows]
        out.print(rich_table(series, headers, table_rows))
    if rows and not all(r["exact"] for r in rows):
        out.print("percentiles from histograms: within ±0.4 % (probe) or ±0.5 µs (imported)")
    activity = _activity_lines(rec)
    if activity:
        out.print("system activity while measuring (CPU busy %, switches/s, interrupts/s):")
        for line in activity:
            out.print(f"  {line}")


def _activity_lines(rec) -> list[str]:
    """One line per finished case when any ran a load: what the system really did."""
    lines, loaded = [], False
    for case in rec.cases:
        if case.status != "done":
            continue
        doc = rec.document(case)
        act = doc.get("activity")
        loaded = loaded or bool(doc.get("loads"))
        if not act:
            continue
        busy = "/".join(f"{v:.0f}" for v in act["cpu_busy_pct"].values())
        lines.append(
            f"{case.series}: {case.name}  {busy} %  {act['ctxt_per_s']:,.0f} ctxt/s  "
            f"{act['intr_per_s']:,.0f} intr/s"
        )
    return lines if loaded else []
