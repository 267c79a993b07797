"""rtlab import: turn other tools' output into stored experiments."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from rtlab.cli._common import print_json, results_option, store_from, visible
from rtlab.cli._import_probe import probe_cmd
from rtlab.ingest import read_cyclictest, read_rtla
from rtlab.records import CaseRecord, SeriesRecord, check_label, new_manifest
from rtlab.resultdoc import check_document
from rtlab.system import collect_fingerprint


@click.group("import")
def import_group() -> None:
    """Import results of other tools, and documents made by hand with rtlab-probe, as
    experiments."""


import_group.add_command(probe_cmd)


LABEL_OPTION = click.option(
    "--label", metavar="NAME", help="name the setup in every table and figure"
)


def _import_options(tool: str) -> Callable:
    """The arguments and options every import subcommand takes."""

    def wrap(fn: Callable) -> Callable:
        for deco in reversed(
            [
                click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False)),
                click.option(
                    "--name", default=f"{tool} import", show_default=True, help="experiment name"
                ),
                click.option(
                    "--series", default=tool, show_default=True, help="series name of the cases"
                ),
                LABEL_OPTION,
                click.option(
                    "--this-system",
                    is_flag=True,
                    help="record this machine's fingerprint (the files were made here)",
                ),
                click.option(
                    "--json",
                    "as_json",
                    is_flag=True,
                    help='JSON on stdout: {"id", "path", "cases"}',
                ),
                results_option,
            ]
        ):
            fn = deco(fn)
        return fn

    return wrap


@import_group.command("cyclictest")
@_import_options("cyclictest")
def cyclictest_cmd(**opts: Any) -> None:
    """Import cyclictest --json files or -h/--histfile histograms, one case per file.

    Every file is checked before anything is stored; a file that cannot be read
    stores nothing (exit 2).
    """
    _store_import("cyclictest", read_cyclictest, **opts)


@import_group.command("rtla")
@_import_options("rtla")
def rtla_cmd(**opts: Any) -> None:
    """Import rtla timerlat/osnoise hist or top output (captured stdout), one case per file.

    The kind and the time unit come from each file's content. Every file is checked
    before anything is stored; a file that cannot be read stores nothing (exit 2).
    """
    _store_import("rtla", read_rtla, **opts)


def _store_import(
    tool: str,
    read: Callable[[Path], dict[str, Any]],
    files: tuple[str, ...],
    name: str,
    series: str,
    label: str | None,
    this_system: bool,
    as_json: bool,
    results_dir: str,
) -> None:
    """Read and check every file, then store them as one experiment, one case per file."""
    store = store_from(results_dir)
    if label is not None:
        check_label(label)  # before anything is read
    docs = [read(Path(f)) for f in files]
    for f, doc in zip(files, docs, strict=True):
        check_document(doc, f)
    names = [Path(f).name for f in files]
    manifest = new_manifest(
        name=name,
        description=f"imported from {len(files)} {tool} file(s)",
        source=f"import:{tool}",
        series=[SeriesRecord(series, "", ["file"])],
        cases=[CaseRecord(i, series, n, {"file": n}) for i, n in enumerate(names)],
    )
    manifest.label = None if label is None else check_label(label)
    system = collect_fingerprint() if this_system else {"schema": 1, "imported": True}
    rec = store.create(
        manifest,
        f"# imported\n# {json.dumps(names)}\n",
        system,
        documents=dict(enumerate(docs)),
    )
    if as_json:
        print_json({"id": rec.id, "path": str(rec.path), "cases": len(docs)})
    else:
        click.echo(f"{visible(rec.id)}: imported {len(docs)} case(s)")
