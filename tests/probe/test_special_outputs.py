"""--json into a device, a FIFO or standard output: written in place, never replaced by
the atomic rename that regular files get (renaming over /dev/null would replace it)."""

from __future__ import annotations

import json
import os
import stat
import threading

import pytest

from ..conftest import is_root

WAKEUP = ["wakeup", "--loops", "20", "--interval", "1ms", "--policy", "other", "--quiet"]


@pytest.mark.skipif(not is_root(), reason="mknod of a character device needs root")
@pytest.mark.parametrize("command", [WAKEUP, ["sysinfo"], ["load", "spin:1", "--duration", "1s"]])
def test_a_device_stays_a_device(run_probe, tmp_path, command):
    dev = tmp_path / "null"
    os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    cp = run_probe(*command, "--json", str(dev))
    assert cp.returncode == 0, cp.stderr
    assert stat.S_ISCHR(dev.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no temporary file left


def test_a_fifo_gets_the_document(run_probe, tmp_path):
    fifo = tmp_path / "doc.json"
    os.mkfifo(fifo)
    got: dict = {}
    reader = threading.Thread(target=lambda: got.update(json.loads(fifo.read_bytes())))
    reader.start()
    try:
        cp = run_probe(*WAKEUP, "--json", str(fifo), timeout=60)
    finally:
        if reader.is_alive():  # the probe failed before opening it: unblock the reader
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    assert cp.returncode == 0, cp.stderr
    assert got["meter"] == "wakeup" and got["threads"][0]["count"] == 20
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_dev_stdout(run_probe):
    cp = run_probe(*WAKEUP, "--json", "/dev/stdout")
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["threads"][0]["count"] == 20
