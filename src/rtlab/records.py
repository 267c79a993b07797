"""Typed records of a stored experiment: its manifest (experiment.json), series and cases.

One loader (`Manifest.from_dict`) checks every field and migrates older manifests step
by step; one factory (`new_manifest`) builds the manifest of a run and of an import.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from rtlab.errors import UserError
from rtlab.probecall import ProbeCall
from rtlab.system import UNKNOWN_VIRTUALIZATION, VIRTUALIZATION_KINDS, virtualization_of

#: Version of experiment.json. 2: `dma_latency` is a duration with a unit ("10us"),
#: in the case parameters and in the probe arguments (it was a number of µs).
#: 3: a case keeps its probe call as a typed value (`call`: meter and options, each with
#: the case key it came from) instead of a command line (`args`).
#: 4: `virtualization`, what the system ran under (none, a hypervisor, emulation; the
#: fingerprint's, rtlab.system._virt); "unknown" in older manifests.
MANIFEST_SCHEMA = 4
STATUSES = ("pending", "done", "interrupted", "failed")


class DamagedRecord(UserError):
    """A stored manifest that cannot be read: the message names the file and the field."""


@dataclass
class CaseRecord:
    """One case of an experiment: what is run (its probe call) and how it went."""

    index: int
    series: str
    name: str  # "forkcopy=3" (swept values), or the series name
    swept: dict[str, Any]
    params: dict[str, Any] = field(default_factory=dict)  # every case key, resolved
    call: ProbeCall | None = None  # what the probe is asked; None for imported cases
    status: str = "pending"  # one of STATUSES
    document: str | None = None  # relative to the experiment directory
    expected_s: float = 0.0  # for progress and ETA
    reason: str | None = None  # why a failed case failed (e.g. the target's connection lost)

    @property
    def slug(self) -> str:
        return f"{self.index:03d}"

    @property
    def done(self) -> bool:
        return self.status == "done"

    @property
    def label(self) -> str:
        """The swept value(s) that tell the case apart within its series."""
        if len(self.swept) == 1:
            return str(next(iter(self.swept.values())))
        return self.name


@dataclass
class SeriesRecord:
    name: str
    description: str = ""
    swept: list[str] = field(default_factory=list)  # keys swept in this series


@dataclass
class Manifest:
    """experiment.json. `id` is the directory's name, whatever the file says (a copied or
    renamed directory is listed and opened under its new name)."""

    id: str
    name: str
    description: str
    source: str  # preset name, file path, or "import:TOOL"
    scale: float
    deadline_ns: int | None
    created_utc: str
    notes: list[str]
    series: list[SeriesRecord]
    cases: list[CaseRecord]
    complete: bool = False
    schema: int = MANIFEST_SCHEMA
    # where it ran when not here: {"name", "spec", "arch", "probe", "farm"} (rtlab.targets)
    target: dict[str, Any] | None = None
    # {"kind": "none"|"vm"|"unknown", "hypervisor", "accel", "emulated", "host_kernel", ...}
    virtualization: dict[str, Any] = field(default_factory=lambda: dict(UNKNOWN_VIRTUALIZATION))
    label: str | None = None  # `--label NAME`: names the setup everywhere (absent before)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for case, c in zip(data["cases"], self.cases, strict=True):
            case["call"] = None if c.call is None else c.call.to_dict()
        return data

    def refresh_complete(self) -> None:
        self.complete = bool(self.cases) and all(c.done for c in self.cases)

    @classmethod
    def from_dict(cls, data: Any, where: str, exp_id: str | None = None) -> Manifest:
        """Check and migrate a manifest read from WHERE; DamagedRecord names what is wrong."""
        d = _Fields(data, where)
        schema = d.get("schema", int)
        if schema > MANIFEST_SCHEMA or schema < 1:
            raise DamagedRecord(
                f"{where}: manifest schema {schema} is not known to this rtlab "
                f"(1..{MANIFEST_SCHEMA})"
            )
        data = _migrate(dict(data), schema, where)
        d = _Fields(data, where)
        cases = [_case(c, f"{where}: cases[{i}]") for i, c in enumerate(d.get("cases", list))]
        for i, c in enumerate(cases):
            if c.index != i:
                raise DamagedRecord(f"{where}: cases[{i}] has index {c.index}")
        series = [
            _series(s, f"{where}: series[{i}]") for i, s in enumerate(d.opt("series", list) or [])
        ]
        deadline = d.opt("deadline_ns", int)
        if deadline is not None and not 0 < deadline <= MAX_DEADLINE_NS:
            raise DamagedRecord(f"{where}: deadline_ns {deadline} is out of range")
        scale = float(d.opt("scale", (int, float)) or 1.0)
        if not (math.isfinite(scale) and scale > 0):
            raise DamagedRecord(f"{where}: scale {scale} is not a positive number")
        m = cls(
            id=exp_id or d.get("id", str),
            name=d.opt("name", str) or exp_id or "",
            description=d.opt("description", str) or "",
            source=d.opt("source", str) or "",
            scale=scale,
            deadline_ns=deadline,
            created_utc=d.opt("created_utc", str) or "",
            notes=d.strings("notes"),
            series=series,
            cases=cases,
            target=d.opt("target", dict),
            virtualization=_virtualization(d, where),
            label=_label(d.opt("label", str), where),
        )
        m.refresh_complete()
        return m


#: Longest setup label (`--label`), in characters.
MAX_LABEL = 80


def check_label(text: str) -> str:
    """A setup label as given to --label: stripped, 1..MAX_LABEL printable characters."""
    label = text.strip()
    if not label or len(label) > MAX_LABEL or not label.isprintable():
        raise UserError(f"bad label {text!r}: 1 to {MAX_LABEL} printable characters")
    return label


def _label(value: str | None, where: str) -> str | None:
    if value is None:
        return None
    try:
        return check_label(value)
    except UserError as e:
        raise DamagedRecord(f"{where}: {e}") from None


#: Largest deadline accepted anywhere (1 h), as the probe's --deadline.
MAX_DEADLINE_NS = 3600 * 1_000_000_000


class _Fields:
    """Typed access to the keys of one JSON object, with one-line errors."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise DamagedRecord(f"{where}: not a JSON object")
        self.data, self.where = data, where

    def get(self, key: str, types: type | tuple[type, ...]) -> Any:
        if key not in self.data:
            raise DamagedRecord(f"{self.where}: '{key}' is missing")
        return self._typed(key, self.data[key], types)

    def opt(self, key: str, types: type | tuple[type, ...]) -> Any:
        value = self.data.get(key)
        return None if value is None else self._typed(key, value, types)

    def strings(self, key: str) -> list[str]:
        values = self.opt(key, list) or []
        if not all(isinstance(v, str) for v in values):
            raise DamagedRecord(f"{self.where}: '{key}' must be a list of strings")
        return values

    def _typed(self, key: str, value: Any, types: type | tuple[type, ...]) -> Any:
        types = types if isinstance(types, tuple) else (types,)
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            want = " or ".join(t.__name__ for t in types)
            raise DamagedRecord(f"{self.where}: '{key}' must be {want}, not {type(value).__name__}")
        return value


