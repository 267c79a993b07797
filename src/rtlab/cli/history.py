"""rtlab history: the boards of the results store, or one board's experiments over time."""

from __future__ import annotations

from pathlib import Path

import click

from rtlab.analysis import metric
from rtlab.cli._common import (
    console,
    line,
    print_json,
    results_option,
    rich_table,
    store_from,
    visible,
    warn_store,
)
from rtlab.errors import UserError
from rtlab.history import board_history, board_records, boards, load_baselines, match_board
from rtlab.monitor._board import MonitorRow, monitor_row, stored_monitors
from rtlab.units import format_ns

MAX_CASES = 20


@click.command()
@click.argument("board", required=False)
@click.option(
    "--stat",
    default="p99",
    show_default=True,
    help="the statistic per experiment: min, avg, median, p90, p99, p99.9, p99.99, max, …",
)
@click.option(
    "--case",
    "cases",
    multiple=True,
    metavar="NAME",
    help="a case (NAME, SERIES/NAME, or a series: its worst case); repeatable "
    "[default: the worst case of each experiment]",
)
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False),
    help="write the statistic over time as a figure (.svg, .png or .pdf)",
)
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout")
@results_option
def history(
    board: str | None,
    stat: str,
    cases: tuple[str, ...],
    plot_path: str | None,
    as_json: bool,
    results_dir: str,
) -> int:
    """The boards known (without BOARD) with their experiments and monitors, or BOARD's
    experiments over time: each one's setup (what differs between them: kernel,
    preemption model, boot line, tuning), the kernel changes marked, and --stat of each
    --case; then BOARD's monitors (`rtlab monitor`): when each ran, its windows, its gaps,
    its worst window's maximum and its setup.

    A board is the target an experiment ran through (its name), else the machine it ran
    on (its machine ID, else its host name). BOARD is a board's name or key, or a unique
    prefix of one.
    """
    try:
        wanted = metric(stat)
    except UserError as e:
        raise click.BadParameter(str(e), param_hint="--stat") from None
    if len(cases) > MAX_CASES:
        raise click.BadParameter(f"at most {MAX_CASES} cases", param_hint="--case")
    for c in cases:
        if not c.strip() or not c.isprintable():
            raise click.BadParameter(f"bad case name {c!r}", param_hint="--case")
    store = store_from(results_dir)
    stored = stored_monitors(store)
    known = boards(store, stored)
    baselines = load_baselines(store)
    if board is None:
        if cases or plot_path:
            raise click.UsageError("--case and --plot need a BOARD")
        warn_store(store)
        _print_boards(known, baselines, as_json)
        return 0
    key = match_board(known, board)
    recs = board_records(store, key)
    rows = board_history(recs, wanted, cases)
    mons = [monitor_row(m.rec) for m in stored if m.board.key == key]
    warn_store(store)
    name = next(b.name for b in known if b.key == key)
    ident = recs[-1].board() if recs else next(m.board for m in stored if m.board.key == key)
    base = baselines.get(key, {}).get("experiment")
    written = None
    if plot_path and not rows:
        raise click.UsageError(f"{name} has no experiment to plot (its monitors: rtlab report ID)")
    if plot_path:
        from rtlab.report._history import history_plot
        from rtlab.report.plots import save

        out = Path(plot_path)
        if not out.parent.is_dir():
            raise click.BadParameter(f"{out.parent}: no such directory", param_hint="--plot")
        written = save(history_plot(rows, wanted, name), out)
    if as_json:
        print_json(
            {
                "board": key,
                "name": name,
                "identity": ident.to_dict(),
                "stat": wanted.key,
                "baseline": base,
                "plot": str(written) if written else None,
                "experiments": [r.to_dict() for r in rows],
                "monitors": [m.to_dict() for m in mons],
            }
        )
        return 0
    out_c = console()
    facts = [
        f"{k} {v}"
        for k, v in (
            ("target", ident.target),
            ("model", ident.model),
            ("host", ident.hostname),
            ("machine ID", ident.machine_id and ident.machine_id[:12]),
        )
        if v
    ]
    out_c.print(line((name, "bold"), f" ({key})" + (": " + ", ".join(facts) if facts else "")))
    columns = list(dict.fromkeys(k for r in rows for k in r.values))
    table = []
    for r in rows:
        marks = [f"kernel {r.kernel_change}"] if r.kernel_change else []
        marks += ["machine ID changed"] if r.machine_change else []
        marks += ["baseline"] if r.id == base else []
        table.append(
            [r.id, r.created_utc or "-", r.kernel or "-", r.setup]
            + [wanted.text(r.values.get(c)) for c in columns]
            + [", ".join(marks)]
        )
    headers = ["experiment", "created", "kernel", "setup"]
    headers += [f"{wanted.label} {c}" for c in columns] + ["marks"]
    if table:
        out_c.print(rich_table(None, headers, table, right_from=4))
    if mons:
        out_c.print(_monitor_table(mons))
    if written:
        click.echo(f"plot: {visible(written)}")
    return 0


def _monitor_table(mons: list[MonitorRow]) -> object:
    table = [
        [
            m.id,
            m.start_utc or m.created_utc or "-",
            m.end_utc or "-",
            m.kernel or "-",
            m.setup,
            m.windows,
            f"{m.gaps} ({m.gap_s:g} s)" if m.gaps else "0",
            format_ns(m.max_ns),
            m.worst_utc or "-",
        ]
        for m in mons
    ]
    headers = ["monitor", "start", "end", "kernel", "setup", "windows", "gaps", "worst max",
               "worst window"]  # fmt: skip
    return rich_table(None, headers, table, right_from=5)


def _print_boards(known: list, baselines: dict, as_json: bool) -> None:
    if as_json:
        print_json(
            [{**b.to_dict(), "baseline": baselines.get(b.key, {}).get("experiment")} for b in known]
        )
        return
    if not known:
        click.echo("no experiments or monitors stored: no boards")
        return
    rows = [
        [
            b.name,
            b.key if len(b.key) <= 48 else b.key[:47] + "…",
            (b.identity.model if b.identity else None) or "-",
            len(b.experiments),
            len(b.monitors),
            f"{b.first_utc or '-'} … {b.last_utc or '-'}",
            ", ".join(b.kernels[-3:]) or "-",
            baselines.get(b.key, {}).get("experiment") or "-",
        ]
        for b in known
    ]
    headers = ["board", "key", "model", "experiments", "monitors", "from … to", "kernels",
               "baseline"]  # fmt: skip
    console().print(rich_table(None, headers, rows, right_from=3))
