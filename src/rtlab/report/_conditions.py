"""The report's conditions: a table of what each case really ran with (settings read back,
interrupts and local timer rate per measured CPU, kernel log), and the headline's lines
for the cases whose conditions were not met or warn."""

from __future__ import annotations

from rtlab.analysis import conditions_summary
from rtlab.report._data import ExperimentData
from rtlab.report._tables import Table
from rtlab.system import is_emulated

TITLE = "Conditions while measuring"
INTRO = (
    "What each case really ran with, read back at the end of measuring: the scheduling "
    "policy and CPUs of its threads, locked memory and /dev/cpu_dma_latency; the interrupts "
    "and local timer interrupts per measured CPU (ticks per second estimated: less the "
    "meter's own timer wake-ups); the kernel log while measuring. A case whose conditions "
    "were not met measured something else than asked: no PASS/FAIL verdict is given on it."
)


def conditions_table(exps: list[ExperimentData]) -> Table:
    many = len(exps) > 1
    t = Table(
        "conditions",
        "Conditions per case",
        (["setup"] if many else []) + ["series", "case", "conditions", "evidence", "reasons"],
        csv_columns=[
            "experiment",
            "series",
            "case",
            "recorded",
            "met",
            "not_met",
            "warnings",
            "evidence",
        ],
    )
    for e in exps:
        for c in e.conditions:
            cond = c.conditions
            state = "not met" if not cond.met else ("met" if cond.recorded else "not recorded")
            state += f", {len(cond.warnings)} warning(s)" if cond.warnings else ""
            reasons = "; ".join(cond.not_met + cond.warnings) or "-"
            evidence = conditions_summary(cond)
            t.rows.append(
                ([e.setup] if many else []) + [c.series, c.case, state, evidence, reasons]
            )
            t.row_class.append("fail" if not cond.met else ("warn" if cond.warnings else ""))
            t.csv_rows.append(
                {
                    "experiment": e.id,
                    "series": c.series,
                    "case": c.case,
                    "recorded": cond.recorded,
                    "met": cond.met,
                    "not_met": "; ".join(cond.not_met),
                    "warnings": "; ".join(cond.warnings),
                    "evidence": evidence,
                }
            )
    return t


def shown(exps: list[ExperimentData]) -> bool:
    """Whether the report has a conditions section: some case recorded its conditions or
    did not meet them (a migrated document's policy fallback)."""
    return any(c.conditions.recorded or not c.conditions.met for e in exps for c in e.conditions)


def headline(exps: list[ExperimentData]) -> tuple[bool, list[str]]:
    """(whether a verdict is refused: conditions not met in an experiment that is not
    emulated, the headline's lines: each case not met, and a count of the warnings)."""
    lines: list[str] = []
    refused = False
    for e in exps:
        who = f"{e.id}: " if len(exps) > 1 else ""
        for c in e.conditions:
            if not c.conditions.met:
                refused = refused or not is_emulated(e.rec.manifest.virtualization)
                lines.append(
                    f"{who}{c.where}: conditions not met: {'; '.join(c.conditions.not_met)}."
                )
        warned = [c for c in e.conditions if c.conditions.warnings]
        if warned:
            n = sum(len(c.conditions.warnings) for c in warned)
            cases = ", ".join(c.where for c in warned[:3]) + (" ..." if len(warned) > 3 else "")
            lines.append(
                f"{who}{n} condition warning(s) in {len(warned)} case(s) ({cases}); see "
                "Conditions while measuring."
            )
    return refused, lines
