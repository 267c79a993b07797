"""A swept sysctl on the PREEMPT_RT kernel (in its virtual machine, where changing the
real-time runtime harms no one): each case runs with its value in effect, as the noise
meter's own reading of it records, and the original is back after the run."""

from __future__ import annotations

import json
import shlex

from .conftest import Guest

RT_RUNTIME = "/proc/sys/kernel/sched_rt_runtime_us"
VALUES = [800000, -1]
EXPERIMENT = f"""
[defaults]
meter = "noise"
policy = "fifo:1"
cpus = "last"
duration = "300ms"
[[series]]
name = "throttling"
sweep = {{ "sysctl.kernel.sched_rt_runtime_us" = {VALUES} }}
"""


def test_a_swept_rt_runtime_is_in_effect_per_case_and_put_back(rt_guest: Guest):
    before = rt_guest.sh(f"cat {RT_RUNTIME}")
    rt_guest.sh(f"printf %s {shlex.quote(EXPERIMENT)} > /tmp/rtlab-throttling.toml")
    out = json.loads(rt_guest.rtlab("run", "/tmp/rtlab-throttling.toml", "--json"))
    assert out["complete"], out
    assert rt_guest.sh(f"cat {RT_RUNTIME}") == before  # byte for byte
    for i, value in enumerate(VALUES):
        doc = json.loads(rt_guest.sh(f"cat {shlex.quote(out['path'])}/cases/00{i}.json"))
        assert doc["params"]["rt_runtime_us"] == value  # read by the probe during the case
