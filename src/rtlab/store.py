"""Results directory + SQLite index.

    results/<id>/experiment.toml   the experiment as given
    results/<id>/experiment.json   manifest: cases, their parameters and status
    results/<id>/system.json       the system fingerprint
    results/<id>/cases/NNN.json    one probe document per case (+ NNN.raw[.T] raw samples)
    results/index.sqlite           experiments and cases, for list/compare

The directories are the record; the index is derived from them and rebuilt
when missing or stale, so a results tree can be copied, archived and diffed.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.probe import load_document

MANIFEST_SCHEMA = 1
INDEX_NAME = "index.sqlite"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "experiment"


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, path)


@dataclass
class CaseRecord:
    index: int
    series: str
    name: str
    swept: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    status: str = "pending"  # pending | done | interrupted | failed
    document: str | None = None  # relative to the experiment directory
    expected_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ExperimentRecord:
    path: Path
    manifest: dict[str, Any]

    @property
    def id(self) -> str:
        return self.manifest["id"]

    @property
    def name(self) -> str:
        return self.manifest.get("name", self.id)

    @property
    def complete(self) -> bool:
        return bool(self.manifest.get("complete"))

    @property
    def cases(self) -> list[CaseRecord]:
        return [
            CaseRecord(**{k: v for k, v in c.items() if k in CaseRecord.__dataclass_fields__})
            for c in self.manifest.get("cases", [])
        ]

    def system(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / "system.json").read_text())
        except (OSError, json.JSONDecodeError):
            return {}

    def document(self, case: CaseRecord) -> dict[str, Any]:
        if not case.document:
            raise UserError(f"{self.id}: case {case.index} ({case.name}) has no result yet")
        return load_document(self.path / case.document)

    def save(self) -> None:
        write_json_atomic(self.path / "experiment.json", self.manifest)

    def set_case(self, case: CaseRecord) -> None:
        self.manifest["cases"][case.index] = case.to_dict()
        self.manifest["complete"] = all(c["status"] == "done" for c in self.manifest["cases"])
        self.save()


class Store:
    def __init__(self, root: Path | str = "results") -> None:
        self.root = Path(root)

    # -- experiments -------------------------------------------------------
    def new_id(self, name: str) -> str:
        base = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{_slug(name)}"
        candidate, n = base, 1
        while (self.root / candidate).exists():
            n += 1
            candidate = f"{base}-{n}"
        return candidate

    def create(
        self,
        manifest: dict[str, Any],
        toml_text: str,
        system: dict[str, Any],
        exp_id: str | None = None,
    ) -> ExperimentRecord:
        self.root.mkdir(parents=True, exist_ok=True)
        exp_id = exp_id or self.new_id(manifest.get("name", "experiment"))
        path = self.root / exp_id
        (path / "cases").mkdir(parents=True)
        manifest = {"schema": MANIFEST_SCHEMA, "id": exp_id, **manifest}
        (path / "experiment.toml").write_text(toml_text)
        write_json_atomic(path / "system.json", system)
        rec = ExperimentRecord(path, manifest)
        rec.save()
        self.index(rec)
        return rec

    def open(self, exp_id: str) -> ExperimentRecord:
        path = Path(exp_id)
        if not (path / "experiment.json").is_file():
            path = self.root / exp_id
        if not (path / "experiment.json").is_file():
            matches = (
                sorted(
                    p.name
                    for p in self.root.glob(f"{exp_id}*")
                    if (p / "experiment.json").is_file()
                )
                if self.root.is_dir()
                else []
            )
            if len(matches) == 1:
                path = self.root / matches[0]
            elif matches:
                raise UserError(f'"{exp_id}" is ambiguous: {", ".join(matches[:5])}')
            else:
                raise UserError(f'no experiment "{exp_id}" in {self.root}/ (see rtlab list)')
        try:
            manifest = json.loads((path / "experiment.json").read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise UserError(f"{path}/experiment.json: unreadable ({e})") from None
        if not isinstance(manifest, dict) or "id" not in manifest or "cases" not in manifest:
            raise UserError(f"{path}/experiment.json: not an rtlab experiment manifest")
        return ExperimentRecord(path, manifest)

    def experiments(self) -> list[ExperimentRecord]:
        if not self.root.is_dir():
            return []
        out = []
        for p in sorted(self.root.iterdir()):
            if (p / "experiment.json").is_file():
                try:
                    out.append(self.open(str(p)))
                except UserError:
                    continue  # a foreign or broken directory is not ours to list
        return out

    # -- index ---------------------------------------------------------------
    def _db(self) -> sqlite3.Connection:
        self.root.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.root / INDEX_NAME)
        db.executescript("""
            CREATE TABLE IF NOT EXISTS experiments (
                id TEXT PRIMARY KEY, name TEXT, created_utc TEXT, complete INTEGER,
                hostname TEXT, kernel TEXT, preempt TEXT, source TEXT,
                cases INTEGER, done INTEGER, path TEXT, mtime REAL);
            CREATE TABLE IF NOT EXISTS cases (
                experiment_id TEXT, idx INTEGER, series TEXT, name TEXT, swept TEXT,
                status TEXT, document TEXT, PRIMARY KEY (experiment_id, idx));
        """)
        return db

    def index(self, rec: ExperimentRecord) -> None:
        system = rec.system()
        cases = rec.manifest.get("cases", [])
        with self._db() as db:
            db.execute("DELETE FROM cases WHERE experiment_id = ?", (rec.id,))
            db.execute(
                "INSERT OR REPLACE INTO experiments VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    rec.id,
                    rec.name,
                    rec.manifest.get("created_utc"),
                    int(rec.complete),
                    system.get("hostname"),
                    system.get("kernel_release"),
                    system.get("preempt_model"),
                    rec.manifest.get("source"),
                    len(cases),
                    sum(c["status"] == "done" for c in cases),
                    str(rec.path),
                    (rec.path / "experiment.json").stat().st_mtime,
                ),
            )
            db.executemany(
                "INSERT INTO cases VALUES (?,?,?,?,?,?,?)",
                [
                    (
                        rec.id,
                        c["index"],
                        c["series"],
                        c["name"],
                        json.dumps(c["swept"]),
                        c["status"],
                        c.get("document"),
                    )
                    for c in cases
                ],
            )
        db.close()

    def listing(self) -> list[dict[str, Any]]:
        """Index rows, refreshed from the directories first (new, changed or removed ones)."""
        recs = {r.id: r for r in self.experiments()}
        db = self._db()
        known = {row[0]: row[1] for row in db.execute("SELECT id, mtime FROM experiments")}
        db.close()
        for exp_id, rec in recs.items():
            if known.get(exp_id) != (rec.path / "experiment.json").stat().st_mtime:
                self.index(rec)
        with self._db() as db:
            for gone in set(known) - set(recs):
                db.execute("DELETE FROM experiments WHERE id = ?", (gone,))
                db.execute("DELETE FROM cases WHERE experiment_id = ?", (gone,))
            db.row_factory = sqlite3.Row
            rows = [
                dict(r)
                for r in db.execute(
                    "SELECT id, name, created_utc, complete, hostname, kernel, preempt, source, "
                    "cases, done FROM experiments ORDER BY created_utc, id"
                )
            ]
        db.close()
        return rows