def _case(data: Any, where: str) -> CaseRecord:
    d = _Fields(data, where)
    status = d.get("status", str)
    if status not in STATUSES:
        raise DamagedRecord(f"{where}: status {status!r} is not one of {', '.join(STATUSES)}")
    document = d.opt("document", str)
    if status == "done" and not document:
        raise DamagedRecord(f"{where}: a finished case without a document")
    if document and (document.startswith("/") or ".." in document.split("/")):
        raise DamagedRecord(f"{where}: document {document!r} is outside the experiment")
    call = d.opt("call", dict)
    return CaseRecord(
        index=d.get("index", int),
        series=d.get("series", str),
        name=d.get("name", str),
        swept=d.opt("swept", dict) or {},
        params=d.opt("params", dict) or {},
        call=None if call is None else _call(call, where),
        status=status,
        document=document,
        expected_s=float(d.opt("expected_s", (int, float)) or 0.0),
        reason=d.opt("reason", str),
    )


def _virtualization(d: _Fields, where: str) -> dict[str, Any]:
    v = d.get("virtualization", dict)
    if v.get("kind") not in VIRTUALIZATION_KINDS:
        raise DamagedRecord(f"{where}: virtualization kind {v.get('kind')!r} is not known")
    return v


def _call(data: dict[str, Any], where: str) -> ProbeCall:
    try:
        return ProbeCall.from_dict(data, where)
    except UserError as e:
        raise DamagedRecord(str(e)) from None


