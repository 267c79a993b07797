"""Results directory + SQLite index.

    results/<id>/experiment.toml   the experiment as given
    results/<id>/experiment.json   manifest: cases, their parameters and status (records.py)
    results/<id>/system.json       the system fingerprint
    results/<id>/cases/NNN.json    one probe document per case (+ NNN.raw[.T] raw samples)
    results/index.sqlite           one row per experiment, for `rtlab list`

The directories are the record. The index is derived from them: `list` stats every
experiment.json and parses only those whose size or mtime changed since it was indexed,
so listing a thousand experiments does not read a thousand manifests. A damaged index is
rebuilt; a damaged experiment is skipped with a warning (Store.warnings), never silently.
An experiment's id is its directory's name, so a copied or renamed directory is listed
and opened under its new name.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.probe import load_document
from rtlab.records import CaseRecord, DamagedRecord, Manifest, SeriesRecord
from rtlab.system import BoardId, board_identity, migrate_fingerprint, virtualization_of

MANIFEST_FILE = "experiment.json"
INDEX_NAME = "index.sqlite"
LOCK_NAME = ".lock"
#: Bumped when the index's table changes: an older index is rebuilt.
INDEX_VERSION = 4
#: Columns of `Store.listing` rows, in display order.
LISTING_COLUMNS = (
    "id",
    "name",
    "created_utc",
    "complete",
    "done",
    "cases",
    "hostname",
    "kernel",
    "preempt",
    "source",
    "label",
    "board",
    "board_name",
)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "experiment"


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    os.replace(tmp, path)


def read_fingerprint(path: Path) -> dict[str, Any]:
    """The fingerprint (system.json) of the record in directory PATH, migrated to the
    current schema ({} when unreadable)."""
    try:
        data = json.loads((path / "system.json").read_bytes())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return {}
    return migrate_fingerprint(data) if isinstance(data, dict) else {}


def read_json(path: Path, what: str = "") -> Any:
    """A JSON file that rtlab wrote; DamagedRecord when it is unreadable."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise DamagedRecord(f"{path}: unreadable {what}({e})".strip()) from None


@dataclass
class ExperimentRecord:
    path: Path
    manifest: Manifest

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def name(self) -> str:
        return self.manifest.name or self.id

    @property
    def complete(self) -> bool:
        return self.manifest.complete

    @property
    def deadline_ns(self) -> int | None:
        return self.manifest.deadline_ns

    @property
    def cases(self) -> list[CaseRecord]:
        return self.manifest.cases

    @property
    def done_cases(self) -> list[CaseRecord]:
        return [c for c in self.manifest.cases if c.done]

    def series_record(self, name: str) -> SeriesRecord:
        found = next((s for s in self.manifest.series if s.name == name), None)
        return found or SeriesRecord(name, "", list(self._case_swept(name)))

    def _case_swept(self, series: str) -> list[str]:
        return next((list(c.swept) for c in self.cases if c.series == series), [])

    def system(self) -> dict[str, Any]:
        """The fingerprint (system.json), migrated to the current schema ({} unreadable)."""
        return read_fingerprint(self.path)

    def board(self, system: dict[str, Any] | None = None) -> BoardId:
        """The board it ran on (rtlab.system.board_identity): the target its manifest names
        (a stored fingerprint of schema 3 names it too), else the machine's ID or name
        (SYSTEM: its fingerprint, when read already)."""
        target = self.manifest.target
        name = target.get("name") if isinstance(target, dict) else None
        fp = self.system() if system is None else system
        return board_identity(fp, name if isinstance(name, str) else None)

    def document_path(self, case: CaseRecord) -> Path:
        if not case.document:
            raise UserError(f"{self.id}: case {case.index} ({case.name}) has no result yet")
        return self.path / case.document

    def document(self, case: CaseRecord) -> dict[str, Any]:
        return load_document(self.document_path(case))

    def save(self) -> None:
        self.manifest.id = self.id
        write_json_atomic(self.path / MANIFEST_FILE, self.manifest.to_dict())

    def set_case(self, case: CaseRecord) -> None:
        self.manifest.cases[case.index] = case
        self.manifest.refresh_complete()
        self.save()


def read_record(path: Path) -> ExperimentRecord:
    """The experiment in directory PATH; DamagedRecord naming the file and the field."""
    f = path / MANIFEST_FILE
    manifest = Manifest.from_dict(read_json(f), str(f), exp_id=path.name)
    for c in manifest.cases:  # "done" without its result is not done: shown as failed
        if c.done and not (path / (c.document or "")).is_file():
            c.status, c.reason = "failed", f"result document {c.document!r} is missing"
    manifest.refresh_complete()
    return ExperimentRecord(path, manifest)


