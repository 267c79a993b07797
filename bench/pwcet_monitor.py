"""pWCET held out on a monitor's long run (bench/pwcet.py --monitor ID).

The fit: the raw samples of a short `rtlab-probe wakeup --raw` run on the monitor's CPU
with its period and policy (--fit-raw FILE: one made just before the monitor started;
else one of --seconds made now). The held-out data: the stored monitor's windows on that
CPU (their maxima and counts). Two checks, each side by side with every gate ignored:
  a. the 90 % prediction interval of the largest of the monitor's M activations (M: the
     sum of its windows' counts) against the monitor's observed maximum;
  b. per window, the 90 % interval of the largest of that window's count against the
     window's maximum; the share of windows inside (0.9 if the interval is calibrated).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from _common import probe_path

from rtlab.analysis import TailFit, fit_tail
from rtlab.errors import UserError
from rtlab.monitor import open_monitor
from rtlab.rawfile import open_samples
from rtlab.store import Store
from rtlab.system import parse_cpulist


def _windows(results: Path, mon_id: str, cpu: int | None) -> tuple[str, dict, int, list]:
    """(the monitor's id, its settings, the CPU, [(count, max_ns)] of its windows there)."""
    rec = open_monitor(Store(results), mon_id)
    s = rec.manifest.settings
    cpus = parse_cpulist(s.cpus) if s.cpus else []
    if cpu is None:
        if not cpus:
            raise UserError(f"{rec.id}: ran on no chosen CPU: give --cpu")
        cpu = cpus[0]
    wins = [
        (int(c["count"]), int(c["max_ns"]))
        for r in rec.rows()
        if r["kind"] == "interval"
        for c in r["cpus"]
        if c.get("cpu") == cpu and c.get("count") and c.get("max_ns") is not None
    ]
    if not wins:
        raise UserError(f"{rec.id}: no window measured on CPU {cpu}")
    return rec.id, vars(s), cpu, wins


def _fit_run(settings: dict, cpu: int, seconds: int, where: Path) -> Path:
    raw = where / "fit.raw"
    cmd = [probe_path(), "wakeup", "--cpus", str(cpu), "--policy", settings["policy"],
           "--interval", f"{settings['period_ns']}ns", "--duration", f"{seconds}s",
           "--raw", str(raw), "--json", str(where / "fit.json"), "--quiet"]  # fmt: skip
    print(f"   fit run: {' '.join(cmd)}", flush=True)
    subprocess.run(cmd, check=True)
    return raw


def _line(name: str, pred: tuple | str, observed: float, advice: str | None = None) -> None:
    if isinstance(pred, str):
        print(f"   {name:<26} refused: {pred.split(' (')[0]}")
        if advice:
            print(f"      advice: {advice}")
        return
    lo, hi, method = pred
    ok = "inside" if lo <= observed <= hi else "OUTSIDE"
    print(f"   {name:<26} [{lo / 1e3:.1f}, {hi / 1e3:.1f}] us ({method}) {ok}")


def _per_window(name: str, fit: TailFit, wins: list) -> None:
    """The share of windows whose maximum is inside the interval for its count."""
    cache: dict[int, tuple | str] = {}
    inside = answered = 0
    for count, mx in wins:
        key = int(float(f"{count:.3g}"))  # windows of about one count share an interval
        if key not in cache:
            cache[key] = fit.predict_max(key)
        p = cache[key]
        if isinstance(p, str):
            continue
        answered += 1
        inside += p[0] <= mx <= p[1]
    share = f"{inside / answered:.3f}" if answered else "n/a"
    print(f"   {name:<26} answered {answered:>4}/{len(wins):<4} windows; "
          f"inside {inside:>4}/{answered:<4} = {share}")  # fmt: skip


def held_out(results: Path, mon_id: str, fit_raw: Path | None, seconds: int,
             cpu: int | None, ungated: Callable[[np.ndarray], TailFit]) -> None:  # fmt: skip
    """Print checks a. and b. (module docstring) for monitor MON_ID of RESULTS."""
    mid, settings, cpu, wins = _windows(results, mon_id, cpu)
    counts = np.array([w[0] for w in wins], np.int64)
    maxima = np.array([w[1] for w in wins], np.int64)
    m, observed = int(counts.sum()), float(maxima.max())
    span_s = m * settings["period_ns"] / 1e9
    print(f"\n4. held out on monitor {mid}: CPU {cpu}, {len(wins)} windows, {m} activations "
          f"(~{span_s / 60:.1f} min at {settings['period_ns'] / 1e3:g} us), observed maximum "
          f"{observed / 1e3:.1f} us")  # fmt: skip
    with tempfile.TemporaryDirectory() as d:
        raw = fit_raw or _fit_run(settings, cpu, seconds, Path(d))
        x = np.array(open_samples(raw))
    print(f"   fit on {x.size} samples of {raw if fit_raw else 'the run above'} "
          f"(max {x.max() / 1e3:.1f} us); 90 % interval of the max of {m}:")  # fmt: skip
    fit, free = fit_tail(x), ungated(x)
    pred = fit.predict_max(m)
    advice = getattr(fit.estimate(1.0 / m), "advice", None) if isinstance(pred, str) else None
    _line("this estimator", pred, observed, advice)
    _line("every gate ignored (pot)", free.predict_max(m), observed)
    print("   per window (the max of each window's count):")
    _per_window("this estimator", fit, wins)
    _per_window("every gate ignored (pot)", free, wins)
