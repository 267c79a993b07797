"""Fidelity of the noise and periodic meters, measured side by side in one run.

1. `rtlab-probe noise` against rt-tests `oslat` on the same CPU, with the same planted
   SCHED_FIFO thread that spins SPIN_US every PERIOD_MS: the maximum gap and the rate
   of gaps of at least GAP_US, per tool, interleaved round by round, and their ratios.
2. `rtlab-probe periodic --mechanism nanosleep-abs` against `rtlab-probe wakeup` (the
   same measurement through another meter): p50 and p90 ratios, interleaved.

Usage: python bench/meters.py [--rounds N] [--seconds S] [--cpu CPU]  (root: SCHED_FIFO)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import probe_path

SPIN_US, PERIOD_MS, GAP_US = 300, 5, 100
PLANTER = f"""
import os, time
os.sched_setaffinity(0, {{int(os.environ["CPU"])}})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(80))
print("ready", flush=True)
while True:
    end = time.perf_counter_ns() + {SPIN_US} * 1000
    while time.perf_counter_ns() < end:
        pass
    time.sleep({PERIOD_MS} / 1000)
"""


def run_json(cmd: list[str], out: Path) -> dict:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return json.loads(out.read_text())


def noise_round(probe: str, cpu: int, secs: int, tmp: Path) -> tuple[float, float]:
    """(max gap ns, gaps >= GAP_US per second) by rtlab-probe noise."""
    out = tmp / "noise.json"
    doc = run_json(
        [probe, "noise", "--cpus", str(cpu), "--policy", "fifo:10", "--duration", f"{secs}s",
         "--threshold", "1us", "--quiet", "--json", str(out)],
        out,
    )  # fmt: skip
    (t,) = doc["threads"]
    big = sum(c for lo, _hi, c in t["histogram"]["buckets"] if lo >= GAP_US * 1000)
    return float(t["max_ns"] or 0), big / (doc["elapsed_ns"] / 1e9)


def oslat_round(cpu: int, secs: int, tmp: Path) -> tuple[float, float]:
    """(max gap ns, gaps >= GAP_US per second) by oslat (µs buckets, 1 µs wide)."""
    out = tmp / "oslat.json"
    doc = run_json(
        ["oslat", "--cpu-list", str(cpu), "--rtprio", "10", "--duration", str(secs),
         "--bucket-size", "1024", "--quiet", f"--json={out}"],
        out,
    )  # fmt: skip
    t = next(iter(doc["thread"].values()))
    big = sum(c for us, c in t["histogram"].items() if int(us) >= GAP_US)
    return float(t["max"]) * 1000, big / float(t["duration"])


def meter_round(probe: str, meter: list[str], cpu: int, loops: int, tmp: Path) -> dict:
    out = tmp / "m.json"
    doc = run_json(
        [probe, *meter, "--cpus", str(cpu), "--policy", "fifo:99", "--interval", "1ms",
         "--loops", str(loops), "--quiet", "--json", str(out)],
        out,
    )  # fmt: skip
    return doc["threads"][0]["percentiles_ns"]


def ratio_line(name: str, a: list[float], b: list[float]) -> str:
    per = [x / y for x, y in zip(a, b, strict=True) if y]
    pooled = statistics.fmean(a) / statistics.fmean(b) if statistics.fmean(b) else float("nan")
    spread = f"{min(per):.2f}..{max(per):.2f}" if per else "-"
    return f"  {name:<28} ratio pooled {pooled:5.2f}  per round {spread}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--cpu", type=int, default=os.cpu_count() - 1)
    ap.add_argument("--loops", type=int, default=5000)
    a = ap.parse_args()
    if not shutil.which("oslat"):
        print("meters.py: oslat not found (Debian package rt-tests)", file=sys.stderr)
        return 2
    probe = probe_path()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        planter = subprocess.Popen(
            [sys.executable, "-c", PLANTER],
            env={**os.environ, "CPU": str(a.cpu)},
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert planter.stdout.readline().strip() == "ready"
            print(
                f"1. noise vs oslat on CPU {a.cpu}, planted SCHED_FIFO 80 spinning {SPIN_US} us "
                f"every {PERIOD_MS} ms; {a.rounds} rounds of {a.seconds} s each, interleaved"
            )
            n, o = [], []
            for r in range(a.rounds):
                n.append(noise_round(probe, a.cpu, a.seconds, tmp))
                o.append(oslat_round(a.cpu, a.seconds, tmp))
                print(
                    f"  round {r + 1}: max gap noise {n[-1][0] / 1e3:8.1f} us  oslat "
                    f"{o[-1][0] / 1e3:8.1f} us;  gaps >= {GAP_US} us/s noise {n[-1][1]:6.1f}  "
                    f"oslat {o[-1][1]:6.1f}"
                )
        finally:
            planter.kill()
            planter.wait()
        print(ratio_line("max gap (noise/oslat)", [x[0] for x in n], [x[0] for x in o]))
        print(ratio_line(f"gaps >= {GAP_US} us/s", [x[1] for x in n], [x[1] for x in o]))
        print(f"  expected gap rate from the planted thread: about {1000 / PERIOD_MS:.0f}/s")

        print(
            f"\n2. periodic --mechanism nanosleep-abs vs wakeup, 1 ms, CPU {a.cpu}, "
            f"fifo:99, {a.loops} loops, {a.rounds} rounds interleaved (target 0.9..1.1)"
        )
        p, w = [], []
        for _ in range(a.rounds):
            p.append(meter_round(probe, ["periodic", "--mechanism", "nanosleep-abs"], a.cpu,
                                 a.loops, tmp))  # fmt: skip
            w.append(meter_round(probe, ["wakeup"], a.cpu, a.loops, tmp))
            time.sleep(0.2)
        for q in ("50", "90"):
            print(ratio_line(f"p{q} (periodic/wakeup)", [x[q] for x in p], [x[q] for x in w]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
