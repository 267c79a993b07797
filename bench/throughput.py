"""rtlab's throughput figures against the tools run directly, side by side in one run.

Each round runs `rtlab bench throughput --workloads hackbench-pipe,iperf3 --repeat 1
--workload 'cmd=hackbench --pipe ...'` and the same hackbench and iperf3 commands directly
(no rtlab in between), in alternating order, and prints per round and pooled the ratio
rtlab / direct (target 0.85..1.15): of the figures, of the user command's wall time, and
of its user and system CPU time against the direct run's rusage (os.wait4).

Usage: python bench/throughput.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HACKBENCH = ["hackbench", "--pipe", "-g", "4", "-l", "2000"]


def direct_hackbench() -> float:
    out = subprocess.run(HACKBENCH, capture_output=True, text=True, check=True).stdout
    return float(re.search(r"^Time:\s*([0-9.]+)", out, re.M).group(1))


def direct_command() -> tuple[float, float, float]:
    """HACKBENCH run directly: (wall s, user s, system s) from its wait4 rusage."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(HACKBENCH, stdout=subprocess.DEVNULL)
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - t0, ru.ru_utime, ru.ru_stime


def direct_iperf3() -> float:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    server = subprocess.Popen(
        ["iperf3", "-s", "-1", "--forceflush", "-B", "127.0.0.1", "-p", port],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        while "listening" not in server.stdout.readline():
            pass
        out = subprocess.run(
            ["iperf3", "-c", "127.0.0.1", "-p", port, "-t", "3", "-J"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    finally:
        server.kill()
        server.wait()
    return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9


def via_rtlab(results: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "rtlab.cli", "bench", "throughput", "--repeat", "1",
         "--workloads", "hackbench-pipe,iperf3", "--results", results, "--json",
         "--workload", "cmd=" + " ".join(HACKBENCH)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    exp = json.loads(out)["id"]
    show = subprocess.run(
        [sys.executable, "-m", "rtlab.cli", "show", exp, "--results", results, "--json"],
        capture_output=True,
        text=True,
    ).stdout
    rows = {r["workload"]: r for r in json.loads(show)["meters"]["throughput"]}
    return {k: r["mean"] for k, r in rows.items()} | {
        "cmd-user": rows["cmd"]["user_s"],
        "cmd-system": rows["cmd"]["system_s"],
    }


def run_direct() -> dict[str, float]:
    wall, user, system = direct_command()
    return {
        "hackbench-pipe": direct_hackbench(),
        "iperf3": direct_iperf3(),
        "cmd": wall,
        "cmd-user": user,
        "cmd-system": system,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    got: dict[str, tuple[list[float], list[float]]] = {
        k: ([], []) for k in ("hackbench-pipe", "iperf3", "cmd", "cmd-user", "cmd-system")
    }
    with tempfile.TemporaryDirectory() as results:
        for r in range(a.rounds):
            if r % 2:  # alternate which goes first: no order effect in the ratios
                direct = run_direct()
                mine = via_rtlab(results)
            else:
                mine = via_rtlab(results)
                direct = run_direct()
            for k, (m, d) in got.items():
                m.append(mine[k])
                d.append(direct[k])
            print(
                f"round {r + 1}: hackbench --pipe rtlab {mine['hackbench-pipe']:.3f} s, direct "
                f"{direct['hackbench-pipe']:.3f} s; iperf3 rtlab {mine['iperf3']:.2f} Gbit/s, "
                f"direct {direct['iperf3']:.2f} Gbit/s; --workload rtlab {mine['cmd']:.3f} s "
                f"(user {mine['cmd-user']:.3f}, system {mine['cmd-system']:.3f}), direct "
                f"{direct['cmd']:.3f} s (user {direct['cmd-user']:.3f}, "
                f"system {direct['cmd-system']:.3f})"
            )
            time.sleep(0.5)
    for k, (m, d) in got.items():
        per = [x / y for x, y in zip(m, d, strict=True) if y > 0] or [float("nan")]
        pooled = statistics.fmean(m) / statistics.fmean(d)
        print(f"{k:<16} rtlab/direct pooled {pooled:.3f}, per round {min(per):.2f}..{max(per):.2f}"
              "  (target 0.85..1.15)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
