"""The kernel's timerlat and osnoise tracers on Debian's 6.1 PREEMPT_RT kernel (the
generic kernel of tests/vm has neither): the probe's --tracer runs, the global osnoise/
settings put back byte for byte after a normal run and after a SIGKILL (the journal of
probe/src/lib/kjournal.h), and rtla's own outputs imported by `rtlab import rtla`.
Structure only: TCG guests are noisy, no latency figure is asserted."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.ingest import read_rtla
from rtlab.resultdoc import check_document

from .conftest import RT_CPU, Guest

OSNOISE = "/sys/kernel/tracing/osnoise"
INSTANCES = "/sys/kernel/tracing/instances"
JOURNAL = "/run/rtlab/osnoise-journal"  # the probe's, without $RTLAB_STATE
# Linux 6.1's osnoise/ files (kernel/trace/trace_osnoise.c, init_tracefs); the probe
# writes all of them but none other
FILES_61 = {"cpus", "options", "period_us", "print_stack", "runtime_us", "stop_tracing_total_us",
            "stop_tracing_us", "timerlat_period_us"}  # fmt: skip
SNAPSHOT = (
    f"echo =snapshot= && cd {OSNOISE} && for f in *; do printf '%s ' \"$f\"; "
    "od -An -tx1 -v \"$f\" | tr -d ' \\n'; echo; done"
)
# A user's own configuration, unlike both the kernel's defaults and what a run sets, so
# that "as before" means something; written in an order the kernel takes
# (runtime_us <= period_us at every write).
USER = [
    ("cpus", "0"),
    ("timerlat_period_us", "2000"),
    ("runtime_us", "400000"),
    ("period_us", "900000"),
    ("stop_tracing_us", "77"),
    ("print_stack", "33"),
    ("options", "NO_OSNOISE_WORKLOAD"),
]
RUN = f"--cpus {RT_CPU} --policy fifo:95 --quiet"


def split(out: str) -> tuple[str, dict[str, str]]:
    """A command's output before "=snapshot=", and the osnoise/ files (name -> hex)."""
    head, _, snap = out.partition("=snapshot=\n")
    files = dict(line.split(" ", 1) for line in snap.splitlines() if " " in line)
    return head, files


def snapshot(g: Guest, command: str = "true") -> tuple[str, dict[str, str]]:
    """COMMAND (which must succeed), then every osnoise/ file byte for byte."""
    return split(g.sh(f"{command} && {SNAPSHOT}"))


def writes(pairs: list[tuple[str, str]]) -> str:
    return " && ".join(f"echo {v} > {OSNOISE}/{f}" for f, v in pairs)


def text(hexbytes: str) -> str:
    return bytes.fromhex(hexbytes).decode()


def put_back(g: Guest, original: dict[str, str]) -> None:
    """The kernel's settings as found before this file's tests (period before runtime)."""
    order = ["period_us", "runtime_us", "cpus", "timerlat_period_us", "stop_tracing_us",
             "stop_tracing_total_us", "print_stack"]  # fmt: skip
    pairs = [(f, text(original[f]).strip()) for f in order if f in original]
    options = text(original.get("options", "")).split()
    # "DEFAULTS" resets every option; the kernel prints NO_DEFAULTS once one differs
    pairs += [("options", o) for o in options if o != "NO_DEFAULTS"]
    g.sh(writes(pairs))


def probe_doc(out: str, meter: str, tracer: str) -> dict:
    doc = json.loads(out)
    check_document(doc, f"{meter} --tracer {tracer}")
    assert doc["complete"] is True and doc["meter"] == meter
    assert doc["tracer"]["used"] == tracer and doc["tracer"]["reason"] is None
    (t,) = doc["threads"]
    assert t["cpu"] == RT_CPU and t["count"] > 0 and tracer in t
    changed = {s["file"] for s in doc["tracer"]["settings"]}
    assert {"osnoise/cpus", "osnoise/stop_tracing_us", "osnoise/options"} <= changed
    assert all(s["restored"] for s in doc["tracer"]["settings"])
    return doc


def kill_mid_run(g: Guest) -> tuple[int, dict[str, str]]:
    """A timerlat run SIGKILLed once its tracer runs; its PID and the files it left."""
    out, files = snapshot(
        g,
        f"{g.probe} wakeup --tracer timerlat {RUN} --duration 120s --json /tmp/k.json & "
        "pid=$!; for i in $(seq 300); do "
        f"grep -qs timerlat {INSTANCES}/rtlab-$pid/current_tracer && break; sleep 0.1; done; "
        f"sleep 0.5; kill -KILL $pid; wait $pid; echo pid=$pid; "
        f"test -s {JOURNAL} && cat {INSTANCES}/rtlab-$pid/current_tracer",
    )
    pid = int(re.search(r"pid=(\d+)", out).group(1))  # type: ignore[union-attr]
    assert out.rstrip().endswith("timerlat")  # its instance still runs the tracer
    return pid, files


