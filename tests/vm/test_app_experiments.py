"""`app =` and `attach =` experiments on a vm: target (Debian's PREEMPT_RT kernel, CPU 1
isolated), run through the session's booted guest: the program is built and started in
the guest, the case measured there and its document brought back. Structure is asserted,
never a latency (the guest is emulated).

Each command to the emulated guest takes 4-15 s here, so the application audit made
while a case runs (a look for the program, then its files at both ends of the window)
may not fit in the case: its document must be whole, and when it is done, right. That
it is done on a target is asserted over SSH (tests/test_targets_ssh.py), and the
audit's reading of these kernels by `rtlab audit --pid` in the guest
(test_audit_app.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rtlab.measure import Settings, measure, plan
from rtlab.runner import Display
from rtlab.store import Store

from .conftest import RT_CPU, Guest

PERIODIC = Path(__file__).resolve().parents[1] / "probe" / "progs" / "periodic.c"


def test_app_and_attach_cases_run_in_the_guest(rt_guest: Guest, tmp_path):
    g = rt_guest
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the measured program")
    # The guest's /tmp is its own: the program is built there, by this machine's compiler.
    g.sh(f"{cc} -O2 -o /tmp/periodic {PERIODIC}")
    attached = g.sh(
        "setsid /tmp/periodic abs 20000 100000 /tmp/attached.txt </dev/null >/dev/null 2>&1 "
        "& echo $!"
    ).strip()
    assert attached.isdigit(), attached
    exp = tmp_path / "app.toml"
    exp.write_text(
        '[defaults]\nduration = "6s"\nmlock = false\n'
        '[[series]]\nname = "started"\napp = "/tmp/periodic abs 20000 100000 /tmp/own.txt"\n'
        'cpus = "isolated"\nsweep = { policy = ["fifo:70"] }\n'
        '[[series]]\nname = "attached"\nattach = "periodic"\n'
    )
    try:
        planned = plan(str(exp), g.target, Settings(), lambda text: None)  # type: ignore[arg-type]
        done = measure(
            Store(tmp_path / "r"), planned, g.target, Settings(), Display(), lambda text: None
        )  # type: ignore[arg-type]
    finally:
        g.sh(f"kill {attached}", check=False)
    rec = done.record
    assert rec.complete and not done.interrupted
    started = json.loads((rec.path / rec.cases[0].document).read_text())
    [t] = [t for t in started["threads"] if t["sched"]["tid"]]
    assert t["sched"]["comm"] == "periodic" and t["count"] > 0
    assert t["policy"]["name"] == "fifo" and t["policy"]["priority"] == 70  # chrt in the guest
    assert started["sched"]["command"]["stopped_by_probe"]
    assert started["params"]["command"][:6] == ["chrt", "-f", "70", "taskset", "-c", str(RT_CPU)]
    att = json.loads((rec.path / rec.cases[1].document).read_text())
    assert att["sched"]["process"] == int(attached)
    assert sum(x["count"] for x in att["threads"]) > 0
    # the application audit, read in the guest by its probe (sysinfo --pid), when in time
    for c, pid in zip(rec.cases, [started["sched"]["command"]["pid"], int(attached)], strict=True):
        audit = json.loads((rec.path / "cases" / f"{c.slug}.app-audit.json").read_text())
        assert audit["status"] in ("done", "failed") and audit["case"] == c.index, audit
        if audit["status"] == "failed":
            assert audit["reason"], audit
            continue
        assert audit["pids"] == [pid], audit
        by_id = {x["id"]: x for x in audit["findings"]}
        assert by_id["app.memlock"]["status"] == "OK"  # periodic.c calls mlockall
        threads = audit["facts"]["threads"]
        assert [t["tid"] for t in threads] == [pid]
        if c is rec.cases[0]:  # started by chrt -f 70 taskset -c RT_CPU in the guest
            assert (threads[0]["policy"], threads[0]["priority"]) == ("fifo", 70)
            assert threads[0]["cpus"] == [RT_CPU]
