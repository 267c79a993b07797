"""Shared CLI pieces: option types, the results directory, table output (rich, JSON, CSV)."""

from __future__ import annotations

import csv
import io
import json
import math
import sys
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from rtlab.errors import UserError
from rtlab.store import Store
from rtlab.units import format_ns, parse_duration_ns

EXIT_USAGE = 2
EXIT_UNSUPPORTED = 3


class Duration(click.ParamType):
    name = "DURATION"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return parse_duration_ns(value)
        except UserError as e:
            self.fail(str(e), param, ctx)


DURATION = Duration()

results_option = click.option(
    "--results",
    "results_dir",
    default="results",
    show_default=True,
    type=click.Path(file_okay=False),
    help="results directory",
)


def store_from(results_dir: str) -> Store:
    return Store(results_dir)


def output_options(f):
    f = click.option("--csv", "as_csv", is_flag=True, help="CSV on stdout")(f)
    f = click.option("--json", "as_json", is_flag=True, help="JSON on stdout")(f)
    return f


def check_exclusive(as_json: bool, as_csv: bool) -> None:
    if as_json and as_csv:
        raise click.UsageError("--json and --csv exclude each other")


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def print_json(data: Any) -> None:
    click.echo(json.dumps(_clean(data), indent=1))


def print_csv(rows: list[dict[str, Any]], columns: list[str]) -> None:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if row.get(k) is None else row.get(k)) for k in columns})
    click.echo(buf.getvalue(), nl=False)


def fmt(value: Any, duration: bool) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if duration:
        return format_ns(value)
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def console() -> Console:
    # Piped output (logs, CI) is not cut to 80 columns.
    return Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 200)


def rich_table(
    title: str | None, headers: list[str], rows: list[list[str]], right_from: int = 1
) -> Table:
    table = Table(title=title, title_justify="left", header_style="bold")
    for i, h in enumerate(headers):
        table.add_column(h, justify="right" if i >= right_from else "left", no_wrap=i == 0)
    for r in rows:
        table.add_row(*r)
    return table
