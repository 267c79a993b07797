"""The throughput a kernel setup costs everything else: a suite of workloads, each run K
times, stored as an experiment whose cases have meter "throughput".

Each workload is one entry of WORKLOADS: the tool it needs, the figure it yields (and
whether higher is better), and how to run it once at a SCALE of its default size. The
tools are the ones users trust (hackbench, stress-ng, iperf3); fork-exec is timed here.
A user's command is a workload too (rtlab._benchopts). Every run also records its wall
time and the user and system CPU time of the processes it started (rusage). Every child
runs in a process group of its own and is killed by PID on every exit path.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rtlab import __version__
from rtlab.errors import InternalError, UnsupportedError, UserError
from rtlab.probe import RESULT_SCHEMA

#: Resamples of the bootstrap intervals, and their confidence.
BOOTSTRAP_N, CONFIDENCE = 4000, 0.95


@dataclass(frozen=True)
class Workload:
    name: str
    unit: str
    higher_is_better: bool
    tool: str | None  # the command it needs on PATH
    description: str
    run: Callable[[float], float]  # one run at a scale of the default size -> the figure
    in_process: bool = False  # runs in rtlab itself: its own CPU time counts as the run's
    command: tuple[str, ...] | None = None  # a user's command (`--workload`): its words


@contextlib.contextmanager
def process_group(cmd: list[str], **kw: Any) -> Iterator[subprocess.Popen[str]]:
    """CMD in a process group of its own, killed (the whole group) when leaving."""
    proc = subprocess.Popen(cmd, start_new_session=True, **kw)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # what the leader left behind


def _output(cmd: list[str], timeout_s: float) -> str:
    with process_group(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
        try:
            out, _ = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise InternalError(f"{cmd[0]} did not finish within {timeout_s:.0f} s") from None
    if p.returncode != 0:
        tail = (out.strip().splitlines() or ["no output"])[-1]
        raise InternalError(f"{' '.join(cmd)} exited {p.returncode}: {tail}")
    return out


def _hackbench(pipe: bool, scale: float) -> float:
    loops = max(10, round(2000 * scale))
    out = _output(["hackbench", *(["--pipe"] if pipe else []), "-g", "4", "-l", str(loops)], 300)
    m = re.search(r"^Time:\s*([0-9.]+)", out, re.M)
    if not m:
        raise InternalError(f"hackbench printed no time: {out.strip()[-200:]!r}")
    return float(m.group(1))


def _stress_ng(stressor: list[str], scale: float) -> float:
    secs = max(1, round(5 * scale))
    with tempfile.TemporaryDirectory(prefix="rtlab-tp-") as d:
        yaml = Path(d) / "metrics.yaml"
        _output(
            ["stress-ng", *stressor, "-t", f"{secs}s", "--metrics-brief", "--yaml", str(yaml)],
            secs * 10 + 30,
        )
        text = yaml.read_text()
    rates = re.findall(r"bogo-ops-per-second-real-time:\s*([0-9.eE+-]+)", text)
    if not rates:
        raise InternalError("stress-ng wrote no bogo-ops-per-second-real-time")
    return sum(float(r) for r in rates)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _iperf3(scale: float) -> float:
    secs = max(1, round(3 * scale))
    port = str(_free_port())
    server = ["iperf3", "-s", "-1", "--forceflush", "-B", "127.0.0.1", "-p", port]
    with process_group(server, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as srv:
        # A test connection would be the one client `-1` serves: wait for its banner.
        banner = srv.stdout
        assert banner is not None  # stdout=PIPE
        ready, _, _ = select.select([banner], [], [], 10)
        if not ready or "listening" not in banner.readline().lower() + banner.readline():
            raise InternalError("iperf3 -s did not start listening")
        out = _output(["iperf3", "-c", "127.0.0.1", "-p", port, "-t", str(secs), "-J"], 60)
    import json

    try:
        bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
    except (ValueError, KeyError, TypeError) as e:
        raise InternalError(f"iperf3 -J: no end.sum_received ({e})") from None
    return float(bps) / 1e9


def _fork_exec(scale: float) -> float:
    n = max(20, round(1000 * scale))
    true = shutil.which("true") or "/bin/true"
    t0 = time.perf_counter()
    for _ in range(n):
        pid = os.posix_spawn(true, [true], {})
        os.waitpid(pid, 0)
    return n / (time.perf_counter() - t0)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "hackbench-pipe",
            "s",
            False,
            "hackbench",
            "hackbench --pipe -g 4 -l 2000: seconds for a fixed number of messages",
            lambda s: _hackbench(True, s),
        ),
        Workload(
            "hackbench-socket",
            "s",
            False,
            "hackbench",
            "hackbench -g 4 -l 2000 (sockets): seconds for a fixed number of messages",
            lambda s: _hackbench(False, s),
        ),
        Workload(
            "stress-ng-vm",
            "bogo-ops/s",
            True,
            "stress-ng",
            "stress-ng --vm 2 --vm-bytes 64M for 5 s",
            lambda s: _stress_ng(["--vm", "2", "--vm-bytes", "64M"], s),
        ),
        Workload(
            "stress-ng-cpu",
            "bogo-ops/s",
            True,
            "stress-ng",
            "stress-ng --cpu 0 (one per CPU) for 5 s",
            lambda s: _stress_ng(["--cpu", "0"], s),
        ),
        Workload(
            "iperf3",
            "Gbit/s",
            True,
            "iperf3",
            "iperf3 over loopback for 3 s",
            _iperf3,
        ),
        Workload(
            "zlib",
            "bogo-ops/s",
            True,
            "stress-ng",
            "stress-ng --zlib 1 (compression) for 5 s",
            lambda s: _stress_ng(["--zlib", "1"], s),
        ),
        Workload(
            "fork-exec",
            "exec/s",
            True,
            None,
            "posix_spawn of /bin/true and wait, 1000 times",
            _fork_exec,
            in_process=True,
        ),
    )
}


def select_workloads(names: str | None) -> list[Workload]:
    """Workloads by comma-separated name (all by default); a missing tool is exit 3."""
    if not names:
        chosen = list(WORKLOADS.values())
    else:
        chosen = []
        for name in (n.strip() for n in names.split(",") if n.strip()):
            if name not in WORKLOADS:
                raise UserError(f"unknown workload '{name}' (known: {', '.join(WORKLOADS)})")
            chosen.append(WORKLOADS[name])
    missing = sorted({w.tool for w in chosen if w.tool and not shutil.which(w.tool)})
    if missing:
        raise UnsupportedError(
            f"not installed: {', '.join(missing)} (Debian packages rt-tests, stress-ng, iperf3)"
        )
    return chosen


def bootstrap_mean(values: np.ndarray, seed: int = 0) -> tuple[float, float]:
    """CONFIDENCE interval of the mean by percentile bootstrap (seeded)."""
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(BOOTSTRAP_N, values.size), replace=True).mean(axis=1)
    a = (1 - CONFIDENCE) / 2
    return float(np.quantile(means, a)), float(np.quantile(means, 1 - a))


def change_pct(a: list[float], b: list[float], seed: int = 0) -> dict[str, float | bool]:
    """% change of B's mean against A's with a bootstrap interval (both resampled)."""
    va, vb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    ma = rng.choice(va, size=(BOOTSTRAP_N, va.size), replace=True).mean(axis=1)
    mb = rng.choice(vb, size=(BOOTSTRAP_N, vb.size), replace=True).mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = (mb / ma - 1.0) * 100.0
    rel = rel[np.isfinite(rel)]
    q = (1 - CONFIDENCE) / 2
    lo, hi = (
        (float(np.quantile(rel, q)), float(np.quantile(rel, 1 - q)))
        if rel.size
        else (
            float("nan"),
            float("nan"),
        )
    )
    pct = (vb.mean() / va.mean() - 1.0) * 100.0 if va.mean() else float("nan")
    return {"change_pct": float(pct), "change_lo": lo, "change_hi": hi,
            "excludes_zero": bool(lo > 0 or hi < 0)}  # fmt: skip


def _cpu_s(who: int) -> tuple[float, float]:
    r = resource.getrusage(who)
    return r.ru_utime, r.ru_stime


def _interval(values: list[float]) -> dict[str, Any]:
    arr = np.asarray(values, dtype=float)
    lo, hi = bootstrap_mean(arr) if arr.size > 1 else (float(arr[0]), float(arr[0]))
    return {"values": values, "mean": float(arr.mean()), "ci_low": lo, "ci_high": hi}


def measure(
    w: Workload,
    repeat: int,
    scale: float,
    on_run: Callable[[Workload, int, float], None] | None = None,
    policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run W REPEAT times; the result document of its case. Each run's user and system
    CPU time is the rusage of the processes it started and waited for (RUSAGE_CHILDREN
    before and after), plus rtlab's own for a workload that runs in it (fork-exec).
    POLICY (the policy's record, rtlab._benchopts) is stored as it is."""
    start_utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    t0 = time.monotonic_ns()
    values: list[float] = []
    times: dict[str, list[float]] = {"wall_s": [], "user_s": [], "system_s": []}
    for i in range(repeat):
        child0 = _cpu_s(resource.RUSAGE_CHILDREN)
        self0 = _cpu_s(resource.RUSAGE_SELF) if w.in_process else (0.0, 0.0)
        wall0 = time.perf_counter()
        values.append(w.run(scale))
        times["wall_s"].append(time.perf_counter() - wall0)
        child1 = _cpu_s(resource.RUSAGE_CHILDREN)
        self1 = _cpu_s(resource.RUSAGE_SELF) if w.in_process else (0.0, 0.0)
        for k, key in enumerate(("user_s", "system_s")):
            times[key].append(max(0.0, child1[k] - child0[k] + self1[k] - self0[k]))
        if on_run:
            on_run(w, i, values[-1])
    arr = np.asarray(values, dtype=float)
    lo, hi = bootstrap_mean(arr) if arr.size > 1 else (float(arr[0]), float(arr[0]))
    params: dict[str, Any] = {"workload": w.name, "repeat": repeat, "scale": scale}
    if w.command is not None:
        params["command"] = list(w.command)
    if policy is not None:
        params["policy"] = policy["policy"]
    return {
        "schema": RESULT_SCHEMA,
        "tool": "rtlab",
        "version": __version__,
        "meter": "throughput",
        "complete": True,
        "start_utc": start_utc,
        "end_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "elapsed_ns": time.monotonic_ns() - t0,
        "params": params,
        "threads": [],
        "throughput": {
            "workload": w.name,
            "description": w.description,
            "unit": w.unit,
            "higher_is_better": w.higher_is_better,
            "values": values,
            "mean": float(arr.mean()),
            "stddev": float(arr.std(ddof=1)) if arr.size > 1 else None,
            "ci_low": lo,
            "ci_high": hi,
            "confidence": CONFIDENCE,
            "times": {key: _interval(v) for key, v in times.items()},
            "policy": policy,
        },
    }
