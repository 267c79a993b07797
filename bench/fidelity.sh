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
# ROUNDS (3), CPUS (all online), HISTMAX_US (2000), PROBE (build/probe/rtlab-probe).
# `bench/fidelity.sh --help` lists all options (see bench/fidelity.py).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
PROBE=${PROBE:-build/probe/rtlab-probe}

for arg in "$@"; do
	if [[ $arg == -h || $arg == --help ]]; then
		exec "$PYTHON" bench/fidelity.py --help
	fi
done

if [[ $(id -u) -ne 0 ]]; then
	echo "fidelity.sh: needs root (SCHED_FIFO 99, mlockall); try: sudo $0 $*" >&2
	exit 2
fi

if ! command -v cyclictest >/dev/null 2>&1; then
	echo "fidelity.sh: installing rt-tests (cyclictest)" >&2
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rt-tests >/dev/null
fi

if ! command -v "$PYTHON" >/dev/null 2>&1; then
	echo "fidelity.sh: $PYTHON not found" >&2
	exit 2
fi

if [[ ! -x $PROBE ]]; then
	if [[ $PROBE != build/probe/rtlab-probe ]]; then
		echo "fidelity.sh: $PROBE is not an executable" >&2
		exit 2
	fi
	echo "fidelity.sh: building the probe (make probe)" >&2
	make probe >&2
fi

exec "$PYTHON" bench/fidelity.py --probe "$PROBE" --cyclictest "$(command -v cyclictest)" "$@"
