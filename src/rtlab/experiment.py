"""Declarative experiments (TOML) -> the matrix of cases to run.

    [experiment]            name, description, deadline
    [defaults]              case keys applied to every series
    [[series]]              name, description, case keys, and [series.sweep]: key -> list of values

Runtime settings are case keys too: "sysctl.<name>" and the IDs of the audit checks
`rtlab tune` has a knob for (rtlab.tune._settings); rtlab writes them around each case.

Every case is the product of its series' swept values. The case keys are the probe's
own options, as `rtlab-probe list --json` describes them (`--dma-latency` is the key
`dma_latency`), less those rtlab sets itself, plus the host keys of HOST_KEYS. The whole
file is checked before anything runs: structure and types here, option values by the
probe itself (`rtlab-probe METER ... --check`), so both sides agree.
"""

from __future__ import annotations

import itertools
import math
import os
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from importlib import resources
from pathlib import Path
from typing import Any

from rtlab._appcase import APP_METER, app_error, app_kind, app_options
from rtlab._caseloads import case_loads, load_specs
from rtlab._input import read_regular
from rtlab._probeargs import (  # re-exported: the experiment API is this module
    DEFAULT_METER,
    PROBE_ARGS,
    RESERVED_OPTIONS,
    case_where,
    check_probe_args,
    probe_args_options,
    q,
    validate_with_probe,
)
from rtlab.errors import UserError
from rtlab.probe import Catalog, ProbeOption, one_line, probe_catalog
from rtlab.probecall import LOAD, Option, ProbeCall
from rtlab.records import MAX_DEADLINE_NS, CaseRecord
from rtlab.system import LIVE_ROOT, Root, format_cpulist, isolated_cpus, parse_cpulist
from rtlab.tune import is_setting_key, key_error, value_error
from rtlab.units import parse_duration_ns


@dataclass(frozen=True)
class CaseKey:
    """A key of [defaults], [[series]] and sweeps: what TOML values it takes."""

    name: str
    kind: str  # a key of _KINDS
    help: str = ""
    option: str | None = None  # the probe option it sets ("dma-latency"), None: host only
    choices: tuple[str, ...] = ()  # kind "choice": the words the probe accepts


# What each kind of key accepts: (TOML types, description for messages).
_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "flag": ((bool,), "bool (true or false)"),
    "bool": ((bool,), "bool (true or false)"),
    "int": ((int,), "int"),
    "count": ((int,), "int"),
    "duration": ((str,), 'str (a duration with a unit, e.g. "100us")'),
    "cpulist": ((str, int), "str or int (a CPU list)"),
    "cpus": ((str, int), 'str or int (a CPU list, "all", "last" or "isolated")'),
    "str": ((str,), "str"),
    "meter": ((str,), "str"),
    "choice": ((str,), "str"),
    "load": ((str,), "str"),
    "strings": ((list,), "list of strings"),
}
# Probe option type -> key kind; "load" is the host's (forkcopy, load, loads).
_OPTION_KINDS = {
    "flag": "flag",
    "int": "int",
    "duration": "duration",
    "cpulist": "cpulist",
    "policy": "str",
    "string": "str",
    "choice": "choice",
}

#: Keys rtlab handles itself (some end up as probe options after rtlab resolves them).
HOST_KEYS: dict[str, CaseKey] = {
    k.name: k
    for k in (
        CaseKey("meter", "meter", "probe meter (default wakeup)"),
        CaseKey("cpus", "cpus", 'CPU list, "all", "last" or "isolated"', "cpus"),
        CaseKey("forkcopy", "count", "number of fork-copy load processes"),
        CaseKey("forkcopy_size", "str", "buffer size of each fork-copy child (1M)"),
        CaseKey("load", "load", 'one load spec KIND:ARGS[@CPUS][,policy=P]; "" or "none": no load'),
        CaseKey("loads", "strings", "further load specs KIND:ARGS[@CPUS]"),
        CaseKey("isolate_loads", "bool", "keep loads off the measuring CPUs"),
        CaseKey("raw", "bool", "capture every sample"),
        CaseKey("mlock", "bool", "lock memory (true)"),
        CaseKey("probe_args", "strings", "further probe options of the meter"),
        CaseKey("app", "str", "a command rtlab starts and measures (the sched meter)"),
        CaseKey("attach", "str", "a running process measured, by its name (the sched meter)"),
        CaseKey("app_threads", "str", '"all" or the name of the application threads measured'),
    )
}
#: Probe options that are no case key: rtlab sets them (or its host keys stand for them).
HOST_OPTIONS = frozenset(
    {"json", "raw", "progress", "quiet", "check", "help", "no-mlock", "load", "stop-on-eof"}
    | {"thread-cgroup", "load-cgroup"}  # `rtlab run --partition` places the probe
)
SECTION_KEYS = {"experiment", "defaults", "series"}
EXPERIMENT_KEYS = {"name", "description", "deadline"}
SERIES_KEYS = {"name", "sweep", "description"}
MAX_FILE_BYTES = 1 << 20
MAX_CASES = 10_000  # an experiment of more cases is a typo, not a plan
INT64 = (-(2**63), 2**63 - 1)
PRESETS_PACKAGE = "rtlab.presets"
__all__ = [
    "DEFAULT_METER",
    "HOST_KEYS",
    "RESERVED_OPTIONS",
    "CaseKey",
    "Experiment",
    "case_keys",
    "expand",
    "load_experiment",
    "parse",
    "parse_deadline",
    "preset_names",
    "read_source",
    "validate_with_probe",
]