class Store:
    def __init__(self, root: Path | str = "results") -> None:
        self.root = Path(root)
        self.warnings: list[str] = []  # damaged experiments skipped, index rebuilt, ...
        if self.root.exists() and not self.root.is_dir():
            raise UserError(f"results directory {self.root}: not a directory")

    # -- experiments -------------------------------------------------------
    def new_id(self, name: str) -> str:
        base = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{_slug(name)}"
        candidate, n = base, 1
        while (self.root / candidate).exists():
            n += 1
            candidate = f"{base}-{n}"
        return candidate

    def _make_root(self) -> None:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            probe = self.root / f".write-test.{os.getpid()}"
            probe.touch()
            probe.unlink()
        except OSError as e:
            raise UserError(f"results directory {self.root}: cannot write ({e.strerror})") from None

    def create(
        self,
        manifest: Manifest,
        toml_text: str,
        system: dict[str, Any],
        documents: dict[int, dict[str, Any]] | None = None,
        exp_id: str | None = None,
        files: dict[str, Path | dict[str, Any]] | None = None,
    ) -> ExperimentRecord:
        """Store a new experiment; DOCUMENTS (case index -> result document) mark those
        cases done; FILES (path in the experiment -> a file to copy, or JSON data) are
        stored with them (raw samples, audit.json). The directory appears whole or not
        at all."""
        self._make_root()
        system = migrate_fingerprint(system)  # an import's own fingerprint included
        manifest.virtualization = virtualization_of(system)
        exp_id = exp_id or self.new_id(manifest.name or "experiment")
        final = self.root / exp_id
        tmp = self.root / f".new-{exp_id}.{os.getpid()}"
        try:
            (tmp / "cases").mkdir(parents=True)
            (tmp / "experiment.toml").write_text(toml_text)
            write_json_atomic(tmp / "system.json", system)
            rec = ExperimentRecord(tmp, manifest)
            for index, doc in (documents or {}).items():
                case = manifest.cases[index]
                write_json_atomic(tmp / "cases" / f"{case.slug}.json", doc)
                case.status, case.document = "done", f"cases/{case.slug}.json"
            for name, what in (files or {}).items():
                if isinstance(what, dict):
                    write_json_atomic(tmp / name, what)
                else:
                    shutil.copyfile(what, tmp / name)
            manifest.refresh_complete()
            manifest.id = exp_id
            write_json_atomic(tmp / MANIFEST_FILE, manifest.to_dict())
            os.rename(tmp, final)
        except OSError as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError(f"{final}: cannot store the experiment ({e.strerror})") from None
        rec = ExperimentRecord(final, manifest)
        with contextlib.suppress(UserError):
            self.index(rec)
        return rec

    def _names(self) -> list[str]:
        """Directory names holding an experiment.json, sorted."""
        if not self.root.is_dir():
            return []
        try:
            entries = list(os.scandir(self.root))
        except OSError as e:
            raise UserError(f"results directory {self.root}: {e.strerror}") from None
        return sorted(
            e.name
            for e in entries
            if not e.name.startswith(".")
            and e.is_dir()
            and os.path.isfile(os.path.join(e.path, MANIFEST_FILE))
        )

    def open(self, exp_id: str) -> ExperimentRecord:
        """An experiment by id, unique id prefix, or directory path."""
        if not exp_id or "\0" in exp_id:
            raise UserError("an experiment id must be a non-empty name")
        path = Path(exp_id)
        if (path / MANIFEST_FILE).is_file():
            return read_record(path.resolve())
        if "/" in exp_id or exp_id in (".", ".."):
            raise UserError(f"{exp_id}: not an experiment directory (no {MANIFEST_FILE})")
        names = self._names()
        if exp_id in names:
            return read_record(self.root / exp_id)
        matches = [n for n in names if n.startswith(exp_id)]
        if len(matches) == 1:
            return read_record(self.root / matches[0])
        if matches:
            raise UserError(f'"{exp_id}" is ambiguous: {", ".join(matches[:5])}')
        raise UserError(f'no experiment "{exp_id}" in {self.root}/ (see rtlab list)')

    def experiments(self) -> list[ExperimentRecord]:
        """Every readable experiment; damaged ones are skipped with a warning."""
        out = []
        for name in self._names():
            try:
                out.append(read_record(self.root / name))
            except UserError as e:
                self.warnings.append(f"skipped {self.root / name}: {e}")
        return out

    def lock(self, rec: ExperimentRecord) -> contextlib.AbstractContextManager[None]:
        """Exclusive right to run REC's cases; a second holder gets a UserError naming
        the first. Released when the process ends, however it ends."""
        return dir_lock(rec.path / LOCK_NAME, rec.id)

    # -- index ---------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        """The index, created or rebuilt as needed; in memory when the directory is
        read-only (listing still works, nothing is written)."""
        path = self.root / INDEX_NAME
        for attempt in range(2):
            db = None
            try:
                db = sqlite3.connect(path, timeout=5)
                _init_index(db)
                return db
            except sqlite3.DatabaseError as e:
                if db is not None:
                    db.close()
                if attempt or (isinstance(e, sqlite3.OperationalError) and _read_only(e)):
                    break
                self.warnings.append(f"{path}: damaged index rebuilt ({e})")
                with contextlib.suppress(OSError):
                    path.unlink()
        db = sqlite3.connect(":memory:")
        _init_index(db)
        return db

    def index(self, rec: ExperimentRecord) -> None:
        if not self.root.is_dir():
            return
        db = self._connect()
        try:
            with db:
                self._upsert(db, rec, os.stat(rec.path / MANIFEST_FILE))
        except (sqlite3.Error, OSError):
            pass  # the index is derived: the next listing refreshes it
        finally:
            db.close()

    def _upsert(self, db: sqlite3.Connection, rec: ExperimentRecord, st: os.stat_result) -> None:
        system = rec.system()
        m = rec.manifest
        board = rec.board(system)

        def text(key: str) -> str | None:
            v = system.get(key)
            return None if v is None else str(v)

        db.execute(
            "INSERT OR REPLACE INTO experiments VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                rec.id,
                rec.name,
                m.created_utc,
                int(m.complete),
                sum(c.done for c in m.cases),
                len(m.cases),
                text("hostname"),
                text("kernel_release"),
                text("preempt_model"),
                m.source,
                m.label,
                board.key,
                board.name,
                st.st_mtime_ns,
                st.st_size,
            ),
        )

    def listing(self) -> list[dict[str, Any]]:
        """One row per experiment (see LISTING_COLUMNS), refreshed from the directories first:
        only new or changed manifests are read."""
        names = self._names()
        if not names and not (self.root / INDEX_NAME).exists():
            return []
        db = self._connect()
        try:
            with db:
                known = {
                    r[0]: (r[1], r[2])
                    for r in db.execute("SELECT id, mtime_ns, size FROM experiments")
                }
                for name in names:
                    path = self.root / name
                    try:
                        st = os.stat(path / MANIFEST_FILE)
                        if known.get(name) == (st.st_mtime_ns, st.st_size):
                            continue
                        self._upsert(db, read_record(path), st)
                    except (UserError, OSError) as e:
                        self.warnings.append(f"skipped {path}: {e}")
                        db.execute("DELETE FROM experiments WHERE id = ?", (name,))
                for gone in set(known) - set(names):
                    db.execute("DELETE FROM experiments WHERE id = ?", (gone,))
            rows = db.execute(
                f"SELECT {', '.join(LISTING_COLUMNS)} FROM experiments ORDER BY created_utc, id"
            ).fetchall()
        finally:
            db.close()
        return [
            {**dict(zip(LISTING_COLUMNS, r, strict=True)), "complete": bool(r[3])} for r in rows
        ]


@contextlib.contextmanager
def dir_lock(path: Path, name: str) -> Iterator[None]:
    """Exclusive right to run the record NAME, held on the file PATH (with the PID); a
    second holder gets a UserError naming the first. Released when the process ends,
    however it ends."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise UserError(f"{path}: cannot lock it ({e.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise UserError(
                f"{name} is being run by process {holder}: wait for it or stop it"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def _init_index(db: sqlite3.Connection) -> None:
    if db.execute("PRAGMA user_version").fetchone()[0] == INDEX_VERSION:
        return
    db.executescript(
        "DROP TABLE IF EXISTS cases; DROP TABLE IF EXISTS experiments;"
        "CREATE TABLE experiments (id TEXT PRIMARY KEY, name TEXT, created_utc TEXT,"
        " complete INTEGER, done INTEGER, cases INTEGER, hostname TEXT, kernel TEXT,"
        " preempt TEXT, source TEXT, label TEXT, board TEXT, board_name TEXT,"
        " mtime_ns INTEGER, size INTEGER);"
        f"PRAGMA user_version = {INDEX_VERSION};"
    )


def _read_only(e: sqlite3.OperationalError) -> bool:
    text = str(e).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text
