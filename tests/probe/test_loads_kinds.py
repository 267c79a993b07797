"""Every load kind: starts, does measurable work, stops, and leaves no process behind."""

from __future__ import annotations

import json
import signal
import time

import pytest

from . import procfs
from .conftest import online_cpus
from .loadproc import group_activity, kind_of, skip_unless_installed, start_load, stop, wait_gone

LAST = online_cpus()[-1]
NCPUS = len(online_cpus())

# spec -> (worker processes, what must grow while it runs)
LOADS: dict[str, tuple[int, str]] = {
    f"spin:60%@{LAST}": (1, "cpu_ticks"),
    "spin:30%": (NCPUS, "cpu_ticks"),
    f"stride:line@{LAST}": (1, "cpu_ticks"),
    f"stride:page:32M@{LAST}": (1, "cpu_ticks"),
    "ipc:1": (1, "switches"),
    "ipc:1:pipe:5": (1, "switches"),
    "io:{tmp}": (1, "switches"),
    "net": (1, "cpu_ticks"),
    f"timer:8@{LAST}": (1, "switches"),
    f"stress-ng:cpu:1@{LAST}": (1, "cpu_ticks"),
    "hackbench:1:pipe:5": (1, "cpu_ticks"),
    "iperf3": (1, "cpu_ticks"),
}


def tool_started(pgid: int, spec: str) -> bool:
    """External kinds: the tool itself (not only the rtlab worker) is in the group."""
    if kind_of(spec) not in ("stress-ng", "hackbench", "iperf3"):
        return True
    return any(not p.comm.startswith("rtlab:") for p in procfs.live_in_group(pgid))


@pytest.mark.parametrize("spec", sorted(LOADS))
def test_load_works_stops_and_reports(probe, tmp_path, spec):
    skip_unless_installed(spec)
    nworkers, metric = LOADS[spec]
    spec = spec.format(tmp=tmp_path)
    out = tmp_path / "load.json"
    proc, pgid = start_load(
        probe, ["load", spec, "--json", str(out), "--quiet"], tmp_path, nworkers
    )
    try:
        assert procfs.wait_for(lambda: tool_started(pgid, spec), timeout_s=5)
        time.sleep(0.3)
        before = group_activity(pgid)
        time.sleep(1.0)
        after = group_activity(pgid)
        grown = getattr(after, metric) - getattr(before, metric)
        assert grown > 0, (spec, metric, before, after)
        proc.send_signal(signal.SIGTERM)
        assert wait_gone(pgid) == []
        assert proc.wait(timeout=10) == 0
    finally:
        stop(proc)
    doc = json.loads(out.read_text())
    (ran,) = doc["loads"]
    assert ran["spec"] == spec and ran["workers"] == nworkers
    assert ran["work_units"] > 0 and ran["work_unit"]
    assert ran["policy"] == "other:0" and ran["workers_ended_early"] == 0
    assert not list(tmp_path.glob("*rtlab-io*"))  # the io file never has a name left behind


@pytest.mark.parametrize("spec", sorted(LOADS))
def test_nothing_survives_sigkill_of_the_probe(probe, tmp_path, spec):
    skip_unless_installed(spec)
    nworkers, _ = LOADS[spec]
    spec = spec.format(tmp=tmp_path)
    proc, pgid = start_load(probe, ["load", spec, "--quiet"], tmp_path, nworkers)
    try:
        assert procfs.wait_for(lambda: tool_started(pgid, spec), timeout_s=5)
        time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)
        assert wait_gone(pgid) == []
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        stop(proc)


@pytest.mark.parametrize(
    "spec", ["stress-ng:cpu:1", "hackbench:1:pipe:5", "iperf3", "ipc:1:pipe:5"]
)
def test_nothing_survives_sigkill_during_wakeup(probe, tmp_path, spec):
    skip_unless_installed(spec)
    args = ["wakeup", "--load", spec, "--settle", "100ms", "--duration", "10m", "--quiet"]
    proc, pgid = start_load(probe, [*args, "--allow-fallback"], tmp_path, 1)
    try:
        assert procfs.wait_for(lambda: tool_started(pgid, spec), timeout_s=5)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        assert wait_gone(pgid) == []
    finally:
        stop(proc)


def test_spin_pins_one_worker_per_cpu(probe, tmp_path):
    cpus = online_cpus()
    proc, pgid = start_load(probe, ["load", "spin:10%", "--quiet"], tmp_path, len(cpus))
    try:
        workers = [w for w in procfs.children(proc.pid) if w.comm == "rtlab:spin"]
        assert sorted(procfs.cpus_allowed(w.pid) for w in workers) == sorted(map(str, cpus))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    assert wait_gone(pgid) == []
