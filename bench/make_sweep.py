"""Write a synthetic sweep experiment laid out as rtlab stores it, for report benchmarks.

    python bench/make_sweep.py RESULTS_DIR [--id ID] [--samples N] [--seed S]

Three series ("no preemption", "preemption", "preemption + isolation") over 0-8
fork-copy loads: 27 cases, each one probe result document (schema 1) of N samples
(60,000 by default, 1 ms apart) with the probe's histogram geometry, the per-second
min/mean/max series, the 16 worst samples, plus system.json and experiment.json. No raw
files: like a run without --raw, statistics come from the histograms. Samples are
lognormal and grow with the load, with a heavy tail and a spike every 10 s.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from rtlab.analysis import Histogram, stats_from_histogram

SERIES = [
    ("no preemption", "other:0", 60_000, 0.5),
    ("preemption", "fifo:99", 12_000, 0.3),
    ("preemption + isolation", "fifo:99", 8_000, 0.2),
]
LOADS = range(9)
INTERVAL_NS = 1_000_000


def samples(rng: np.random.Generator, n: int, median_ns: float, sigma: float) -> np.ndarray:
    x = rng.lognormal(math.log(median_ns), sigma, n)
    tail = rng.random(n) < 0.002
    x[tail] += rng.pareto(1.5, int(tail.sum())) * median_ns
    x[::10_000] *= 8  # a periodic spike every 10 s
    return np.maximum(x, 1).astype(np.int64)


def document(x: np.ndarray, policy: str, loads: int, host: str) -> dict:
    hist = Histogram.from_samples(x)
    mean, sd = float(x.mean()), float(x.std(ddof=1))
    est = stats_from_histogram(
        hist, minimum=int(x.min()), maximum=int(x.max()), mean=mean, stddev=sd
    )
    per = 1_000_000_000 // INTERVAL_NS
    secs = [x[i : i + per] for i in range(0, x.size, per)]
    worst = np.argsort(x, kind="stable")[::-1][:16]
    name, _, prio = policy.partition(":")
    nice = int(prio or 0) if name in ("other", "batch", "idle") else 0  # other:NICE
    prio = "0" if nice or name in ("other", "batch", "idle") else prio
    if name in ("other", "batch"):
        policy = f"{name}:{nice}"  # the probe's canonical text
    return {
        "schema": 3,
        "tool": "rtlab-probe",
        "version": "synthetic",
        "meter": "wakeup",
        "complete": True,
        "stop_reason": "loops",
        "signal": None,
        "argv": ["make_sweep.py"],
        "start_utc": "2026-01-01T00:00:00.000Z",
        "end_utc": "2026-01-01T00:01:00.000Z",
        "elapsed_ns": x.size * INTERVAL_NS,
        "host": {"uname": {"nodename": host}, "cpus_online": 2, "cpus_configured": 2},
        "params": {"interval_ns": INTERVAL_NS, "loops": int(x.size), "policy": policy},
        "mlocked": True,
        "deadline_exceeded": False,
        "loads": [{"spec": f"forkcopy:{loads}", "workers": loads}] if loads else [],
        "threads": [
            {
                "index": 0,
                "cpu": None,
                "tid": 0,
                "period_ns": INTERVAL_NS,
                "policy": {"name": name, "priority": int(prio or 0), "nice": nice},
                "count": int(x.size),
                "min_ns": int(x.min()),
                "max_ns": int(x.max()),
                "mean_ns": mean,
                "stddev_ns": sd,
                "percentiles_ns": {
                    "50": est.median,
                    "90": est.p90,
                    "99": est.p99,
                    "99.9": est.p999,
                    "99.99": est.p9999,
                },
                "percentiles_rel_error": 0.5 / 128,
                "overruns": 0,
                "raw_lost": 0,
                "histogram": hist.to_document(),
                "worst": [
                    {"latency_ns": int(x[i]), "cycle": int(i), "t_ns": int(i) * INTERVAL_NS}
                    for i in worst
                ],
                "series": {
                    "period_ns": 1_000_000_000,
                    "truncated": False,
                    "min_ns": [int(s.min()) for s in secs],
                    "mean_ns": [float(s.mean()) for s in secs],
                    "max_ns": [int(s.max()) for s in secs],
                    "count": [int(s.size) for s in secs],
                },
            }
        ],
    }


def write_sweep(
    results: Path,
    exp_id: str,
    n: int = 60_000,
    seed: int = 27,
    host: str = "synthetic",
    loads: Sequence[int] = LOADS,
) -> Path:
    """Write RESULTS/EXP_ID (3 series x LOADS cases of N samples); returns its directory."""
    rng = np.random.default_rng(seed)
    exp = results / exp_id
    (exp / "cases").mkdir(parents=True, exist_ok=True)
    cases = []
    for name, policy, median_ns, sigma in SERIES:
        for nload in loads:
            idx = len(cases)
            x = samples(rng, n, median_ns * (1 + 0.15 * nload), sigma)
            doc = document(x, policy, nload, host)
            (exp / "cases" / f"{idx:03d}.json").write_text(json.dumps(doc))
            cases.append(
                {
                    "index": idx,
                    "series": name,
                    "name": f"forkcopy={nload}",
                    "swept": {"forkcopy": nload},
                    "params": {"policy": policy, "interval": "1ms", "loops": n, "forkcopy": nload},
                    "args": [],
                    "status": "done",
                    "document": f"cases/{idx:03d}.json",
                    "expected_s": n / 1000,
                }
            )
    manifest = {
        "schema": 2,
        "id": exp_id,
        "name": "synthetic sweep",
        "source": "bench/make_sweep.py",
        "scale": 1.0,
        "deadline_ns": None,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "complete": True,
        "notes": [],
        "series": [{"name": s[0], "description": "", "swept": ["forkcopy"]} for s in SERIES],
        "cases": cases,
    }
    (exp / "experiment.json").write_text(json.dumps(manifest, indent=1))
    (exp / "experiment.toml").write_text("# synthetic\n")
    system = {
        "schema": 1,
        "hostname": host,
        "kernel_release": "6.1.0-synthetic",
        "kernel_version": "#1 SMP PREEMPT_DYNAMIC",
        "machine": "x86_64",
        "cmdline": "quiet",
        "cpus_online": [0, 1],
        "cpu_count": 2,
        "realtime": False,
        "preempt_model": "dynamic",
        "hz": 250,
        "timer_mode": "NO_HZ_IDLE",
        "isolated_cpus": [],
        "isolation_source": None,
    }
    (exp / "system.json").write_text(json.dumps(system, indent=1))
    return exp


def write_planned(
    results: Path,
    exp_id: str,
    spec: str,
    n: int = 2000,
    seed: int = 1,
    host: str = "synthetic",
    label: str | None = None,
    slower: float = 1.0,
) -> Path:
    """Write RESULTS/EXP_ID with the cases of experiment SPEC (a preset or a TOML file) as
    `rtlab run` plans them (series, names, swept values, parameters), each a synthetic
    document of N samples; SLOWER scales the latencies (another kernel), LABEL is the
    experiment's --label."""
    from rtlab.experiment import load_experiment

    exp_plan = load_experiment(spec)
    rng = np.random.default_rng(seed)
    exp = results / exp_id
    (exp / "cases").mkdir(parents=True, exist_ok=True)
    cases = []
    for c in exp_plan.cases:
        load = 0 if c.params.get("load") in (None, "none", "") else 1 + c.index % 4
        x = samples(rng, n, 10_000 * slower * (1 + 0.5 * load), 0.3)
        doc = document(x, str(c.params.get("policy", "fifo:99")), load, host)
        (exp / "cases" / f"{c.index:03d}.json").write_text(json.dumps(doc))
        cases.append(
            {
                "index": c.index,
                "series": c.series,
                "name": c.name,
                "swept": c.swept,
                "params": c.params,
                "status": "done",
                "document": f"cases/{c.index:03d}.json",
                "expected_s": 1.0,
            }
        )
    manifest = {
        "schema": 4,
        "id": exp_id,
        "name": exp_plan.name,
        "source": spec,
        "scale": 1.0,
        "deadline_ns": None,
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "complete": True,
        "notes": [],
        "series": [
            {"name": s["name"], "description": "", "swept": list(s.get("sweep", {}))}
            for s in exp_plan.series
        ],
        "cases": cases,
        "label": label,
        "virtualization": {"kind": "unknown"},
    }
    (exp / "experiment.json").write_text(json.dumps(manifest, indent=1))
    (exp / "experiment.toml").write_text(exp_plan.text)
    system = {"schema": 1, "hostname": host, "kernel_release": "6.1.0-synthetic", "hz": 250}
    (exp / "system.json").write_text(json.dumps(system, indent=1))
    return exp


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="results directory (created)")
    ap.add_argument("--id", default="synthetic-sweep", help="experiment id")
    ap.add_argument("--samples", type=int, default=60_000, help="samples per case")
    ap.add_argument("--seed", type=int, default=27)
    ap.add_argument("--host", default="synthetic", help="host name in system.json")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    exp = write_sweep(args.results, args.id, args.samples, args.seed, args.host)
    print(f"wrote {exp}: 27 cases x {args.samples} samples in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
