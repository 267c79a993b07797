"""The host side of the probe: its catalog, its refusals, its exit codes, and that it dies
with rtlab. Fake probes are shell scripts; the tests with the real probe skip without it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import rtlab
from rtlab.errors import InternalError, OutputError, UnsupportedError, UserError
from rtlab.probe import (
    RESULT_SCHEMA,
    Refusal,
    check_call,
    die_with,
    load_catalog,
    migrate,
    probe_catalog,
    run_probe,
)
from rtlab.probecall import Option, Outputs, ProbeCall

from ._skips import skip_setup
from .probe.conftest import probe_path

FIXTURE = Path(__file__).parent / "fixtures" / "probe-list.json"


def fake_probe(tmp_path: Path, body: str, name: str = "fake-probe") -> Path:
    """An executable shell script standing in for rtlab-probe."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def new_probe() -> Path:
    """The real probe, if it describes its options (skips otherwise)."""
    path = probe_path()
    try:
        probe_catalog(path)
    except UserError as e:
        skip_setup(str(e))
    return path


# --- the catalog -------------------------------------------------------------------------


def test_catalog_is_read_once_per_probe_build(tmp_path):
    calls = tmp_path / "calls"
    probe = fake_probe(tmp_path, f"echo x >> {calls}\ncat {FIXTURE}\n")
    cat = probe_catalog(probe)
    assert cat.probe == probe and cat.meter_names[:4] == ["wakeup", "periodic", "response", "noise"]
    assert [o.name for o in cat.options("wakeup")][:2] == ["interval", "distance"]
    assert cat.option("wakeup", "threshold").name == "deadline"  # an alias
    assert cat.option("noise", "threshold").name == "threshold"  # the meter's own first
    dma = cat.option("wakeup", "dma-latency")
    assert (dma.type, dma.key, dma.step) == ("duration", "dma_latency", 1000)
    assert {k.name for k in cat.loads} >= {"forkcopy", "spin", "stress-ng"}
    assert probe_catalog(probe) is cat
    assert calls.read_text().count("x") == 1
    os.utime(probe, ns=(0, 0))  # rebuilt: asked again
    probe_catalog(probe)
    assert calls.read_text().count("x") == 2


@pytest.mark.parametrize(
    "body",
    [
        'echo \'{"version": "0.1.0", "meters": [], "loads": []}\'\n',  # before common_options
        "echo 'rtlab-probe: unknown command \"list\"' >&2\nexit 2\n",
        "echo not json\n",
    ],
)
def test_a_probe_too_old_to_describe_its_options(tmp_path, body):
    with pytest.raises(UserError) as e:
        probe_catalog(fake_probe(tmp_path, body))
    assert "too old to describe its options" in str(e.value) and "\n" not in str(e.value)


def test_missing_probe(tmp_path):
    with pytest.raises(UserError, match="cannot run the probe"):
        probe_catalog(tmp_path / "nonesuch")


def test_the_fixture_catalog_is_the_probes():
    """tests/fixtures/probe-list.json is `rtlab-probe list --json`: recapture when it changes."""
    real, fixture = probe_catalog(new_probe()), load_catalog(FIXTURE)

    def shape(cat):
        return [(o.name, o.type, o.min, o.max, o.aliases) for o in cat.common_options] + [
            (m.name, [(o.name, o.type, o.min, o.max, o.choices) for o in m.options])
            for m in cat.meters
        ]

    assert shape(real) == shape(fixture)


def wakeup(*options: tuple[str, str | None]) -> ProbeCall:
    return ProbeCall("wakeup", tuple(Option(n, v) for n, v in options))


# --- refusals ------------------------------------------------------------------------------


def test_check_reads_the_json_refusal(tmp_path):
    probe = fake_probe(
        tmp_path,
        """\
        case "$*" in
        *fifo:200*)
            echo '{"error": "--policy: \\"fifo:200\\": priority must be 1..99",' \
                 '"option": "policy", "value": "fifo:200"}'
            echo 'rtlab-probe wakeup: --policy: "fifo:200": priority must be 1..99' >&2
            exit 2;;
        *stress-ng*)
            echo '{"error": "stress-ng not found", "option": "load", "value": "stress-ng:cpu"}'
            exit 3;;
        *bogus*)
            echo '{"error": "unknown option \\"--bogus\\"", "option": null, "value": "--bogus"}'
            exit 2;;
        esac
        """,
    )
    assert check_call(wakeup(("policy", "fifo:10")), probe) is None
    assert check_call(wakeup(("policy", "fifo:200")), probe) == Refusal(
        '--policy: "fifo:200": priority must be 1..99', "policy", "fifo:200", 2
    )
    assert check_call(wakeup(("load", "stress-ng:cpu")), probe) == Refusal(
        "stress-ng not found", "load", "stress-ng:cpu", 3
    )
    assert check_call(wakeup(("bogus", None)), probe) == Refusal(
        'unknown option "--bogus"', None, "--bogus", 2
    )


def test_check_falls_back_to_the_stderr_line(tmp_path):
    probe = fake_probe(
        tmp_path,
        """\
        echo 'usage: ...'
        echo 'warming up' >&2
        echo 'rtlab-probe wakeup: --interval: "0" is out of range' >&2
        exit 2
        """,
    )
    assert check_call(wakeup(), probe) == Refusal('--interval: "0" is out of range', None, None, 2)
    silent = fake_probe(tmp_path, "exit 2\n", "silent")
    assert check_call(wakeup(), silent) == Refusal("exit 2", None, None, 2)


