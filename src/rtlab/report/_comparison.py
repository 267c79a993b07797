"""Comparison tables of several experiments: ratios with a rank test, the setup that wins
per metric, and what differs between the setups."""

from __future__ import annotations

import json
import math
from typing import Any

from rtlab.analysis import RATIO_KEYS, rank_test, ratio_table
from rtlab.report._data import CaseData, ExperimentData
from rtlab.report._tables import Table, _d, _fact, _nan, _plain
from rtlab.results import case_samples

#: Significance level of the rank test in the comparison.
ALPHA = 0.01
#: Metrics compared and won in a comparison: CaseStats key -> header.
WIN_METRICS = {"mean": "avg", "median": "median", "p99": "p99", "p999": "p99.9", "max": "max"}


# -- comparison -------------------------------------------------------------------------------


def _matching(exps: list[ExperimentData]) -> list[tuple[str, str, list[CaseData]]]:
    """(series, case name, [case per experiment]) for cases finished in every experiment."""
    out = []
    for s in exps[0].series:
        for c in s.cases:
            row = [c]
            for e in exps[1:]:
                other = next(
                    (
                        o
                        for so in e.series
                        if so.name == s.name
                        for o in so.cases
                        if o.case.name == c.case.name
                    ),
                    None,
                )
                if other is None:
                    break
                row.append(other)
            if len(row) == len(exps):
                out.append((s.name, c.case.name, row))
    return out


def comparison_tables(exps: list[ExperimentData]) -> list[Table]:
    """Ratios to the first experiment with a rank test, wins per metric, what differs."""
    base = exps[0]
    match = _matching(exps)
    ratios = Table(
        "compare",
        f"Ratios to {base.setup} (the first experiment)",
        ["setup", "series", "case"]
        + [f"{h} ratio" for h in WIN_METRICS.values()]
        + ["p (rank test)", "differs"],
        csv_columns=["baseline", "other", "series", "case"]
        + [f"{k}_ratio" for k in RATIO_KEYS]
        + ["p_value", "effect_size", "significant"],
    )
    samples: dict[tuple[int, int], Any] = {}
    for series, case, row in match:
        a = row[0]
        sa = _samples(base, a, samples, 0)
        for j, (e, b) in enumerate(zip(exps[1:], row[1:], strict=True), start=1):
            r = ratio_table(a.stats, b.stats)
            sb = _samples(e, b, samples, j) if sa is not None else None
            rt = rank_test(sa, sb) if sa is not None and sb is not None else None
            sig = None if rt is None else rt.pvalue < ALPHA
            ratios.rows.append(
                [e.setup, series, case]
                + [_ratio(r.get(k)) for k in WIN_METRICS]
                + [
                    "n/a (no raw samples)" if rt is None else f"{rt.pvalue:.2g}",
                    "-" if rt is None else ("yes" if sig else "no"),
                ]
            )
            ratios.csv_rows.append(
                {
                    "baseline": base.id,
                    "other": e.id,
                    "series": series,
                    "case": case,
                    **{f"{k}_ratio": _plain(r.get(k)) for k in RATIO_KEYS},
                    "p_value": None if rt is None else rt.pvalue,
                    "effect_size": None if rt is None else rt.effect_size,
                    "significant": sig,
                }
            )
    wins = Table(
        "wins",
        "Which setup wins (lowest value) per series and metric",
        ["series", *list(WIN_METRICS.values())],
        csv_columns=["series", "metric", "setup", "wins", "cases"],
    )
    by_series: dict[str, list[list[CaseData]]] = {}
    for series, _, row in match:
        by_series.setdefault(series, []).append(row)
    for series, rows in by_series.items():
        cells = [series]
        for key in WIN_METRICS:
            tally = [0] * len(exps)
            for row in rows:
                vals = [float(getattr(c.stats, key)) for c in row]
                if any(math.isnan(v) for v in vals) or len(set(vals)) == 1:
                    continue
                tally[vals.index(min(vals))] += 1
            best = max(range(len(exps)), key=lambda i: tally[i])
            cells.append(
                f"{exps[best].setup} ({tally[best]} of {len(rows)})" if tally[best] else "tie"
            )
            for i, e in enumerate(exps):
                wins.csv_rows.append(
                    {
                        "series": series,
                        "metric": key,
                        "setup": e.setup,
                        "wins": tally[i],
                        "cases": len(rows),
                    }
                )
        wins.rows.append(cells)
    return [ratios, wins, differences_table(exps)]


def _samples(e: ExperimentData, c: CaseData, cache: dict, j: int):
    key = (j, c.case.index)
    if key not in cache:
        cache[key] = case_samples(e.rec, c.case) if c.stats.exact else None
    return cache[key]


def _ratio(v: float | None) -> str:
    return "-" if v is None or _nan(v) else f"{v:.2f}×"


def differences_table(exps: list[ExperimentData]) -> Table:
    """System facts, experiment settings and case parameters that differ between setups."""
    t = Table(
        "differences",
        "What differs between the setups",
        ["what"] + [e.setup for e in exps],
        csv_columns=["what"] + [e.id for e in exps],
    )
    items: list[tuple[str, list[Any]]] = []
    keys: list[str] = []
    for e in exps:
        keys += [k for k in e.system if k not in keys and k != "schema"]
    items += [(f"system: {k}", [e.system.get(k) for e in exps]) for k in keys]
    for k in ("source", "scale"):
        items.append((f"experiment: {k}", [e.rec.manifest.get(k) for e in exps]))
    items.append(("deadline", [_d(e.deadline_ns) for e in exps]))
    pkeys: list[str] = []
    for e in exps:
        for c in e.cases():
            pkeys += [k for k in c.case.params if k not in pkeys]
    for k in pkeys:
        vals = []
        for e in exps:
            seen = {json.dumps(c.case.params.get(k), sort_keys=True) for c in e.cases()}
            vals.append(" / ".join(sorted(_fact(json.loads(x)) for x in seen)))
        items.append((f"case parameter: {k}", vals))
    for label, values in items:
        texts = [_fact(v) for v in values]
        if len(set(texts)) > 1:
            t.rows.append([label, *texts])
            t.csv_rows.append(
                {"what": label, **{e.id: x for e, x in zip(exps, texts, strict=False)}}
            )
    return t
