"""The application audit on real kernels (Debian's 6.1 PREEMPT_RT and generic, CPU 1
isolated): a planted fifo:60 thread pinned to the isolated CPU, never locked; the
values read are asserted, never a latency."""

from __future__ import annotations

import json

from .conftest import RT_CPU, Guest


def test_the_application_audit_reads_the_kernel(guest: Guest):
    planted = guest.sh(
        f"setsid taskset -c {RT_CPU} chrt -f 60 sleep 300 </dev/null >/dev/null 2>&1 & echo $!"
    ).strip()
    assert planted.isdigit(), planted
    try:
        out = guest.rtlab("audit", "--pid", planted, "--json", "--window", "1s", check=False)
    finally:
        guest.sh(f"kill {planted}", check=False)
    doc = json.loads(out)
    got = {f["id"]: f for f in doc["findings"]}
    rt = doc["facts"]["system"]["preempt_model"] == "rt"
    assert [t["tid"] for t in doc["facts"]["threads"]] == [int(planted)]

    prio = got["app.priority"]
    assert "sleep (" in prio["evidence"] and "fifo:60" in prio["evidence"]
    assert "migration/N fifo:99" in prio["evidence"]  # the stop class, as /proc shows it
    if rt:  # PREEMPT_RT: RCU boosting threads at fifo:1 (rcutree.kthread_prio)
        assert "rcub/N fifo:1" in prio["evidence"] or "rcuc/N fifo:1" in prio["evidence"]
    assert prio["status"] in ("OK", "WARN")  # WARN only for an IRQ thread above 60

    aff = got["app.affinity"]
    assert f"CPUs {RT_CPU}" in aff["evidence"] and f"isolated CPUs: {RT_CPU}" in aff["evidence"]
    assert "not isolated" not in aff["fix"] and "pin each" not in aff["fix"]

    assert got["app.memlock"]["status"] == "WARN"  # sleep locks nothing
    # Debian builds CONFIG_SCHED_DEBUG: /proc/PID/task/TID/sched counts migrations
    mig = got["app.migrations"]
    assert "se.nr_migrations" in mig["evidence"] and mig["status"] == "OK", mig
    sw = got["app.switches"]  # blocked in nanosleep all along: not a busy thread
    assert sw["status"] == "OK" and "did not run" in sw["evidence"], sw
    assert got["app.faults"]["status"] == "OK"
