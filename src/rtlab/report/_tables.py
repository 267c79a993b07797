"""The report's tables: verdict, system and parameters, load-level appendix tables, the full
statistics and audit findings. Each is shown in HTML and written as CSV."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from rtlab.analysis import EXPORT_METRICS, METRICS, TABLE_COUNTS, TABLE_METRICS
from rtlab.report import _pwcet
from rtlab.report._data import ExperimentData
from rtlab.report._style import case_title
from rtlab.system import is_emulated
from rtlab.units import format_ns

#: Boot parameters that partition CPUs or quiet them for real-time work.
ISOLATION_PARAMS = (
    "isolcpus",
    "nohz_full",
    "nohz",
    "rcu_nocbs",
    "rcu_nocb_poll",
    "irqaffinity",
    "kthread_cpus",
    "housekeeping",
    "intel_idle.max_cstate",
    "processor.max_cstate",
    "idle",
    "intel_pstate",
    "skew_tick",
    "tsc",
    "nosoftlockup",
    "nowatchdog",
    "threadirqs",
    "preempt",
    "mitigations",
)


@dataclass
class Table:
    """One table: display cells for HTML, plain values for CSV (ns for durations)."""

    name: str  # CSV file suffix: <report>.<name>.csv
    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    csv_columns: list[str] = field(default_factory=list)
    csv_rows: list[dict[str, Any]] = field(default_factory=list)
    groups: list[tuple[str, int]] = field(default_factory=list)  # header groups: (text, span)
    row_class: list[str] = field(default_factory=list)  # CSS class per row


def _d(ns: float | None) -> str:
    return format_ns(ns) if ns is not None and not _nan(ns) else "-"


def _nan(v: Any) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


def _plain(v: Any) -> Any:
    return None if _nan(v) else v


# -- verdict ---------------------------------------------------------------------


def series_verdicts(exps: list[ExperimentData]) -> list[dict[str, Any]]:
    """Worst max and p99.9 per series against the deadline: PASS/FAIL with the margin."""
    out = []
    for e in exps:
        for s in e.series:
            live = [c for c in s.cases if c.stats.count > 0]
            if not live:
                continue
            wmax = max(live, key=lambda c: c.stats.max)
            wp = max(live, key=lambda c: c.stats.p999)
            dl = e.deadline_ns
            emulated = is_emulated(e.rec.manifest.virtualization)
            unmet = [c.case for c in e.conditions if c.series == s.name and not c.conditions.met]
            row = {
                "experiment": e.id,
                "setup": e.setup,
                "series": s.name,
                "cases": len(s.cases),
                "pending": sum(c.series == s.name for c in e.pending),
                "max_ns": wmax.stats.max,
                "max_case": wmax.case.name,
                "p999_ns": wp.stats.p999,
                "p999_case": wp.case.name,
                "deadline_ns": dl,
                "verdict": None,
                "margin_ns": None,
                "p999_verdict": None,
                "p999_margin_ns": None,
                "misses": None,
                "no_verdict": "emulated (TCG)"
                if emulated and dl is not None
                else (f"conditions not met ({', '.join(unmet)})" if unmet else None),
                **dict.fromkeys(_pwcet.FIELDS),
            }
            if dl is not None and not emulated and not unmet:
                row["verdict"] = "PASS" if wmax.stats.max <= dl else "FAIL"
                row["margin_ns"] = dl - wmax.stats.max
                row["p999_verdict"] = "PASS" if wp.stats.p999 <= dl else "FAIL"
                row["p999_margin_ns"] = dl - wp.stats.p999
                row["misses"] = sum(c.stats.deadline_misses or 0 for c in live)
                row.update(_pwcet.series_exceedance(live, dl))
            out.append(row)
    return out


def _margin(ns: float | None) -> str:
    if ns is None:
        return "-"
    return ("+" if ns >= 0 else "−") + format_ns(abs(ns)) + (" headroom" if ns >= 0 else " over")


def verdict_table(exps: list[ExperimentData]) -> Table:
    many = len(exps) > 1
    fitted = any(c.tail is not None for e in exps for c in e.cases())
    t = Table(
        "verdict",
        "Verdict per series",
        (["setup"] if many else [])
        + ["series", "cases", "worst max", "worst p99.9", "deadline", "max", "p99.9", "misses"]
        + (["P(> deadline) per activation"] if fitted else []),
        csv_columns=[
            "experiment",
            "setup",
            "series",
            "cases",
            "pending",
            "max_ns",
            "max_case",
            "p999_ns",
            "p999_case",
            "deadline_ns",
            "verdict",
            "no_verdict",
            "margin_ns",
            "p999_verdict",
            "p999_margin_ns",
            "misses",
            *(_pwcet.FIELDS if fitted else ()),
        ],
    )
    rates = {e.id: e.rate_hz for e in exps}
    for v in series_verdicts(exps):
        cases = str(v["cases"]) + (f" ({v['pending']} not run)" if v["pending"] else "")
        t.rows.append(
            ([v["setup"]] if many else [])
            + [
                v["series"],
                cases,
                f"{_d(v['max_ns'])} ({v['max_case']})",
                f"{_d(v['p999_ns'])} ({v['p999_case']})",
                _d(v["deadline_ns"]),
                f"{v['verdict']} {_margin(v['margin_ns'])}"
                if v["verdict"]
                else (f"no verdict: {v['no_verdict']}" if v["no_verdict"] else "-"),
                f"{v['p999_verdict']} {_margin(v['p999_margin_ns'])}" if v["p999_verdict"] else "-",
                "-" if v["misses"] is None else str(v["misses"]),
            ]
            + ([_pwcet.cell(v, rates[v["experiment"]])] if fitted else [])
        )
        t.row_class.append((v["verdict"] or "none").lower())
        t.csv_rows.append(v)
    return t


# -- what was measured ---------------------------------------------------------------


def boot_params(cmdline: str | None) -> list[str]:
    """The isolation and latency-relevant parameters of a kernel command line."""
    if not cmdline:
        return []
    words = cmdline.split(" -- ")[0].split()
    return [w for w in words if re.split(r"[=]", w, maxsplit=1)[0] in ISOLATION_PARAMS]


def _fact(v: Any) -> str:
    if v is None or v == "":
        return "not recorded"
    if v == []:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, list):
        return ",".join(map(str, v))
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fact(x)}" for k, x in v.items()) or "not recorded"
    return str(v)


FINGERPRINT_FACTS = [
    ("hostname", "host"),
    ("kernel_release", "kernel"),
    ("kernel_version", "kernel version"),
    ("machine", "machine"),
    ("preempt_model", "preemption model"),
    ("realtime", "PREEMPT_RT active"),
    ("hz", "HZ"),
    ("timer_mode", "timer mode"),
    ("cpus_online", "CPUs online"),
    ("isolated_cpus", "isolated CPUs"),
    ("isolation_source", "isolated by"),
    ("nohz_full_cpus", "nohz_full CPUs"),
    ("rcu_nocbs_cpus", "RCU callbacks offloaded from"),
    ("smt_active", "SMT (hyper-threading) active"),
    ("governors", "CPU frequency governors"),
]


def fingerprint_table(exps: list[ExperimentData]) -> Table:
    t = Table(
        "system",
        "System fingerprint",
        ["fact"] + [e.setup for e in exps],
        csv_columns=["fact"] + [e.id for e in exps],
    )
    facts = list(FINGERPRINT_FACTS)
    known = {k for k, _ in facts} | {"schema", "cmdline", "kernel_config_found", "cpu_count"}
    for e in exps:
        for k in e.system:
            if k not in known:
                facts.append((k, k.replace("_", " ")))
                known.add(k)
    rows: list[tuple[str, list[Any]]] = [
        (label, [e.system.get(k) for e in exps]) for k, label in facts
    ]
    rows.insert(
        11,
        (
            "isolation and latency boot parameters",
            [" ".join(boot_params(e.system.get("cmdline"))) for e in exps],
        ),
    )
    rows.append(("kernel command line", [e.system.get("cmdline") for e in exps]))
    for label, values in rows:
        t.rows.append([label] + [_fact(v) for v in values])
        t.row_class.append("differs" if len({_fact(v) for v in values}) > 1 else "")
        t.csv_rows.append(
            {"fact": label, **{e.id: _fact(v) for e, v in zip(exps, values, strict=False)}}
        )
    return t


PARAM_KEYS = [
    ("policy", "policy"),
    ("cpus", "CPUs"),
    ("threads", "threads"),
    ("interval", "interval"),
    ("loops", "loops"),
    ("duration", "duration"),
    ("forkcopy_size", "fork-copy size"),
    ("isolate_loads", "loads kept off"),
    ("raw", "raw samples"),
]


def parameters_table(exps: list[ExperimentData]) -> Table:
    """Per experiment and series: what was varied, the fixed parameters, time spent."""
    many = len(exps) > 1
    t = Table(
        "parameters",
        "Series and parameters",
        (["setup"] if many else [])
        + ["series", "swept", *[h for _, h in PARAM_KEYS], "measured", "status"],
        csv_columns=[
            "experiment",
            "series",
            "swept",
            *[k for k, _ in PARAM_KEYS],
            "elapsed_s",
            "status",
        ],
    )
    for e in exps:
        for s in e.series:
            recs = [c.case for c in s.cases] + [c for c in e.pending if c.series == s.name]
            if not recs:
                continue
            params = recs[0].params
            swept = ", ".join(
                f"{k} = {' / '.join(str(c.swept.get(k)) for c in recs)}" for k in s.swept
            )
            elapsed = sum(c.elapsed_ns for c in s.cases) / 1e9
            notes = []
            pend = [c.name for c in e.pending if c.series == s.name]
            if pend:
                notes.append(f"not run: {', '.join(pend)}")
            cut = [c.case.name for c in e.cut_short if c.case.series == s.name]
            if cut:
                notes.append(f"cut short: {', '.join(cut)}")
            status = "; ".join(notes) or "complete"
            vals = [params.get(k) for k, _ in PARAM_KEYS]
            t.rows.append(
                ([e.setup] if many else [])
                + [s.name, swept]
                + ["-" if v is None else _fact(v) for v in vals]
                + [f"{elapsed:.1f} s", status]
            )
            t.row_class.append("" if status == "complete" else "incomplete")
            t.csv_rows.append(
                {
                    "experiment": e.id,
                    "series": s.name,
                    "swept": swept,
                    **{
                        k: _fact(v) if v is not None else ""
                        for (k, _), v in zip(PARAM_KEYS, vals, strict=False)
                    },
                    "elapsed_s": round(elapsed, 3),
                    "status": status,
                }
            )
    return t


# -- statistics ---------------------------------------------------------------------------


def load_table(exps: list[ExperimentData], loads: list[int]) -> Table:
    """avg, max and jitter per setup and series at the chosen numbers of load processes."""
    t = Table(
        "loads",
        "Latency at " + " and ".join(f"{n}" for n in loads) + " load processes",
        ["setup", "series"] + [h for _ in loads for h in ("avg", "max", "jitter")],
        csv_columns=["experiment", "setup", "series", "loads", "avg_ns", "max_ns", "jitter_ns"],
        groups=[("", 2)] + [(f"{n} load process" + ("" if n == 1 else "es"), 3) for n in loads],
    )
    for e in exps:
        for s in e.series:
            at = {c.load_value(): c for c in s.cases if c.load_value() is not None}
            if not any(n in at for n in loads):
                continue
            cells = [e.setup, s.name]
            for n in loads:
                c = at.get(n)
                if c is None:
                    cells += ["-", "-", "-"]
                    continue
                cells += [_d(c.stats.mean), _d(c.stats.max), _d(c.stats.jitter)]
                t.csv_rows.append(
                    {
                        "experiment": e.id,
                        "setup": e.setup,
                        "series": s.name,
                        "loads": n,
                        "avg_ns": _plain(c.stats.mean),
                        "max_ns": _plain(c.stats.max),
                        "jitter_ns": _plain(c.stats.jitter),
                    }
                )
            t.rows.append(cells)
    return t


STATS_CSV = ["experiment", "setup", "series", "case", *EXPORT_METRICS, "deadline_ns"]
#: Columns of the full statistics table.
STATS_COLUMNS = [METRICS[k] for k in (*TABLE_METRICS, *TABLE_COUNTS)]


def stats_table(exps: list[ExperimentData]) -> Table:
    many = len(exps) > 1
    t = Table(
        "stats",
        "Full statistics",
        (["setup"] if many else [])
        + ["series", "case", "samples"]
        + [m.label for m in STATS_COLUMNS],
        csv_columns=STATS_CSV,
    )
    for e in exps:
        for s in e.series:
            for c in s.cases:
                d = c.stats.to_dict()
                cells = [
                    _d(d.get(m.key)) if m.duration else _count(d.get(m.key)) for m in STATS_COLUMNS
                ]
                t.rows.append(
                    ([e.setup] if many else [])
                    + [s.name, case_title(s, c), str(c.stats.count)]
                    + cells
                )
                t.row_class.append("" if c.complete else "incomplete")
                t.csv_rows.append(
                    {
                        "experiment": e.id,
                        "setup": e.setup,
                        "series": s.name,
                        "case": c.case.name,
                        **d,
                    }
                )
    return t


def _count(v: Any) -> str:
    return "-" if v is None else str(v)


# -- audit ---------------------------------------------------------------------------------


def audit_table(exps: list[ExperimentData]) -> Table:
    many = len(exps) > 1
    t = Table(
        "audit",
        "Audit findings",
        (["setup"] if many else []) + ["severity", "check", "finding", "evidence", "fix", "why"],
        csv_columns=["experiment", "status", "id", "title", "evidence", "fix", "why"],
    )
    for e in exps:
        for f in (e.audit or {}).get("findings", []):
            vals = [
                _fact(f.get(k)) if f.get(k) not in (None, "") else ""
                for k in ("id", "title", "evidence", "fix", "why")
            ]
            t.rows.append(([e.setup] if many else []) + [f["status"], *vals])
            t.row_class.append(f["status"].lower())
            t.csv_rows.append(
                {
                    "experiment": e.id,
                    "status": f["status"],
                    **dict(zip(("id", "title", "evidence", "fix", "why"), vals, strict=False)),
                }
            )
    return t


# -- meters ----------------------------------------------------------------------------------


def meter_tables(exps: list[ExperimentData]) -> list[Table]:
    """One table per meter with a view (rtlab.analysis.VIEWS): the question it answers."""
    many = len(exps) > 1
    tables: dict[str, Table] = {}
    for e in exps:
        for c in e.cases():
            if c.meter_view is None:
                continue
            view, rows = c.meter_view
            t = tables.get(view.meter)
            if t is None:
                lat = [METRICS[k] for k in view.latency]
                t = tables[view.meter] = Table(
                    f"meter-{view.meter}",
                    f"{view.title}: {view.question}",
                    (["setup"] if many else [])
                    + ["series", "case"]
                    + [m.label for m in lat]
                    + [col.label for col in view.columns],
                    csv_columns=["experiment", "setup", "series", "case"]
                    + list(view.latency)
                    + [col.key for col in view.columns],
                )
            for r in rows:
                t.rows.append(
                    ([e.setup] if many else [])
                    + [r["series"], r["label"]]
                    + [_d(r.get(k)) for k in view.latency]
                    + [col.format(r.get(col.key)) for col in view.columns]
                )
                t.csv_rows.append(
                    {"experiment": e.id, "setup": e.setup, **{k: _plain(v) for k, v in r.items()}}
                )
    return list(tables.values())
