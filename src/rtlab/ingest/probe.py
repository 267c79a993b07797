"""Import result documents made by hand with the probe (`rtlab-probe METER … --json FILE`),
for boards that rtlab cannot reach: a serial console only, a lab across an air gap.

`read_probe(path)` reads one document and the raw-sample files it names:

* Only a regular file of at most 256 MiB is read (as every import), with at most 2^24
  JSON values nested at most 64 deep (docs/cli.md, "Limits"); it must be a JSON object
  with an integer `schema` and a `meter`: a sysinfo document is named as such (it goes
  to `--sysinfo`), and so is the document of `rtlab-probe load`.
* Older schemas are migrated step by step (rtlab.probe.migrate), a newer one is refused,
  and the result is checked as every stored document is (types, int64 ranges): one line
  naming the file and the key.
* A thread's `raw_file` (`--raw FILE`) is looked for where the document says, then beside
  the document (its file name). A file that is found must be a regular raw-sample file of
  that thread holding `raw_samples` samples; it is stored with the document. One that is
  not found is left out with a note: the statistics come from the histogram then.

`import` records where the document came from: `source` (the file name), `format`
("rtlab-probe"), `schema` (as read, before migration), `raw_files` (thread index ->
the raw file named in the document) and `raw_missing` (those not found).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab._input import load_json
from rtlab.errors import UserError
from rtlab.ingest._limits import MAX_JSON_VALUES
from rtlab.ingest._text import display_name, named, read_bytes
from rtlab.probe import migrate
from rtlab.rawfile import read_header


@dataclass
class ProbeDocument:
    """One imported document and the raw-sample files to store beside it."""

    path: Path
    doc: dict[str, Any]
    raw: dict[int, Path] = field(default_factory=dict)  # thread index -> found raw file
    missing: list[str] = field(default_factory=list)  # raw files named but not found

    @property
    def meter(self) -> str:
        return str(self.doc.get("meter"))


def read_probe(path: Path) -> ProbeDocument:
    """Read, migrate and check one probe result document; UserError naming the file."""
    path = Path(path)
    with named(path):
        doc = load_json(read_bytes(path), MAX_JSON_VALUES)
        _identify(doc)
    schema = doc["schema"]
    doc = _clean_strings(migrate(doc, display_name(path)))
    out = ProbeDocument(path, doc)
    raw_files: dict[str, str] = {}
    for i, t in enumerate(doc["threads"]):
        name = t.get("raw_file")
        if not isinstance(name, str) or not name:
            continue
        index = t.get("index") if isinstance(t.get("index"), int) else i
        raw_files[str(index)] = name
        found = _find_raw(name, path.parent)
        if found is None:
            out.missing.append(name)
            t["raw_file"] = None
            continue
        _check_raw(found, t, index, path)
        out.raw[index] = found
    doc["import"] = {
        "source": path.name,
        "format": "rtlab-probe",
        "schema": schema,
        "raw_files": raw_files,
        "raw_missing": out.missing,
    }
    return out


def _identify(doc: Any) -> None:
    """Refuse what is no meter's result document, saying what it is."""
    if not isinstance(doc, dict):
        raise UserError("not an rtlab-probe result document (not a JSON object)")
    if doc.get("kind") == "sysinfo":
        raise UserError("a sysinfo document, not a result: give it with --sysinfo FILE")
    if not isinstance(doc.get("schema"), int) or isinstance(doc.get("schema"), bool):
        raise UserError("not an rtlab-probe result document (no integer 'schema')")
    if "meter" not in doc and isinstance(doc.get("loads"), list) and "threads" not in doc:
        raise UserError("the document of `rtlab-probe load`, not of a meter: nothing measured")
    if not isinstance(doc.get("meter"), str) or not doc["meter"]:
        raise UserError("not an rtlab-probe result document (no 'meter')")


def _clean_strings(value: Any) -> Any:
    """Lone surrogates from JSON escapes replaced: every string encodable as UTF-8."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_clean_strings(k): _clean_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean_strings(v) for v in value]
    return value


def _find_raw(name: str, doc_dir: Path) -> Path | None:
    """The raw file NAME as the document says it (relative: to the document's directory),
    else the file of that name beside the document."""
    if "\0" in name:
        return None
    p = Path(name)
    for candidate in (p if p.is_absolute() else doc_dir / p, doc_dir / p.name):
        try:
            os.stat(candidate)
        except (OSError, ValueError):
            continue
        return candidate
    return None


def _check_raw(path: Path, thread: dict[str, Any], index: int, doc: Path) -> None:
    """PATH must be the regular raw-sample file of thread INDEX with its raw_samples."""
    where = display_name(path)
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{where}: raw file of thread {index} is not a regular file")
    h = read_header(path)
    if h.thread_index != index:
        raise UserError(
            f"{where}: raw file of thread {h.thread_index}, but {display_name(doc)} names "
            f"it for thread {index}"
        )
    expect = thread.get("raw_samples")
    if isinstance(expect, int) and h.count != expect:
        raise UserError(
            f"{where}: {h.count} samples, but {display_name(doc)} says thread {index} "
            f"wrote {expect} (a truncated copy?)"
        )
