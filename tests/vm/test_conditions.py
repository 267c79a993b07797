"""The conditions a run records, on real kernels booted with nohz_full=1 (conftest.py):
the busy noise meter on the isolated CPU 1 and its local timer interrupts counted
between the start and the end of measuring. The ticks per second are printed for each
kernel (TCG guests are noisy: no rate bound is asserted on the generic kernel)."""

from __future__ import annotations

import json

from .conftest import RT_CPU, Guest

SECONDS = 5


def guest_hz(g: Guest) -> int:
    config = g.sh("cat /boot/config-$(uname -r)")
    (line,) = [x for x in config.splitlines() if x.startswith("CONFIG_HZ=")]
    return int(line.split("=", 1)[1])


def test_timer_interrupts_on_the_nohz_full_cpu_are_recorded(guest: Guest):
    out = guest.sh(f"{guest.probe} noise --cpus {RT_CPU} --duration {SECONDS}s --quiet --json -")
    doc = json.loads(out)
    cond = doc["conditions"]
    irq = cond["interrupts"]
    assert irq["error"] is None and irq["elapsed_ns"] >= SECONDS * 10**9
    (cpu,) = irq["per_cpu"]
    assert cpu["cpu"] == RT_CPU
    assert cpu["timer"]["name"] == "LOC"  # an x86 guest: the local APIC timer row
    ticks_per_s = cpu["timer"]["count"] / (irq["elapsed_ns"] / 1e9)
    hz = guest_hz(guest)
    print(f"{guest.release}: CPU {RT_CPU} (nohz_full, busy noise meter): "
          f"{cpu['timer']['count']} local timer interrupts in {irq['elapsed_ns'] / 1e9:.2f} s "
          f"= {ticks_per_s:.1f}/s (HZ={hz}); all interrupts {cpu['total']}")  # fmt: skip
    assert cpu["total"] >= cpu["timer"]["count"]
    # the thread really ran there, at the requested policy
    (t,) = cond["applied"]["threads"]
    assert (t["policy"], t["cpus_allowed"]) == (doc["params"]["policy"], str(RT_CPU))
    assert cond["kmsg"]["error"] is None
    for m in cond["kmsg"]["messages"]:
        print(f"  kernel log while measuring: <{m['level']}> {m['text']}")


def test_with_the_osnoise_tracer_its_kernel_thread_is_read_back(rt_guest: Guest):
    """The probe's thread only reads the trace: the policy and affinity read back are
    those of the kernel's osnoise/1 thread that measures."""
    out = rt_guest.sh(
        f"{rt_guest.probe} noise --tracer osnoise --cpus {RT_CPU} --policy fifo:95 "
        "--duration 2s --quiet --json -"
    )
    doc = json.loads(out)
    (t,) = doc["conditions"]["applied"]["threads"]
    assert t["tid"] != doc["threads"][0]["tid"]
    comm = rt_guest.sh(f"cat /proc/{t['tid']}/comm", check=False).strip()
    assert comm in ("", f"osnoise/{RT_CPU}")  # gone once the tracer stopped
    assert (t["policy"], t["cpus_allowed"]) == ("fifo:95", str(RT_CPU))
