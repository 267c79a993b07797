"""Find the rtlab-probe binary, check arguments with it, run it, read its documents."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from rtlab.errors import UnsupportedError, UserError

RESULT_SCHEMA = 1

# Probe exit codes (docs/result-format.md, README).
EXIT_OK, EXIT_THRESHOLD, EXIT_USAGE, EXIT_UNSUPPORTED = 0, 1, 2, 3


def find_probe() -> Path:
    """$RTLAB_PROBE, else the rtlab-probe installed beside this Python, else $PATH."""
    env = os.environ.get("RTLAB_PROBE")
    if env:
        path = Path(env)
        if not path.is_file():
            raise UserError(f"RTLAB_PROBE={env}: no such file")
        return path
    beside = Path(sys.executable).parent / "rtlab-probe"
    if beside.is_file():
        return beside
    found = shutil.which("rtlab-probe")
    if found:
        return Path(found)
    raise UserError("rtlab-probe not found: install the package (pip install .) or set RTLAB_PROBE")


def check_args(args: list[str], probe: Path | None = None) -> str | None:
    """Validate probe arguments without measuring; the probe's one-line reason, or None."""
    cp = subprocess.run(
        [str(probe or find_probe()), *args, "--check"], capture_output=True, text=True, timeout=30
    )
    if cp.returncode == EXIT_OK:
        return None
    line = (cp.stderr.strip().splitlines() or [f"exit {cp.returncode}"])[-1]
    return line.removeprefix("rtlab-probe ").split(": ", 1)[-1] if ": " in line else line


def migrate(doc: dict, source: str) -> dict:
    """Bring a result document to the current schema, step by step."""
    schema = doc.get("schema")
    if not isinstance(schema, int):
        raise UserError(f"{source}: not an rtlab result document (no integer 'schema')")
    if schema > RESULT_SCHEMA:
        raise UserError(f"{source}: schema {schema} is newer than this rtlab ({RESULT_SCHEMA})")
    # schema 1 is the first; future steps go here: if schema == 1: doc = _v1_to_v2(doc) ...
    if not isinstance(doc.get("threads"), list):
        raise UserError(f"{source}: result document has no 'threads' list")
    return doc


def load_document(path: Path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
    except FileNotFoundError as e:
        raise UserError(f"{path}: no such file") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not valid JSON ({e})") from e
    if not isinstance(doc, dict):
        raise UserError(f"{path}: not a JSON object")
    return migrate(doc, str(path))


@dataclass
class ProbeOutcome:
    returncode: int
    document: Path | None  # None when the probe wrote nothing
    stderr: str
    interrupted: bool


ProgressFn = Callable[[dict], None]


def _term_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _lines(stream) -> Iterator[str]:
    yield from iter(stream.readline, "")


def run_probe(
    args: list[str],
    document: Path,
    on_progress: ProgressFn | None = None,
    probe: Path | None = None,
) -> ProbeOutcome:
    """Run the probe with ARGS, writing DOCUMENT; feed its progress lines to ON_PROGRESS.

    The probe runs in its own session so that a terminal's ^C reaches rtlab only;
    rtlab forwards SIGINT/SIGTERM, and the probe still writes an incomplete document.
    """
    cmd = [str(probe or find_probe()), *args, "--json", str(document), "--progress", "-", "--quiet"]
    interrupted = False
    previous = signal.signal(signal.SIGTERM, _term_as_interrupt)
    proc = None
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        try:
            for line in _lines(proc.stdout):
                if on_progress:
                    with contextlib.suppress(json.JSONDecodeError):  # display only
                        on_progress(json.loads(line))
        except KeyboardInterrupt:
            interrupted = True
            proc.send_signal(signal.SIGINT)  # the probe still writes an incomplete document
            proc.stdout.read()
        stderr = proc.stderr.read()
        rc = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
        if proc is not None and proc.poll() is None:  # interrupted at an unlucky moment
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    if rc == EXIT_UNSUPPORTED:
        raise UnsupportedError(stderr.strip().splitlines()[-1] if stderr.strip() else "exit 3")
    if rc == EXIT_USAGE:
        raise UserError(stderr.strip().splitlines()[-1] if stderr.strip() else "bad usage")
    return ProbeOutcome(rc, document if document.exists() else None, stderr, interrupted)
