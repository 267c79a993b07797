"""Declarative experiments (TOML) -> the matrix of cases to run.

    [experiment]            name, description, deadline
    [defaults]              case keys applied to every series
    [[series]]              name, case keys, and [series.sweep]: key -> list of values

Every case is the product of its series' swept values. The whole file is
checked before anything runs: structure and types here, option values by the
probe itself (`rtlab-probe METER ... --check`), so both sides agree.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from rtlab.errors import UserError
from rtlab.system import LIVE_ROOT, SysRoot, format_cpulist, isolated_cpus, parse_cpulist
from rtlab.units import parse_duration_ns

# key -> (accepted types, probe option or None, help)
CASE_KEYS: dict[str, tuple[tuple[type, ...], str | None, str]] = {
    "meter": ((str,), None, "probe meter (wakeup)"),
    "policy": ((str,), "--policy", "other[:NICE] | fifo:PRIO | rr:PRIO | deadline:R/D/P"),
    "cpus": ((str, int), "--cpus", 'CPU list, "all", "last" or "isolated"'),
    "threads": ((int,), "--threads", "unpinned measuring threads"),
    "main_cpus": ((str, int), "--main-cpus", "CPUs for the probe's main thread"),
    "interval": ((str,), "--interval", "period, e.g. 1ms"),
    "distance": ((str,), "--distance", "added per thread"),
    "loops": ((int,), "--loops", "cycles per thread"),
    "duration": ((str,), "--duration", "run time per case"),
    "settle": ((str,), "--settle", "wait after starting loads"),
    "forkcopy": ((int,), None, "number of fork-copy load processes"),
    "forkcopy_size": ((str,), None, "buffer size of each fork-copy child (1M)"),
    "load": ((str,), None, 'one load spec KIND:ARGS[@CPUS][,policy=P]; "" or "none": no load'),
    "loads": ((list,), None, "further load specs KIND:ARGS[@CPUS]"),
    "isolate_loads": ((bool,), None, "keep loads off the measuring CPUs"),
    "raw": ((bool,), None, "capture every sample"),
    "mlock": ((bool,), None, "lock memory (true)"),
    "dma_latency": ((int,), "--dma-latency", "hold /dev/cpu_dma_latency (us)"),
    "probe_args": ((list,), None, "extra probe arguments"),
}
SECTION_KEYS = {"experiment", "defaults", "series"}
EXPERIMENT_KEYS = {"name", "description", "deadline"}
SERIES_KEYS = {"name", "sweep", "description"}
PRESETS_PACKAGE = "rtlab.presets"


@dataclass
class Case:
    index: int
    series: str
    name: str  # "forkcopy=3" (swept values), or the series name
    swept: dict[str, Any]
    params: dict[str, Any]  # every case key, resolved
    args: list[str] = field(default_factory=list)  # probe arguments (without --json/--raw)
    expected_s: float = 0.0  # for progress and ETA

    @property
    def slug(self) -> str:
        return f"{self.index:03d}"


@dataclass
class Experiment:
    name: str
    description: str
    deadline_ns: int | None
    source: str  # preset name or file path
    text: str  # the TOML as given
    series: list[dict[str, Any]]
    defaults: dict[str, Any]
    scale: float = 1.0
    cases: list[Case] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def preset_names() -> list[str]:
    files = resources.files(PRESETS_PACKAGE).iterdir()
    return sorted(p.name.removesuffix(".toml") for p in files if p.name.endswith(".toml"))


def read_source(spec: str) -> tuple[str, str]:
    """(source label, TOML text) for a preset name or a file path."""
    path = Path(spec)
    if path.suffix == ".toml" or path.exists():
        try:
            return str(path), path.read_text()
        except OSError as e:
            raise UserError(f"{spec}: cannot read ({e.strerror})") from e
    if spec in preset_names():
        return spec, resources.files(PRESETS_PACKAGE).joinpath(f"{spec}.toml").read_text()
    raise UserError(f'"{spec}": no such preset or file (presets: {", ".join(preset_names())})')


def _check_keys(where: str, table: dict, allowed: set[str] | dict) -> None:
    for key in table:
        if key not in allowed:
            close = [
                k
                for k in allowed
                if k.replace("_", "") == key.replace("_", "") or k.startswith(key[:3])
            ]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UserError(f"{where}: unknown key '{key}'{hint}")


def _check_value(where: str, key: str, value: Any) -> None:
    types = CASE_KEYS[key][0]
    if isinstance(value, bool) and bool not in types:
        raise UserError(f"{where}: '{key}' must be {' or '.join(t.__name__ for t in types)}")
    if not isinstance(value, types):
        raise UserError(
            f"{where}: '{key}' must be {' or '.join(t.__name__ for t in types)}, "
            f"not {type(value).__name__}"
        )
    if key in ("loads", "probe_args") and not all(isinstance(v, str) for v in value):
        raise UserError(f"{where}: '{key}' must be a list of strings")
    if key in ("forkcopy", "loops", "threads") and value < (0 if key == "forkcopy" else 1):
        raise UserError(f"{where}: '{key}' must be {'>= 0' if key == 'forkcopy' else '>= 1'}")
    if key in ("interval", "distance", "duration", "settle"):
        try:
            parse_duration_ns(value)
        except UserError as e:
            raise UserError(f"{where}: '{key}': {e}") from None


def parse(text: str, source: str) -> Experiment:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{source}: not valid TOML ({e})") from None
    _check_keys(source, data, SECTION_KEYS)
    head = data.get("experiment", {})
    _check_keys(f"{source}: [experiment]", head, EXPERIMENT_KEYS)
    defaults = data.get("defaults", {})
    _check_keys(f"{source}: [defaults]", defaults, CASE_KEYS)
    for key, value in defaults.items():
        _check_value(f"{source}: [defaults]", key, value)
    series = data.get("series")
    if not isinstance(series, list) or not series:
        raise UserError(f"{source}: needs at least one [[series]]")
    names = set()
    for i, s in enumerate(series):
        where = f"{source}: series[{i}]"
        _check_keys(where, s, CASE_KEYS.keys() | SERIES_KEYS)
        name = s.get("name")
        if not isinstance(name, str) or not name:
            raise UserError(f"{where}: 'name' (a non-empty string) is required")
        if name in names:
            raise UserError(f"{where}: series name '{name}' is used twice")
        names.add(name)
        where = f"{source}: series '{name}'"
        for key, value in s.items():
            if key in CASE_KEYS:
                _check_value(where, key, value)
        sweep = s.get("sweep", {})
        if not isinstance(sweep, dict):
            raise UserError(f"{where}: 'sweep' must be a table of key = [values]")
        _check_keys(f"{where} sweep", sweep, CASE_KEYS)
        for key, values in sweep.items():
            if not isinstance(values, list) or not values:
                raise UserError(f"{where}: sweep '{key}' must be a non-empty list")
            for v in values:
                _check_value(f"{where} sweep", key, v)
    deadline = head.get("deadline")
    return Experiment(
        name=str(head.get("name") or Path(source).stem),
        description=str(head.get("description", "")),
        deadline_ns=parse_duration_ns(deadline) if deadline else None,
        source=source,
        text=text,
        series=series,
        defaults=defaults,
    )


def _label(swept: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in swept.items())


def _scale_duration(text: str, scale: float) -> str:
    return f"{max(1, round(parse_duration_ns(text) * scale))}ns"


def _resolve_cpus(value: Any, root: SysRoot, notes: list[str]) -> tuple[str | None, bool]:
    """(CPU list, kernel-isolated) for a 'cpus' value."""
    if value is None:
        return None, False
    online = parse_cpulist(root.read("sys/devices/system/cpu/online") or "0")
    if value == "all":
        return format_cpulist(online), False
    if value == "last":
        return str(online[-1]), False
    if value == "isolated":
        iso = isolated_cpus(root)
        note = f"isolation series measures on {iso.describe()}"
        if note not in notes:
            notes.append(note)
        return format_cpulist(iso.cpus), iso.kernel_isolated
    return str(value), False


def _probe_args(
    p: dict[str, Any], cpus: str | None, kernel_isolated: bool, online: list[int]
) -> list[str]:
    args = [p.get("meter", "wakeup")]
    for key in (
        "policy",
        "threads",
        "main_cpus",
        "interval",
        "distance",
        "loops",
        "duration",
        "settle",
        "dma_latency",
    ):
        if key in p and not (key == "threads" and cpus):
            args += [CASE_KEYS[key][1], str(p[key])]
    if cpus:
        args += ["--cpus", cpus]
    load_cpus = ""
    if p.get("isolate_loads") and cpus and not kernel_isolated:
        rest = sorted(set(online) - set(parse_cpulist(cpus)))
        load_cpus = f"@{format_cpulist(rest)}" if rest else ""
    if p.get("forkcopy"):
        args += ["--load", f"forkcopy:{p['forkcopy']}:{p.get('forkcopy_size', '1M')}{load_cpus}"]
    for spec in _load_specs(p):
        args += ["--load", _pin_load(spec, load_cpus)]
    if p.get("mlock") is False:
        args.append("--no-mlock")
    args += p.get("probe_args", [])
    return args


# ",policy=P" / ",nice=N" at the end of a load spec: "@CPUS" goes before them.
_LOAD_SCHED = re.compile(r"(,(?:policy|nice)=[^,@]*)+$")


def _load_specs(p: dict[str, Any]) -> list[str]:
    """The 'load' key (unless "" or "none") and then the 'loads' list."""
    one = p.get("load", "")
    return ([one] if one not in ("", "none") else []) + list(p.get("loads", []))


def _pin_load(spec: str, load_cpus: str) -> str:
    """SPEC kept on LOAD_CPUS ("@1-3") unless it names its own CPUs."""
    if not load_cpus or "@" in spec:
        return spec
    m = _LOAD_SCHED.search(spec)
    return spec[: m.start()] + load_cpus + spec[m.start() :] if m else spec + load_cpus


def _expected_seconds(p: dict[str, Any]) -> float:
    settle = (
        parse_duration_ns(p["settle"])
        if "settle" in p
        else (1e9 if p.get("forkcopy") or _load_specs(p) else 0)
    )
    if "duration" in p:
        run = parse_duration_ns(p["duration"])
    else:
        run = p.get("loops", 1000) * parse_duration_ns(p.get("interval", "1ms"))
    return (settle + run) / 1e9


def expand(exp: Experiment, scale: float = 1.0, root: SysRoot = LIVE_ROOT) -> Experiment:
    """Fill exp.cases: the product of every series' sweep, scaled, CPUs resolved."""
    if not scale > 0:
        raise UserError(f"--scale must be > 0, not {scale}")
    exp.scale, exp.cases, exp.notes = scale, [], []
    online = parse_cpulist(root.read("sys/devices/system/cpu/online") or "0")
    for s in exp.series:
        fixed = {**exp.defaults, **{k: v for k, v in s.items() if k in CASE_KEYS}}
        sweep = s.get("sweep", {})
        for combo in itertools.product(*sweep.values()):
            swept = dict(zip(sweep.keys(), combo, strict=True))
            p = {**fixed, **swept}
            if "loops" in p:
                p["loops"] = max(1, round(p["loops"] * scale))
            if "duration" in p:
                p["duration"] = _scale_duration(p["duration"], scale)
            cpus, kernel_isolated = _resolve_cpus(p.get("cpus"), root, exp.notes)
            p["cpus_resolved"] = cpus
            case = Case(
                index=len(exp.cases),
                series=s["name"],
                name=_label(swept) or s["name"],
                swept=swept,
                params=p,
            )
            case.args = _probe_args(p, cpus, kernel_isolated, online)
            case.expected_s = _expected_seconds(p)
            exp.cases.append(case)
    return exp


_OPTION = re.compile(r"(--[a-z-]+)")


def validate_with_probe(exp: Experiment, check) -> None:
    """Ask the probe to check every distinct case; the first refusal is a UserError."""
    seen: set[tuple[str, ...]] = set()
    for case in exp.cases:
        key = tuple(case.args)
        if key in seen:
            continue
        seen.add(key)
        reason = check(case.args)
        if reason:
            m = _OPTION.search(reason)
            option = m.group(1) if m else None
            keys = [k for k, v in CASE_KEYS.items() if v[1] == option]
            if option == "--load":
                one = case.params.get("load", "")
                keys = [
                    "forkcopy"
                    if case.params.get("forkcopy") and '"forkcopy:' in reason
                    else "load"
                    if one not in ("", "none") and f'"{one.split("@")[0].split(",")[0]}' in reason
                    else "loads"
                ]
            named = f" key '{keys[0]}'" if keys else ""
            raise UserError(f"{exp.source}: series '{case.series}' ({case.name}){named}: {reason}")


def load_experiment(spec: str, scale: float = 1.0, root: SysRoot = LIVE_ROOT) -> Experiment:
    source, text = read_source(spec)
    return expand(parse(text, source), scale, root)
