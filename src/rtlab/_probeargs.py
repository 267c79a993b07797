"""Probe arguments of an experiment's cases: what `probe_args` may hold, and the probe's
own check of every case (`rtlab-probe METER ARGS --check`), whose refusal names the case
key that produced the refused value."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.errors import InternalError, UnsupportedError, UserError
from rtlab.probe import EXIT_UNSUPPORTED, EXIT_USAGE, Catalog, Refusal, check_args, one_line
from rtlab.records import CaseRecord

if TYPE_CHECKING:
    from rtlab.experiment import Experiment

#: Probe options that `probe_args` may not give: rtlab sets them for every run.
RESERVED_OPTIONS = frozenset({"json", "raw", "progress", "quiet", "check", "help", "stop-on-eof"})
DEFAULT_METER = "wakeup"


def q(text: Any) -> str:
    """TEXT quoted for a one-line message."""
    return f"'{one_line(str(text))}'"


def check_probe_args(catalog: Catalog, meter: str, args: list[str]) -> str | None:
    """Why ARGS cannot be given as probe_args to METER, or None."""
    i = 0
    while i < len(args):
        word = args[i]
        name, eq, _ = word[2:].partition("=")
        if word in ("-h", "--help") or (word.startswith("--") and name in RESERVED_OPTIONS):
            return f"{q(word)} is set by rtlab, it cannot be given in probe_args"
        if not word.startswith("--") or not name:
            return f"{q(word)} is not an option (probe_args holds options and their values)"
        o = catalog.option(meter, name)
        if o is None:
            return f"{q(word)} is not an option of meter {q(meter)}"
        if o.name in RESERVED_OPTIONS:
            return f"{q(word)} is set by rtlab, it cannot be given in probe_args"
        if o.takes_value and not eq:
            if i + 1 == len(args):
                return f"{q(word)} needs a value"
            i += 1
        i += 1
    return None


def case_where(exp: Experiment, case: CaseRecord) -> str:
    return f"{exp.source}: series {q(case.series)} ({one_line(case.name)})"


# --- checking with the probe -------------------------------------------------------------

CheckFn = Callable[[list[str]], Refusal | None]


def _probe_args_options(catalog: Catalog, meter: str, args: list[str]) -> dict[str, list[str]]:
    """Canonical option -> the values probe_args gives it."""
    out: dict[str, list[str]] = {}
    i = 0
    while i < len(args):
        name, eq, value = args[i][2:].partition("=")
        o = catalog.option(meter, name)
        if o is not None:
            if o.takes_value and not eq and i + 1 < len(args):
                i += 1
                value = args[i]
            out.setdefault(o.name, []).append(value)
        i += 1
    return out


def _refused_key(exp: Experiment, case: CaseRecord, refusal: Refusal) -> str | None:
    """The case key that produced the option value the probe refused, if one did."""
    if refusal.option is None or exp.catalog is None:
        return None
    p, catalog = case.params, exp.catalog
    meter = p.get("meter", DEFAULT_METER)
    o = catalog.option(meter, refusal.option)
    option = o.name if o else refusal.option
    extra = _probe_args_options(catalog, meter, p.get("probe_args", []))
    if option == "load":
        for key, spec in exp.load_keys.get(case.index, []):
            if spec == refusal.value:
                return key
        return "probe_args" if "load" in extra else None
    key = "mlock" if option == "no-mlock" else option.replace("-", "_")
    if option in extra and (refusal.value in extra[option] or key not in p):
        return "probe_args"
    return key if key in p else None


def validate_with_probe(
    exp: Experiment, check: CheckFn | None = None, probe: Path | None = None
) -> None:
    """Ask the probe to check every distinct case (default: check_args with PROBE, else the
    probe the catalog came from); the first refusal is raised, naming series, case and key:
    UserError, UnsupportedError (exit 3) or InternalError."""
    if check is None:
        where = probe or (exp.catalog.probe if exp.catalog else None)

        def check(args: list[str]) -> Refusal | None:
            return check_args(args, where)

    seen: set[tuple[str, ...]] = set()
    for case in exp.cases:
        args = tuple(case.args)
        if args in seen:
            continue
        seen.add(args)
        refusal = check(case.args)
        if refusal is None:
            continue
        key = _refused_key(exp, case, refusal)
        named = f" key '{key}'" if key else ""
        msg = f"{case_where(exp, case)}{named}: {one_line(refusal.message)}"
        if refusal.exit_code == EXIT_USAGE:
            raise UserError(msg)
        if refusal.exit_code == EXIT_UNSUPPORTED:
            raise UnsupportedError(msg)
        raise InternalError(f"{msg} (rtlab-probe --check exited {refusal.exit_code})")
