"""Boards over time: the boards of a results store, one board's experiments with their
setups and a statistic, and each board's baseline (results/baselines.json).

    results/baselines.json   {"schema": 1, "boards": {BOARD_KEY: {"board", "experiment",
                              "set_utc"}}}: written whole (temporary file, rename) under
                              a lock (results/.baselines.lock)

A board is rtlab.system.board_identity of an experiment or a monitor (its target's name,
else its machine ID, else its host name); `Store.listing` indexes the experiments', so
listing the boards reads no experiment (a monitor's manifest and fingerprint are read).
"""

from __future__ import annotations

import contextlib
import fcntl
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from rtlab._input import load_json, read_regular
from rtlab.analysis import Comparison, Metric, Threshold
from rtlab.errors import UserError
from rtlab.monitor._board import StoredMonitor, stored_monitors
from rtlab.records import DamagedRecord, utc_now
from rtlab.results import (
    all_case_stats,
    compare_records,
    mixed_virtualization,
    setup_facts,
    setup_label,
    setup_labels,
)
from rtlab.store import ExperimentRecord, Store, write_json_atomic
from rtlab.system import BoardId

BASELINES_FILE = "baselines.json"
BASELINES_LOCK = ".baselines.lock"
BASELINES_SCHEMA = 1
#: A baselines file is at most this large (a thousand boards take ~200 KiB).
MAX_BASELINES_BYTES = 4 << 20
MAX_BASELINES_VALUES = 1 << 18


@dataclass
class Board:
    """A board of the store, its experiments and its monitors (ids, oldest first)."""

    key: str
    name: str
    experiments: list[str] = field(default_factory=list)
    monitors: list[str] = field(default_factory=list)
    first_utc: str = ""
    last_utc: str = ""
    kernels: list[str] = field(default_factory=list)  # releases, in order of first use
    identity: BoardId | None = None  # of its newest experiment, else its newest monitor

    def to_dict(self) -> dict[str, Any]:
        ident = self.identity.to_dict() if self.identity else {}
        return {
            "board": self.key,
            "name": self.name,
            "target": ident.get("target"),
            "machine_id": ident.get("machine_id"),
            "model": ident.get("model"),
            "hostname": ident.get("hostname"),
            "experiments": len(self.experiments),
            "monitors": len(self.monitors),
            "first_utc": self.first_utc,
            "last_utc": self.last_utc,
            "kernels": self.kernels,
        }


def boards(store: Store, monitors: Sequence[StoredMonitor] | None = None) -> list[Board]:
    """Every board with an experiment or a monitor in STORE (MONITORS: its monitors, when
    read already), by name."""
    found: dict[str, Board] = {}
    for row in store.listing():
        key = row.get("board") or "unknown"
        b = found.setdefault(key, Board(key, row.get("board_name") or key))
        b.experiments.append(row["id"])
        b.first_utc = b.first_utc or row["created_utc"] or ""
        b.last_utc = row["created_utc"] or b.last_utc
        if row.get("kernel") and row["kernel"] not in b.kernels:
            b.kernels.append(row["kernel"])
    for b in found.values():
        with contextlib.suppress(UserError):
            b.identity = store.open(b.experiments[-1]).board()
    for mon in stored_monitors(store) if monitors is None else monitors:
        b = found.setdefault(mon.board.key, Board(mon.board.key, mon.board.name))
        created = mon.rec.manifest.created_utc
        b.monitors.append(mon.rec.id)
        b.first_utc = min(filter(None, (b.first_utc, created)), default="")
        b.last_utc = max(filter(None, (b.last_utc, created)), default="")
        if not b.experiments:
            b.identity = mon.board
        kernel = mon.rec.system().get("kernel_release")
        if isinstance(kernel, str) and kernel not in b.kernels:
            b.kernels.append(kernel)
    return sorted(found.values(), key=lambda b: (b.name, b.key))


