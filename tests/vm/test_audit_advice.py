"""The audit's advice on real kernels: Debian's 6.1 PREEMPT_RT and generic kernels, both
built with NO_HZ_FULL and booted with CPU 1 isolated (isolcpus, nohz_full, rcu_nocbs).
One guest command per kernel runs two audits: the isolated CPU against a 100 µs deadline,
then CPU 0, which is not isolated."""

from __future__ import annotations

import json
import shlex
import sys

from .conftest import RT_CPU, STATE, Guest

SEP = "==== next audit ===="


def _two_audits(guest: Guest) -> tuple[dict, dict]:
    run = f"RTLAB_STATE={STATE} {shlex.quote(sys.executable)} -m rtlab.cli audit --json"
    sep = shlex.quote(SEP)
    out = guest.sh(f"{run} --deadline 100us; echo {sep}; {run} --rt-cpus 0", check=False)
    first, second = out.split(SEP + "\n")
    return (
        {f["id"]: f for f in json.loads(first)["findings"]},
        {f["id"]: f for f in json.loads(second)["findings"]},
    )


def test_the_advice_follows_the_kernel_and_the_isolation(guest: Guest):
    isolated, shared = _two_audits(guest)
    rt = "-rt-" in guest.release
    # the preemption model against 100 µs: PREEMPT_RT meets it, PREEMPT_DYNAMIC does not
    preempt = isolated["kernel.preempt"]
    if rt:
        assert preempt["status"] == "OK", preempt
    else:
        assert preempt["status"] == "FAIL" and "CONFIG_PREEMPT_RT=y" in preempt["fix"], preempt
        assert "preempt=full" in preempt["fix"] or "dynamic:full" in preempt["evidence"]
    # the tick: full dynticks booted on the isolated CPU is right; on CPU 0 the same
    # NO_HZ_FULL kernel behaves like NO_HZ_IDLE, and full dynticks is not advised there
    mode = isolated["timer.mode"]
    assert mode["status"] == "OK" and f"nohz_full={RT_CPU}" in mode["evidence"], mode
    assert "isolated: meant for one busy task each" in mode["evidence"]
    mode0 = shared["timer.mode"]
    assert "behaves like NO_HZ_IDLE" in mode0["evidence"] and "nohz_full" not in mode0["fix"]
    assert shared["boot.nohz_full"]["status"] == "INFO"  # CPU 0: only for one busy task
    # throttling: turning it off is advised for the isolated CPU only, with its cost
    throttle, throttle0 = isolated["sched.rt_runtime"], shared["sched.rt_runtime"]
    assert throttle["status"] == "INFO" and "sched_rt_runtime_us=-1" in throttle["fix"]
    assert "runaway" in throttle["fix"] and "housekeeping CPUs 0" in throttle["fix"]
    assert throttle0["status"] == "OK" and "shared with other work" in throttle0["evidence"]
