"""rtlab import: turn other tools' output into stored experiments."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from rtlab.cli._common import results_option, store_from
from rtlab.ingest import read_cyclictest
from rtlab.store import CaseRecord, write_json_atomic
from rtlab.system import collect_fingerprint


@click.group("import")
def import_group() -> None:
    """Import results of other tools as experiments."""


@import_group.command("cyclictest")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--name", default="cyclictest import", show_default=True, help="experiment name")
@click.option("--series", default="cyclictest", show_default=True, help="series name of the cases")
@click.option(
    "--this-system",
    is_flag=True,
    help="record this machine's fingerprint (the files were made here)",
)
@results_option
def cyclictest_cmd(
    files: tuple[str, ...], name: str, series: str, this_system: bool, results_dir: str
) -> None:
    """Import cyclictest --json files or -h/--histfile histograms, one case per file."""
    docs = [read_cyclictest(Path(f)) for f in files]  # every file checked before storing any
    cases = [
        CaseRecord(i, series, Path(f).name, {"file": Path(f).name}).to_dict()
        for i, f in enumerate(files)
    ]
    manifest = {
        "name": name,
        "description": f"imported from {len(files)} cyclictest file(s)",
        "source": "import:cyclictest",
        "scale": 1.0,
        "deadline_ns": None,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "complete": False,
        "notes": [],
        "series": [{"name": series, "description": "", "swept": ["file"]}],
        "cases": cases,
    }
    system = collect_fingerprint() if this_system else {"schema": 1, "imported": True}
    store = store_from(results_dir)
    rec = store.create(manifest, f"# imported\n# {json.dumps(list(files))}\n", system)
    for case, doc in zip(rec.cases, docs, strict=True):
        write_json_atomic(rec.path / "cases" / f"{case.index:03d}.json", doc)
        case.status, case.document = "done", f"cases/{case.index:03d}.json"
        rec.set_case(case)
    store.index(rec)
    click.echo(f"{rec.id}: imported {len(docs)} case(s)")
