"""rtlab list: the experiments in the results directory."""

from __future__ import annotations

import click

from rtlab.cli._common import (
    check_exclusive,
    console,
    output_options,
    print_csv,
    print_json,
    results_option,
    rich_table,
    store_from,
    visible,
    warn_store,
)
from rtlab.monitor._board import listing_row, stored_monitors
from rtlab.store import LISTING_COLUMNS, Store
from rtlab.targets._farm import farm_rows


@click.command("list")
@results_option
@output_options
def list_cmd(results_dir: str, as_json: bool, as_csv: bool) -> None:
    """List stored experiments (served from the results directory's index), farm runs
    (`rtlab farm run`: their cases are the targets, done when a target finished) and
    monitors (`rtlab monitor`: their windows so far in the cases column).

    A damaged experiment is skipped with a warning on stderr; a damaged index is rebuilt.
    """
    check_exclusive(as_json, as_csv)
    store: Store = store_from(results_dir)
    monitors = [listing_row(m) for m in stored_monitors(store)]
    rows = sorted(
        store.listing() + farm_rows(store) + monitors, key=lambda r: (r["created_utc"], r["id"])
    )
    warn_store(store)
    if as_json:
        print_json(rows)
    elif as_csv:
        print_csv(rows, list(LISTING_COLUMNS))
    elif not rows:
        click.echo(f"no experiments or monitors in {visible(results_dir)}/")
    else:
        labelled = any(r.get("label") for r in rows)
        console().print(
            rich_table(
                None,
                ["id", "name", *(["label"] * labelled), "cases", "kernel", "preempt", "created"],
                [
                    [
                        r["id"],
                        r["name"] or "",
                        *([r.get("label") or "-"] if labelled else []),
                        _cases(r),
                        r["kernel"] or "-",
                        r["preempt"] or "-",
                        r["created_utc"] or "-",
                    ]
                    for r in rows
                ],
                right_from=9,
            )
        )


def _cases(row: dict) -> str:
    if row.get("source") == "monitor":
        return f"{row['done']} windows"
    return f"{row['done']}/{row['cases']}" + ("" if row["complete"] else " (incomplete)")
