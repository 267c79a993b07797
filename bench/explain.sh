#!/usr/bin/env bash
# The cost and the reach of --explain, side by side in one run (bench/explain.py):
#   wakeup p50/p99 with and without --explain, interleaved (target p50 ratio <= 1.15), and
#   the share of the worst spikes' latency attributed to a cause (idle, planted spinner).
#   bench/explain.sh [--rounds N] [--loops N] [--cpu CPU] [--threshold DUR]
#                    [--baseline-probe PROBE]   (as root)
# Environment: PYTHON (default .venv/bin/python), RTLAB_PROBE (default: the installed one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-.venv/bin/python}
exec "$PYTHON" bench/explain.py "$@"
