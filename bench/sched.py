"""The cost and the fidelity of `rtlab-probe sched`, measured side by side in one run.

A periodic program (tests/probe/progs/periodic.c: SCHED_FIFO 80, pinned, 1 ms, absolute
clock_nanosleep by default) writes its own latency of every activation. Round by round,
interleaved, it runs alone and under `rtlab-probe sched -- periodic ...`:

1. Observer cost: the program's own p50 and p99 with rtlab attached over those without
   (target: p50 ratio <= 1.15).
2. Fidelity: in the attached runs, rtlab's count, p50, p99 and max against the program's
   own for the same activations (rtlab's end at the switch-in, the program's after its
   clock read: rtlab's are expected a few us lower, never higher but by 1 us).

Usage: python bench/sched.py [--rounds N] [--count N] [--cpu CPU] [--mode abs|timerfd|rel]
(root: SCHED_FIFO and tracefs)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from _common import probe_path

ROOT = Path(__file__).resolve().parents[1]
PROG = ROOT / "tests" / "probe" / "progs" / "periodic.c"


def own_latencies(path: Path) -> np.ndarray:
    log = np.loadtxt(path, dtype=np.int64, ndmin=2)
    return log[:, 2] - log[:, 1]


def us(v: float) -> str:
    return f"{v / 1000:8.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=3000, help="activations per run (1 ms each)")
    ap.add_argument("--cpu", type=int, default=max(0, (os.cpu_count() or 1) - 1))
    ap.add_argument("--mode", choices=("abs", "timerfd", "rel"), default="abs")
    ap.add_argument(
        "--explain", metavar="THRESH", help="attached with --explain THRESH (its cost included)"
    )
    a = ap.parse_args()
    explain = ["--explain", a.explain] if a.explain else []
    probe = probe_path()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        prog = tmp / "periodic"
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O2", "-o", str(prog), str(PROG)], check=True)
        plain: list[np.ndarray] = []
        attached: list[np.ndarray] = []
        rtlab: list[dict] = []
        for r in range(a.rounds):
            cmd = [str(prog), a.mode, "1000", str(a.count), "", str(a.cpu), "80"]
            for observed in (r % 2 == 0, r % 2 != 0):  # alternate which goes first
                own = tmp / "own.txt"
                cmd[4] = str(own)
                if observed:
                    out = tmp / "sched.json"
                    subprocess.run(
                        [probe, "sched", "--samples", "timer", "--quiet", "--json", str(out),
                         "--duration", "1h", *explain, "--", *cmd],
                        check=True, stdout=subprocess.DEVNULL,
                    )  # fmt: skip
                    attached.append(own_latencies(own))
                    rtlab.append(json.loads(out.read_text())["threads"][0])
                else:
                    subprocess.run(cmd, check=True)
                    plain.append(own_latencies(own))
    p_plain, p_att = np.concatenate(plain), np.concatenate(attached)
    q = (50, 99)
    pp, pa = np.percentile(p_plain, q), np.percentile(p_att, q)
    print(f"program: {a.mode}, 1 ms, SCHED_FIFO 80 on CPU {a.cpu}; {a.rounds} rounds x {a.count}")
    if a.explain:
        print(f"rtlab attached with --explain {a.explain}")
    print("observer cost (the program's own latency, us)")
    print(f"  {'':18} {'p50':>8} {'p99':>8} {'max':>8}")
    print(f"  {'alone':18} {us(pp[0])} {us(pp[1])} {us(p_plain.max())}")
    print(f"  {'rtlab attached':18} {us(pa[0])} {us(pa[1])} {us(p_att.max())}")
    print(f"  ratio p50 {pa[0] / pp[0]:.3f} (target <= 1.15), p99 {pa[1] / pp[1]:.3f}")
    print("fidelity, attached runs (us): rtlab from outside vs the program's own")
    print(f"  {'run':>4} {'count':>11} {'p50':>17} {'p99':>17} {'max':>17}")
    for i, (t, own) in enumerate(zip(rtlab, attached, strict=True)):
        o50, o99 = np.percentile(own, q)
        p = t["percentiles_ns"]
        print(
            f"  {i:4} {t['count']:5}/{len(own):5} {us(p['50'])}/{us(o50)} "
            f"{us(p['99'])}/{us(o99)} {us(t['max_ns'])}/{us(own.max())}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