def test_check_with_the_real_probe():
    probe = new_probe()
    assert check_call(wakeup(("loops", "10"), ("policy", "other")), probe) is None
    refusal = check_call(wakeup(("interval", "0")), probe)
    assert (refusal.option, refusal.value, refusal.exit_code) == ("interval", "0", 2)
    assert "\n" not in refusal.message and refusal.message.startswith("--interval")


# --- running -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "error"),
    [(2, UserError), (3, UnsupportedError), (4, InternalError), (5, OutputError)],
)
def test_exit_codes_raise_the_matching_error(tmp_path, code, error):
    probe = fake_probe(
        tmp_path, f"echo first >&2\necho 'rtlab-probe wakeup: boom {code}' >&2\nexit {code}\n"
    )
    with pytest.raises(error) as e:
        run_probe(wakeup(), Outputs(str(tmp_path / "doc.json")), probe=probe)
    assert str(e.value) == f"rtlab-probe wakeup: boom {code}"


def test_run_feeds_progress_and_returns_the_document(tmp_path):
    doc = tmp_path / "doc.json"
    probe = fake_probe(
        tmp_path,
        """\
        while [ "$1" != "--json" ]; do shift; done
        echo '{"phase": "start"}'
        echo 'not json'
        echo '{"schema": 2, "threads": []}' > "$2"
        exit 1
        """,
    )
    lines: list[dict] = []
    outcome = run_probe(wakeup(), Outputs(str(doc)), lines.append, probe=probe)
    assert lines == [{"phase": "start"}]
    assert (outcome.returncode, outcome.document, outcome.interrupted) == (1, doc, False)


def test_schema_1_documents_migrate():
    thread = {"index": 0, "count": 0, "lost": 7}
    old = {
        "schema": 1,
        "threads": [thread],
        "threshold_exceeded": True,
        "params": {"threshold_ns": 5},
    }
    doc = migrate(old, "x.json")
    assert doc["schema"] == RESULT_SCHEMA == 8
    assert doc["deadline_exceeded"] is True and doc["params"] == {"deadline_ns": 5}
    assert doc["threads"] == [{"index": 0, "count": 0, "raw_lost": 7}]
    assert "threshold_exceeded" in old and "lost" in thread  # the caller's is left as it was
    with pytest.raises(UserError, match="newer than this rtlab"):
        migrate({"schema": 9, "threads": []}, "x.json")


def test_schema_4_documents_say_their_virtualization_is_unknown():
    old = {"schema": 4, "threads": [], "explain": None, "spikes": [], "host": {"realtime": 1}}
    doc = migrate(old, "x.json")
    assert doc["schema"] == 8 and doc["host"]["realtime"] == 1
    assert doc["host"]["virtualization"]["kind"] == "unknown"
    assert "virtualization" not in old["host"]  # the caller's is left as it was


PDEATHSIG = """
import ctypes, sys
sig = ctypes.c_int()
ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
print(sig.value)
"""


def test_the_child_is_told_to_die_with_its_parent():
    out = subprocess.run(
        [sys.executable, "-c", PDEATHSIG],
        capture_output=True,
        text=True,
        preexec_fn=die_with(os.getpid()),
        check=True,
    ).stdout
    assert int(out) == signal.SIGTERM


def test_a_child_whose_parent_already_died_does_not_start():
    cp = subprocess.run(["true"], preexec_fn=die_with(os.getpid() + 100_000))
    assert cp.returncode == 4


# --- the probe dies with rtlab -------------------------------------------------------------

HOST = """
import json, sys
from pathlib import Path
from rtlab.probe import run_probe
from rtlab.probecall import Outputs, ProbeCall

def show(line):
    print(json.dumps(line), flush=True)

call = ProbeCall.from_dict(json.loads(sys.argv[3]), "argv")
run_probe(call, Outputs(sys.argv[1]), show, Path(sys.argv[2]))
"""


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):  # the task ended meanwhile
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def descendants(pid: int) -> list[int]:
    todo, seen = children(pid), []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo += children(p)
    return seen


def alive(pid: int) -> bool:
    """Running, not a zombie (PID 1 may reap orphans late)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.mark.parametrize("load", ["spin:10%@0", "forkcopy:2:64K"])
def test_the_probe_and_its_loads_die_with_a_killed_rtlab(tmp_path, load):
    probe = new_probe()
    env = {**os.environ, "PYTHONPATH": str(Path(rtlab.__file__).parents[1])}
    call = wakeup(
        ("policy", "other"), ("no-mlock", None), ("duration", "300s"), ("load", load)
    ).to_dict()
    host = subprocess.Popen(
        [sys.executable, "-c", HOST, str(tmp_path / "doc.json"), str(probe), json.dumps(call)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        first = host.stdout.readline()  # the probe has started its loads
        assert first, host.stderr.read()
        (probe_pid,) = children(host.pid)
        deadline = time.monotonic() + 10
        while not children(probe_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        family = [probe_pid, *descendants(probe_pid)]
        assert len(family) >= 2, "the load has no process"
        os.kill(host.pid, signal.SIGKILL)
        host.wait()
        deadline = time.monotonic() + 10
        while any(alive(p) for p in family) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [p for p in family if alive(p)]
        assert not left, f"still running after rtlab was killed: {left}"
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        for p in [*locals().get("family", [])]:
            if alive(p):
                os.kill(p, signal.SIGKILL)  # by PID only: what this test started
