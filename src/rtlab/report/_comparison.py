"""Comparison tables of several experiments: ratios with a rank test, the setup that wins
per metric, and what differs between the setups."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from rtlab.analysis import METRICS, RATIO_KEYS, WIN_METRICS, Side, compare_sides
from rtlab.report._data import CaseData, ExperimentData
from rtlab.report._tables import Table, _d, _fact, _nan, _plain
from rtlab.results import case_samples


def _side(e: ExperimentData) -> Side:
    def samples(c: CaseData) -> list[np.ndarray] | None:
        return case_samples(e.rec, c.case) if c.stats.exact else None

    return Side(e.id, e.setup, e.cases(), lambda c: c.stats, samples)


def comparison_tables(exps: list[ExperimentData]) -> list[Table]:
    """Ratios to the first experiment with a rank test, wins per metric, what differs."""
    base = exps[0]
    comp = compare_sides([_side(e) for e in exps])
    wanted = [METRICS[k] for k in WIN_METRICS]
    ratios = Table(
        "compare",
        f"Ratios to {base.setup} (the first experiment)",
        ["setup", "series", "case"]
        + [f"{m.label} ratio" for m in wanted]
        + ["p (rank test)", "differs"],
        csv_columns=["baseline", "other", "series", "case"]
        + [f"{k}_ratio" for k in RATIO_KEYS]
        + ["p_value", "effect_size", "significant"],
    )
    for row in comp.rows:
        rt = row.rank_test
        ratios.rows.append(
            [row.other_setup, row.series, row.case]
            + [_ratio(row.ratios.get(m.key)) for m in wanted]
            + [
                "n/a (no raw samples)" if rt is None else f"{rt.pvalue:.2g}",
                "-" if rt is None else ("yes" if row.significant else "no"),
            ]
        )
        ratios.csv_rows.append(
            {
                "baseline": row.baseline,
                "other": row.other,
                "series": row.series,
                "case": row.case,
                **{f"{k}_ratio": _plain(row.ratios.get(k)) for k in RATIO_KEYS},
                "p_value": None if rt is None else rt.pvalue,
                "effect_size": None if rt is None else rt.effect_size,
                "significant": row.significant,
            }
        )
    wins = Table(
        "wins",
        "Which setup wins (lowest value) per series and metric",
        ["series", *[m.label for m in wanted]],
        csv_columns=["series", "metric", "setup", "wins", "cases"],
    )
    tallies = {m.key: comp.wins(m.key) for m in wanted}
    for series in dict.fromkeys(s for s, _, _ in comp.matched):
        cells = [series]
        for m in wanted:
            tally, n = tallies[m.key][series]
            best = max(range(len(exps)), key=lambda i: tally[i])
            cells.append(f"{exps[best].setup} ({tally[best]} of {n})" if tally[best] else "tie")
            for i, e in enumerate(exps):
                wins.csv_rows.append(
                    {
                        "series": series,
                        "metric": m.key,
                        "setup": e.setup,
                        "wins": tally[i],
                        "cases": n,
                    }
                )
        wins.rows.append(cells)
    return [ratios, wins, differences_table(exps)]


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
        items.append((f"experiment: {k}", [getattr(e.rec.manifest, k) for e in exps]))
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
