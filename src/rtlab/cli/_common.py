"""Shared CLI pieces: option types, the results directory, table output (rich, JSON, CSV).

Every string that comes from the user, a file or the system is printed literally: the
console interprets no markup, and control characters are shown as escapes (`visible`),
in tables, messages and CSV alike; JSON is ASCII with every such character escaped
(rtlab._output). Styling is applied only through rich Text objects built here.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from rtlab._output import csv_text, json_text
from rtlab._output import visible as visible  # re-exported for the commands
from rtlab.errors import UserError
from rtlab.records import MAX_DEADLINE_NS
from rtlab.store import Store
from rtlab.system import EMULATED_WARNING, is_emulated, virt_label, virt_warning
from rtlab.units import format_ns, parse_duration_ns

if TYPE_CHECKING:  # rtlab.results brings numpy: not loaded by the commands without statistics
    from rtlab.results import CaseConditions

EXIT_THRESHOLD = 1
EXIT_USAGE = 2
EXIT_UNSUPPORTED = 3
EXIT_INTERNAL = 4
EXIT_OUTPUT = 5
EXIT_CONDITIONS = 6

#: A command function, as the option decorators take and return it.
CommandFn = TypeVar("CommandFn", bound=Callable[..., Any])


class Duration(click.ParamType):
    """A duration with its unit, > 0 and at most an hour (as every deadline)."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            ns = parse_duration_ns(value)
        except UserError as e:
            self.fail(str(e), param, ctx)
        if not 0 < ns <= MAX_DEADLINE_NS:
            self.fail(f"{value!r} is out of range (1ns..1h)", param, ctx)
        return ns


DURATION = Duration()

results_option = click.option(
    "--results",
    "results_dir",
    default="results",
    show_default=True,
    envvar="RTLAB_RESULTS",
    show_envvar=True,
    type=click.Path(file_okay=False),
    help="results directory",
)


def store_from(results_dir: str) -> Store:
    return Store(results_dir)


def warn_store(store: Store) -> None:
    """Damaged experiments skipped and indexes rebuilt: said on stderr, one line each."""
    for w in store.warnings:
        click.echo(f"rtlab: warning: {visible(w)}", err=True)
    store.warnings.clear()


scale_option = click.option(
    "--scale",
    type=click.FloatRange(min=0, min_open=True, max=1e6),
    default=1.0,
    show_default=True,
    help="multiply every case's loops or duration",
)


def output_options(f: CommandFn) -> CommandFn:
    f = click.option("--csv", "as_csv", is_flag=True, help="CSV on stdout")(f)
    f = click.option("--json", "as_json", is_flag=True, help="JSON on stdout")(f)
    return f


def check_exclusive(as_json: bool, as_csv: bool) -> None:
    if as_json and as_csv:
        raise click.UsageError("--json and --csv exclude each other")


def print_json(data: Any) -> None:
    """DATA as indented JSON: ASCII, non-finite numbers as null (rtlab._output)."""
    click.echo(json_text(data, indent=1))


def print_json_line(data: Any) -> None:
    """DATA as one line of JSON (JSON lines output)."""
    click.echo(json_text(data))


def print_csv(rows: list[dict[str, Any]], columns: list[str]) -> None:
    """ROWS as CSV, every cell with its control characters escaped (rtlab._output)."""
    click.echo(csv_text(rows, columns), nl=False)


