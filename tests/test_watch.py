"""`rtlab watch` follows the progress file of an `rtlab run` started elsewhere: per-thread
statistics appear, and it ends with the run. Structure only, never timing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rtlab import progresslog
from rtlab.cli.watch import _pick
from rtlab.errors import UserError
from rtlab.progresslog import (
    PROGRESS_FILE,
    Follower,
    WatchState,
    read_state,
    running_experiments,
)
from rtlab.records import new_manifest
from rtlab.store import Store
from tests.test_ingest_hostile import finishes, open_writer

RTLAB = [sys.executable, "-m", "rtlab.cli"]

EXPERIMENT = """
[experiment]
name = "watched"
deadline = "10ms"
[defaults]
policy = "other"
interval = "1ms"
settle = "0s"
cpus = "0"
[[series]]
name = "s"
sweep = { duration = ["1s", "300ms"] }
"""


def _wait(cond, timeout_s: float) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _progress_files(results: Path) -> list[Path]:
    return list(results.glob(f"*/{PROGRESS_FILE}")) if results.is_dir() else []


def test_watch_follows_a_run_started_elsewhere(tmp_path):
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    results = tmp_path / "results"
    run = subprocess.Popen(
        [*RTLAB, "run", str(tmp_path / "exp.toml"), "--results", str(results)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait(lambda: _progress_files(results), 60), run.stderr and run.poll()
        (progress,) = _progress_files(results)
        exp_id = progress.parent.name
        watch = subprocess.run(
            [*RTLAB, "watch", exp_id, "--results", str(results), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        _, err = run.communicate(timeout=120)
        assert run.returncode in (0, 1), err  # 1: a case exceeded the deadline
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert watch.returncode == 0, watch.stderr
    events = [json.loads(x) for x in watch.stdout.splitlines()]
    assert events[-1] == {"event": "end", "id": exp_id, "how": "ended", "done": 2, "cases": 2}
    cases = [e for e in events if e["event"] == "case"]
    assert cases and cases[-1]["index"] == 1 and cases[-1]["cases"] == 2
    assert cases[-1]["series"] == "s" and cases[-1]["deadline_ns"] == 10_000_000
    snapshots = [e for e in events if e["event"] == "progress"]
    measured = [t for e in snapshots for t in e["threads"] if t["count"]]
    assert measured, events
    for t in measured:
        assert t["cpu"] == 0 and t["thread"] == 0
        assert t["min_ns"] <= t["mean_ns"] <= t["max_ns"] and t["last_ns"] is not None
        assert isinstance(t["misses"], int) and 0 <= t["misses"] <= t["count"]
    assert any(t["cpu_busy_pct"] is not None for t in measured)
    assert snapshots[-1]["phase"] == "done"
    assert [e["status"] for e in events if e["event"] == "case_done"][-1] == "done"

    # afterwards: the last case as it ended, in plain lines; without ID nothing runs
    plain = subprocess.run(
        [*RTLAB, "watch", exp_id, "--results", str(results)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert plain.returncode == 0, plain.stderr
    lines = plain.stdout.splitlines()
    assert lines[0].startswith(f"{exp_id} [2/2] s: duration=300ms")
    assert any("T0 cpu 0" in x and "misses" in x and "cpu busy" in x for x in lines)
    assert lines[-1] == f"{exp_id}: the run ended, 2 of 2 cases done"
    idle = subprocess.run(
        [*RTLAB, "watch", "--results", str(results)], capture_output=True, text=True, timeout=60
    )
    assert idle.returncode == 2 and "no experiment is running" in idle.stderr
    assert idle.stderr.count("\n") == 1


def test_follower_reads_across_replacements(tmp_path):
    path = tmp_path / PROGRESS_FILE

    def write(name: str, lines: list[dict], mode: str = "w") -> None:
        with open(tmp_path / name, mode) as f:
            f.write("".join(json.dumps(x) + "\n" for x in lines))

    write(PROGRESS_FILE, [{"event": "case", "index": 0, "pid": os.getpid()}])
    f = Follower(path)
    assert [e["event"] for e in f.poll()] == ["case"]
    assert f.poll() == []
    with open(path, "a") as out:  # a half-written line waits for its end
        out.write('{"event": "progress", "probe": {"phase": "me')
        out.flush()
        assert f.poll() == []
        out.write('asure"}}\n{"event": "case_done", "status": "done"}\n')
    write(".next", [{"event": "case", "index": 1, "pid": os.getpid()}])
    os.replace(tmp_path / ".next", path)
    write(PROGRESS_FILE, [{"event": "end", "done": 2}, "not an event"], "a")
    (tmp_path / "junk").write_text("")
    events = f.poll()
    assert [e["event"] for e in events] == ["progress", "case_done", "case", "end"]
    f.close()
    state = read_state(path)
    assert state.ended and state.case is not None and state.case.index == 1
    assert not state.running


def test_a_run_that_died_is_not_running(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    state = WatchState()
    state.apply({"event": "case", "id": "x", "index": 0, "pid": int(dead.stdout)})
    assert not state.running
    state.apply({"event": "case", "id": "x", "index": 0, "pid": os.getpid()})
    assert state.running


def _running(store: Store, name: str, target: dict | None) -> Path:
    """An experiment whose progress file a live process (this one) is writing."""
    rec = store.create(
        new_manifest(name=name, description="", source="test", series=[], cases=[]), "", {}
    )
    rec.manifest.target = target
    rec.save()
    event = {"event": "case", "id": rec.id, "index": 0, "cases": 1, "pid": os.getpid()}
    (rec.path / PROGRESS_FILE).write_text(json.dumps(event) + "\n")
    return rec.path


def test_target_picks_the_experiment_running_there(rtlab, tmp_path):
    store = Store(tmp_path / "results")
    here = _running(store, "here", None)
    there = _running(store, "there", {"name": "board", "url": "ssh://root@board"})
    path, rec = _pick(store, None, "ssh://root@board")
    assert path == there / PROGRESS_FILE and rec is not None and rec.id == there.name
    with pytest.raises(UserError, match="no experiment is running on target ssh://other"):
        _pick(store, None, "ssh://other")
    with pytest.raises(UserError, match="was not run on target"):
        _pick(store, here.name, "ssh://root@board")
    rc, _, err = rtlab("watch", "--target", "ssh://a b", "--results", str(store.root))
    assert rc == 2 and "--target" in err and err.count("\n") == 1


# --- hostile progress files: bounded reads, valid JSON out, literal text ------------------

HOSTILE = "\x1b]8;;http://x.invalid\x1b\\link\x1b]8;;\x1b\\ \u202eevil\x9b2J\x07"


def _strict(line: str) -> dict:
    """LINE as RFC 8259 JSON: NaN and Infinity are refused."""

    def refuse(token: str) -> None:
        raise AssertionError(f"not JSON: {token}")

    assert line.isascii(), line
    return json.loads(line, parse_constant=refuse)


def _no_controls(text: str) -> None:
    for line in text.split("\n"):
        assert line.isprintable(), repr(line)


def _stored_run(tmp_path: Path, lines: list[str]) -> tuple[Store, str]:
    """An experiment whose (finished) progress file holds LINES."""
    store = Store(tmp_path / "results")
    rec = store.create(
        new_manifest(name="w", description="", source="test", series=[], cases=[]), "", {}
    )
    (rec.path / PROGRESS_FILE).write_text("".join(x + "\n" for x in lines))
    return store, rec.id


def _watch_all(rtlab, store: Store, exp_id: str) -> list[dict]:
    rc, out, err = rtlab("watch", exp_id, "--results", str(store.root), "--json")
    assert rc == 0 and "Traceback" not in err, err
    events = [_strict(x) for x in out.splitlines()]
    rc, plain, err = rtlab("watch", exp_id, "--results", str(store.root))
    assert rc == 0, err
    _no_controls(plain + err)
    return events


def test_hostile_progress_lines_are_skipped_or_shown_bounded(rtlab, tmp_path):
    huge = 10**400
    case = {"event": "case", "id": HOSTILE, "index": 0, "cases": huge, "series": HOSTILE,
            "name": HOSTILE, "deadline_ns": huge, "pid": huge}  # fmt: skip
    thread = {"cpu": huge, "count": huge, "last_ns": -huge, "min_ns": 1, "mean_ns": 2,
              "max_ns": huge, "misses": huge}  # fmt: skip
    progress = {"event": "progress", "probe": {"phase": HOSTILE, "elapsed_ns": huge,
                "threads": [thread, 5, "x"], "cpu_busy_pct": {"0": 1e400},
                "cpu_busy_pct_all": 1e400}}  # fmt: skip
    lines = [
        json.dumps(case),
        '{"event": "progress", "probe": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"event": "progress", "probe": {"phase": "measure", "x": ' + "[" * 900 + "]" * 900 + "}}",
        json.dumps(progress).replace("Infinity", "1e400"),  # a number beyond float: inf
        '{"event": "progress", "probe": {"threads": 7, "phase": {"a": 1}}}',
        '{"event": "progress", "probe": {"phase": "' + "x" * (2 << 20) + '"}}',
        '{"event": "progress", "probe": {"elapsed_ns": NaN, "threads": [{"count": 1e999}]}}',
        json.dumps({"event": "case_done", "status": HOSTILE}),
        json.dumps({"event": "end", "done": huge}),
    ]
    store, exp_id = _stored_run(tmp_path, lines)
    events = _watch_all(rtlab, store, exp_id)
    assert events[0]["event"] == "case" and events[-1]["event"] == "end"
    assert events[0]["name"] == HOSTILE and events[0]["cases"] == huge  # JSON keeps them
    shown = [t for e in events if e["event"] == "progress" for t in e["threads"]]
    assert shown and all(
        t[k] is None or -(1 << 63) <= t[k] < 1 << 63
        for t in shown
        for k in ("cpu", "last_ns", "max_ns", "misses", "cpu_busy_pct")
    )
    assert all(e.get("phase") in (None, HOSTILE[:32]) for e in events if e["event"] == "progress")


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats()
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
PROBE = st.fixed_dictionaries(
    {},
    optional={
        "phase": JSONISH,
        "elapsed_ns": JSONISH,
        "threads": JSONISH | st.lists(st.dictionaries(st.sampled_from(
            ["cpu", "count", "last_ns", "min_ns", "mean_ns", "max_ns", "misses"]), JSONISH)),
        "cpu_busy_pct": JSONISH,
        "cpu_busy_pct_all": JSONISH,
    },
)  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(PROBE, min_size=1, max_size=4), JSONISH, JSONISH)
def test_generated_progress_gives_valid_json_and_literal_text(
    rtlab, tmp_path_factory, probes, name, done
):
    case = {"event": "case", "id": "x", "index": 0, "cases": 1, "name": name, "pid": 0}
    lines = [json.dumps(case)]
    lines += [json.dumps({"event": "progress", "probe": p}) for p in probes]
    lines.append(json.dumps({"event": "end", "done": done}))
    store, exp_id = _stored_run(tmp_path_factory.mktemp("w"), lines)
    events = _watch_all(rtlab, store, exp_id)
    assert events[0]["event"] == "case" and events[-1]["event"] == "end"


def test_a_fifo_as_the_progress_file_never_blocks(tmp_path):
    (tmp_path / "exp").mkdir()
    fifo = tmp_path / "exp" / PROGRESS_FILE
    os.mkfifo(fifo)
    follower = Follower(fifo)
    assert finishes(follower.poll, open_writer(fifo)) == []
    assert finishes(lambda: running_experiments(tmp_path), open_writer(fifo)) == []


def test_long_lines_are_skipped_and_reading_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(progresslog, "MAX_LINE_BYTES", 100)
    monkeypatch.setattr(progresslog, "MAX_POLL_BYTES", 1000)
    path = tmp_path / PROGRESS_FILE
    ok = json.dumps({"event": "case", "id": "a", "index": 0})
    long = json.dumps({"event": "case", "id": "b" * 5000, "index": 1})
    path.write_text("\n".join([ok, long, ok, *[ok] * 100]) + "\n")
    f = Follower(path)
    first = f.poll()  # at most 1000 bytes: the long line is skipped, reading stops
    assert first and all(e["id"] == "a" for e in first) and not f.at_end
    rest = []
    while not f.at_end:
        rest += f.poll()
    assert len(first) + len(rest) == 102 and all(e["id"] == "a" for e in rest)
    f.close()
    assert read_state(path).case is not None  # read to the end, poll by poll
