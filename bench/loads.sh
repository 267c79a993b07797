#!/usr/bin/env bash
# Load generators: do they deliver what they promise?
#
#   bench/loads.sh [DURATION]
#
# 1. spin: requested vs achieved CPU % for spin:25/50/75 % pinned to the last
#    CPU, after a spin:0% run of the same CPU for the background. "achieved" is
#    the CPU's busy % from /proc/stat deltas over the run (what the probe writes
#    into every document as "activity"); "own" is the CPU time of the load's
#    processes (utime+stime from /proc/PID/stat) over the same time. Target:
#    achieved within ±3 points of requested (on an otherwise idle CPU).
# 2. built-in loads next to the external tools they resemble, one after the
#    other on all CPUs: ipc:1 vs hackbench:1 (20 senders and receivers over
#    UNIX sockets), forkcopy:2 vs stress-ng:cpu:2, net vs iperf3 — CPU busy %,
#    the loads' own CPU %, context switches, interrupts and softirqs per second,
#    and each load's work units per second.
# Each run lasts DURATION (default 10s) after a 1 s settle. Environment: PROBE
# (default: the rtlab-probe of `make probe`, built when missing), PYTHON.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
DURATION=${1:-${DURATION:-10s}}
PROBE=${PROBE:-}

if [[ -z $PROBE ]]; then
	for exe in build/probe/rtlab-probe build/probe/src/rtlab-probe; do
		[[ -x $exe ]] && PROBE=$exe && break
	done
fi
if [[ -z $PROBE ]]; then
	echo "loads.sh: building the probe (make probe)" >&2
	make -s probe >&2
	for exe in build/probe/rtlab-probe build/probe/src/rtlab-probe; do
		[[ -x $exe ]] && PROBE=$exe && break
	done
fi
[[ -x $PROBE ]] || { echo "loads.sh: no rtlab-probe (set PROBE=...)" >&2; exit 2; }

exec "$PYTHON" - "$PROBE" "$DURATION" <<'PY'
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

PROBE, DURATION = sys.argv[1], sys.argv[2]
SETTLE_S = 1.0
HZ = os.sysconf("SC_CLK_TCK")


def online() -> list[int]:
    cpus = []
    for part in open("/sys/devices/system/cpu/online").read().strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def seconds(text: str) -> float:
    for unit, mult in (("ms", 1e-3), ("s", 1.0), ("m", 60.0)):
        if text.endswith(unit) and text[: -len(unit)].replace(".", "").isdigit():
            return float(text[: -len(unit)]) * mult
    raise SystemExit(f"loads.sh: duration {text!r} needs a unit (ms, s, m)")


def group_ticks(pgid: int) -> int:
    """utime+stime+cutime+cstime of every process of the load group."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            f = open(f"/proc/{name}/stat").read().rpartition(")")[2].split()
        except OSError:
            continue
        if int(f[2]) == pgid:
            total += sum(int(v) for v in f[11:15])
    return total


def run(spec: str, ncpus: int) -> dict:
    """Run SPEC alone; its document plus the load's own CPU % (of NCPUS CPUs)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "load.json")
        proc = subprocess.Popen(
            [PROBE, "load", spec, "--settle", f"{SETTLE_S}s", "--duration", DURATION,
             "--json", out, "--quiet"], stderr=subprocess.PIPE, text=True)
        pgid, t_end = None, time.monotonic() + SETTLE_S + seconds(DURATION)
        while pgid is None and proc.poll() is None:
            for name in os.listdir("/proc"):
                try:
                    f = open(f"/proc/{name}/stat").read().rpartition(")")[2].split()
                    comm = open(f"/proc/{name}/comm").read().strip()
                except OSError:
                    continue
                if int(f[1]) == proc.pid and comm.startswith("rtlab:"):  # a load worker
                    pgid = int(f[2])
            time.sleep(0.01)
        time.sleep(SETTLE_S)
        t0, c0 = time.monotonic(), group_ticks(pgid) if pgid else 0
        time.sleep(max(0.1, t_end - time.monotonic() - 0.2))
        t1, c1 = time.monotonic(), group_ticks(pgid) if pgid else 0
        _, err = proc.communicate()
        if proc.returncode:
            return {"error": err.strip()}
        doc = json.load(open(out))
    doc["own_pct"] = 100.0 * (c1 - c0) / HZ / (t1 - t0) / ncpus
    return doc


cpus = online()
last = cpus[-1]
print(f"rtlab-probe load, {DURATION} per run after {SETTLE_S:.0f} s settle, {len(cpus)} CPUs "
      f"({os.uname().release})")
print(f"\n1. spin on CPU {last}: requested vs achieved CPU % (/proc/stat busy of CPU {last})")
print(f"{'spec':<16}{'requested':>10}{'achieved':>10}{'own':>8}{'error':>8}")
base = run(f"spin:0%@{last}", 1)["activity"]["cpu_busy_pct"][str(last)]
print(f"{f'spin:0%@{last}':<16}{0:>9}%{base:>9.1f}%{'':>8}{'':>8}   (background)")
worst = 0.0
for pct in (25, 50, 75):
    doc = run(f"spin:{pct}%@{last}", 1)
    got = doc["activity"]["cpu_busy_pct"][str(last)]
    worst = max(worst, abs(got - pct))
    print(f"{f'spin:{pct}%@{last}':<16}{pct:>9}%{got:>9.1f}%{doc['own_pct']:>7.1f}%"
          f"{got - pct:>+8.1f}")
print(f"largest |achieved - requested|: {worst:.1f} points (target <= 3)")

print("\n2. built-in loads next to the external tools, all CPUs")
print(f"{'spec':<18}{'busy %':>8}{'own %':>8}{'ctxt/s':>10}{'intr/s':>9}{'softirq/s':>10}"
      f"  work units/s")
pairs = [("spin:0%", None), ("ipc:1", "hackbench"), ("hackbench:1", "hackbench"),
         ("forkcopy:2", None), ("stress-ng:cpu:2", "stress-ng"), ("net", None),
         ("iperf3", "iperf3")]
for spec, tool in pairs:
    if tool and not shutil.which(tool):
        print(f"{spec:<18}skipped: {tool} is not installed (make debs)")
        continue
    doc = run(spec, len(cpus))
    if "error" in doc:
        print(f"{spec:<18}failed: {doc['error']}")
        continue
    a, (ld,) = doc["activity"], doc["loads"]
    unit = ld.get("work_unit", "fork+copy")
    print(f"{spec:<18}{a['cpu_busy_pct_all']:>8.1f}{doc['own_pct']:>8.1f}{a['ctxt_per_s']:>10.0f}"
          f"{a['intr_per_s']:>9.0f}{a['softirq_per_s']:>10.0f}  {ld['work_units_per_s']:.3g} "
          f"{unit}")
PY