def fmt(value: Any, duration: bool) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if duration:
        return format_ns(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def lit(value: Any, style: str = "") -> Text:
    """A literal cell or message part: never read as markup."""
    return value if isinstance(value, Text) else Text(visible(value), style=style)


def line(*parts: Any) -> Text:
    """One output line from literal parts; a (text, style) tuple is a styled part."""
    return Text.assemble(*[lit(*p) if isinstance(p, tuple) else lit(p) for p in parts])


def console(err: bool = False) -> Console:
    # Piped output (logs, CI) is not cut to 80 columns. No markup, no emoji codes:
    # everything printed is literal unless styled through Text.
    stream = sys.stderr if err else sys.stdout
    return Console(
        file=stream,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=False,
        width=None if stream.isatty() else 200,
    )


def rich_table(
    title: str | None, headers: list[str], rows: list[list[Any]], right_from: int = 1
) -> Table:
    table = Table(title=lit(title) if title else None, title_justify="left", header_style="bold")
    for i, h in enumerate(headers):
        table.add_column(lit(h), justify="right" if i >= right_from else "left", no_wrap=i == 0)
    for r in rows:
        table.add_row(*[lit(c) for c in r])
    return table


def verdict(
    rows: list[dict[str, Any]],
    deadline_ns: int | None,
    virtualization: dict[str, Any] | None = None,
    conditions: Sequence[CaseConditions] = (),
) -> tuple[int, Text | None]:
    """The verdict of finished cases (rows with series, case, max): (exit status, its
    lines). CONDITIONS NOT MET, exit 6, when some case did not run in the conditions it
    asked for (CONDITIONS, whatever the deadline); else PASS/FAIL against the deadline,
    FAIL (exit 1) when a case's max exceeds it, (0, None) without one. Measured under
    emulation (VIRTUALIZATION says TCG) there is no PASS/FAIL: the latencies are emulation
    times; under a hypervisor the verdict says it includes the hypervisor's. The
    conditions' warnings follow, one line per case; they change no exit status."""
    status, first = _latency_verdict(rows, deadline_ns, virtualization or {})
    lines = [first] if first is not None else []
    not_met = [c for c in conditions if not c.conditions.met]
    if not_met:
        status = EXIT_CONDITIONS
        if not is_emulated(virtualization or {}):
            lines = []
        shown = "; ".join(f"{c.where}: {', '.join(c.conditions.not_met)}" for c in not_met[:3])
        more = f"; and {len(not_met) - 3} more case(s)" if len(not_met) > 3 else ""
        judged = (
            f" (latencies not judged against {format_ns(deadline_ns)})"
            if deadline_ns is not None and not is_emulated(virtualization or {})
            else ""
        )
        lines.append(line(("CONDITIONS NOT MET", "bold red"), f": {shown}{more}{judged}"))
    for c in conditions:
        if c.conditions.warnings:
            lines.append(
                line(("warning", "yellow"), f": {c.where}: {'; '.join(c.conditions.warnings)}")
            )
    return status, Text("\n").join(lines) if lines else None


def _latency_verdict(
    rows: list[dict[str, Any]], deadline_ns: int | None, v: dict[str, Any]
) -> tuple[int, Text | None]:
    if deadline_ns is None:
        return 0, None
    if is_emulated(v):
        return 0, line(
            ("NO VERDICT", "bold yellow"),
            f": {EMULATED_WARNING}; {len(rows)} case(s) not judged against "
            f"{format_ns(deadline_ns)}",
        )
    warning = virt_warning(v)
    tail = f" ({warning})" if warning else ""
    over = [r for r in rows if r.get("max") is not None and r["max"] > deadline_ns]
    if not over:
        return 0, line(
            ("PASS", "bold green"), f": {len(rows)} case(s) within {format_ns(deadline_ns)}{tail}"
        )
    worst = max(over, key=lambda r: r["max"])
    return EXIT_THRESHOLD, line(
        ("FAIL", "bold red"),
        f": {len(over)} of {len(rows)} case(s) exceed the deadline {format_ns(deadline_ns)} "
        f"(worst: {worst['series']} / {worst['case']}, max {format_ns(worst['max'])}){tail}",
    )


def verdict_fields(
    status: int,
    deadline_ns: int | None,
    virtualization: dict[str, Any] | None,
    conditions: Sequence[CaseConditions] = (),
) -> dict[str, Any]:
    """The verdict keys of --json: `verdict` PASS, FAIL, CONDITIONS NOT MET or null (no
    deadline, or emulated: `no_verdict` says why), the `virtualization` it was measured
    under and its warning, `conditions_not_met` and `condition_warnings` (one object per
    reason: series, case, reason)."""
    v = virtualization or {}
    not_met = condition_items(conditions, "not_met")
    emulated = is_emulated(v) and (deadline_ns is not None or bool(not_met))
    if emulated:
        word = None
    elif not_met:
        word = "CONDITIONS NOT MET"
    elif deadline_ns is None:
        word = None
    else:
        word = "FAIL" if status else "PASS"
    return {
        "verdict": word,
        "no_verdict": EMULATED_WARNING if emulated else None,
        "virtualization": virt_label(v),
        "virtualization_warning": virt_warning(v),
        "conditions_not_met": not_met,
        "condition_warnings": condition_items(conditions, "warnings"),
    }


def condition_items(conditions: Sequence[CaseConditions], which: str) -> list[dict[str, Any]]:
    """Each reason (WHICH: "not_met" or "warnings") of CONDITIONS as {series, case, reason}."""
    return [
        {"series": c.series, "case": c.case, "reason": r}
        for c in conditions
        for r in getattr(c.conditions, which)
    ]


def print_views(out: Console, tables: list, title_suffix: str = "") -> None:
    """Each meter's table: the view's latency statistics and columns, a row per case (or
    per CPU for a view of threads)."""
    from rtlab.analysis import METRICS

    for view, rows in tables:
        headers = ["series", "case"] + [METRICS[k].label for k in view.latency]
        headers += [c.label for c in view.columns]
        cells = [
            [r["series"], r["label"]]
            + [fmt(r.get(k), True) for k in view.latency]
            + [c.format(r.get(c.key)) for c in view.columns]
            for r in rows
        ]
        out.print(rich_table(f"{view.title}: {view.question}{title_suffix}", headers, cells, 2))
