"""A stored monitor: its directory in the results store, its manifest and its rows.

    results/<id>/monitor.json     the manifest (schema 1): what is measured, where, until when
    results/<id>/system.json      the fingerprint at the monitor's start (as an experiment's)
    results/<id>/audit.json       the readiness audit at the start
    results/<id>/intervals.jsonl  the rows, appended and fsynced one at a time
    results/<id>/.lock            held (with the PID) by the `rtlab monitor` running it

The rows are JSON lines of three kinds (`kind`): `start` (a run of `rtlab monitor` began),
`interval` (one window measured: per CPU max, p99, count, misses, the histogram counts,
kernel-log symptoms, explained samples) and `gap` (time not measured, with its start, end
and reason). A row is written whole or not at all: a line cut by a crash (no newline at
its end) is ignored when read and cut off before the next row is appended.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.records import DamagedRecord
from rtlab.store import (
    LOCK_NAME,
    MANIFEST_FILE,
    Store,
    dir_lock,
    read_fingerprint,
    read_json,
    write_json_atomic,
)

MONITOR_FILE = "monitor.json"
ROWS_FILE = "intervals.jsonl"
#: Version of monitor.json and of its rows.
MONITOR_SCHEMA = 1
#: The longest row read (a longer line is damage), and the most rows read.
MAX_ROW_BYTES = 1 << 20
MAX_ROWS = 2_000_000
ROW_KINDS = ("start", "interval", "gap")


def utc_text(t: float) -> str:
    """ISO-8601 UTC with ms, as the probe writes its times."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def parse_utc(text: str) -> float:
    """Seconds since the epoch of an ISO-8601 UTC time written by utc_text or the probe."""
    import calendar

    head, _, frac = text.rstrip("Z").partition(".")
    t = calendar.timegm(time.strptime(head, "%Y-%m-%dT%H:%M:%S"))
    return t + (float(f"0.{frac}") if frac.isdigit() else 0.0)


@dataclass
class MonitorSettings:
    """What the monitor measures: the probe's wakeup meter, one thread per CPU."""

    cpus: str  # CPU list as given to the probe
    period_ns: int
    window_ns: int
    policy: str = "fifo:99"
    deadline_ns: int | None = None
    explain_ns: int | None = None
    explain_max: int = 3
    le_ns: list[int] = field(default_factory=list)  # histogram bounds of the rows' `le` counts


@dataclass
class MonitorManifest:
    id: str
    name: str
    created_utc: str
    settings: MonitorSettings
    end_utc: str | None = None  # --duration: when the monitor stops (None: never)
    target: dict[str, Any] | None = None  # as an experiment's manifest: None is here
    schema: int = MONITOR_SCHEMA
    kind: str = "monitor"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any, where: str, mon_id: str) -> MonitorManifest:
        if not isinstance(data, dict):
            raise DamagedRecord(f"{where}: not a JSON object")
        schema = data.get("schema")
        if schema != MONITOR_SCHEMA:
            raise DamagedRecord(
                f"{where}: monitor schema {schema!r} is not known to this rtlab ({MONITOR_SCHEMA})"
            )
        s = data.get("settings")
        try:
            settings = MonitorSettings(**s) if isinstance(s, dict) else None
        except TypeError as e:
            raise DamagedRecord(f"{where}: settings: {e}") from None
        if settings is None or not _settings_ok(settings):
            raise DamagedRecord(f"{where}: 'settings' is not a monitor's settings")
        name, created, end = data.get("name"), data.get("created_utc"), data.get("end_utc")
        target = data.get("target")
        if not isinstance(name, str) or not isinstance(created, str):
            raise DamagedRecord(f"{where}: 'name' and 'created_utc' must be strings")
        if end is not None and not isinstance(end, str):
            raise DamagedRecord(f"{where}: 'end_utc' must be a string or null")
        if target is not None and not isinstance(target, dict):
            raise DamagedRecord(f"{where}: 'target' must be an object or null")
        return cls(mon_id, name, created, settings, end, target)