def match_board(known: Sequence[Board], text: str, extra: Sequence[str] = ()) -> str:
    """The key of the board TEXT names: a board's name or key, or a unique prefix of one
    (EXTRA: further keys, e.g. baselines of boards with no experiment left)."""
    text = text.strip()
    if not text or not text.isprintable():
        raise UserError(f"bad board name {text!r}")
    names = {b.key: [b.name, b.key, b.key.partition(":")[2]] for b in known}
    for key in extra:
        names.setdefault(key, [key, key.partition(":")[2]])
    exact = sorted({k for k, ns in names.items() if text in ns})
    if len(exact) == 1:
        return exact[0]
    found = exact or sorted({k for k, ns in names.items() if any(n.startswith(text) for n in ns)})
    if len(found) == 1:
        return found[0]
    if found:
        label = {b.key: b.name for b in known}
        shown = ", ".join(f"{label.get(k, k)} ({k})" for k in found[:5])
        raise UserError(f'board "{text}" is ambiguous: {shown}')
    raise UserError(f'no board "{text}" (the boards: rtlab history)')


def board_records(store: Store, key: str) -> list[ExperimentRecord]:
    """The experiments of board KEY, oldest first."""
    ids = [r["id"] for r in store.listing() if (r.get("board") or "unknown") == key]
    return [store.open(i) for i in ids]


# --- history ---------------------------------------------------------------------------


@dataclass
class HistoryRow:
    """One experiment of a board's history."""

    id: str
    created_utc: str
    name: str
    kernel: str | None
    setup: str  # what tells it apart from the board's other experiments
    kernel_change: str | None  # "A → B" when the kernel differs from the experiment before
    machine_change: bool  # the machine ID differs from the experiment before (a new image?)
    values: dict[str, float | None]  # column (a case, or "worst case") -> the statistic

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


WORST = "worst case"


def _case_value(
    rec: ExperimentRecord, stat: Metric, wanted: Sequence[str]
) -> dict[str, float | None]:
    stats = all_case_stats(rec)
    out: dict[str, float | None] = {}
    if not wanted:
        vals = [float(getattr(s, stat.key)) for s in stats.values()]
        vals = [v for v in vals if math.isfinite(v)]
        return {WORST: max(vals) if vals else None}
    for name in wanted:
        hits = [c for c in rec.done_cases if name in (c.name, f"{c.series}/{c.name}", c.series)]
        vals = [float(getattr(stats[c.index], stat.key)) for c in hits]
        vals = [v for v in vals if math.isfinite(v)]
        out[name] = max(vals) if vals else None
    return out


def _kernel_of(facts: dict[str, Any]) -> tuple[str | None, str | None]:
    release, version = facts.get("kernel_release"), facts.get("kernel_version")
    return (release if isinstance(release, str) else None,
            version if isinstance(version, str) else None)  # fmt: skip


def board_history(
    recs: Sequence[ExperimentRecord], stat: Metric, cases: Sequence[str] = ()
) -> list[HistoryRow]:
    """One row per experiment of a board (RECS, oldest first): its setup named by what
    differs between them, a kernel change (release, or the same release rebuilt: its
    version string) marked, and STAT of each case named in CASES (a case's name,
    SERIES/NAME, or a series: the worst of its cases), else of the worst case."""
    facts = [setup_facts(r) for r in recs]
    labels = setup_labels(list(recs)) if len(recs) > 1 else [r.id for r in recs]
    rows: list[HistoryRow] = []
    before: tuple[str | None, str | None] | None = None
    machine_before: str | None = None
    for i, (rec, f) in enumerate(zip(recs, facts, strict=True)):
        kernel = _kernel_of(f)
        change = None
        if before is not None and kernel != before and None not in (kernel[0], before[0]):
            change = (
                f"{before[0]} → {kernel[0]}" if kernel[0] != before[0] else f"{kernel[0]} rebuilt"
            )
        mid = rec.board().machine_id
        setup = labels[i] if labels[i] != rec.id else setup_label(rec)  # alike: in full
        rows.append(
            HistoryRow(
                rec.id,
                rec.manifest.created_utc,
                rec.name,
                kernel[0],
                setup,
                change,
                bool(mid and machine_before and mid != machine_before),
                _case_value(rec, stat, cases),
            )
        )
        before, machine_before = kernel, mid or machine_before
    return rows


# --- baselines -------------------------------------------------------------------------


