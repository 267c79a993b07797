"""Copy the files the audit reads from a system into a directory tree (a fixture).

`rtlab audit --capture DIR` records every path the facts reader opens and copies those
that exist, byte for byte. Per-process files (/proc/PID/...) are left out: they are a
moment's state and name the user's programs. Nothing else is read, so no environment,
credentials or logs end up in the tree.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from rtlab._input import read_regular
from rtlab.errors import UserError
from rtlab.system._facts import read_facts
from rtlab.system._root import MAX_SYSTEM_FILE_BYTES, RecordingRoot, SysRoot

_PER_PROCESS = re.compile(r"^/proc/\d+/")


def capture(source: SysRoot, dest: Path, rt_cpus: list[int] | None = None) -> list[str]:
    """Write the files the audit reads from SOURCE into DEST (new or empty); the paths copied."""
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UserError(f"{dest}: exists and is not an empty directory")
    rec = RecordingRoot(source)
    read_facts(rec, rt_cpus)
    tmp = dest.with_name(f".{dest.name}.tmp.{os.getpid()}")
    copied: list[str] = []
    try:
        for name in sorted(set(rec.reads)):
            if _PER_PROCESS.match(name):
                continue
            try:  # a regular file only, at most what the audit reads of it
                data = read_regular(source.path(name), MAX_SYSTEM_FILE_BYTES, truncate=True)
            except UserError:
                continue
            target = tmp / name.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            copied.append(name)
        tmp.mkdir(parents=True, exist_ok=True)
        if dest.exists():
            dest.rmdir()
        os.replace(tmp, dest)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise UserError(f"{dest}: {e.strerror or e}") from None
    return copied
