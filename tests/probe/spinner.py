"""A planted cause for --explain: a SCHED_FIFO process with a distinctive name that
spins SPIN_US on CPU every PERIOD_MS. Prints "ready" once its policy is set; runs
until killed (the test stops it by PID).

With a sixth argument "kernel" it spends the burst in the kernel instead: reads of
256 KiB from /dev/urandom (the kernel computes every byte: vfs_read, urandom_read_iter),
so a timer interrupt during the burst stops kernel code, natively and under emulation
(where the string instructions that clear a /dev/zero buffer are nearly free and the
interpreter's own loop would dominate).

Each burst starts up to 1 ms after its period boundary, at random: the meter's
activations (a 1 ms grid) do not stay in one phase with the bursts, so some expire
while the burst runs rather than all in the interrupt that wakes it."""

from __future__ import annotations

import ctypes
import os
import random
import sys
import time


def main() -> None:
    cpu, prio, spin_us, period_ms, name = sys.argv[1:6]
    kernel = sys.argv[6:7] == ["kernel"]
    buf = bytearray(256 << 10)
    src = open("/dev/urandom", "rb", buffering=0)  # noqa: SIM115 (open until killed)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(15, name.encode()[:15], 0, 0, 0)  # PR_SET_NAME
    os.sched_setaffinity(0, {int(cpu)})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(prio)))
    print("ready", flush=True)
    spin_ns, period_ns = int(spin_us) * 1000, int(period_ms) * 1_000_000
    nxt = time.monotonic_ns()
    while True:
        end = time.monotonic_ns() + spin_ns
        while time.monotonic_ns() < end:
            if kernel:
                src.readinto(buf)
        nxt += period_ns
        start = nxt + random.randrange(1_000_000)
        time.sleep(max(0.0, (start - time.monotonic_ns()) / 1e9))


if __name__ == "__main__":
    main()