def load_baselines(store: Store) -> dict[str, dict[str, Any]]:
    """Board key -> {"board", "experiment", "set_utc"}; {} without a file. A damaged file
    is one line naming it (DamagedRecord)."""
    path = store.root / BASELINES_FILE
    if not path.exists():
        return {}
    try:
        data = load_json(read_regular(path, MAX_BASELINES_BYTES), MAX_BASELINES_VALUES)
    except UserError as e:
        raise DamagedRecord(f"{path}: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("boards"), dict):
        raise DamagedRecord(f"{path}: not a baselines file (no 'boards' object)")
    schema = data.get("schema")
    if schema != BASELINES_SCHEMA:
        raise DamagedRecord(f"{path}: baselines schema {schema!r} is not known (1)")
    out = {}
    for key, entry in data["boards"].items():
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("experiment"), str)
            and isinstance(entry.get("board"), str)
        ):
            raise DamagedRecord(f"{path}: boards[{key!r}] needs 'board' and 'experiment' strings")
        out[key] = entry
    return out


@contextlib.contextmanager
def _locked(store: Store) -> Iterator[dict[str, dict[str, Any]]]:
    """The baselines for a change, saved whole when the block ends without an error."""
    store._make_root()
    fd = os.open(store.root / BASELINES_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        current = load_baselines(store)
        yield current
        try:
            write_json_atomic(
                store.root / BASELINES_FILE, {"schema": BASELINES_SCHEMA, "boards": current}
            )
        except OSError as e:
            raise UserError(f"{store.root / BASELINES_FILE}: cannot write ({e.strerror})") from None
    finally:
        os.close(fd)


def set_baseline(store: Store, rec: ExperimentRecord) -> tuple[BoardId, str | None]:
    """Make REC its board's baseline; returns the board and the baseline it replaced."""
    if not rec.done_cases:
        raise UserError(f"{rec.id}: no finished case to compare against")
    board = rec.board()
    with _locked(store) as current:
        old = current.get(board.key, {}).get("experiment")
        current[board.key] = {"board": board.name, "experiment": rec.id, "set_utc": utc_now()}
    return board, old


def clear_baseline(store: Store, key: str) -> str | None:
    """Forget board KEY's baseline; returns the experiment it was (None: there was none)."""
    if not load_baselines(store).get(key):
        return None
    with _locked(store) as current:
        old = current.pop(key, None)
    return old["experiment"] if old else None


# --- comparisons against the baselines -------------------------------------------------


@dataclass
class BoardComparison:
    """One experiment against its board's baseline."""

    board: BoardId
    experiment: str
    baseline: str | None
    # "regressed", "ok", "compared" (no threshold given), "no baseline", "is the baseline",
    # "not judged"
    status: str
    why: str | None = None  # not judged: mixed virtualization; no baseline: missing
    comparison: Comparison | None = None

    @property
    def failures(self) -> list[str]:
        return self.comparison.failures if self.comparison and self.status == "regressed" else []

    def to_dict(self) -> dict[str, Any]:
        return {
            "board": self.board.key,
            "board_name": self.board.name,
            "experiment": self.experiment,
            "baseline": self.baseline,
            "status": self.status,
            "why": self.why,
            "failures": self.failures,
            "not_judged": self.comparison.failures
            if self.comparison and self.status == "not judged"
            else [],
            "rows": [r.to_dict() for r in self.comparison.rows] if self.comparison else [],
        }


def against_baselines(
    store: Store,
    recs: Sequence[ExperimentRecord],
    deadline_ns: int | None = None,
    thresholds: Sequence[Threshold] = (),
    pwcet: Sequence[float] = (),
) -> list[BoardComparison]:
    """Each of RECS against its own board's baseline, with the rank tests and THRESHOLDS
    (a board regressed when one is exceeded); a board without one is said so."""
    baselines = load_baselines(store)
    out = []
    for rec in recs:
        board = rec.board()
        entry = baselines.get(board.key)
        if entry is None:
            out.append(BoardComparison(board, rec.id, None, "no baseline"))
            continue
        base_id = entry["experiment"]
        if base_id == rec.id:
            out.append(BoardComparison(board, rec.id, base_id, "is the baseline"))
            continue
        try:
            base = store.open(base_id)
        except UserError as e:
            out.append(BoardComparison(board, rec.id, base_id, "no baseline", f"missing: {e}"))
            continue
        comp = compare_records([base, rec], deadline_ns, thresholds, pwcet)
        mixed = mixed_virtualization([base, rec])
        if mixed:
            status = "not judged"
        elif not comp.rows:
            status, mixed = "not judged", "no case matches the baseline's"
        elif not thresholds:
            status = "compared"  # nothing to judge by: the ratios and rank tests only
        else:
            status = "regressed" if comp.failures else "ok"
        out.append(BoardComparison(board, rec.id, base_id, status, mixed, comp))
    return out
