"""rtlab baseline: each board's reference experiment, for compare --baseline and farms."""

from __future__ import annotations

import click

from rtlab.cli._common import console, print_json, results_option, rich_table, store_from
from rtlab.errors import UserError
from rtlab.history import boards, clear_baseline, load_baselines, match_board, set_baseline


@click.group("baseline")
def baseline_group() -> None:
    """Mark an experiment as its board's reference (results/baselines.json):
    `rtlab compare --baseline` and the farm report compare each board against it."""


@baseline_group.command("set")
@click.argument("board")
@click.argument("experiment_id")
@results_option
def baseline_set(board: str, experiment_id: str, results_dir: str) -> int:
    """Make EXPERIMENT_ID the baseline of BOARD (it must have run on that board)."""
    store = store_from(results_dir)
    key = match_board(boards(store), board)
    rec = store.open(experiment_id)
    ran_on = rec.board()
    if ran_on.key != key:
        raise UserError(f"{rec.id} ran on board {ran_on.name} ({ran_on.key}), not {key}")
    _, old = set_baseline(store, rec)
    was = f" (was {old})" if old and old != rec.id else ""
    click.echo(f"baseline of {ran_on.name}: {rec.id}{was}")
    return 0


@baseline_group.command("show")
@click.argument("board", required=False)
@click.option("--json", "as_json", is_flag=True, help="JSON on stdout")
@results_option
def baseline_show(board: str | None, as_json: bool, results_dir: str) -> int:
    """The baseline of every board, or of BOARD."""
    store = store_from(results_dir)
    current = load_baselines(store)
    if board is not None:
        key = match_board(boards(store), board, extra=list(current))
        current = {key: current[key]} if key in current else {}
        if not current and not as_json:
            click.echo(f"no baseline set for {board}")
            return 0
    names = {k for k in current}
    present = {k: (store.root / v["experiment"]).is_dir() for k, v in current.items()}
    if as_json:
        print_json([{"key": k, **v, "present": present[k]} for k, v in sorted(current.items())])
        return 0
    if not names:
        click.echo("no baselines set")
        return 0
    rows = [
        [v["board"], k, v["experiment"] + ("" if present[k] else " (missing)"), v.get("set_utc")]
        for k, v in sorted(current.items(), key=lambda kv: kv[1]["board"])
    ]
    console().print(rich_table(None, ["board", "key", "baseline", "set"], rows, right_from=9))
    return 0


@baseline_group.command("clear")
@click.argument("board")
@results_option
def baseline_clear(board: str, results_dir: str) -> int:
    """Forget BOARD's baseline."""
    store = store_from(results_dir)
    key = match_board(boards(store), board, extra=list(load_baselines(store)))
    old = clear_baseline(store, key)
    click.echo(f"baseline of {board} cleared (was {old})" if old else f"{board} had no baseline")
    return 0
