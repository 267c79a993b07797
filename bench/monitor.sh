#!/usr/bin/env bash
# The overhead of rtlab monitor, side by side in one run (bench/monitor.py):
#   CPU time per hour of monitoring (rusage of rtlab and its probes, from a short and a
#   long monitor), and the p50/p99/max of a co-running rtlab-probe wakeup with and
#   without a monitor, interleaved, as ratios.
#   bench/monitor.sh [--rounds N] [--loops N] [--cpu CPU] [--window DUR] [--short S] [--long S]
#   (as root)
# Environment: PYTHON (default .venv/bin/python), RTLAB_PROBE (default: the installed one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-.venv/bin/python}
exec "$PYTHON" bench/monitor.py "$@"