def _settings_ok(s: MonitorSettings) -> bool:
    def pos(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    return (
        isinstance(s.cpus, str)
        and pos(s.period_ns)
        and pos(s.window_ns)
        and isinstance(s.policy, str)
        and (s.deadline_ns is None or pos(s.deadline_ns))
        and (s.explain_ns is None or pos(s.explain_ns))
        and pos(s.explain_max)
        and isinstance(s.le_ns, list)
        and all(pos(b) for b in s.le_ns)
    )


@dataclass
class MonitorRecord:
    path: Path
    manifest: MonitorManifest

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def rows_path(self) -> Path:
        return self.path / ROWS_FILE

    def system(self) -> dict[str, Any]:
        """The fingerprint (system.json), as an experiment's ({} when unreadable)."""
        return read_fingerprint(self.path)

    def save(self) -> None:
        write_json_atomic(self.path / MONITOR_FILE, self.manifest.to_dict())

    def rows(self) -> list[dict[str, Any]]:
        return list(read_rows(self.rows_path))

    def append(self, row: dict[str, Any]) -> None:
        append_row(self.rows_path, row)


def is_monitor(path: Path) -> bool:
    return (path / MONITOR_FILE).is_file()


def read_monitor(path: Path) -> MonitorRecord:
    f = path / MONITOR_FILE
    return MonitorRecord(path, MonitorManifest.from_dict(read_json(f), str(f), path.name))


def monitor_names(store: Store) -> list[str]:
    """The ids of the monitors in STORE, sorted ([] when it cannot be read)."""
    try:
        return sorted(
            e.name
            for e in os.scandir(store.root)
            if not e.name.startswith(".") and e.is_dir() and is_monitor(Path(e.path))
        )
    except OSError:
        return []


def find_monitor(store: Store, mon_id: str) -> MonitorRecord | None:
    """The monitor MON_ID names (an id, a unique prefix of monitors' ids, or a directory);
    None when it names no monitor (it may name an experiment)."""
    if not mon_id or "\0" in mon_id:
        return None
    path = Path(mon_id)
    if is_monitor(path):
        return read_monitor(path.resolve())
    if "/" in mon_id or mon_id in (".", "..") or not store.root.is_dir():
        return None
    names = monitor_names(store)
    if mon_id in names:
        return read_monitor(store.root / mon_id)
    matches = [n for n in names if n.startswith(mon_id)]
    if not matches or (store.root / mon_id).exists():
        return None
    others = [n for n in store._names() if n.startswith(mon_id)]  # experiments
    if len(matches) + len(others) > 1:
        raise UserError(f'"{mon_id}" is ambiguous: {", ".join([*matches, *others][:5])}')
    return read_monitor(store.root / matches[0])


def open_monitor(store: Store, mon_id: str) -> MonitorRecord:
    found = find_monitor(store, mon_id)
    if found is None:
        if (store.root / mon_id / MANIFEST_FILE).is_file():
            raise UserError(f"{mon_id} is an experiment, not a monitor (rtlab run --resume)")
        raise UserError(f'no monitor "{mon_id}" in {store.root}/')
    return found


def create_monitor(
    store: Store, manifest: MonitorManifest, system: dict[str, Any], audit: dict[str, Any]
) -> MonitorRecord:
    """A new monitor directory, whole or not at all (written aside, then renamed)."""
    import shutil

    from rtlab.system import migrate_fingerprint

    store._make_root()
    final = store.root / manifest.id
    tmp = store.root / f".new-{manifest.id}.{os.getpid()}"
    try:
        tmp.mkdir(parents=True)
        write_json_atomic(tmp / "system.json", migrate_fingerprint(system))
        write_json_atomic(tmp / "audit.json", audit)
        write_json_atomic(tmp / MONITOR_FILE, manifest.to_dict())
        (tmp / ROWS_FILE).touch()
        os.rename(tmp, final)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"{final}: cannot store the monitor ({e.strerror})") from None
    return MonitorRecord(final, manifest)


