"""Does the pWCET estimate earn trust? Three figures, printed side by side in one run.

1. Coverage on synthetic data with known tails: N samples, a gamma body (shape 4, scale
   5 µs) below its 99th percentile u0 and u0 + a generalised Pareto tail (scale 20 µs,
   shape -0.3, -0.1 or 0) above it, so the true quantile at p is known. For each shape,
   REPLICATES seeded replicates are fitted (rtlab.analysis.fit_tail, method auto); the
   figure is the fraction whose interval at p = 1e-6 and 1e-9 contains the true quantile
   (target 0.85-0.95 for a 90 % interval), refusals counted apart.
2. Coverage on clustered synthetic data with a known law and known clustering: the
   max-autoregressive process X_t = max(a X_{t-1}, (1 - a) Z_t) with unit Frechet Z has
   a unit Frechet marginal and extremal index 1 - a (bursts of mean size 1 / (1 - a));
   it is mapped sample by sample (a monotone map keeps the clusters and the extremal
   index) onto the law of 1. (gamma body, GPD tail of shape -0.1) or onto a Frechet law
   of shape 0.25 (20 us + 10 us * X^(1/4)), so the true per-activation quantile at p is
   known in closed form. a = 0.3, 0.5, 0.7 (extremal index 0.7, 0.5, 0.3).
3. Prediction on real runs of this machine: RUNS raw wake-up runs
   (`rtlab-probe wakeup --cpus CPU --interval 1ms --duration SECONDS --raw FILE`, as
   root); each is fitted on its first 10 % and predicts the maximum of the remaining
   90 % (`TailFit.predict_max`: the 90 % prediction interval of the largest of m
   activations); the figure is the fraction of runs whose observed maximum falls inside
   (target >= 0.8), refusals counted apart. --runs-dir keeps the runs for another look.
   Side by side: the same with every gate ignored, and, with --baseline-src DIR (the
   src/ of an older rtlab, e.g. `git archive REV src`), that version's estimator.
4. With --monitor ID: held out on a stored monitor's long run (bench/pwcet_monitor.py):
   fitted on a short raw run on its CPU (--fit-raw FILE, else --seconds measured now),
   the 90 % interval of the maximum over the monitor's activations against its observed
   maximum, and per window; side by side with every gate ignored.

Usage: python bench/pwcet.py [--replicates N] [--samples N] [--runs N] [--seconds S]
       [--runs-dir DIR] [--baseline-src DIR] [--skip-synthetic] [--skip-clustered]
       [--skip-real] [--jobs N] [--monitor ID [--results DIR] [--fit-raw FILE]]
"""

from __future__ import annotations

import argparse
import json
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


def _refusals(res: list) -> None:
    """The reasons of the refusals at the first probability, counted."""
    reasons: dict[str, int] = {}
    for r in res:
        if r[0][3] is not None:
            key = r[0][3].split(" (")[0]
            reasons[key] = reasons.get(key, 0) + 1
    if reasons:
        print(f"          refusals at {PS[0]:.0e}: {reasons}")


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
            _refusals(res)
    print(f"   ({time.monotonic() - t0:.0f} s; width: (hi - lo) / true quantile)")


MAR_A = (0.3, 0.5, 0.7)
LAWS = ("gpd-0.1", "frechet0.25")
FRECHET_LOC, FRECHET_SCALE, FRECHET_ALPHA = 20_000.0, 10_000.0, 4.0


def mar_frechet(n: int, a: float, seed: int) -> np.ndarray:
    """N steps of X_t = max(a X_{t-1}, (1 - a) Z_t), Z unit Frechet, started stationary."""
    rng = np.random.default_rng(seed)
    z = (1 - a) / -np.log(rng.random(n))
    x = np.empty(n)
    prev = 1 / -np.log(rng.random())  # the stationary law: unit Frechet
    for i in range(n):  # a running maximum with decay: sequential by nature
        prev = x[i] = max(a * prev, z[i])
    return x


