"""The journal of the osnoise/ settings (probe/src/lib/kjournal.h) on a fake tracefs: a
--tracer run killed by SIGKILL mid-setup leaves the settings it changed and their journal;
`rtlab-probe explain --cleanup`, or the next --tracer run, puts them back byte for byte
and removes the journal. A journal whose run is alive is left alone. The same on a real
kernel: tests/vm/test_tracers.py."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import one_line
from .test_tracer import fake_tracefs, run, tree

WAIT_S = 20.0  # at most, for the killed run to reach its blocked read


def env_for(tmp_path: Path, fake: Path) -> dict[str, str]:
    return {**os.environ, "RTLAB_TRACEFS": str(fake), "RTLAB_STATE": str(tmp_path / "state")}


def journal(tmp_path: Path) -> Path:
    return tmp_path / "state" / "osnoise-journal"


def settings(fake: Path) -> dict[str, bytes | None]:
    """osnoise/ but print_stack, the file the killed run was stopped at."""
    return {k: v for k, v in tree(fake).items() if k.startswith("osnoise/") and "print" not in k}


def killed_run(probe: Path, tmp_path: Path, fake: Path) -> int:
    """A timerlat run that writes cpus, timerlat_period_us and stop_tracing_us, then
    blocks reading osnoise/print_stack (a FIFO no one writes) and is SIGKILLed there."""
    stack = fake / "osnoise" / "print_stack"
    stack.unlink()
    os.mkfifo(stack)
    proc = subprocess.Popen(
        [str(probe), "wakeup", "--tracer", "timerlat", "--cpus", "0", "--interval", "500us",
         "--loops", "20", "--policy", "other", "--no-mlock", "--quiet"],
        env=env_for(tmp_path, fake), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + WAIT_S
        while (fake / "osnoise" / "stop_tracing_us").read_text() != "0\n":
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the run never wrote its settings"
            time.sleep(0.01)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    stack.unlink()
    stack.write_text("0\n")
    return proc.pid


def test_a_killed_run_is_put_back_by_cleanup(probe, run_probe, tmp_path):
    fake = fake_tracefs(tmp_path, "timerlat osnoise nop")
    before = settings(fake)
    pid = killed_run(probe, tmp_path, fake)
    changed = settings(fake)
    assert changed["osnoise/cpus"] == b"0\n" and changed["osnoise/timerlat_period_us"] == b"500\n"
    text = journal(tmp_path).read_text()
    assert text.startswith(f"rtlab-probe osnoise journal 1\nowner {pid} ")
    assert f"root {fake}\n" in text and "undo osnoise/cpus 302d330a\n" in text  # "0-3\n"
    assert (fake / "instances" / f"rtlab-{pid}").is_dir()

    cp = run_probe("explain", "--cleanup", env=env_for(tmp_path, fake))
    assert cp.returncode == 0, cp.stderr
    assert "removed 1 stale tracefs instance\n" in cp.stdout
    assert f"put back 3 osnoise/ settings of the killed run {pid}" in cp.stdout
    assert settings(fake) == before  # byte for byte
    assert not journal(tmp_path).exists() and not (fake / "instances" / f"rtlab-{pid}").exists()
    cp = run_probe("explain", "--cleanup", env=env_for(tmp_path, fake))
    assert cp.returncode == 0 and "put back" not in cp.stdout  # nothing left


def test_the_next_tracer_run_puts_a_killed_runs_settings_back_first(run_probe, probe, tmp_path):
    """The next run reads the user's values as found, not the killed run's: its own
    (failed, on this fake tree) setup then leaves every file as the user had it."""
    fake = fake_tracefs(tmp_path, "timerlat osnoise nop")
    before = settings(fake)
    killed_run(probe, tmp_path, fake)
    cp, doc = run(run_probe, tmp_path, "noise", ["--tracer", "osnoise", "--cpus", "1",
                                                 "--duration", "50ms"], fake)  # fmt: skip
    assert cp.returncode == 3 and doc is None
    assert "cannot configure the tracefs instance" in one_line(cp)
    assert settings(fake) == before
    assert not journal(tmp_path).exists()


def start_time(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


@pytest.fixture
def live_owner():
    """A live process that stands for a running --tracer run."""
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_live_runs_journal_is_left_alone(run_probe, tmp_path, live_owner):
    fake = fake_tracefs(tmp_path, "timerlat osnoise nop")
    (fake / "osnoise" / "cpus").write_text("1\n")  # as the live run set it
    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    journal(tmp_path).parent.mkdir()
    text = (
        f"rtlab-probe osnoise journal 1\nowner {live_owner.pid} {start_time(live_owner.pid)} "
        f"{boot}\nroot {fake}\nundo osnoise/cpus 302d330a\n"
    )
    journal(tmp_path).write_text(text)
    before = tree(fake)
    cp = run_probe("explain", "--cleanup", env=env_for(tmp_path, fake))
    assert cp.returncode == 0, cp.stderr
    assert f"left alone: rtlab-probe {live_owner.pid} runs a tracer" in cp.stdout
    cp, doc = run(run_probe, tmp_path, "wakeup", ["--tracer", "timerlat", "--cpus", "0",
                                                  "--loops", "5"], fake)  # fmt: skip
    assert cp.returncode == 3 and doc is None
    assert f"rtlab-probe {live_owner.pid} runs a tracer and holds the osnoise/" in one_line(cp)
    assert tree(fake) == before and journal(tmp_path).read_text() == text

    live_owner.kill()  # dead, not reaped: a zombie, dead all the same
    os.waitid(os.P_PID, live_owner.pid, os.WEXITED | os.WNOWAIT)
    assert Path(f"/proc/{live_owner.pid}/stat").read_text().split(") ")[1][0] == "Z"
    cp = run_probe("explain", "--cleanup", env=env_for(tmp_path, fake))
    assert "put back 1 osnoise/ setting of the killed run" in cp.stdout, cp.stdout
    assert (fake / "osnoise" / "cpus").read_text() == "0-3\n"


@pytest.mark.parametrize(
    "body",
    ["garbage\n", "rtlab-probe osnoise journal 1\nowner 1 2 x\nroot /\nundo /etc/passwd 30\n"],
)
def test_a_damaged_journal_is_refused_in_one_line(run_probe, tmp_path, body):
    fake = fake_tracefs(tmp_path, "timerlat osnoise nop")
    journal(tmp_path).parent.mkdir()
    journal(tmp_path).write_text(body)
    before = tree(fake)
    cp = run_probe("explain", "--cleanup", env=env_for(tmp_path, fake))
    assert cp.returncode == 2
    assert "not a journal of rtlab-probe (remove it)" in one_line(cp)
    assert tree(fake) == before and journal(tmp_path).read_text() == body
