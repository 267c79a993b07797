"""A FIFO given as an output with no reader: the probe waits for one (and says so), but
SIGTERM and SIGINT still stop it, with nothing left running: loads reaped, no tracefs
instance. The output the signal cut short is exit 5. Each probe is stopped by its PID,
and only how it ended is asserted, never how fast."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from . import procfs
from .conftest import is_root, online_cpus

LAST = online_cpus()[-1]
TRACEFS = Path("/sys/kernel/tracing")
HAS_TRACEFS = is_root() and (TRACEFS / "instances").is_dir()
WAITING = "waiting for a reader of"
SIGNALS = [signal.SIGTERM, signal.SIGINT]


class Probe:
    """A probe started in the background, its stderr collected line by line."""

    def __init__(self, probe: Path, args: list[str]):
        self.proc = subprocess.Popen(
            [str(probe), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, text: str) -> None:
        found = procfs.wait_for(
            lambda: any(text in ln for ln in self.lines) or self.proc.poll() is not None,
            timeout_s=60,
        )
        assert found and self.proc.poll() is None, (self.proc.returncode, self.lines)

    def stop(self, sig: int) -> int:
        """Send SIG; the exit status once it has ended (killed by PID if it does not)."""
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.reader.join(10)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def load_workers(pid: int) -> list[procfs.ProcStat]:
    return [c for c in procfs.children(pid) if c.comm.startswith("rtlab:") and c.state != "Z"]


def our_instance(pid: int) -> bool:
    return HAS_TRACEFS and (TRACEFS / "instances" / f"rtlab-{pid}").exists()


def meter_args(extra: list[str]) -> list[str]:
    args = ["wakeup", "--loops", "50", "--interval", "1ms", "--policy", "other", "--quiet"]
    args += ["--load", f"spin:5%@{LAST}", "--settle", "10ms", *extra]
    return args + (["--explain", "10ms"] if HAS_TRACEFS else [])


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize("flag", ["--json", "--raw", "--progress"])
def test_a_fifo_without_reader_stops_on_a_signal(probe, tmp_path, flag, sig):
    fifo, doc = tmp_path / "out.fifo", tmp_path / "doc.json"
    os.mkfifo(fifo)
    extra = [flag, str(fifo)] if flag == "--json" else [flag, str(fifo), "--json", str(doc)]
    p = Probe(probe, meter_args(extra))
    try:
        p.wait_line(WAITING)
        # --json waits after the run, --raw and --progress before it: nothing runs meanwhile
        assert load_workers(p.proc.pid) == []
        assert not our_instance(p.proc.pid)
        assert p.stop(sig) == 5, p.lines
    finally:
        p.close()
    assert not our_instance(p.proc.pid)
    last = p.lines[-1]
    assert last.startswith(f"rtlab-probe wakeup: {flag}: ") and f"stopped by {sig.name}" in last
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    if flag == "--json":
        assert not doc.exists()
        assert sorted(x.name for x in tmp_path.iterdir()) == ["out.fifo"]
        return
    got = json.loads(doc.read_text())  # stopped before measuring: an empty, incomplete record
    assert got["complete"] is False and got["signal"] == sig.name
    assert got["loads"][0]["workers"] == 0  # never started
    (t,) = got["threads"]
    assert t["count"] == 0
    if flag == "--raw":
        assert t["raw_samples"] == 0 and t["raw_lost"] == 0
        assert t["raw_error"] == f"stopped by {sig.name} while waiting for a reader"


@pytest.mark.parametrize("sig", SIGNALS, ids=lambda s: s.name)
@pytest.mark.parametrize(
    "command", [["sysinfo"], ["load", f"spin:5%@{LAST}", "--duration", "50ms", "--quiet"]]
)
def test_other_commands_stop_waiting_on_a_signal(probe, tmp_path, command, sig):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    p = Probe(probe, [*command, "--json", str(fifo)])
    try:
        p.wait_line(WAITING)
        assert load_workers(p.proc.pid) == []  # `load` stopped its loads before writing
        assert p.stop(sig) == 5, p.lines
    finally:
        p.close()
    assert f"--json: stopped by {sig.name}" in p.lines[-1]
    assert sorted(x.name for x in tmp_path.iterdir()) == ["out.fifo"]


def test_a_reader_that_comes_gets_everything(probe, tmp_path):
    """Waiting is ordinary: a reader that opens late gets the raw samples and the stream."""
    raw, progress, doc = tmp_path / "raw.fifo", tmp_path / "progress.fifo", tmp_path / "doc.json"
    os.mkfifo(raw)
    os.mkfifo(progress)
    args = ["--raw", str(raw), "--progress", str(progress), "--json", str(doc)]
    p = Probe(probe, ["wakeup", "--loops", "200", "--interval", "1ms", "--policy", "other", *args])
    got: dict[str, bytes] = {}

    def read(path: Path) -> None:
        got[path.name] = path.read_bytes()

    try:
        p.wait_line(f'{WAITING} "{progress}"')  # opened first, before the raw files
        readers = [threading.Thread(target=read, args=(f,)) for f in (progress, raw)]
        for r in readers:
            r.start()
        assert p.proc.wait(timeout=60) == 0, p.lines
        for r in readers:
            r.join(10)
    finally:
        p.close()
    (t,) = json.loads(doc.read_text())["threads"]
    assert t["count"] == 200 and t["raw_lost"] == 0 and t["raw_samples"] == 200
    assert len(got["raw.fifo"]) == 64 + 8 * 200 and got["raw.fifo"][:8] == b"RTLABRAW"
    lines = [json.loads(x) for x in got["progress.fifo"].splitlines()]
    assert lines[-1]["phase"] == "done" and lines[-1]["threads"][0]["count"] == 200