@dataclass
class Experiment:
    name: str
    description: str
    deadline_ns: int | None
    source: str  # preset name or file path
    text: str  # the TOML as given
    series: list[dict[str, Any]]
    defaults: dict[str, Any]
    catalog: Catalog | None = None  # what the probe accepts (parse() sets it)
    scale: float = 1.0
    cases: list[CaseRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def case_keys(catalog: Catalog) -> dict[str, list[CaseKey]]:
    """Every case key -> its declarations: the host's, or one per meter declaring the
    option (the same option name may, in principle, differ in type between meters)."""
    keys: dict[str, list[CaseKey]] = {name: [k] for name, k in HOST_KEYS.items()}
    for o in [*catalog.common_options, *(o for m in catalog.meters for o in m.options)]:
        if o.name in HOST_OPTIONS or o.key in HOST_KEYS:
            continue
        k = _option_key(o)
        if k not in keys.setdefault(o.key, []):
            keys[o.key].append(k)
    return keys


def _meter_key(catalog: Catalog, meter: str, name: str) -> CaseKey | None:
    """The declaration of case key NAME for METER; None when METER has no such option."""
    if name in HOST_KEYS:
        return HOST_KEYS[name]
    o = next((o for o in catalog.options(meter) if o.key == name), None)
    if o is None or o.name in HOST_OPTIONS:
        return None
    return _option_key(o)


def _option_key(o: ProbeOption) -> CaseKey:
    """The case key of probe option O."""
    return CaseKey(o.key, _OPTION_KINDS.get(o.type, "str"), o.help, o.name, o.choices)


# --- reading the file --------------------------------------------------------------------


def preset_names() -> list[str]:
    files = resources.files(PRESETS_PACKAGE).iterdir()
    return sorted(p.name.removesuffix(".toml") for p in files if p.name.endswith(".toml"))


def _decode(data: bytes, label: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"{label}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})"
        ) from None


def _read_file(spec: str) -> str:
    """The text of the regular file SPEC; never blocks on a FIFO or reads a directory."""
    try:
        data = read_regular(spec, MAX_FILE_BYTES)
    except UserError as e:
        raise UserError(f"{one_line(spec)}: {e}") from None
    return _decode(data, one_line(spec))


def read_source(spec: str) -> tuple[str, str]:
    """(source label, TOML text) for a preset name or a file path."""
    try:
        is_file = spec.endswith(".toml") or os.path.lexists(spec)
    except ValueError:  # a NUL in the name: no such file, nor preset
        is_file = False
    if is_file:
        return spec, _read_file(spec)
    if spec in preset_names():
        data = resources.files(PRESETS_PACKAGE).joinpath(f"{spec}.toml").read_bytes()
        return spec, _decode(data, spec)
    raise UserError(
        f'"{one_line(spec)}": no such preset or file (presets: {", ".join(preset_names())})'
    )


# --- checking ----------------------------------------------------------------------------


def _check_keys(
    where: str, table: dict, allowed: Iterable[str], aliases: dict[str, list[str]] | None = None
) -> None:
    """Every key of TABLE must be ALLOWED; the message suggests the key meant."""
    allowed = sorted(allowed)
    for key in table:
        if key not in allowed:
            close = [a for a in (aliases or {}).get(key, [])] or [
                k
                for k in allowed
                if k.replace("_", "") == key.replace("_", "") or (key[:3] and k.startswith(key[:3]))
            ]
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UserError(f"{where}: unknown key {q(key)}{hint}")


def _table(where: str, value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise UserError(f"{where}: {what} must be a table, not {_type(value)}")
    return value


def _type(value: Any) -> str:
    names: dict[type, str] = {list: "array", dict: "table"}
    return names.get(type(value), type(value).__name__)


def _value_error(k: CaseKey, value: Any, catalog: Catalog) -> str | None:
    """Why VALUE does not fit key K, or None."""
    types, what = _KINDS[k.kind]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        return f"must be {what}, not {_type(value)}"
    if k.kind == "choice" and value not in k.choices:
        return f"must be one of {', '.join(k.choices)}; not {q(value)}"
    if isinstance(value, str) and not value and k.kind != "load":
        return "must not be empty"
    if k.kind == "count" and isinstance(value, int) and value < 0:
        return "must be >= 0"
    if k.kind == "strings" and isinstance(value, list):
        if not all(isinstance(v, str) for v in value):
            return "must be a list of strings"
        if k.name == "loads" and not all(value):
            return "must be a list of non-empty strings"
    if k.kind == "meter" and value not in catalog.meter_names:
        return f"must be one of {', '.join(catalog.meter_names)}, not {q(value)}"
    if k.kind == "duration" and isinstance(value, str):
        try:
            ns = parse_duration_ns(value)
        except UserError as e:
            return one_line(str(e))
        if ns > INT64[1]:
            return f"{q(value)} is too long (the probe counts in 64-bit ns)"
    return None


def _check_value(where: str, decls: list[CaseKey], value: Any, catalog: Catalog) -> None:
    """VALUE must fit one of the declarations of its key."""
    errors = [_value_error(k, value, catalog) for k in decls]
    if None not in errors:
        raise UserError(f"{where}: {q(decls[0].name)} {errors[0]}")


def _without_settings(where: str, table: dict, swept: bool = False) -> dict:
    """TABLE less its runtime settings (sysctl.* and tune's check IDs), each checked:
    the key's spelling and that its value (or each swept value) is one int or str."""
    rest = {}
    for key, value in table.items():
        if not isinstance(key, str) or not is_setting_key(key):
            rest[key] = value
            continue
        why = key_error(key)
        if why:
            raise UserError(f"{where}: key {q(key)}: {why}")
        for v in value if swept else [value]:
            why = value_error(key, v)
            if why:
                raise UserError(f"{where}: {q(key)} {why}")
    return rest


def _check_scalars(source: str, data: dict) -> None:
    """No NUL in any string (it could not be passed as a process argument) and only the
    64-bit integers TOML promises (bigger ones would overflow on their way)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            items: Iterable[tuple[Any, Any]] = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            continue
        for k, v in items:
            if isinstance(k, str) and "\0" in k:
                raise UserError(f"{source}: key {q(k)} contains a NUL character")
            sub = f"{path}[{k}]" if isinstance(k, int) else f"{path}.{k}" if path else k
            if isinstance(v, str) and "\0" in v:
                raise UserError(f"{source}: {q(sub)} contains a NUL character")
            if isinstance(v, int) and not isinstance(v, bool) and not INT64[0] <= v <= INT64[1]:
                raise UserError(f"{source}: {q(sub)} is beyond the 64-bit integers of TOML")
            stack.append((sub, v))


def parse_deadline(value: Any, where: str) -> int:
    """A latency deadline: a duration string, > 0 and at most one hour; in ns."""
    if not isinstance(value, str):
        raise UserError(f'{where} must be a duration string such as "100us", not {_type(value)}')
    try:
        ns = parse_duration_ns(value)
    except UserError as e:
        raise UserError(f"{where}: {e}") from None
    if not 0 < ns <= MAX_DEADLINE_NS:
        raise UserError(f"{where} must be > 0 and at most 1h, not {q(value)}")
    return ns


def _loads_toml(text: str, source: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{source}: not valid TOML ({one_line(str(e))})") from None
    except RecursionError:
        raise UserError(f"{source}: not valid TOML (nested too deeply)") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise UserError(f"{source}: not valid TOML ({one_line(str(e)).split(':')[0]})") from None


def parse(text: str, source: str, catalog: Catalog | None = None) -> Experiment:
    """Read and check an experiment file. CATALOG says what the probe accepts (default:
    the installed probe's)."""
    data = _loads_toml(text, source)
    _check_scalars(source, data)
    _check_keys(source, data, SECTION_KEYS)
    head = _table(source, data.get("experiment", {}), "[experiment]")
    _check_keys(f"{source}: [experiment]", head, EXPERIMENT_KEYS)
    for key in ("name", "description"):
        if not isinstance(head.get(key, ""), str):
            raise UserError(f"{source}: [experiment] '{key}' must be str")
    defaults = _table(source, data.get("defaults", {}), "[defaults]")
    series = data.get("series")
    if not isinstance(series, list) or not series:
        raise UserError(f"{source}: needs at least one [[series]]")
    catalog = catalog or probe_catalog()
    keys = case_keys(catalog)
    aliases = {
        a.replace("-", "_"): [o.key]
        for o in [*catalog.common_options, *(o for m in catalog.meters for o in m.options)]
        for a in o.aliases
    }
    plain = _without_settings(f"{source}: [defaults]", defaults)
    _check_keys(f"{source}: [defaults]", plain, keys, aliases)
    for key, value in plain.items():
        _check_value(f"{source}: [defaults]", keys[key], value, catalog)
    names, ncases = set(), 0
    for i, s in enumerate(series):
        where = f"{source}: series[{i}]"
        s = _table(where, s, "each series ([[series]])")
        _check_keys(where, _without_settings(where, s), keys.keys() | SERIES_KEYS, aliases)
        name = s.get("name")
        if not isinstance(name, str) or not name:
            raise UserError(f"{where}: 'name' (a non-empty string) is required")
        if name in names:
            raise UserError(f"{where}: series name {q(name)} is used twice")
        names.add(name)
        where = f"{source}: series {q(name)}"
        if not isinstance(s.get("description", ""), str):
            raise UserError(f"{where}: 'description' must be str")
        for key, value in s.items():
            if key in keys:
                _check_value(where, keys[key], value, catalog)
        sweep = s.get("sweep", {})
        if not isinstance(sweep, dict):
            raise UserError(f"{where}: 'sweep' must be a table of key = [values]")
        for key, values in sweep.items():
            if not isinstance(values, list) or not values:
                raise UserError(f"{where}: sweep {q(key)} must be a non-empty list")
        plain = _without_settings(f"{where} sweep", sweep, swept=True)
        _check_keys(f"{where} sweep", plain, keys, aliases)
        for key, values in plain.items():
            for v in values:
                _check_value(f"{where} sweep", keys[key], v, catalog)
        ncases += math.prod(len(v) for v in sweep.values())
        if ncases > MAX_CASES:
            raise UserError(f"{where}: more than {MAX_CASES} cases in the experiment")
    deadline = head.get("deadline")
    return Experiment(
        name=head.get("name") or Path(source).stem,
        description=head.get("description", ""),
        deadline_ns=(
            None
            if deadline is None
            else parse_deadline(deadline, f"{source}: [experiment] 'deadline'")
        ),
        source=source,
        text=text,
        series=series,
        defaults=defaults,
        catalog=catalog,
    )


# --- expanding into cases ----------------------------------------------------------------


def _label(swept: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in swept.items())


def _scaled(value: int, scale: float) -> int:
    """VALUE * SCALE rounded, exactly (no float overflow), at least 1 when VALUE was."""
    n = round(Fraction(value) * Fraction(scale))
    return max(1, n) if value >= 1 else n


def _resolve_cpus(value: Any, root: Root, notes: list[str]) -> tuple[str | None, bool]:
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


def _probe_call(
    catalog: Catalog, p: dict[str, Any], cpus: str | None, loads: list[tuple[str, str]]
) -> ProbeCall:
    """METER, its options from the case keys (common ones first), loads, probe_args; an
    application case's selection and command (its policy and CPUs are the program's)."""
    app = app_kind(p) is not None
    meter = p.get("meter", APP_METER if app else DEFAULT_METER)
    m = catalog.meter(meter)
    options = []
    for o in (*catalog.common_options, *(m.options if m else ())):
        if o.name in HOST_OPTIONS or (app and o.key in ("policy", "cpus")):
            continue
        value = cpus if o.key == "cpus" else p.get(o.key)
        if value is None or value is False or (o.key == "threads" and cpus):
            continue
        options.append(Option(o.name, None if value is True else str(value), o.key))
    options += [Option(LOAD, spec, key) for key, spec in loads]
    if p.get("mlock") is False:
        options.append(Option("no-mlock", None, "mlock"))
    options += probe_args_options(catalog, meter, p.get(PROBE_ARGS, []))
    if not app:
        return ProbeCall(meter, tuple(options))
    selection, command = app_options(p, cpus)
    return ProbeCall(meter, tuple(selection + options), command)


def _expected_seconds(p: dict[str, Any]) -> float:
    settle = (
        parse_duration_ns(p["settle"])
        if "settle" in p
        else (10**9 if p.get("forkcopy") or load_specs(p) else 0)
    )
    if "duration" in p:
        run = parse_duration_ns(p["duration"])
    else:
        run = p.get("loops", 1000) * _mean_interval_ns(p.get("interval", "1ms"))
        if p.get("find_max_rate"):
            run *= 2  # the steps halve the interval: their sum stays below twice the first
    return min(settle + run, 10**30) / 1e9  # absurd sizes are the probe's to refuse


def _mean_interval_ns(text: Any) -> int:
    """An interval, or the middle of a range "MIN..MAX" (response); for the ETA only, so
    what the probe will refuse counts as 1 ms here. Integers: loops may be huge."""
    try:
        ends = [parse_duration_ns(x) for x in str(text).split("..", 1)]
    except UserError:
        return 1_000_000
    return sum(ends) // len(ends)


def expand(exp: Experiment, scale: float = 1.0, root: Root = LIVE_ROOT) -> Experiment:
    """Fill exp.cases: the product of every series' sweep, scaled, CPUs resolved; each
    case's keys checked against its meter."""
    if (
        isinstance(scale, bool)
        or not isinstance(scale, int | float)
        or not math.isfinite(scale)
        or not scale > 0
    ):
        raise UserError(f"--scale must be a finite number > 0, not {scale}")
    catalog = exp.catalog or probe_catalog()
    exp.catalog = catalog
    exp.scale, exp.cases, exp.notes = scale, [], []
    online = parse_cpulist(root.read("sys/devices/system/cpu/online") or "0")
    for s in exp.series:
        fixed = {**exp.defaults, **{k: v for k, v in s.items() if k not in SERIES_KEYS}}
        sweep = s.get("sweep", {})
        for combo in itertools.product(*sweep.values()):
            swept = dict(zip(sweep.keys(), combo, strict=True))
            p = {**fixed, **swept}
            case = CaseRecord(
                index=len(exp.cases),
                series=s["name"],
                name=_label(swept) or s["name"],
                swept=swept,
                params=p,
            )
            _check_case(exp, case, catalog)
            if isinstance(p.get("loops"), int):
                p["loops"] = _scaled(p["loops"], scale)
            if "duration" in p:
                p["duration"] = f"{_scaled(parse_duration_ns(p['duration']), scale)}ns"
            cpus, kernel_isolated = _resolve_cpus(p.get("cpus"), root, exp.notes)
            p["cpus_resolved"] = cpus
            case.call = _probe_call(catalog, p, cpus, case_loads(p, cpus, kernel_isolated, online))
            case.expected_s = _expected_seconds(p)
            exp.cases.append(case)
    return exp


def _check_case(exp: Experiment, case: CaseRecord, catalog: Catalog) -> None:
    """Every key of the case must be one its meter accepts; probe_args only its options."""
    p = case.params
    why = app_error(p)
    if why:
        raise UserError(f"{case_where(exp, case)} key {q(why[0])}: {why[1]}")
    app = app_kind(p)
    meter = p.get("meter", APP_METER if app else DEFAULT_METER)
    if catalog.meter(meter) is None:
        raise UserError(
            f"{case_where(exp, case)} key 'meter': must be one of "
            f"{', '.join(catalog.meter_names)}, not {q(meter)}"
        )
    for key, value in p.items():
        if is_setting_key(key):
            continue  # checked by parse(); its file when the run is planned on its target
        k = _meter_key(catalog, meter, key)
        if k is None:
            by = f" (an {app} case is measured by it)" if app else ""
            raise UserError(
                f"{case_where(exp, case)} key {q(key)}: not an option of meter {q(meter)}{by}"
            )
        bad = _value_error(k, value, catalog)
        if bad:
            raise UserError(f"{case_where(exp, case)} key {q(key)}: {bad}")
    bad = check_probe_args(catalog, meter, p.get("probe_args", []))
    if bad:
        raise UserError(f"{case_where(exp, case)} key 'probe_args': {bad}")


def load_experiment(
    spec: str, scale: float = 1.0, root: Root = LIVE_ROOT, catalog: Catalog | None = None
) -> Experiment:
    source, text = read_source(spec)
    return expand(parse(text, source, catalog), scale, root)