def monitor_lock(rec: MonitorRecord) -> Any:
    """Exclusive right to run REC (a second `rtlab monitor --resume` is refused)."""
    return dir_lock(rec.path / LOCK_NAME, rec.id)


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The complete rows of PATH, in order; a damaged one is one line naming it (exit 2).
    A last line without its newline was cut by a crash and is not a row."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror})") from None
    with f:
        for n, raw in enumerate(iter(lambda: f.readline(MAX_ROW_BYTES + 1), b""), 1):
            if not raw.endswith(b"\n"):
                if len(raw) > MAX_ROW_BYTES:
                    raise DamagedRecord(f"{path}: line {n} is longer than {MAX_ROW_BYTES} bytes")
                return  # torn by a crash: the row was never written
            if n > MAX_ROWS:
                raise DamagedRecord(f"{path}: more than {MAX_ROWS} rows")
            try:
                row = json.loads(raw)
            except (UnicodeDecodeError, ValueError, RecursionError) as e:
                raise DamagedRecord(f"{path}: line {n}: not JSON ({e})") from None
            if not isinstance(row, dict) or row.get("kind") not in ROW_KINDS:
                raise DamagedRecord(f"{path}: line {n}: not a monitor row")
            bad = _row_error(row)
            if bad is not None:
                raise DamagedRecord(f"{path}: line {n}: {row['kind']} row: {bad}")
            yield row


def _is_int(v: Any, none: bool = True) -> bool:
    return (v is None and none) or (isinstance(v, int) and not isinstance(v, bool))


def _is_time(v: Any) -> bool:
    if not isinstance(v, str):
        return False
    try:
        parse_utc(v)
    except (ValueError, OverflowError):
        return False
    return True


def _row_error(row: dict[str, Any]) -> str | None:
    """What is wrong with a row's fields that readers use, or None."""
    kind = row["kind"]
    if kind == "gap":
        ok = _is_time(row.get("start_utc")) and _is_time(row.get("end_utc"))
        return None if ok else "'start_utc' and 'end_utc' must be UTC times"
    if kind == "start":
        return None
    if not _is_int(row.get("seq"), none=False):
        return "'seq' must be an integer"
    if not (_is_time(row.get("start_utc")) and _is_time(row.get("end_utc"))):
        return "'start_utc' and 'end_utc' must be UTC times"
    cpus = row.get("cpus")
    if not isinstance(cpus, list):
        return "'cpus' must be a list"
    for i, c in enumerate(cpus):
        if not isinstance(c, dict):
            return f"cpus[{i}] is not an object"
        for key in ("cpu", "count", "min_ns", "max_ns", "p99_ns", "sum_ns", "misses", "overruns"):
            if not _is_int(c.get(key)):
                return f"cpus[{i}].{key} must be an integer or null"
        le = c.get("le")
        if not isinstance(le, list) or not all(_is_int(x, none=False) for x in le):
            return f"cpus[{i}].le must be a list of integers"
    for key in ("kmsg", "explain"):
        if row.get(key) is not None and not isinstance(row[key], dict):
            return f"'{key}' must be an object"
    if not isinstance(row.get("spikes", []), list):
        return "'spikes' must be a list"
    return None


def append_row(path: Path, row: dict[str, Any]) -> None:
    """Append ROW and fsync it; a torn last line left by a crash is cut off first."""
    data = json.dumps(row, separators=(",", ":"), allow_nan=False).encode() + b"\n"
    if len(data) > MAX_ROW_BYTES:
        raise UserError(f"{path}: a row of {len(data)} bytes is over {MAX_ROW_BYTES}")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise UserError(f"{path}: cannot write ({e.strerror})") from None
    try:
        size = os.fstat(fd).st_size
        if size:
            start = max(0, size - MAX_ROW_BYTES - 1)
            tail = os.pread(fd, size - start, start)
            if not tail.endswith(b"\n"):  # rows are shorter: the previous newline is in TAIL
                size = start + tail.rfind(b"\n") + 1
                os.ftruncate(fd, size)
        os.pwrite(fd, data, size)
        os.fsync(fd)
    except OSError as e:
        from rtlab.errors import OutputError

        raise OutputError(f"{path}: a row could not be written ({e.strerror})") from None
    finally:
        os.close(fd)
