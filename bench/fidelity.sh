#!/usr/bin/env bash
# Fidelity benchmark: rtlab-probe wakeup against cyclictest (Debian rt-tests).
#
#   sudo bench/fidelity.sh [--loops N] [--rounds N] [--cpus LIST] [--json OUT] [--strict]
#
# Runs A = rtlab-probe wakeup, B = cyclictest, C = rtlab-probe wakeup --raw,
# interleaved A B C A B C ... ROUNDS times, all with SCHED_FIFO 99, one thread
# pinned per online CPU, a 1 ms absolute period and LOOPS cycles per thread.
# Prints pooled p50/p90/p99 and CPU time (user+sys) per cycle of each tool and
# the probe/cyclictest ratios against the targets. Environment: LOOPS (20000),
# ROUNDS (3), CPUS (all online), HISTMAX_US (2000), PROBE (default: the
# rtlab-probe of `make probe`, built when missing).
# `bench/fidelity.sh --help` lists all options (see bench/fidelity.py).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
PROBE=${PROBE:-}

# The probe built by `make probe` in build/probe: ask Meson where the target
# lives (build/probe/rtlab-probe or build/probe/src/rtlab-probe, by layout).
find_probe() {
	local exe=""
	if [[ -f build/probe/build.ninja && -x .venv/bin/meson ]]; then
		exe=$(.venv/bin/meson introspect --targets build/probe 2>/dev/null | "$PYTHON" -c '
import json, sys
try:
    print(next(t["filename"][0] for t in json.load(sys.stdin) if t["name"] == "rtlab-probe"))
except Exception:
    pass' || true)
	fi
	if [[ -n $exe && -x $exe ]]; then
		echo "$exe"
	elif [[ -x build/probe/rtlab-probe ]]; then
		echo build/probe/rtlab-probe
	fi
}

for arg in "$@"; do
	if [[ $arg == -h || $arg == --help ]]; then
		exec "$PYTHON" bench/fidelity.py --help
	fi
done

if [[ $(id -u) -ne 0 ]]; then
	echo "fidelity.sh: needs root (SCHED_FIFO 99, mlockall); try: sudo $0 $*" >&2
	exit 2
fi

if ! command -v "$PYTHON" >/dev/null 2>&1; then
	echo "fidelity.sh: $PYTHON not found" >&2
	exit 2
fi

if ! command -v cyclictest >/dev/null 2>&1; then
	echo "fidelity.sh: installing rt-tests (cyclictest)" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rt-tests >/dev/null
fi

if [[ -z $PROBE ]]; then
	PROBE=$(find_probe)
	if [[ -z $PROBE ]]; then
		echo "fidelity.sh: building the probe (make probe)" >&2
		make probe >&2
		PROBE=$(find_probe)
	fi
fi
if [[ -z $PROBE || ! -x $PROBE ]]; then
	echo "fidelity.sh: no rtlab-probe executable (${PROBE:-not found}); set PROBE=path" >&2
	exit 2
fi

exec "$PYTHON" bench/fidelity.py --probe "$PROBE" --cyclictest "$(command -v cyclictest)" "$@"
