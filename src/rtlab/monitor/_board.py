"""The monitors of a results store by board: each stored monitor's board (its fingerprint
through rtlab.system.board_identity, as an experiment's) and, for `rtlab history BOARD`,
what it measured over time (start, end, windows, gaps, the worst window's maximum, setup).

Listing the boards reads each monitor's manifest and fingerprint only; a board's history
reads its monitors' rows too (at most MAX_ROWS each, rtlab.monitor._record). A damaged
monitor is skipped with a warning in the store's warnings, as a damaged experiment is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rtlab.errors import UserError
from rtlab.monitor._record import MonitorRecord, monitor_names, parse_utc, read_monitor
from rtlab.store import Store
from rtlab.system import BoardId, board_identity


@dataclass
class StoredMonitor:
    """A monitor of the store and its board."""

    rec: MonitorRecord
    board: BoardId


def monitor_board(rec: MonitorRecord) -> BoardId:
    """The board REC ran on: its target's name, else its fingerprint's machine or host."""
    target = rec.manifest.target
    name = target.get("name") if isinstance(target, dict) else None
    return board_identity(rec.system(), name if isinstance(name, str) else None)


def stored_monitors(store: Store) -> list[StoredMonitor]:
    """Every readable monitor of STORE, oldest first (damaged ones: store.warnings)."""
    out = []
    for name in monitor_names(store):
        path = store.root / name
        try:
            rec = read_monitor(path)
            out.append(StoredMonitor(rec, monitor_board(rec)))
        except UserError as e:
            store.warnings.append(f"skipped {path}: {e}")
    return sorted(out, key=lambda m: (m.rec.manifest.created_utc, m.rec.id))


@dataclass
class MonitorRow:
    """One monitor of a board's history."""

    id: str
    name: str
    created_utc: str
    start_utc: str | None  # the first window's start (None: no window yet)
    end_utc: str | None  # the last window's end
    planned_end_utc: str | None  # --duration's end (None: runs until stopped)
    windows: int
    gaps: int
    gap_s: float
    max_ns: int | None  # the largest window maximum of any CPU
    worst_utc: str | None  # the start of the window that had it
    cpus: str
    period_ns: int
    window_ns: int
    kernel: str | None
    setup: str

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def monitor_row(rec: MonitorRecord) -> MonitorRow:
    """What REC measured, read from its rows (a damaged row: DamagedRecord, exit 2)."""
    from rtlab.results import setup_facts
    from rtlab.system._setup import setup_description

    windows = gaps = 0
    gap_s = 0.0
    start = end = worst_utc = None
    worst: int | None = None
    for row in rec.rows():
        if row["kind"] == "gap":
            gaps += 1
            gap_s += max(0.0, parse_utc(row["end_utc"]) - parse_utc(row["start_utc"]))
            continue
        if row["kind"] != "interval":
            continue
        windows += 1
        start = start or row["start_utc"]
        end = row["end_utc"]
        mx = [c["max_ns"] for c in row["cpus"] if c.get("count") and c.get("max_ns") is not None]
        if mx and (worst is None or max(mx) > worst):
            worst, worst_utc = max(mx), row["start_utc"]
    m = rec.manifest
    facts = setup_facts(rec)
    kernel = facts.get("kernel_release")
    return MonitorRow(
        rec.id,
        m.name,
        m.created_utc,
        start,
        end,
        m.end_utc,
        windows,
        gaps,
        round(gap_s, 3),
        worst,
        worst_utc,
        m.settings.cpus,
        m.settings.period_ns,
        m.settings.window_ns,
        kernel if isinstance(kernel, str) else None,
        setup_description(facts),
    )


def listing_row(mon: StoredMonitor) -> dict[str, Any]:
    """One `rtlab list` row of a monitor (the columns of an experiment's row; cases are its
    windows, from the rows file's lines, and it is never complete while it may resume)."""
    rec = mon.rec
    try:
        with rec.rows_path.open("rb") as f:
            windows = sum(b'"kind":"interval"' in line for line in f)
    except OSError:
        windows = 0
    fp = rec.system()
    kernel, preempt = fp.get("kernel_release"), fp.get("preempt_model")
    return {
        "id": rec.id,
        "name": f"monitor {rec.manifest.name}",
        "created_utc": rec.manifest.created_utc,
        "complete": False,
        "done": windows,
        "cases": windows,
        "hostname": mon.board.hostname,
        "kernel": kernel if isinstance(kernel, str) else None,
        "preempt": preempt if isinstance(preempt, str) else None,
        "source": "monitor",
        "label": None,
        "board": mon.board.key,
        "board_name": mon.board.name,
    }
