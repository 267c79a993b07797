"""rtlab import probe: documents made by hand with rtlab-probe, stored as an experiment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from rtlab.cli._common import DURATION, print_json, results_option, store_from, visible
from rtlab.errors import UserError
from rtlab.ingest._text import display_name
from rtlab.ingest.probe import ProbeDocument, read_probe
from rtlab.records import MAX_DEADLINE_NS, CaseRecord, SeriesRecord, check_label, new_manifest
from rtlab.system import audit_system, load_snapshot


@click.command("probe")
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--name", default="probe import", show_default=True, help="experiment name")
@click.option("--series", help="series name of every case (default: each document's meter)")
@click.option(
    "--sysinfo",
    "sysinfo",
    metavar="FILE",
    help="the board's `rtlab-probe sysinfo --json FILE`: its fingerprint and audit are stored",
)
@click.option(
    "--this-system",
    is_flag=True,
    help="record this machine's fingerprint and audit (the files were made here)",
)
@click.option(
    "--deadline",
    type=DURATION,
    help="the experiment's deadline (default: the documents' own --deadline, when they agree)",
)
@click.option("--label", metavar="NAME", help="name the setup in every table and figure")
@click.option("--json", "as_json", is_flag=True, help='JSON on stdout: {"id", "path", "cases"}')
@results_option
def probe_cmd(
    files: tuple[str, ...],
    name: str,
    series: str | None,
    sysinfo: str | None,
    this_system: bool,
    deadline: int | None,
    label: str | None,
    as_json: bool,
    results_dir: str,
) -> None:
    """Import result documents of rtlab-probe (`rtlab-probe METER ... --json FILE`), one
    case per file, with the raw-sample files they name (--raw) when they are found.

    For boards rtlab cannot reach. Documents of older schemas are migrated. Every file
    is checked before anything is stored; a file that cannot be read stores nothing
    (exit 2).
    """
    if sysinfo and this_system:
        raise click.UsageError("--sysinfo and --this-system exclude each other")
    label = None if label is None else check_label(label)
    store = store_from(results_dir)
    imported = [read_probe(Path(f)) for f in files]
    for p in imported:
        for missing in p.missing:
            click.echo(
                visible(
                    f"note: {p.path}: raw file {missing} not found: imported without raw samples"
                ),
                err=True,
            )
    meters = sorted({p.meter for p in imported})
    if series is not None and len(meters) > 1:
        raise UserError(
            f"--series {series}: the files are of several meters ({', '.join(meters)}): "
            "leave --series out to get one series per meter"
        )
    dl = deadline if deadline is not None else _common_deadline(imported)
    system, audit = _system(sysinfo, this_system, imported, dl)
    names = _case_names(files)
    cases = [
        CaseRecord(i, series or p.meter, names[i], {"file": names[i]})
        for i, p in enumerate(imported)
    ]
    order = list(dict.fromkeys(c.series for c in cases))
    extra: dict[str, Path | dict[str, Any]] = {} if audit is None else {"audit.json": audit}
    for case, p in zip(cases, imported, strict=True):
        extra.update(_raw_names(case, p))
    manifest = new_manifest(
        name=name,
        description=f"imported from {len(files)} rtlab-probe document(s)",
        source="import:probe",
        deadline_ns=dl,
        series=[SeriesRecord(s, "", ["file"]) for s in order],
        cases=cases,
    )
    manifest.label = label
    rec = store.create(
        manifest,
        f"# imported\n# {json.dumps(names)}\n",
        system,
        documents={i: p.doc for i, p in enumerate(imported)},
        files=extra,
    )
    if as_json:
        print_json({"id": rec.id, "path": str(rec.path), "cases": len(imported)})
    else:
        click.echo(f"{visible(rec.id)}: imported {len(imported)} case(s)")


def _case_names(files: tuple[str, ...]) -> list[str]:
    """The file names; a name two files share is replaced by the path as given."""
    base = [Path(f).name for f in files]
    return [b if base.count(b) == 1 else f for b, f in zip(base, files, strict=True)]


def _raw_names(case: CaseRecord, p: ProbeDocument) -> dict[str, Path | dict[str, Any]]:
    """The raw files of P stored as cases/NNN.raw (one thread) or NNN.raw.T (several),
    the names the document then gives (relative to its directory)."""
    out: dict[str, Path | dict[str, Any]] = {}
    several = len(p.doc["threads"]) > 1
    for i, t in enumerate(p.doc["threads"]):
        index = t.get("index") if isinstance(t.get("index"), int) else i
        source = p.raw.get(index)
        if source is None:
            continue
        stored = f"{case.slug}.raw" + (f".{index}" if several else "")
        t["raw_file"] = stored
        out[f"cases/{stored}"] = source
    return out


def _common_deadline(imported: list[ProbeDocument]) -> int | None:
    """The documents' --deadline when every one has the same, else None."""
    values = []
    for p in imported:
        params = p.doc.get("params")
        v = params.get("deadline_ns") if isinstance(params, dict) else None
        values.append(v if isinstance(v, int) and not isinstance(v, bool) else None)
    first = values[0]
    if first is None or not 0 < first <= MAX_DEADLINE_NS or any(v != first for v in values):
        return None
    return first


def _system(
    sysinfo: str | None, this_system: bool, imported: list[ProbeDocument], deadline: int | None
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """system.json and audit.json: of the board's sysinfo document, of this machine, or
    what the documents' `host` says (no audit)."""
    if this_system:
        return audit_system(deadline_ns=deadline)
    if sysinfo:
        root = load_snapshot(sysinfo)  # a regular file of bounded size, never a FIFO
        system, audit = audit_system(root, deadline_ns=deadline)
        system["imported"] = True
        hosts = {n for p in imported if (n := _uname(p.doc).get("nodename")) is not None}
        board = system.get("hostname")
        if board and hosts and hosts != {board}:
            click.echo(
                visible(
                    f"note: --sysinfo {display_name(sysinfo)} is of host {board}, the "
                    f"documents of {', '.join(sorted(hosts))}"
                ),
                err=True,
            )
        return system, audit
    host = imported[0].doc.get("host")
    if not isinstance(host, dict):
        host = {}
    uname = _uname(imported[0].doc)
    system = {
        "schema": 1,
        "imported": True,
        "hostname": uname.get("nodename"),
        "kernel_release": uname.get("release"),
        "kernel_version": uname.get("version"),
        "machine": uname.get("machine"),
        "realtime": host.get("realtime") == 1,
    }
    return system, None


def _uname(doc: dict[str, Any]) -> dict[str, Any]:
    host = doc.get("host")
    uname = host.get("uname") if isinstance(host, dict) else None
    return {k: v for k, v in uname.items() if isinstance(v, str)} if isinstance(uname, dict) else {}