def clustered(law: str, a: float, n: int, seed: int) -> np.ndarray:
    """N int64 ns samples of the MAR process mapped onto LAW (unit Frechet -> LAW)."""
    x = mar_frechet(n, a, seed)
    if law.startswith("frechet"):
        return np.round(FRECHET_LOC + FRECHET_SCALE * x ** (1 / FRECHET_ALPHA)).astype(np.int64)
    body = stats.gamma(BODY_SHAPE, scale=BODY_SCALE)
    u0 = body.ppf(1 - TAU)
    sf = -np.expm1(-1 / x)  # P(X > x) of the unit Frechet marginal
    out = body.isf(np.clip(sf, TAU, 1.0))
    tail = sf < TAU
    out[tail] = u0 + stats.genpareto.isf(sf[tail] / TAU, -0.1, scale=TAIL_SCALE)
    return np.round(out).astype(np.int64)


def clustered_truth(law: str, p: float) -> float:
    if law.startswith("frechet"):
        return FRECHET_LOC + FRECHET_SCALE * (-np.log1p(-p)) ** (-1 / FRECHET_ALPHA)
    return true_quantile(-0.1, p)


def clustered_replicate(args: tuple[str, float, int, int]) -> list[tuple]:
    law, a, n, seed = args
    fit = fit_tail(clustered(law, a, n, 5000 + seed), seed=seed)
    out = []
    for p in PS:
        e = fit.estimate(p)
        theta = e.params.get("extremal_index") if e.method == "pot" else None
        out.append((e.method or "-", e.lo_ns or 0.0, e.hi_ns or 0.0, e.refused, theta))
    return out


def clustered_coverage(replicates: int, n: int, jobs: int) -> None:
    print(
        f"\n2. clustered coverage: {replicates} seeded replicates of {n} samples per law and a, "
        "max-autoregressive X_t = max(a X_t-1, (1-a) Z_t) (extremal index 1 - a) mapped onto "
        "the law, 90 % intervals of the marginal quantile (target 0.85-0.95)"
    )
    print(f"   {'law':>11} {'a':>4} {'p':>6} {'covered':>8} {'coverage':>9} {'refused':>8} "
          f"{'pot/bm':>8} {'theta^':>7} {'median width':>13}")  # fmt: skip
    t0 = time.monotonic()
    with ProcessPoolExecutor(jobs) as pool:
        for law in LAWS:
            for a in MAR_A:
                args = [(law, a, n, r) for r in range(replicates)]
                res = list(pool.map(clustered_replicate, args))
                for j, p in enumerate(PS):
                    truth = clustered_truth(law, p)
                    given = [r[j] for r in res if r[j][3] is None]
                    hit = sum(lo <= truth <= hi for _, lo, hi, _, _ in given)
                    pot = sum(g[0] == "pot" for g in given)
                    thetas = [g[4] for g in given if g[4] is not None]
                    th = f"{np.median(thetas):.2f}" if thetas else "-"
                    width = np.median([(g[2] - g[1]) / truth for g in given]) if given else 0
                    cov = hit / len(given) if given else float("nan")
                    print(f"   {law:>11} {a:>4} {p:>6.0e} {hit:>4}/{len(given):<3} {cov:>9.3f} "
                          f"{replicates - len(given):>8} {pot:>3}/{len(given) - pot:<4} "
                          f"{th:>7} {width:>12.1%}")  # fmt: skip
                _refusals(res)
    print(f"   ({time.monotonic() - t0:.0f} s; theta^: median extremal index of the pot fits)")


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
    """(samples, max of the rest, gated prediction or refusal, ungated prediction, advice)."""
    x = np.asarray(open_samples(path))
    k = x.size // 10
    rest = x[k:]
    fit = fit_tail(x[:k])
    r = fit.predict_max(rest.size)
    u = ungated(x[:k]).predict_max(rest.size)
    adv = getattr(fit.estimate(1.0 / rest.size), "advice", None) if isinstance(r, str) else None
    return x.size, rest.size, float(rest.max()), r, u, adv