def test_probe_tracers_measure_and_leave_osnoise_as_found(rt_guest: Guest):
    g = rt_guest
    _, original = snapshot(g)
    assert set(original) == FILES_61
    _, user = snapshot(g, writes(USER))
    assert text(user["cpus"]) == "0\n" and "NO_OSNOISE_WORKLOAD" in text(user["options"])
    try:
        # a normal run of each tracer: samples, and every file as the user had it
        for meter, tracer, extra in (
            ("wakeup", "timerlat", "--duration 2s"),
            ("noise", "osnoise", "--duration 2s"),
        ):
            out, files = snapshot(
                g, f"{g.probe} {meter} --tracer {tracer} {RUN} {extra} --json /tmp/d.json "
                f"&& ! test -e {JOURNAL} && cat /tmp/d.json",
            )  # fmt: skip
            probe_doc(out, meter, tracer)
            assert files == user

        # SIGKILL: the settings stay changed, with their journal, until a cleanup
        pid, left = kill_mid_run(g)
        assert text(left["cpus"]) == f"{RT_CPU}\n" and left != user
        out, files = snapshot(
            g, f"{g.probe} explain --cleanup && ! test -e {JOURNAL} "
            f"&& ! test -e {INSTANCES}/rtlab-{pid}",
        )  # fmt: skip
        assert "removed 1 stale tracefs instance" in out
        assert f"osnoise/ settings of the killed run {pid}" in out
        assert files == user

        # SIGKILL again: the next --tracer run puts them back before it reads them
        kill_mid_run(g)
        out, files = snapshot(
            g, f"{g.probe} noise --tracer osnoise {RUN} --duration 2s "
            f"--json /tmp/d.json && ! test -e {JOURNAL} && cat /tmp/d.json",
        )  # fmt: skip
        doc = probe_doc(out, "noise", "osnoise")
        found = {s["file"]: s["found"] for s in doc["tracer"]["settings"]}
        assert found["osnoise/cpus"] == "0"  # the user's (no newline here), not the killed run's
        assert files == user
    except BaseException:  # put back what can be, and report the first failure, not this
        with contextlib.suppress(Exception):
            put_back(g, original)
        raise
    put_back(g, original)
    assert snapshot(g)[1] == original


# rtla's commands, short; cwd /tmp: --auto saves its trace file there (the guest's overlay)
RTLA = {
    "timerlat-hist": "timerlat hist -d 3s",
    "timerlat-top": "timerlat top -q -d 3s --auto 10000",
    "osnoise-hist": "osnoise hist -d 3s",
    "osnoise-top": "osnoise top -q -d 3s",
}


def test_rtla_outputs_import_and_rtla_leaves_osnoise_as_found(rt_guest: Guest, tmp_path):
    """Debian's rtla (the host's, seen by the guest) run on the guest's CPUs; its stdout
    imported by `rtlab import rtla` here. rtla 6.1 puts the osnoise/ files it changed
    back at its exit, so nothing is left for these tests to restore."""
    g = rt_guest
    _, before = snapshot(g)
    script = " && ".join(f"echo =={name}== && rtla {cmd}" for name, cmd in RTLA.items())
    out, after = snapshot(g, f"cd /tmp && {script}")
    assert after == before
    parts = re.split(r"^==([a-z-]+)==\n", out, flags=re.M)[1:]
    files = []
    for name, body in zip(parts[::2], parts[1::2], strict=True):
        path = tmp_path / f"{name}.txt"
        path.write_text(body)
        files.append(path)
        doc = read_rtla(path)
        check_document(doc, name)
        assert doc["meter"] == ("wakeup" if name.startswith("timerlat") else "noise")
        assert [t["cpu"] for t in doc["threads"]] == [0, 1]  # the guest's 2 CPUs
        for t in doc["threads"]:
            if name == "osnoise-top":  # totals only
                assert t["count"] is None and t["measured_ns"] > 0 and t["max_ns"] >= 0
            else:
                assert t["count"] > 0 and t["max_ns"] >= t["min_ns"] >= 0
            if name.endswith("hist"):
                h = t["histogram"]
                assert sum(b[2] for b in h["buckets"]) + h["overflow"] == t["count"]
    assert [p.stem for p in files] == list(RTLA)
    cp = subprocess.run(
        [sys.executable, "-m", "rtlab.cli", "import", "rtla", *map(str, files), "--json",
         "--results", str(tmp_path / "results")],
        capture_output=True, text=True, timeout=120, env={**os.environ},
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["cases"] == len(RTLA)


def test_rtla_hwnoise_imports_where_rtla_has_it(rt_guest: Guest, tmp_path):
    usage = rt_guest.sh("rtla --help 2>&1 || true")
    if "hwnoise" not in usage:
        pytest.skip("this rtla has no hwnoise (it came with rtla 6.3; Debian 12's is 6.1)")
    out, _ = snapshot(rt_guest, "cd /tmp && rtla hwnoise -q -d 3s")
    path = tmp_path / "hwnoise.txt"
    path.write_text(out)
    doc = read_rtla(Path(path))
    check_document(doc, "hwnoise")
    assert doc["import"]["format"].startswith("rtla-hwnoise")
    assert [t["cpu"] for t in doc["threads"]] == [0, 1]
