"""The real-time policy checks of the audit on real kernels: one `rtlab audit --json` per
guest (Debian's 6.1 PREEMPT_RT and generic kernels), with a planted SCHED_FIFO 99 thread
on the isolated CPU, read values asserted, never a latency."""

from __future__ import annotations

import json

from .conftest import RT_CPU, Guest

OVERCOMMIT = {0: "INFO", 1: "WARN", 2: "OK"}


def test_the_real_time_policy_checks_read_the_kernel(guest: Guest):
    planted = guest.sh(
        f"setsid taskset -c {RT_CPU} chrt -f 99 sleep 300 </dev/null >/dev/null 2>&1 & echo $!"
    ).strip()
    assert planted.isdigit(), planted
    try:
        doc = json.loads(guest.rtlab("audit", "--json", check=False))
    finally:
        guest.sh(f"kill {planted}", check=False)
    facts = doc["facts"]
    got = {f["id"]: f for f in doc["findings"]}
    rt = facts["preempt_model"] == "rt"
    assert rt == guest.release.endswith("-rt-amd64")

    boost = got["kernel.rcu_boost"]
    if rt:  # Debian's RT configuration: RCU_BOOST=y, RCU_BOOST_DELAY=500
        assert boost["status"] == "OK", boost
        assert "CONFIG_RCU_BOOST=y, CONFIG_RCU_BOOST_DELAY=500 (ms)" in boost["evidence"]
        assert "rcub/N threads at fifo:1" in boost["evidence"]
    else:
        assert boost["status"] == "INFO" and "not a PREEMPT_RT kernel" in boost["evidence"]

    assert facts["rt_threads_read"] and facts["rt_kthreads"]["migration/N"] == ["fifo:99"]
    irq = got["irq.threads"]
    assert irq["status"] == ("OK" if facts["irq_threads"] else "INFO"), irq
    if rt:  # PREEMPT_RT threads every handler, at fifo:50
        assert facts["irq_threads"] > 0 and "fifo:50" in facts["irq_thread_prios"]
        assert all(name.startswith("irq/") for name in facts["irq_thread_names"])

    mine = [t for t in facts["rt_user_thread_list"] if t["tid"] == int(planted)]
    assert mine == [
        {
            "pid": int(planted),
            "tid": int(planted),
            "comm": "sleep",
            "policy": "fifo",
            "priority": 99,
            "cpus": str(RT_CPU),
            "oom_score_adj": 0,
        }
    ]
    prio = got["tasks.rt_priority"]
    assert prio["status"] == "WARN" and f"chrt -f -p 98 {planted} (sleep)" in prio["fix"]
    oom = got["vm.oom"]
    assert oom["status"] == "INFO" and f"sleep ({planted}): 0" in oom["evidence"]

    mode = facts["overcommit_memory"]
    assert mode in OVERCOMMIT and facts["commit_limit_kb"] > 0 and facts["committed_as_kb"] > 0
    over = got["vm.overcommit"]
    assert over["evidence"].startswith(f"/proc/sys/vm/overcommit_memory: {mode} (")
    if mode != 2:
        assert over["status"] == OVERCOMMIT[mode]
