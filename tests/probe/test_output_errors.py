"""Outputs that cannot be written. A path that cannot be created (a name longer than the
file system takes, among the others of test_check.py) is bad input: exit 2 before
anything is measured, also with --check. A write that fails after measuring (no space,
a reader gone) is exit 5 with one line naming the output; raw samples that could not be
written count in raw_lost; a document is never half-written."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from .conftest import is_root

QUICK = ["--loops", "50", "--interval", "1ms", "--policy", "other", "--quiet"]
LONG = ["--duration", "1h", "--interval", "1ms", "--policy", "other", "--quiet"]  # never ends
ENOSPC = "No space left on device"


def name_max(directory: Path) -> int:
    return os.pathconf(directory, "PC_NAME_MAX")


@pytest.mark.parametrize("flag", ["--json", "--raw", "--progress"])
def test_a_name_too_long_is_refused_before_measuring(run_probe, tmp_path, flag):
    path = "n" * (name_max(tmp_path) + 1)  # relative: the message shows it whole
    cp = run_probe("wakeup", *LONG, flag, path, timeout=60, cwd=tmp_path)  # measuring never ends
    assert cp.returncode == 2, cp.stderr
    (line,) = cp.stderr.strip().splitlines()
    assert line.startswith(f"rtlab-probe wakeup: {flag}: ") and path in line
    assert "File name too long" in line
    cp = run_probe("wakeup", *LONG, flag, path, "--check", cwd=tmp_path)
    assert cp.returncode == 2
    assert json.loads(cp.stdout)["option"] == flag[2:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["sysinfo"], ["load", "spin:5%", "--duration", "1h"]])
def test_other_commands_refuse_a_name_too_long(run_probe, tmp_path, command):
    path = "n" * (name_max(tmp_path) + 1)
    cp = run_probe(*command, "--json", path, timeout=60, cwd=tmp_path)
    assert cp.returncode == 2, cp.stderr
    (line,) = cp.stderr.strip().splitlines()
    assert "--json" in line and path in line
    assert list(tmp_path.iterdir()) == []


def test_the_longest_name_is_written(run_probe, tmp_path):
    """The temporary name beside it is shortened, not refused after the run."""
    path = tmp_path / ("n" * name_max(tmp_path))
    cp = run_probe("wakeup", *QUICK, "--json", str(path), "--check")
    assert cp.returncode == 0, cp.stderr
    cp = run_probe("wakeup", *QUICK, "--json", str(path))
    assert cp.returncode == 0, cp.stderr
    assert json.loads(path.read_text())["threads"][0]["count"] == 50
    assert list(tmp_path.iterdir()) == [path]


needs_dev_full = pytest.mark.skipif(
    not os.access("/dev/full", os.W_OK), reason="no writable /dev/full"
)


@needs_dev_full
@pytest.mark.parametrize(
    "command",
    [["wakeup", *QUICK], ["sysinfo"], ["load", "spin:5%", "--duration", "200ms", "--quiet"]],
)
def test_a_document_that_cannot_be_written_is_exit_5(run_probe, command):
    if command[0] == "wakeup":  # a device that can be opened passes the check
        assert run_probe(*command, "--json", "/dev/full", "--check").returncode == 0
    cp = run_probe(*command, "--json", "/dev/full")
    assert cp.returncode == 5, cp.stderr
    line = cp.stderr.strip().splitlines()[-1]
    assert "--json" in line and "/dev/full" in line and ENOSPC in line


@needs_dev_full
def test_raw_samples_not_written_count_as_lost(run_probe, tmp_path):
    out = tmp_path / "doc.json"
    # --deadline 1ns is exceeded: 5 (the record is not whole) comes before 1
    cp = run_probe("wakeup", *QUICK, "--raw", "/dev/full", "--json", str(out), "--deadline", "1ns")
    assert cp.returncode == 5, cp.stderr
    (line,) = cp.stderr.strip().splitlines()
    assert line.startswith("rtlab-probe wakeup: --raw: ") and ENOSPC in line
    (t,) = json.loads(out.read_text())["threads"]
    assert t["count"] == 50 and t["raw_samples"] == 0 and t["raw_lost"] == 50
    assert t["raw_error"] == ENOSPC


@needs_dev_full
def test_a_progress_stream_that_fails_is_said(run_probe, tmp_path):
    out = tmp_path / "doc.json"
    cp = run_probe("wakeup", *QUICK, "--progress", "/dev/full", "--json", str(out))
    assert cp.returncode == 5, cp.stderr
    (line,) = cp.stderr.strip().splitlines()
    assert line.startswith("rtlab-probe wakeup: --progress: ") and ENOSPC in line
    assert json.loads(out.read_text())["threads"][0]["count"] == 50  # the record is whole


def test_a_progress_reader_that_goes_away_is_said(probe, tmp_path):
    out = tmp_path / "doc.json"
    proc = subprocess.Popen(
        [str(probe), "wakeup", *QUICK, "--progress", "-", "--json", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        proc.stdout.close()  # the reader is gone before the first line
        assert proc.wait(timeout=60) == 5
        line = proc.stderr.read().strip().splitlines()[-1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert line.startswith("rtlab-probe wakeup: --progress: ") and "Broken pipe" in line
    assert json.loads(out.read_text())["threads"][0]["count"] == 50


@pytest.fixture
def small_fs(tmp_path):
    """A 256 KiB tmpfs of our own, unmounted after the test."""
    if not is_root():
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "rtlab-test", str(mnt)]
    ).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def fill(directory: Path, leave_bytes: int) -> None:
    """Take the free space of DIRECTORY's file system but about LEAVE_BYTES."""
    st = os.statvfs(directory)
    free = st.f_bavail * st.f_frsize
    (directory / "filler").write_bytes(b"\0" * max(0, free - leave_bytes))


def test_no_space_keeps_the_old_document_whole(run_probe, small_fs):
    doc = small_fs / "doc.json"
    doc.write_text('{"old": true}\n')
    fill(small_fs, 0)  # a file can still be created, not written
    cp = run_probe("wakeup", *QUICK, "--json", str(doc))
    assert cp.returncode == 5, cp.stderr
    assert ENOSPC in cp.stderr and "--json" in cp.stderr
    assert doc.read_text() == '{"old": true}\n'  # never half-written, never lost
    assert sorted(p.name for p in small_fs.iterdir()) == ["doc.json", "filler"]


def test_no_space_leaves_a_raw_file_of_whole_samples(run_probe, tmp_path, small_fs):
    raw, out = small_fs / "r.raw", tmp_path / "doc.json"
    fill(small_fs, 12 * 1024)
    args = ["--loops", "20000", "--interval", "50us", "--policy", "other", "--quiet"]
    cp = run_probe("wakeup", *args, "--raw", str(raw), "--json", str(out), timeout=120)
    assert cp.returncode == 5, cp.stderr
    (t,) = json.loads(out.read_text())["threads"]
    assert t["raw_error"] == ENOSPC and 0 < t["raw_samples"] < 20000
    assert t["raw_samples"] + t["raw_lost"] == t["count"] == 20000
    assert raw.stat().st_size == 64 + 8 * t["raw_samples"]  # cut to whole samples
