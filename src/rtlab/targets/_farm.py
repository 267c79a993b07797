"""Farm runs: one experiment on every target of a targets file.

    results/<farm-id>/farm.json     the farm run: its targets, each one's experiment and outcome
    results/<farm-id>/report.html   the boards compared (rtlab report FARM-ID writes it again)
    results/<experiment-id>/        one ordinary experiment per target (its manifest names
                                    the target and the farm)

Each target's experiment is an `rtlab run EXPERIMENT --target NAME` of its own process:
targets run concurrently (asyncio drives the processes, at most --jobs at once), each
one's cases serially, and a target that fails — unreachable, refused, lost — fails alone,
with its reason recorded. Every member stays an experiment that `rtlab show`, `compare`
and `run --resume` take as any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import site
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.probe import one_line
from rtlab.records import utc_now
from rtlab.store import ExperimentRecord, Store, read_record, write_json_atomic
from rtlab.targets._spec import TargetSpec

FARM_FILE = "farm.json"
FARM_SCHEMA = 1
EXIT_INTERRUPTED = 130
#: Exit statuses of a member that measured and stored its experiment: 0 ok, 1 a deadline
#: exceeded, 6 conditions not met (rtlab.cli._common).
MEASURED_EXITS = (0, 1, 6)
#: The farm's exit status is its members' worst, in this order (best first): a judged result
#: (ok, deadline exceeded, conditions not met) before a member that could not measure (bad
#: input, unsupported or lost, internal error, output not written).
EXIT_ORDER = (0, 1, 6, 2, 3, 4, 5)


def worst_exit(codes: list[int]) -> int:
    """The worst of the members' exit statuses (EXIT_ORDER; an unknown one is worst)."""
    rank = {c: i for i, c in enumerate(EXIT_ORDER)}
    return max(codes, key=lambda c: rank.get(c, len(EXIT_ORDER)), default=0)


STATUSES = ("pending", "running", "done", "incomplete", "failed", "interrupted")


@dataclass
class FarmMember:
    name: str
    url: str
    status: str = "pending"  # one of STATUSES
    experiment: str | None = None
    exit_code: int | None = None
    verdict: str | None = None  # "PASS"/"FAIL" against a deadline
    error: str | None = None  # why it failed, one line


@dataclass
class Farm:
    path: Path
    name: str
    source: str
    created_utc: str
    members: list[FarmMember] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.path.name

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": FARM_SCHEMA,
            "kind": "farm",
            "id": self.id,
            "name": self.name,
            "source": self.source,
            "created_utc": self.created_utc,
            "targets": [asdict(m) for m in self.members],
        }

    def save(self) -> None:
        write_json_atomic(self.path / FARM_FILE, self.to_dict())


def create_farm(store: Store, name: str, source: str, specs: list[TargetSpec]) -> Farm:
    store._make_root()
    path = store.root / store.new_id(f"farm {name}")
    try:
        path.mkdir()
    except OSError as e:
        raise UserError(f"{path}: cannot make the farm run's directory ({e.strerror})") from None
    farm = Farm(path, name, source, utc_now(), [FarmMember(s.name, s.url) for s in specs])
    farm.save()
    return farm


def load_farm(path: Path) -> Farm:
    f = path / FARM_FILE
    try:
        data = json.loads(f.read_bytes())
        members = [FarmMember(**m) for m in data["targets"]]
        return Farm(path, str(data["name"]), str(data["source"]), str(data["created_utc"]), members)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(f"{f}: not a farm run ({one_line(str(e))})") from None


def farm_dirs(store: Store) -> list[Path]:
    if not store.root.is_dir():
        return []
    return sorted(
        p.parent for p in store.root.glob(f"*/{FARM_FILE}") if not p.parent.name.startswith(".")
    )


def find_farm(store: Store, ident: str) -> Farm | None:
    """The farm run IDENT (its id or a unique prefix of one); None when it names none."""
    dirs = farm_dirs(store)
    exact = [d for d in dirs if d.name == ident]
    found = exact or [d for d in dirs if d.name.startswith(ident)]
    return load_farm(found[0]) if len(found) == 1 else None


def member_records(store: Store, farm: Farm) -> list[ExperimentRecord]:
    """The experiments of FARM that have a finished case, in the farm's order."""
    out = []
    for m in farm.members:
        if m.experiment and (store.root / m.experiment).is_dir():
            rec = read_record(store.root / m.experiment)
            if rec.done_cases:
                out.append(rec)
    return out


def open_experiments(store: Store, ids: list[str]) -> tuple[list[ExperimentRecord], Farm | None]:
    """Experiments by id, a farm run's id standing for its boards' experiments; the farm
    when exactly one was named."""
    recs: list[ExperimentRecord] = []
    farms = []
    for ident in ids:
        try:
            recs.append(store.open(ident))
            continue
        except UserError:
            farm = find_farm(store, ident)
            if farm is None:
                raise
        members = member_records(store, farm)
        if not members:
            raise UserError(f"farm run {farm.id}: no target finished a case")
        farms.append(farm)
        recs += members
    return recs, (farms[0] if len(farms) == 1 and len(ids) == 1 else None)


