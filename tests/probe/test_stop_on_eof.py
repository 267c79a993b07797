"""--stop-on-eof: a closed pipe or SSH channel (no signal) stops the run as SIGHUP would."""

from __future__ import annotations

import json
import subprocess

from . import procfs
from .conftest import wait_measuring


def test_end_of_stdin_stops_the_run_and_its_loads(probe, tmp_path):
    doc, progress = tmp_path / "out.json", tmp_path / "progress.jsonl"
    proc = subprocess.Popen(
        [str(probe), "wakeup", "--policy", "other", "--no-mlock", "--duration", "1h",
         "--load", "forkcopy:1", "--settle", "100ms", "--stop-on-eof", "--quiet",
         "--json", str(doc), "--progress", str(progress)],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        wait_measuring(progress, proc)
        assert procfs.live_in_group(proc.pid)  # the probe and its load
        proc.stdin.close()  # the channel closes: no signal, only end of file
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert procfs.wait_for(lambda: not procfs.live_in_group(proc.pid), timeout_s=10)
    d = json.loads(doc.read_text())
    assert d["complete"] is False and d["signal"] == "SIGHUP"
    assert d["threads"][0]["count"] > 0


def test_without_it_stdin_is_not_read(probe, tmp_path):
    doc = tmp_path / "out.json"
    cp = subprocess.run(
        [str(probe), "wakeup", "--policy", "other", "--no-mlock", "--loops", "50", "--quiet",
         "--json", str(doc)],
        stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
    )  # fmt: skip
    assert cp.returncode == 0
    assert json.loads(doc.read_text())["complete"] is True
