"""Probe options of an experiment's cases: what `probe_args` may hold (read once into
typed options), and the probe's own check of every case (`rtlab-probe METER ... --check`),
whose refusal names the case key that produced the refused value."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rtlab.errors import InternalError, UnsupportedError, UserError
from rtlab.probe import EXIT_UNSUPPORTED, EXIT_USAGE, Catalog, Refusal, one_line
from rtlab.probecall import Option, ProbeCall
from rtlab.records import CaseRecord

if TYPE_CHECKING:
    from rtlab.experiment import Experiment

#: Probe options that `probe_args` may not give: rtlab sets them for every run.
RESERVED_OPTIONS = frozenset({"json", "raw", "progress", "quiet", "check", "help", "stop-on-eof"})
DEFAULT_METER = "wakeup"
PROBE_ARGS = "probe_args"


def q(text: Any) -> str:
    """TEXT quoted for a one-line message."""
    return f"'{one_line(str(text))}'"


def probe_args_options(catalog: Catalog, meter: str, args: list[str]) -> list[Option]:
    """The options ARGS (the `probe_args` key: words as on a command line) give to METER,
    under their canonical names; UserError saying why when ARGS are not such options."""
    out: list[Option] = []
    i = 0
    while i < len(args):
        word = args[i]
        name, eq, value = word[2:].partition("=")
        if word in ("-h", "--help") or (word.startswith("--") and name in RESERVED_OPTIONS):
            raise UserError(f"{q(word)} is set by rtlab, it cannot be given in probe_args")
        if not word.startswith("--") or not name:
            raise UserError(
                f"{q(word)} is not an option (probe_args holds options and their values)"
            )
        o = catalog.option(meter, name)
        if o is None:
            raise UserError(f"{q(word)} is not an option of meter {q(meter)}")
        if o.name in RESERVED_OPTIONS:
            raise UserError(f"{q(word)} is set by rtlab, it cannot be given in probe_args")
        if o.takes_value and not eq:
            if i + 1 == len(args):
                raise UserError(f"{q(word)} needs a value")
            i += 1
            value = args[i]
        out.append(Option(o.name, value if o.takes_value else None, PROBE_ARGS))
        i += 1
    return out


def check_probe_args(catalog: Catalog, meter: str, args: list[str]) -> str | None:
    """Why ARGS cannot be given as probe_args to METER, or None."""
    try:
        probe_args_options(catalog, meter, args)
    except UserError as e:
        return str(e)
    return None


def case_where(exp: Experiment, case: CaseRecord) -> str:
    return f"{exp.source}: series {q(case.series)} ({one_line(case.name)})"


# --- checking with the probe -------------------------------------------------------------

CheckFn = Callable[[ProbeCall], Refusal | None]


def _refused_key(exp: Experiment, call: ProbeCall, refusal: Refusal) -> str | None:
    """The case key that produced the option value the probe refused, if one did."""
    if refusal.option is None and call.command and refusal.value == call.command[0]:
        return "app"  # its program (or the chrt/taskset that starts it) cannot be run
    if refusal.option is None or exp.catalog is None:
        return None
    o = exp.catalog.option(call.meter, refusal.option)
    given = call.option_from(o.name if o else refusal.option, refusal.value)
    return given.key if given is not None and given.key else None


def validate_with_probe(exp: Experiment, check: CheckFn) -> None:
    """Ask the probe (CHECK: a target's) to check every distinct case; the first refusal is
    raised, naming series, case and key: UserError, UnsupportedError (exit 3) or
    InternalError."""
    seen: set[ProbeCall] = set()
    for case in exp.cases:
        call = case.call
        if call is None or call in seen:
            continue
        seen.add(call)
        refusal = check(call)
        if refusal is None:
            continue
        key = _refused_key(exp, call, refusal)
        named = f" key '{key}'" if key else ""
        msg = f"{case_where(exp, case)}{named}: {one_line(refusal.message)}"
        if refusal.exit_code == EXIT_USAGE:
            raise UserError(msg)
        if refusal.exit_code == EXIT_UNSUPPORTED:
            raise UnsupportedError(msg)
        raise InternalError(f"{msg} (rtlab-probe --check exited {refusal.exit_code})")
