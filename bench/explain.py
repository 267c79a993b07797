"""The cost and the reach of --explain, measured side by side in one run.

1. Observer cost: `rtlab-probe wakeup` on one CPU (SCHED_FIFO 99, 1 ms) with and without
   `--explain`, interleaved round by round: p50 and p99 ratios (explained / plain).
   Target: p50 ratio <= 1.15.
2. Reach: over the spikes the explained runs kept, the fraction of their latency that
   was attributed to a thread, IRQ, softirq or timer callback (not "unexplained"), on
   this machine as it is, and with a planted SCHED_FIFO thread spinning on that CPU
   (the fraction of the latency attributed to that thread by name and PID), and how
   many kept spikes have the kernel stack of their main cause (or the commonest reason
   they have none).

Usage: python bench/explain.py [--rounds N] [--loops N] [--cpu CPU] [--threshold DUR]
       [--baseline-probe PROBE]
(root: SCHED_FIFO and tracefs)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import probe_path

SPIN_LOAD = "spin:3%:20ms@{cpu},policy=fifo:99"  # the planted thread (rtlab:spin)


def wakeup(probe: str, cpu: int, loops: int, tmp: Path, *extra: str) -> dict:
    out = tmp / "w.json"
    subprocess.run(
        [probe, "wakeup", "--cpus", str(cpu), "--policy", "fifo:99", "--interval", "1ms",
         "--loops", str(loops), "--quiet", "--json", str(out), *extra],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    return json.loads(out.read_text())


def attributed(docs: list[dict]) -> tuple[float, int]:
    """Fraction of the kept spikes' latency that has a cause, and the number of spikes."""
    spikes = [s for d in docs for s in d["spikes"]]
    total = sum(s["latency_ns"] for s in spikes)
    unexplained = sum(s["unexplained_ns"] for s in spikes)
    return (1 - unexplained / total if total else float("nan")), len(spikes)


def planted_share(docs: list[dict]) -> tuple[float, int]:
    """Fraction of the kept spikes' latency attributed to the planted load thread."""
    spikes = [(d, s) for d in docs for s in d["spikes"]]
    total = sum(s["latency_ns"] for _, s in spikes)
    pids = {w for d in docs for ld in d["loads"] for w in ld.get("pids", [])}
    mine = sum(
        c["ns"]
        for _, s in spikes
        for c in s["causes"]
        if c["kind"] == "thread" and c["name"] == "rtlab:spin" and (not pids or c["pid"] in pids)
    )
    return (mine / total if total else float("nan")), len(spikes)


def with_stacks(docs: list[dict]) -> str:
    """How many kept spikes have the kernel stack of their main cause (schema 7)."""
    spikes = [s for d in docs for s in d["spikes"]]
    n = sum(1 for s in spikes if s.get("cause_stack"))
    why: dict[str, int] = {}
    for s in spikes:
        if not s.get("cause_stack"):
            key = str(s.get("cause_stack_unavailable"))
            why[key] = why.get(key, 0) + 1
    top = max(why, key=why.__getitem__) if why else ""
    return f"{n} of {len(spikes)} with a main-cause stack" + (
        f" (else mostly: {top})" if top else ""
    )


def ratio(a: list[float], b: list[float]) -> str:
    per = [x / y for x, y in zip(a, b, strict=True) if y]
    pooled = statistics.fmean(a) / statistics.fmean(b) if statistics.fmean(b) else float("nan")
    return f"pooled {pooled:5.2f}  per round {min(per):.2f}..{max(per):.2f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--loops", type=int, default=10000)
    ap.add_argument("--cpu", type=int, default=os.cpu_count() - 1)
    ap.add_argument("--threshold", default="50us")
    ap.add_argument(
        "--baseline-probe",
        help="another rtlab-probe build (e.g. one without kernel stacks): its --explain "
        "runs interleaved too, and the ratio explained / baseline-explained is printed",
    )
    a = ap.parse_args()
    probe = probe_path()
    explain = ["--explain", a.threshold, "--explain-max", "20"]
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        print(
            f"1. wakeup on CPU {a.cpu}, fifo:99, 1 ms, {a.loops} loops; {a.rounds} rounds, "
            f"plain and --explain {a.threshold} interleaved"
        )
        plain, expl, base, docs = [], [], [], []
        for r in range(a.rounds):
            p = wakeup(probe, a.cpu, a.loops, tmp)["threads"][0]["percentiles_ns"]
            doc = wakeup(probe, a.cpu, a.loops, tmp, *explain)
            e = doc["threads"][0]["percentiles_ns"]
            if a.baseline_probe:
                b = wakeup(a.baseline_probe, a.cpu, a.loops, tmp, *explain)
                base.append(b["threads"][0]["percentiles_ns"]["50"])
                print(f"  round {r + 1}: p50 {base[-1] / 1e3:6.2f} us explained by the baseline")
            plain.append((p["50"], p["99"]))
            expl.append((e["50"], e["99"]))
            docs.append(doc)
            print(
                f"  round {r + 1}: p50 {p['50'] / 1e3:6.2f} / {e['50'] / 1e3:6.2f} us  "
                f"p99 {p['99'] / 1e3:7.2f} / {e['99'] / 1e3:7.2f} us  (plain / explained); "
                f"{len(doc['spikes'])} spikes kept of {doc['explain']['marked']} marked, "
                f"{doc['explain']['lost_events']} events lost"
            )
        print(
            f"  p50 explained/plain {ratio([x[0] for x in expl], [x[0] for x in plain])}"
            "  (target <= 1.15)"
        )
        print(f"  p99 explained/plain {ratio([x[1] for x in expl], [x[1] for x in plain])}")
        if base:
            print(f"  p50 explained/baseline-explained {ratio([x[0] for x in expl], base)}")
        frac, n = attributed(docs)
        print(
            f"\n2. attributed share of the kept spikes' latency, this machine idle: "
            f"{frac:.3f} over {n} spikes; {with_stacks(docs)}"
        )
        loaded = [
            wakeup(probe, a.cpu, a.loops, tmp, *explain, "--load", SPIN_LOAD.format(cpu=a.cpu))
            for _ in range(max(1, a.rounds // 2))
        ]
        frac, n = attributed(loaded)
        share, _ = planted_share(loaded)
        print(
            f"   with a planted SCHED_FIFO spinner ({SPIN_LOAD.format(cpu=a.cpu)}): attributed "
            f"{frac:.3f}, to the planted thread {share:.3f}, over {n} spikes; "
            f"{with_stacks(loaded)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
