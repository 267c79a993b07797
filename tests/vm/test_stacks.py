"""The kernel stack of a spike's main cause on Debian's 6.1 PREEMPT_RT kernel: the
private instance's stacktrace trigger on timer:hrtimer_expire_entry, its "<stack trace>"
lines as that kernel prints them, and the stack of the timer interrupt that stopped a
planted thread in the kernel. Structure only, never a latency."""

from __future__ import annotations

from .conftest import Guest, explain_planted, explained_spikes


def test_a_thread_in_the_kernel_leaves_its_kernel_stack(rt_guest: Guest):
    """A SCHED_FIFO 80 thread pinned to the measured CPU reads /dev/urandom for 3 ms
    every 30 ms (time in kernel code, preemptible on RT but above the meter's priority):
    the spikes it causes keep the stack of the timer interrupt that stopped it, the
    kernel's read path below the interrupt entry. The instance and its trigger are gone
    afterwards.

    The measured CPU is nohz_full: while kernel.timer_migration is 1 the kernel may put
    the meter's timer on CPU 0, and then no interrupt on CPU 1 stops the thread (the
    spike says so). The test runs with timer migration off, restored afterwards, and
    explains every spike (the worst ones are those where both timers expired in one
    interrupt, before the thread ran: no stack can show it)."""
    g = rt_guest
    was = g.sh("cat /proc/sys/kernel/timer_migration").strip()
    g.sh("echo 0 > /proc/sys/kernel/timer_migration")
    try:
        pid, doc = explain_planted(g, "rtlab-kplant", "kernel", explain_max=200)
    finally:
        g.sh(f"echo {was} > /proc/sys/kernel/timer_migration")
    spikes = explained_spikes(doc)
    stacks = doc["explain"]["stacks"]
    assert stacks["recorded"] and stacks["trigger"] == "timer:hrtimer_expire_entry", stacks
    assert stacks["read"] > 0
    mine = [
        s
        for s in spikes
        if s["causes"] and s["causes"][0]["kind"] == "thread" and s["causes"][0]["pid"] == pid
    ]
    assert mine, " | ".join(s["verdict"] for s in spikes)
    for s in spikes:  # a stack, or the reason there is none
        assert (s["cause_stack"] is None) != (s["cause_stack_unavailable"] is None), s
    kernel = []
    for s in mine:
        frames = [f.split("+")[0] for f in s["cause_stack"] or []]
        if "hrtimer_interrupt" in frames:
            below = frames[frames.index("hrtimer_interrupt") + 1 :]
            if {"ksys_read", "vfs_read"} & set(below):
                kernel.append(s)
    assert kernel, [s["cause_stack"] or s["cause_stack_unavailable"] for s in mine]
    assert all("+0x" in f for f in kernel[0]["cause_stack"])
    left = g.sh("ls /sys/kernel/tracing/instances")
    assert "rtlab-" not in left, left