def baseline(src: Path, files: list[Path]) -> list:
    """The gated predictions of the rtlab in SRC, on the same files (a subprocess)."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, "--predict-json", *map(str, files)],
                         env=env, check=True, capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout)


def _tally(name: str, preds: list, maxima: list[float]) -> None:
    given = [(p, mx) for p, mx in zip(preds, maxima, strict=True) if not isinstance(p, str)]
    inside = sum(p[0] <= mx <= p[1] for p, mx in given)
    frac = f"{inside / len(given):.3f}" if given else "n/a"
    share = len(given) / len(preds)
    print(f"   {name:<34} answered {len(given):>3}/{len(preds):<3} = {share:.3f}; "
          f"inside {inside:>3}/{len(given):<3} = {frac}")  # fmt: skip


def prediction(runs: int, seconds: int, cpu: int, runs_dir: Path | None, jobs: int,
               base_src: Path | None) -> None:  # fmt: skip
    print(
        f"\n3. prediction: {runs} raw wake-up runs of {seconds} s at 1 ms on CPU {cpu}; fit on "
        "the first 10 %, 90 % prediction interval of the max of the rest (target >= 0.8)"
    )
    with tempfile.TemporaryDirectory() as d:
        where = runs_dir or Path(d)
        where.mkdir(parents=True, exist_ok=True)
        files = collect(where, runs, seconds, cpu)
        with ProcessPoolExecutor(jobs) as pool:
            res = list(pool.map(predict, files))
        base = baseline(base_src, files) if base_src is not None else None
    reasons: dict[str, int] = {}
    for i, (f, (n, m, mx, r, _, adv)) in enumerate(zip(files, res, strict=True)):
        head = f"   {f.name}: {n} samples, max of the last {m}: {mx / 1e3:8.1f} us"
        then = ""
        if base is not None:
            b = base[i][3]
            then = "; before: refused" if isinstance(b, str) else (
                f"; before: [{b[0] / 1e3:.1f}, {b[1] / 1e3:.1f}] "
                f"{'inside' if b[0] <= mx <= b[1] else 'OUTSIDE'}")  # fmt: skip
        if isinstance(r, str):
            why = r.split(" (")[0]
            reasons[why] = reasons.get(why, 0) + 1
            print(f"{head}; refused: {why}{then}\n      advice: {adv}")
            continue
        lo, hi, method = r
        ok = lo <= mx <= hi
        print(f"{head}, predicted [{lo / 1e3:.1f}, {hi / 1e3:.1f}] us ({method}) "
              f"{'inside' if ok else 'OUTSIDE'}{then}")  # fmt: skip
    maxima = [r[2] for r in res]
    _tally("this estimator", [r[3] for r in res], maxima)
    if base is not None:
        _tally(f"before ({base_src})", [b[3] for b in base], maxima)
    _tally("every gate ignored (pot)", [r[4] for r in res], maxima)
    for why, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"     {count:3d} x {why}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=200)
    ap.add_argument("--samples", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--cpu", type=int, help="3.: the CPU [the last]; 4.: [the monitor's first]")
    ap.add_argument("--runs-dir", type=Path, help="keep (and reuse) the raw runs here")
    ap.add_argument("--baseline-src", type=Path, help="src/ of an rtlab to compare with")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-clustered", action="store_true")
    ap.add_argument("--skip-real", action="store_true")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--monitor", help="4.: a stored monitor's id as the held-out data")
    ap.add_argument("--results", type=Path, default=Path("results"), help="the monitor's store")
    ap.add_argument("--fit-raw", type=Path, help="4.: fit on this raw file (else run --seconds)")
    ap.add_argument("--predict-json", nargs="+", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.cpu_given, a.cpu = a.cpu, (os.cpu_count() or 1) - 1 if a.cpu is None else a.cpu
    if a.predict_json:  # the baseline's side of 3., in its own interpreter
        print(json.dumps([predict(f)[:4] for f in a.predict_json]))
        return 0
    if not a.skip_synthetic:
        coverage(a.replicates, a.samples, a.jobs)
    if not a.skip_clustered:
        clustered_coverage(a.replicates, a.samples, a.jobs)
    if not a.skip_real:
        if os.geteuid() != 0 and a.runs_dir is None:
            print("\n3. prediction: skipped, needs root for SCHED_FIFO (or --runs-dir with runs)")
        else:
            prediction(a.runs, a.seconds, a.cpu, a.runs_dir, a.jobs, a.baseline_src)
    if a.monitor:
        from pwcet_monitor import held_out

        from rtlab.errors import UserError

        try:
            held_out(a.results, a.monitor, a.fit_raw, a.seconds, a.cpu_given, ungated)
        except UserError as e:
            print(f"pwcet.py: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