def _series(data: Any, where: str) -> SeriesRecord:
    d = _Fields(data, where)
    return SeriesRecord(d.get("name", str), d.opt("description", str) or "", d.strings("swept"))


def _dma_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """dma_latency: a number of µs -> a duration with its unit, in params and args."""
    for case in data.get("cases") or []:
        if not isinstance(case, dict):
            continue
        params = case.get("params")
        if isinstance(params, dict) and isinstance(params.get("dma_latency"), int):
            params["dma_latency"] = f"{params['dma_latency']}us"
        args = case.get("args")
        if isinstance(args, list):
            for i, a in enumerate(args[:-1]):
                nxt = args[i + 1]
                if a == "--dma-latency" and isinstance(nxt, str) and nxt.isdigit():
                    args[i + 1] = nxt + "us"
    return data


def _args_v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """A case's command line (`args`) -> its typed call (`call`). Each option is `--NAME`,
    `--NAME=VALUE` or `--NAME VALUE` (a value never starts with "--"); the case key of an
    option is the parameter of its name when the case has one, else "probe_args"."""
    for case in data.get("cases") or []:
        if not isinstance(case, dict):
            continue
        args = case.pop("args", None)
        if not isinstance(args, list) or not args or not all(isinstance(a, str) for a in args):
            continue
        params = case.get("params")
        if not isinstance(params, dict):
            params = {}
        options, i = [], 1
        while i < len(args):
            name, eq, value = args[i].removeprefix("--").partition("=")
            if not eq:
                nxt = args[i + 1] if i + 1 < len(args) else None
                value = nxt if nxt is not None and not nxt.startswith("--") else None
                i += value is not None
            key = name.replace("-", "_")
            key = key if key in params or name == "load" else "probe_args"
            options.append({"name": name, "value": value, "key": key})
            i += 1
        case["call"] = {"meter": args[0], "options": options}
    return data


def _virt_v3_to_v4(data: dict[str, Any]) -> dict[str, Any]:
    """`virtualization` added: what a vm: target recorded, else "unknown"."""
    target = data.get("target")
    known = target.get("virtualization") if isinstance(target, dict) else None
    data["virtualization"] = virtualization_of({"virtualization": known})
    return data


_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    1: _dma_v1_to_v2,
    2: _args_v2_to_v3,
    3: _virt_v3_to_v4,
}


def _migrate(data: dict[str, Any], schema: int, where: str) -> dict[str, Any]:
    while schema < MANIFEST_SCHEMA:
        data = _MIGRATIONS[schema](data)
        schema += 1
    data["schema"] = schema
    return data


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def new_manifest(
    *,
    name: str,
    description: str,
    source: str,
    series: Iterable[SeriesRecord],
    cases: Iterable[CaseRecord],
    scale: float = 1.0,
    deadline_ns: int | None = None,
    notes: Iterable[str] = (),
) -> Manifest:
    """The manifest of a new experiment (a run or an import); the store sets its id."""
    return Manifest(
        id="",
        name=name,
        description=description,
        source=source,
        scale=scale,
        deadline_ns=deadline_ns,
        created_utc=utc_now(),
        notes=list(notes),
        series=list(series),
        cases=list(cases),
    )