def farm_rows(store: Store) -> list[dict[str, Any]]:
    """One `rtlab list` row per farm run (the columns of an experiment's row)."""
    rows = []
    for path in farm_dirs(store):
        try:
            farm = load_farm(path)
        except UserError as e:
            store.warnings.append(f"skipped {path}: {e}")
            continue
        done = sum(m.status == "done" for m in farm.members)
        rows.append(
            {
                "id": farm.id,
                "name": f"{farm.name} on {', '.join(m.name for m in farm.members)}",
                "created_utc": farm.created_utc,
                "complete": done == len(farm.members),
                "done": done,
                "cases": len(farm.members),
                "hostname": None,
                "kernel": None,
                "preempt": None,
                "source": f"farm:{farm.source}",
                "label": None,
                "board": None,
                "board_name": None,
            }
        )
    return rows


# --- running ------------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    """This environment; when this rtlab is a source tree (PYTHONPATH, tests), with it on
    the members' path too, so that they run the same code."""
    here = str(Path(__file__).resolve().parents[2])
    if here in site.getsitepackages():
        return dict(os.environ)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": here + (os.pathsep + path if path else "")}


def _die_with_parent() -> Callable[[], None]:
    from rtlab.probe import die_with  # the probe's parent-death signal, for our children

    return die_with(os.getpid())


async def _member(
    farm: Farm,
    m: FarmMember,
    argv: list[str],
    say: Callable[[str], None],
    procs: dict[str, asyncio.subprocess.Process],
) -> None:
    m.status = "running"
    farm.save()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL,
        start_new_session=True,  # the farm passes ^C on, once
        preexec_fn=_die_with_parent(),
        env=_child_env(),
        limit=1 << 22,
    )
    procs[m.name] = proc
    last = ""
    assert proc.stderr is not None and proc.stdout is not None
    while line := await proc.stderr.readline():
        text = line.decode(errors="replace").rstrip("\n")
        if text.startswith("rtlab: "):
            last = text.removeprefix("rtlab: ")
        say(f"[{m.name}] {text}")
    out = await proc.stdout.read()
    rc = await proc.wait()
    procs.pop(m.name, None)
    summary: dict[str, Any] = {}
    with contextlib.suppress(ValueError):
        summary = json.loads(out) if out.strip() else {}
    m.exit_code = rc
    m.experiment = summary.get("id") or m.experiment
    m.verdict = summary.get("verdict")
    if rc == EXIT_INTERRUPTED:
        m.status = "interrupted"
    elif rc in MEASURED_EXITS and summary.get("complete"):
        m.status = "done"
    else:
        m.status = "failed"
        m.error = one_line(last) if last else f"exit {rc}"


def _find_members(store: Store, farm: Farm) -> None:
    """The experiment of each member that ended without saying it (lost, refused later)."""
    missing = {m.name: m for m in farm.members if m.experiment is None}
    if not missing:
        return
    for rec in store.experiments():
        t = rec.manifest.target or {}
        if t.get("farm") == farm.id and t.get("name") in missing:
            missing[t["name"]].experiment = rec.id


async def run_farm(
    store: Store,
    farm: Farm,
    argv: Callable[[FarmMember], list[str]],
    jobs: int,
    say: Callable[[str], None],
) -> bool:
    """Run every member (ARGV: its command line), at most JOBS at once. True when
    interrupted (^C, SIGTERM): the running members are told once and keep what finished."""
    sem = asyncio.Semaphore(jobs)
    procs: dict[str, asyncio.subprocess.Process] = {}
    interrupted = asyncio.Event()

    def interrupt(signum: int) -> None:
        if not interrupted.is_set():
            interrupted.set()
            for p in procs.values():
                with contextlib.suppress(ProcessLookupError):
                    p.send_signal(signum)

    loop = asyncio.get_running_loop()
    for s in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(s, interrupt, s)

    async def one(m: FarmMember) -> None:
        async with sem:
            if not interrupted.is_set():
                await _member(farm, m, argv(m), say, procs)
                farm.save()

    try:
        await asyncio.gather(*(one(m) for m in farm.members))
    finally:
        for s in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(s)
        _find_members(store, farm)
        farm.save()
    return interrupted.is_set()


def member_argv(
    source: str, targets_file: Path, store: Store, farm: Farm, options: list[str]
) -> Callable[[FarmMember], list[str]]:
    """`rtlab run SOURCE --target NAME ...` of each member, in a Python like this one."""

    def argv(m: FarmMember) -> list[str]:
        return [
            sys.executable,
            "-m",
            "rtlab.cli",
            "run",
            source,
            "--target",
            m.name,
            "--targets",
            str(targets_file),
            "--results",
            str(store.root),
            "--farm",
            farm.id,
            "--json",
            *options,
        ]

    return argv
