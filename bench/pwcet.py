"""Does the pWCET estimate earn trust? Two figures, printed side by side in one run.

1. Coverage on synthetic data with known tails: N samples, a gamma body (shape 4, scale
   5 µs) below its 99th percentile u0 and u0 + a generalised Pareto tail (scale 20 µs,
   shape -0.3, -0.1 or 0) above it, so the true quantile at p is known. For each shape,
   REPLICATES seeded replicates are fitted (rtlab.analysis.fit_tail, method auto); the
   figure is the fraction whose interval at p = 1e-6 and 1e-9 contains the true quantile
   (target 0.85-0.95 for a 90 % interval), refusals counted apart.
2. Prediction on real runs of this machine: RUNS raw wake-up runs
   (`rtlab-probe wakeup --cpus CPU --interval 1ms --duration SECONDS --raw FILE`, as
   root); each is fitted on its first 10 % and predicts the maximum of the remaining
   90 % (`TailFit.predict_max`: the 90 % prediction interval of the largest of m
   activations); the figure is the fraction of runs whose observed maximum falls inside
   (target >= 0.8), refusals counted apart. --runs-dir keeps the runs for another look.

Usage: python bench/pwcet.py [--replicates N] [--samples N] [--runs N] [--seconds S]
       [--runs-dir DIR] [--skip-synthetic] [--skip-real] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from _common import probe_path
from scipy import stats

from rtlab.analysis import TailFit, fit_tail
from rtlab.analysis._pwcet_methods import fit_pot
from rtlab.rawfile import open_samples

SHAPES = (-0.3, -0.1, 0.0)
PS = (1e-6, 1e-9)
TAU, BODY_SHAPE, BODY_SCALE, TAIL_SCALE = 0.01, 4.0, 5_000.0, 20_000.0


def synthetic(xi: float, n: int, seed: int) -> np.ndarray:
    """N int64 ns samples: the gamma body below u0, u0 + GPD(xi) above (fraction TAU)."""
    rng = np.random.default_rng(seed)
    body = stats.gamma(BODY_SHAPE, scale=BODY_SCALE)
    u0 = body.ppf(1 - TAU)
    tail = rng.random(n) < TAU
    x = np.empty(n)
    x[~tail] = body.ppf(rng.random(int((~tail).sum())) * (1 - TAU))
    x[tail] = u0 + stats.genpareto.ppf(rng.random(int(tail.sum())), xi, scale=TAIL_SCALE)
    return np.round(x).astype(np.int64)


def true_quantile(xi: float, p: float) -> float:
    u0 = stats.gamma(BODY_SHAPE, scale=BODY_SCALE).ppf(1 - TAU)
    return float(u0 + stats.genpareto.isf(p / TAU, xi, scale=TAIL_SCALE))


def replicate(args: tuple[float, int, int]) -> list[tuple[str, float, float, str | None]]:
    xi, n, seed = args
    fit = fit_tail(synthetic(xi, n, 1000 + seed), seed=seed)
    out = []
    for p in PS:
        e = fit.estimate(p)
        out.append((e.method or "-", e.lo_ns or 0.0, e.hi_ns or 0.0, e.refused))
    return out


def coverage(replicates: int, n: int, jobs: int) -> None:
    print(
        f"1. coverage: {replicates} seeded replicates of {n} samples per shape, gamma body + "
        f"GPD tail above its {1 - TAU:.0%} quantile, 90 % intervals (target 0.85-0.95)"
    )
    print(f"   {'shape':>6} {'p':>6} {'covered':>8} {'coverage':>9} {'refused':>8} "
          f"{'pot/bm':>8} {'median width':>13}")  # fmt: skip
    t0 = time.monotonic()
    with ProcessPoolExecutor(jobs) as pool:
        for xi in SHAPES:
            res = list(pool.map(replicate, [(xi, n, r) for r in range(replicates)]))
            for j, p in enumerate(PS):
                truth = true_quantile(xi, p)
                rows = [r[j] for r in res]
                given = [r for r in rows if r[3] is None]
                hit = sum(lo <= truth <= hi for _, lo, hi, _ in given)
                pot = sum(m == "pot" for m, *_ in given)
                width = np.median([(hi - lo) / truth for _, lo, hi, _ in given]) if given else 0
                cov = hit / len(given) if given else float("nan")
                print(f"   {xi:>6} {p:>6.0e} {hit:>4}/{len(given):<3} {cov:>9.3f} "
                      f"{len(rows) - len(given):>8} {pot:>3}/{len(given) - pot:<4} "
                      f"{width:>12.1%}")  # fmt: skip
            reasons = {}
            for r in res:
                if r[0][3] is not None:
                    key = r[0][3].split(":")[0]
                    reasons[key] = reasons.get(key, 0) + 1
            if reasons:
                print(f"          refusals at 1e-6: {reasons}")
    print(f"   ({time.monotonic() - t0:.0f} s; width: (hi - lo) / true quantile)")


def collect(runs_dir: Path, runs: int, seconds: int, cpu: int) -> list[Path]:
    """The raw files of RUNS runs in RUNS_DIR, measuring the missing ones."""
    probe = probe_path()
    out = []
    for i in range(runs):
        raw = runs_dir / f"run-{i:02d}.raw"
        if not raw.exists():
            tmp = raw.with_suffix(".tmp")
            cmd = [probe, "wakeup", "--cpus", str(cpu), "--interval", "1ms", "--duration",
                   f"{seconds}s", "--raw", str(tmp), "--json", str(runs_dir / "last.json"),
                   "--quiet"]  # fmt: skip
            print(f"   run {i + 1}/{runs}: {' '.join(cmd)}", flush=True)
            subprocess.run(cmd, check=True)
            tmp.rename(raw)
        out.append(raw)
    return out


def ungated(x: np.ndarray) -> TailFit:
    """For comparison only, never what rtlab gives: a peaks-over-threshold fit with every
    gate ignored."""
    order = np.argsort(-x.astype(float), kind="stable")[: min(5001, x.size - 1)]
    f = fit_pot(x.size, x[order].astype(float), order, 0)
    f.refused = None
    return TailFit(x, "pot", 0.9, 0, [], [f], None)


def predict(path: Path) -> tuple:
    """(samples, max of the rest, gated prediction or refusal, ungated prediction)."""
    x = np.asarray(open_samples(path))
    k = x.size // 10
    rest = x[k:]
    r = fit_tail(x[:k]).predict_max(rest.size)
    u = ungated(x[:k]).predict_max(rest.size)
    return x.size, rest.size, float(rest.max()), r, u


def prediction(runs: int, seconds: int, cpu: int, runs_dir: Path | None, jobs: int) -> None:
    print(
        f"\n2. prediction: {runs} raw wake-up runs of {seconds} s at 1 ms on CPU {cpu}; fit on "
        "the first 10 %, 90 % prediction interval of the max of the rest (target >= 0.8)"
    )
    with tempfile.TemporaryDirectory() as d:
        where = runs_dir or Path(d)
        where.mkdir(parents=True, exist_ok=True)
        files = collect(where, runs, seconds, cpu)
        with ProcessPoolExecutor(jobs) as pool:
            res = list(pool.map(predict, files))
    inside = refused = raw_in = raw_n = 0
    reasons: dict[str, int] = {}
    for f, (n, m, mx, r, u) in zip(files, res, strict=True):
        head = f"   {f.name}: {n} samples, max of the last {m}: {mx / 1e3:8.1f} us"
        if not isinstance(u, str):
            raw_n += 1
            raw_in += u[0] <= mx <= u[1]
        if isinstance(r, str):
            refused += 1
            why = r.split(" (")[0]
            reasons[why] = reasons.get(why, 0) + 1
            print(f"{head}; refused: {why}")
            continue
        lo, hi, method = r
        ok = lo <= mx <= hi
        inside += ok
        print(f"{head}, predicted [{lo / 1e3:.1f}, {hi / 1e3:.1f}] us ({method}) "
              f"{'inside' if ok else 'OUTSIDE'}")  # fmt: skip
    given = runs - refused
    frac = f"{inside / given:.3f}" if given else "n/a"
    print(f"   inside: {inside}/{given} = {frac}; refused: {refused}/{runs}")
    for why, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"     {count:3d} x {why}")
    if raw_n:
        print(f"   for comparison only, every gate ignored (peaks over threshold): inside "
              f"{raw_in}/{raw_n} = {raw_in / raw_n:.3f}")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--cpu", type=int, default=(os.cpu_count() or 1) - 1)
    ap.add_argument("--runs-dir", type=Path, help="keep (and reuse) the raw runs here")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    a = ap.parse_args()
    if not a.skip_synthetic:
        coverage(a.replicates, a.samples, a.jobs)
    if not a.skip_real:
        if os.geteuid() != 0 and a.runs_dir is None:
            print("\n2. prediction: skipped, needs root for SCHED_FIFO (or --runs-dir with runs)")
        else:
            prediction(a.runs, a.seconds, a.cpu, a.runs_dir, a.jobs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
