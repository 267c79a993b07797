"""The report's production conditions (schema 8): per case, the CPU time split by
category of its measured CPUs and the load average while it measured; the CSV has a row
per CPU and category totals in ns."""

from __future__ import annotations

from rtlab.analysis import PRODUCTION_HEADERS, production, production_row
from rtlab.analysis._production import CATEGORIES
from rtlab.report._data import ExperimentData
from rtlab.report._tables import Table

TITLE = "Production conditions"
INTRO = (
    "What the system did while each case measured (/proc/stat and /proc/loadavg at the "
    "start and the end of measuring): the share of the measured CPUs' time spent in each "
    "category, the busy share of all CPUs, and the load average at the end. The CSV has "
    "every CPU."
)


def production_table(exps: list[ExperimentData]) -> Table | None:
    """The table, or None when no case recorded its production conditions."""
    many = len(exps) > 1
    t = Table(
        "production",
        "CPU time by category (% of the measured CPUs' time) and load average",
        (["setup"] if many else []) + PRODUCTION_HEADERS,
        csv_columns=["experiment", "series", "case", "cpu", "measured", "busy_pct"]
        + [f"{c}_ns" for c in CATEGORIES]
        + ["load_1min", "load_5min", "load_15min"],
    )
    for e in exps:
        for case in e.rec.done_cases:
            p = production(e.rec.document(case))
            if p is None:
                continue
            t.rows.append(([e.setup] if many else []) + production_row(case.series, case.name, p))
            end = p["loadavg_end"] or {}
            for cpu, split in [*p["per_cpu"].items(), ("all", p["all"])]:
                t.csv_rows.append(
                    {
                        "experiment": e.id,
                        "series": case.series,
                        "case": case.name,
                        "cpu": cpu,
                        "measured": cpu in (p["measured_cpus"] or p["per_cpu"]),
                        "busy_pct": split["busy_pct"],
                        **{f"{c}_ns": split["ns"][c] for c in CATEGORIES},
                        "load_1min": end.get("avg_1min"),
                        "load_5min": end.get("avg_5min"),
                        "load_15min": end.get("avg_15min"),
                    }
                )
    return t if t.rows else None
