"""The overhead of `rtlab monitor`, measured side by side in one run.

1. CPU time: `rtlab monitor` (its defaults: a SCHED_FIFO 99 thread per CPU at 1 ms, here
   with --window W) runs for D1 and for D2 seconds; the CPU time of rtlab and of every
   probe it ran (os.wait4's rusage of rtlab: its own and its waited-for children's) is
   read for both, and the difference per second of monitoring, times 3600, is the CPU
   time per hour of monitoring; what is left is the cost of starting (audit, fingerprint).
2. The bare probe: one `rtlab-probe wakeup` run as long as the difference, for the
   share of the CPU time that is the measurement itself.
3. Latency: `rtlab-probe wakeup` on one CPU (SCHED_FIFO 98, just below the monitor's
   threads, 1 ms) without and with a monitor running on every CPU, interleaved round
   by round: p50, p99 and max ratios (with / without) of the pooled samples.

Usage: python bench/monitor.py [--rounds N] [--loops N] [--cpu CPU] [--window DUR]
       [--short S] [--long S]        (root: SCHED_FIFO)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import probe_path

RTLAB = [sys.executable, "-m", "rtlab.cli"]


def monitor_cpu(seconds: int, window: str, results: Path) -> tuple[float, int]:
    """(CPU seconds of rtlab monitor and its probes, windows stored) for one monitor."""
    proc = subprocess.Popen(
        [*RTLAB, "monitor", "--duration", f"{seconds}s", "--window", window,
         "--results", str(results), "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    out = proc.stdout.read() if proc.stdout else b""
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"rtlab monitor exited {proc.returncode}")
    return ru.ru_utime + ru.ru_stime, json.loads(out)["intervals"]


def probe_cpu(probe: str, seconds: int, tmp: Path) -> float:
    """CPU seconds of the bare probe doing what a monitor's windows do, for SECONDS."""
    proc = subprocess.Popen(
        [probe, "wakeup", "--cpus", f"0-{(os.cpu_count() or 1) - 1}", "--policy", "fifo:99",
         "--interval", "1ms", "--duration", f"{seconds}s", "--quiet",
         "--json", str(tmp / "p.json")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return ru.ru_utime + ru.ru_stime


def hist_samples(doc: dict) -> np.ndarray:
    """The samples of a result document as bucket midpoints (its histogram)."""
    b = np.array(doc["threads"][0]["histogram"]["buckets"], np.int64).reshape(-1, 3)
    return np.repeat((b[:, 0] + b[:, 1]) / 2, b[:, 2])


def wakeup(probe: str, cpu: int, loops: int, tmp: Path) -> np.ndarray:
    out = tmp / "w.json"
    subprocess.run(
        [probe, "wakeup", "--cpus", str(cpu), "--policy", "fifo:98", "--interval", "1ms",
         "--loops", str(loops), "--quiet", "--json", str(out)],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    doc = json.loads(out.read_text())
    return hist_samples(doc)


def with_monitor(probe: str, cpu: int, loops: int, tmp: Path, results: Path) -> np.ndarray:
    err = (tmp / "monitor.err").open("w")
    mon = subprocess.Popen(
        [*RTLAB, "monitor", "--window", "5s", "--results", str(results)],
        stdout=subprocess.DEVNULL, stderr=err,
    )  # fmt: skip
    try:
        end = time.monotonic() + 60
        while "monitoring CPUs" not in (tmp / "monitor.err").read_text():
            if mon.poll() is not None or time.monotonic() > end:
                sys.exit("rtlab monitor did not start: " + (tmp / "monitor.err").read_text())
            time.sleep(0.1)
        time.sleep(0.5)  # its first window's probe is measuring
        return wakeup(probe, cpu, loops, tmp)
    finally:
        mon.send_signal(signal.SIGINT)
        try:
            mon.wait(30)
        except subprocess.TimeoutExpired:
            mon.kill()
            mon.wait()
        err.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=20000)
    ap.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1)
    ap.add_argument("--window", default="10s", help="the monitor's window in part 1")
    ap.add_argument("--short", type=int, default=20, help="seconds of the short monitor")
    ap.add_argument("--long", type=int, default=80, help="seconds of the long monitor")
    a = ap.parse_args()
    probe = probe_path()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cpu1, n1 = monitor_cpu(a.short, a.window, tmp / "r1")
        cpu2, n2 = monitor_cpu(a.long, a.window, tmp / "r2")
        per_s = (cpu2 - cpu1) / (a.long - a.short)
        start = cpu1 - per_s * a.short
        ncpu = os.cpu_count() or 1
        print(f"monitor CPU time ({ncpu} CPUs, 1 ms, --window {a.window}):")
        print(f"  {a.short} s: {cpu1:.2f} s CPU ({n1} windows); {a.long} s: {cpu2:.2f} s CPU "
              f"({n2} windows)")  # fmt: skip
        print(f"  per hour of monitoring: {per_s * 3600:.0f} s CPU "
              f"({per_s * 100:.2f} % of one CPU); to start: {start:.2f} s")  # fmt: skip
        bare = probe_cpu(probe, a.long - a.short, tmp) / (a.long - a.short)
        print(f"  the bare probe (one run of {a.long - a.short} s): {bare * 3600:.0f} s CPU "
              f"per hour; monitor / bare probe = {per_s / bare:.2f}")  # fmt: skip
        plain, mon = [], []
        for r in range(a.rounds):
            plain.append(wakeup(probe, a.cpu, a.loops, tmp))
            mon.append(with_monitor(probe, a.cpu, a.loops, tmp, tmp / "r3"))
            print(f"  round {r + 1}/{a.rounds} done", file=sys.stderr)
        p, m = np.concatenate(plain), np.concatenate(mon)
        print(f"co-running wakeup on CPU {a.cpu} (fifo:98, 1 ms, {a.rounds} x {a.loops} "
              "samples each, interleaved), with / without the monitor:")  # fmt: skip
        for name, q in (("p50", 50), ("p99", 99), ("max", 100)):
            wo, wi = np.percentile(p, q), np.percentile(m, q)
            print(f"  {name}: {wi / 1000:.1f} µs / {wo / 1000:.1f} µs = {wi / wo:.2f}")


if __name__ == "__main__":
    main()
