"""`rtlab monitor`: a monitor of many windows (2 s windows for 60 s: the rows of a
two-hour monitor at 5-minute windows), SIGKILLed and resumed with the gap marked, its
metrics read back by Prometheus' own parsers, its show and report. Structure and
invariants only, never a latency bound."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from rtlab.analysis._hist import bucket_bounds, bucket_index
from rtlab.errors import LostError, UserError
from rtlab.monitor import (
    ROWS_FILE,
    MonitorLoop,
    MonitorManifest,
    MonitorSettings,
    Sink,
    append_row,
    create_monitor,
    find_monitor,
    interval_row,
    parse_utc,
    read_rows,
    utc_text,
    window_call,
)
from rtlab.monitor._window import le_counts
from rtlab.store import Store
from rtlab.targets import LocalTarget
from tests.test_watch import _wait

RTLAB = [sys.executable, "-m", "rtlab.cli"]


def _rows(results: Path) -> list[dict]:
    files = list(results.glob(f"*/{ROWS_FILE}"))
    return list(read_rows(files[0])) if files else []


def _intervals(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["kind"] == "interval"]


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                status = (d / "status").read_text()
            except OSError:
                continue
            if f"\nPPid:\t{pid}\n" in status:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (PID 1 reaps orphans late)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _check_windows(rows: list[dict], deadline: bool) -> None:
    """Invariants of every window row."""
    iv = _intervals(rows)
    assert [r["seq"] for r in iv] == list(range(len(iv)))
    for a, b in itertools.pairwise(iv):
        assert parse_utc(b["start_utc"]) >= parse_utc(a["end_utc"])
    for r in iv:
        assert parse_utc(r["end_utc"]) >= parse_utc(r["start_utc"])
        assert r["cpus"], r
        for c in r["cpus"]:
            assert c["count"] > 0
            assert c["min_ns"] <= c["p99_ns"] <= c["max_ns"]
            assert c["le"] == sorted(c["le"]) and c["le"][-1] <= c["count"]
            assert (c["misses"] is not None) == deadline
            if deadline:
                assert 0 <= c["misses"] <= c["count"]
        assert set(r["kmsg"]) >= {"symptoms", "messages", "messages_lost", "error"}


def test_monitor_killed_and_resumed_marks_the_gap(tmp_path):
    results, prom = tmp_path / "results", tmp_path / "rtlab.prom"
    common = ["--results", str(results), "--metrics-file", str(prom)]
    err = (tmp_path / "first.err").open("w")
    first = subprocess.Popen(
        [*RTLAB, "monitor", "--window", "2s", "--duration", "60s", "--deadline", "100us",
         "--name", "hour", *common],
        stdout=subprocess.DEVNULL, stderr=err,
    )  # fmt: skip
    try:
        assert _wait(lambda: len(_intervals(_rows(results))) >= 5, 60), (
            tmp_path / "first.err"
        ).read_text()
        (mon_dir,) = [p for p in results.iterdir() if not p.name.startswith(".")]
        # a second run of the same monitor is refused while the first holds it
        busy = subprocess.run(
            [*RTLAB, "monitor", "--resume", mon_dir.name, "--results", str(results)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert busy.returncode == 2, busy.stderr
        assert f"is being run by process {first.pid}" in busy.stderr
        assert len(busy.stderr.strip().splitlines()) == 1
        probes = _children(first.pid)
        first.send_signal(signal.SIGKILL)
        first.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        err.close()
    # the probe dies with rtlab (its standard input closes): nothing is left running
    assert _wait(lambda: not any(_alive(p) for p in probes), 15), probes
    before = _rows(results)
    time.sleep(2.5)  # unmeasured: longer than a window's start
    done = subprocess.run(
        [*RTLAB, "monitor", "--resume", mon_dir.name[:12], "--json", *common],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["id"] == mon_dir.name and summary["gaps"] == 1

    rows = _rows(results)
    assert rows[: len(before)] == before  # append-only
    assert [r["kind"] for r in rows].count("start") == 2
    _check_windows(rows, deadline=True)
    gaps = [r for r in rows if r["kind"] == "gap"]
    assert len(gaps) == 1
    gap = gaps[0]
    at = rows.index(gap)
    prev_end = _intervals(rows[:at])[-1]["end_utc"]
    next_start = _intervals(rows[at:])[0]["start_utc"]
    assert (gap["start_utc"], gap["end_utc"]) == (prev_end, next_start)
    assert gap["reason"] == "not running" and gap["seconds"] >= 2.5
    # it ran until its end: the last window ends within a window of the end
    manifest = json.loads((mon_dir / "monitor.json").read_text())
    assert manifest["kind"] == "monitor" and manifest["settings"]["window_ns"] == 2 * 10**9
    last_end = parse_utc(_intervals(rows)[-1]["end_utc"])
    assert parse_utc(manifest["end_utc"]) - 2.5 <= last_end
    # the board's fingerprint is stored as an experiment's
    system = json.loads((mon_dir / "system.json").read_text())
    assert system["schema"] >= 2 and "kernel_release" in system
    assert not (mon_dir / ".window.json").exists()

    # the textfile: whole, parsed by Prometheus' parser, counting what the rows hold
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("rtlab.prom")] == ["rtlab.prom"]
    fams = _families(prom.read_text())
    iv = _intervals(rows)
    for cpu in {str(c["cpu"]) for r in iv for c in r["cpus"]}:
        mine = [c for r in iv for c in r["cpus"] if str(c["cpu"]) == cpu]
        samples = {s.labels["cpu"]: s.value for s in fams["rtlab_monitor_samples"].samples}
        assert samples[cpu] == sum(c["count"] for c in mine)
        misses = {s.labels["cpu"]: s.value for s in fams["rtlab_monitor_deadline_misses"].samples}
        assert misses[cpu] == sum(c["misses"] for c in mine)
        buckets = [
            s
            for s in fams["rtlab_monitor_latency_seconds"].samples
            if s.name.endswith("_bucket") and s.labels["cpu"] == cpu
        ]
        values = [s.value for s in buckets]
        assert values == sorted(values) and buckets[-1].labels["le"] == "+Inf"
        assert values[-1] == samples[cpu]
    gaps_total = fams["rtlab_monitor_gaps"].samples[0].value
    assert gaps_total == 1
    assert fams["rtlab_monitor_intervals"].samples[0].value == len(iv)

    # show: the maxima over time, the gap, the worst windows
    shown = subprocess.run(
        [*RTLAB, "show", mon_dir.name, "--json", "--results", str(results)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert shown.returncode in (0, 1), shown.stderr  # 1: a window's max above the deadline
    view = json.loads(shown.stdout)
    assert view["kind"] == "monitor" and view["intervals"] == len(iv)
    assert [m["seq"] for m in view["maxima"]] == [r["seq"] for r in iv]
    for m, r in zip(view["maxima"], iv, strict=True):
        assert m["max_ns"] == {str(c["cpu"]): c["max_ns"] for c in r["cpus"]}
    assert len(view["gaps"]) == 1 and view["coverage"]["gap_s"] == gap["seconds"]
    worst = [w["max_ns"] for w in view["worst"]]
    assert worst == sorted(worst, reverse=True)
    assert worst[0] == max(c["max_ns"] for r in iv for c in r["cpus"])
    assert sum(view["over_time"][i]["intervals"] for i in range(len(view["over_time"]))) == len(iv)
    assert (shown.returncode == 1) == (worst[0] > 100_000)
    text = subprocess.run(
        [*RTLAB, "show", mon_dir.name, "--results", str(results)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "maximum per window over time" in text.stdout and "gap " in text.stdout

    # report: the long-term plot and the distribution of the maxima
    rep = subprocess.run(
        [*RTLAB, "report", mon_dir.name, "--json", "--results", str(results)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert rep.returncode in (0, 1), rep.stderr
    out = json.loads(rep.stdout)
    assert out["figures"] == 2
    html = Path(out["html"]).read_text()
    assert html.count("<svg") == 2 and "Maximum per window over time" in html
    assert "Worst windows" in html and "not running" in html


def test_metrics_endpoint_serves_both_formats(tmp_path):
    results = tmp_path / "results"
    err = (tmp_path / "err").open("w")
    proc = subprocess.Popen(
        [*RTLAB, "monitor", "--window", "1s", "--duration", "6s", "--cpus", "0",
         "--metrics-port", "127.0.0.1:0", "--results", str(results)],
        stdout=subprocess.DEVNULL, stderr=err,
    )  # fmt: skip
    try:
        assert _wait(lambda: "/metrics" in (tmp_path / "err").read_text(), 30)
        url = (tmp_path / "err").read_text().split("metrics at ", 1)[1].split()[0]
        assert _wait(lambda: len(_intervals(_rows(results))) >= 1, 30)
        with urllib.request.urlopen(url, timeout=10) as r:
            fams = _families(r.read().decode())
        assert fams["rtlab_monitor_samples"].samples[0].labels["cpu"] == "0"
        assert fams["rtlab_monitor_samples"].samples[0].value > 0
        assert "rtlab_monitor_deadline_misses" not in fams  # no deadline, no misses counted
        req = urllib.request.Request(url, headers={"Accept": "application/openmetrics-text"})
        with urllib.request.urlopen(req, timeout=10) as r:
            om = {f.name: f for f in openmetrics_families(r.read().decode())}
        assert om["rtlab_monitor_latency_seconds"].type == "histogram"
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--window", "0"], "--window"),
        (["--window", "1s", "--period", "20ms"], "at least 100 periods"),
        (["--period", "10us"], "--period"),
        (["--duration", "5"], "a unit is required"),
        (["--metrics-port", "1", "--metrics-file", "x.prom"], "exclude each other"),
        (["--metrics-port", "http"], "--metrics-port"),
        (["--metrics-file", "/nonexistent/dir/x.prom"], "no such directory"),
        (["--cpus", "4095"], "not online"),
        (["--cpus", "x"], "--cpus"),
        (["--policy", "bogus"], "policy"),
        (["--explain-max", "0"], "--explain-max"),
        (["--resume", "nothing-here"], 'no monitor "nothing-here"'),
        (["--resume", "x", "--window", "2s"], "--window: --resume continues"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(rtlab, tmp_path, args, message):
    results = tmp_path / "results"
    rc, _, err = rtlab("monitor", *args, "--results", str(results))
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not results.exists() or not any(results.iterdir())


def test_rows_survive_a_torn_write(tmp_path):
    path = tmp_path / ROWS_FILE
    append_row(path, {"kind": "start", "utc": "2026-01-01T00:00:00.000Z"})
    with path.open("ab") as f:
        f.write(b'{"kind":"interval","seq":0,"cpus":[')  # cut by a crash
    assert [r["kind"] for r in read_rows(path)] == ["start"]
    t = "2026-01-01T00:00:00.000Z"
    append_row(path, {"kind": "gap", "start_utc": t, "end_utc": t})
    assert [r["kind"] for r in read_rows(path)] == ["start", "gap"]
    assert path.read_bytes().count(b"\n") == 2


def test_damaged_rows_are_one_line(rtlab, tmp_path):
    results = tmp_path / "results"
    d = results / "20260101-000000-m"
    d.mkdir(parents=True)
    manifest = {
        "schema": 1, "kind": "monitor", "id": d.name, "name": "m",
        "created_utc": "2026-01-01T00:00:00.000Z", "end_utc": None, "target": None,
        "settings": {"cpus": "0", "period_ns": 10**6, "window_ns": 10**9, "policy": "other",
                     "deadline_ns": None, "explain_ns": None, "explain_max": 3, "le_ns": [1000]},
    }  # fmt: skip
    (d / "monitor.json").write_text(json.dumps(manifest))
    (d / ROWS_FILE).write_text('{"kind":"start"}\nnot json\n')
    rc, _, err = rtlab("show", d.name[:10], "--results", str(results))
    assert rc == 2 and "line 2: not JSON" in err and len(err.strip().splitlines()) == 1
    (d / ROWS_FILE).write_text(
        '{"kind":"interval","seq":0,"start_utc":"2026-01-01T00:00:00.000Z",'
        '"end_utc":"2026-01-01T00:00:01.000Z","cpus":[{"cpu":0,"max_ns":"big","le":[]}]}\n'
    )
    rc, _, err = rtlab("show", d.name, "--json", "--results", str(results))
    assert rc == 2 and "line 1: interval row: cpus[0].max_ns must be an integer" in err
    (d / "monitor.json").write_text(json.dumps({**manifest, "schema": 99}))
    rc, _, err = rtlab("report", d.name, "--results", str(results))
    assert rc == 2 and "monitor schema 99" in err
    # an id prefix shared by a monitor and an experiment is ambiguous
    (results / "20260101-000000-x").mkdir()
    (results / "20260101-000000-x" / "experiment.json").write_text("{}")
    with pytest.raises(UserError, match="ambiguous"):
        find_monitor(Store(results), "2026")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 2**34), min_size=1, max_size=300))
def test_le_counts_follow_the_histogram(values):
    """A bucket counts at a bound when its lower edge is at or below it."""
    v = np.array(values, np.int64)
    idx, counts = np.unique(bucket_index(v), return_counts=True)
    lower, upper = bucket_bounds(idx)
    thread = {"histogram": {"unit": "ns", "overflow": 0,
                            "buckets": [[int(a), int(b), int(c)] for a, b, c in
                                        zip(lower, upper, counts, strict=True)]}}  # fmt: skip
    bounds = [1000, 20_000, 10**6, 10**8]
    got = le_counts(thread, bounds)
    own_lower = bucket_bounds(bucket_index(v))[0]
    for b, n in zip(bounds, got, strict=True):
        assert n == int((own_lower <= b).sum())
        assert n >= int((v <= b).sum())  # never fewer than the samples at or below it
    assert got == sorted(got)


def test_resume_of_an_experiment_is_refused(rtlab, tmp_path):
    results = tmp_path / "results"
    (results / "20260101-000000-e").mkdir(parents=True)
    (results / "20260101-000000-e" / "experiment.json").write_text("{}")
    rc, _, err = rtlab("monitor", "--resume", "20260101-000000-e", "--results", str(results))
    assert rc == 2 and "is an experiment, not a monitor" in err
    assert os.listdir(results) == ["20260101-000000-e"]


class FlakyTarget(LocalTarget):
    """This machine, whose connection is "lost" at its LOSE_AT-th window."""

    def __init__(self, name: str, lose_at: int | None) -> None:
        super().__init__()
        self.name, self.lose_at, self.windows, self.closed = name, lose_at, 0, False

    def run_case(self, case, call, document, raw, on_progress=None):
        self.windows += 1
        if self.windows == self.lose_at:
            raise LostError("connection lost (test)")
        return super().run_case(case, call, document, raw, on_progress)

    def close(self) -> None:
        self.closed = True


def test_a_lost_target_is_reached_again_and_the_gap_marked(tmp_path):
    store = Store(tmp_path / "results")
    now = time.time()
    manifest = MonitorManifest(
        id="20260101-000000-lost", name="lost", created_utc=utc_text(now),
        settings=MonitorSettings(cpus="0", period_ns=10**6, window_ns=10**9, policy="other",
                                 le_ns=[10**4, 10**5]),
        end_utc=utc_text(now + 6), target={"name": "flaky"},
    )  # fmt: skip
    rec = create_monitor(store, manifest, {"schema": 2}, {})
    first = FlakyTarget("flaky", lose_at=2)
    again: list[FlakyTarget] = []

    def reopen() -> FlakyTarget:
        again.append(FlakyTarget("flaky", lose_at=None))
        return again[-1]

    said: list[str] = []
    loop = MonitorLoop(rec, first, reopen, Sink(), said.append)
    loop.reconnect_s = 0.5
    result = loop.run([])
    assert first.closed and len(again) == 1 and again[0].closed  # each closed by the loop
    assert result.reconnects == 1 and result.gaps == 1 and not result.interrupted
    rows = rec.rows()
    assert [r["kind"] for r in rows][:3] == ["start", "interval", "start"]
    _check_windows(rows, deadline=False)
    (gap,) = [r for r in rows if r["kind"] == "gap"]
    assert gap["reason"] == "target lost: connection lost (test)"
    assert any("target lost" in s for s in said)


def test_window_row_keeps_symptoms_and_the_worst_explained_per_cpu():
    thread = {"count": 3, "min_ns": 900, "max_ns": 5000, "mean_ns": 2000.0,
              "percentiles_ns": {"99": 5000}, "overruns": 0,
              "histogram": {"unit": "ns", "overflow": 0,
                            "buckets": [[900, 903, 1], [1000, 1003, 1], [4992, 5023, 1]]},
              }  # fmt: skip
    doc = {
        "start_utc": "2026-01-01T00:00:00.000Z", "end_utc": "2026-01-01T00:00:01.000Z",
        "elapsed_ns": 10**9, "complete": True, "host": {"uname": {"release": "6.1.0-rt"}},
        "threads": [{**thread, "cpu": 0}, {**thread, "cpu": 1}],
        "conditions": {"kmsg": {"error": None, "lost": 0, "messages": [
            {"t_us": 1, "facility": 0, "text": "usb 1-1: new device"},
            {"t_us": 2, "facility": 0, "text": "sched: RT throttling activated"}]}},
        "explain": {"status": "ok", "reason": None},
        "spikes": [{"cpu": c, "latency_ns": 5000 - i, "verdict": f"v{i}", "causes": []}
                   for i, c in enumerate([0, 0, 1, 0, 1])],
    }  # fmt: skip
    row = interval_row(7, doc, {0: 2}, [1000, 10_000], explain_max=2)
    assert row["seq"] == 7 and row["kernel"] == "6.1.0-rt"
    assert [c["misses"] for c in row["cpus"]] == [2, None]
    assert row["cpus"][0]["le"] == [2, 3] and row["cpus"][0]["sum_ns"] == 6000
    assert [(s["cpu"], s["verdict"]) for s in row["spikes"]] == [
        (0, "v0"),
        (0, "v1"),
        (1, "v2"),
        (1, "v4"),
    ]
    assert row["kmsg"]["symptoms"] == {"RT throttling": 1}
    assert row["kmsg"]["messages"][0]["symptom"] == "RT throttling"  # symptoms first
    assert (
        window_call(MonitorSettings("0-1", 10**6, 10**9, explain_ns=10**5, explain_max=2)).value(
            "explain-max"
        )
        == "4"
    )  # the probe keeps N in all: 2 per CPU
