"""Write a synthetic experiment with one huge raw-sample file, laid out as rtlab stores it.

    python bench/make_synthetic.py RESULTS_DIR [--id ID] [--samples N] [--seed S]

Creates RESULTS_DIR/<id>/experiment.json and cases/000.json (a minimal valid schema-1
result document whose single thread has ``raw_file``: "000.raw") plus cases/000.raw.
Samples: lognormal around 20 µs with a heavy Pareto tail mixture (0.1 %), generated,
summarised (exact count/min/max/mean/stddev and the probe histogram) and written chunk
by chunk, so memory stays bounded whatever N is. Prints the document's summary.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from rtlab.analysis import NBUCKETS, Histogram, bucket_index, stats_from_histogram
from rtlab.rawfile import write_raw

CHUNK = 4_000_000
INTERVAL_NS = 1_000_000


class Summary:
    """Running exact moments and probe histogram of the chunks written."""

    def __init__(self) -> None:
        self.n = 0
        self.total = 0  # exact sum, ns
        self.m2 = 0.0  # sum of squared deviations (Chan et al.)
        self.vmin = math.inf
        self.vmax = -math.inf
        self.counts = np.zeros(NBUCKETS + 1, dtype=np.int64)

    def add(self, c: np.ndarray) -> None:
        k = c.size
        csum = int(c.sum(dtype=np.int64))
        d = c - csum / k
        cm2 = float(np.dot(d, d))
        if self.n:
            num = csum * self.n - self.total * k
            self.m2 += cm2 + num * num / (k * self.n * (self.n + k))
        else:
            self.m2 = cm2
        self.n += k
        self.total += csum
        self.vmin = min(self.vmin, int(c.min()))
        self.vmax = max(self.vmax, int(c.max()))
        self.counts += np.bincount(bucket_index(c), minlength=NBUCKETS + 1)


def generate(n: int, seed: int, summary: Summary) -> Iterator[np.ndarray]:
    rng = np.random.default_rng(seed)
    for start in range(0, n, CHUNK):
        k = min(CHUNK, n - start)
        x = rng.lognormal(math.log(20_000), 0.25, k)
        tail = rng.random(k) < 0.001  # heavy tail: 0.1 % of wake-ups hit by something
        x[tail] += rng.pareto(1.2, int(tail.sum())) * 30_000
        c = np.minimum(x, 5e9).astype(np.int64)
        summary.add(c)
        yield c


def document(s: Summary, hist: Histogram, argv: list[str], elapsed_ns: int) -> dict:
    mean = s.total / s.n
    stddev = math.sqrt(s.m2 / (s.n - 1)) if s.n > 1 else None
    est = stats_from_histogram(hist, minimum=s.vmin, maximum=s.vmax, mean=mean, stddev=stddev)
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
    return {
        "schema": 3,
        "tool": "rtlab-probe",
        "version": "synthetic",
        "meter": "wakeup",
        "complete": True,
        "stop_reason": "loops",
        "signal": None,
        "argv": argv,
        "start_utc": now,
        "end_utc": now,
        "elapsed_ns": elapsed_ns,
        "host": {
            "uname": {
                "sysname": "Linux",
                "nodename": "synthetic",
                "release": "",
                "version": "",
                "machine": "",
            },
            "realtime": 0,
            "cpus_online": 1,
            "cpus_configured": 1,
        },
        "params": {
            "interval_ns": INTERVAL_NS,
            "distance_ns": 0,
            "clock": "CLOCK_MONOTONIC",
            "sleep": "clock_nanosleep",
            "loops": s.n,
            "duration_ns": None,
            "policy": "fifo:99",
            "allow_fallback": False,
            "cpus": None,
            "threads": 1,
            "main_cpus": None,
            "mlock": True,
            "dma_latency_us": None,
            "deadline_ns": None,
            "settle_ns": 0,
            "raw": True,
            "loads": [],
        },
        "mlocked": True,
        "deadline_exceeded": False,
        "loads": [],
        "threads": [
            {
                "index": 0,
                "cpu": None,
                "tid": 0,
                "period_ns": INTERVAL_NS,
                "policy": {"name": "fifo", "priority": 99, "nice": 0},
                "policy_fallback": False,
                "count": s.n,
                "min_ns": s.vmin,
                "max_ns": s.vmax,
                "mean_ns": mean,
                "stddev_ns": stddev,
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
                "raw_file": "000.raw",
                "raw_samples": s.n,
                "histogram": hist.to_document(),
                "worst": [],
                "series": {
                    "period_ns": 1_000_000_000,
                    "truncated": True,
                    "min_ns": [],
                    "mean_ns": [],
                    "max_ns": [],
                    "count": [],
                },
            }
        ],
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="results directory (created)")
    ap.add_argument("--id", default="synthetic-100m", help="experiment id")
    ap.add_argument("--samples", type=int, default=100_000_000)
    ap.add_argument("--seed", type=int, default=20)
    args = ap.parse_args(argv)

    exp = args.results / args.id
    cases = exp / "cases"
    cases.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic_ns()
    s = Summary()
    write_raw(cases / "000.raw", generate(args.samples, args.seed, s), interval_ns=INTERVAL_NS)
    hist = Histogram.from_probe_counts(s.counts[:NBUCKETS], int(s.counts[NBUCKETS]))
    doc = document(s, hist, ["make_synthetic.py", *argv], time.monotonic_ns() - t0)
    (cases / "000.json").write_text(json.dumps(doc) + "\n")
    manifest = {
        "schema": 2,
        "id": args.id,
        "name": "synthetic",
        "complete": True,
        "cases": [
            {
                "index": 0,
                "series": "synthetic",
                "name": "100M samples",
                "swept": {},
                "status": "done",
                "document": "cases/000.json",
            }
        ],
    }
    (exp / "experiment.json").write_text(json.dumps(manifest, indent=1) + "\n")
    t = doc["threads"][0]
    print(
        f"wrote {exp}: {s.n} samples in {(time.monotonic_ns() - t0) / 1e9:.1f} s; "
        f"min {t['min_ns']} mean {t['mean_ns']:.1f} max {t['max_ns']} ns; "
        f"histogram p50/p99/p99.99 {t['percentiles_ns']['50']}/{t['percentiles_ns']['99']}"
        f"/{t['percentiles_ns']['99.99']} ns"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
