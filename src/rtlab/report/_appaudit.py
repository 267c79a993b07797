"""The report's "Application audit" section: per app or attach case, each finding of the
audit made while it ran (status, evidence, fix), or why there is none."""

from __future__ import annotations

from rtlab._appaudit import read_app_audit
from rtlab.report._data import ExperimentData
from rtlab.report._tables import Table


def app_audit_table(exps: list[ExperimentData]) -> Table:
    many = len(exps) > 1
    t = Table(
        "app-audit",
        "Application audit",
        (["setup"] if many else []) + ["series", "case", "severity", "check", "evidence", "fix"],
        csv_columns=["experiment", "series", "case", "status", "id", "evidence", "fix"],
    )
    for e in exps:
        for c in e.cases():
            doc = read_app_audit(e.rec.path, c.case)
            if doc is None:
                continue
            findings = doc.get("findings", []) if doc["status"] == "done" else []
            rows = [
                (
                    f["status"],
                    str(f.get("id", "")),
                    str(f.get("evidence", "")),
                    str(f.get("fix", "")),
                )
                for f in findings
            ] or [("-", "", doc.get("reason", ""), "")]
            for status, check, evidence, fix in rows:
                t.rows.append(
                    ([e.setup] if many else [])
                    + [c.case.series, c.case.name, status, check, evidence, fix]
                )
                t.row_class.append(status.lower() if status != "-" else "")
                t.csv_rows.append(
                    {
                        "experiment": e.id,
                        "series": c.case.series,
                        "case": c.case.name,
                        "status": status,
                        "id": check,
                        "evidence": evidence,
                        "fix": fix,
                    }
                )
    return t
