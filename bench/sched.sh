#!/usr/bin/env bash
# The cost and the fidelity of `rtlab-probe sched`, side by side in one run (bench/sched.py):
#   a periodic SCHED_FIFO program's own latencies with and without rtlab attached,
#   interleaved (observer cost: p50 and p99 ratios, target p50 ratio <= 1.15), and
#   rtlab's figures against the program's own.
#   bench/sched.sh [--rounds N] [--count N] [--cpu CPU] [--mode abs|timerfd|rel]
#                  [--explain THRESH]   (as root; --explain: its cost included)
# Environment: PYTHON (default .venv/bin/python), RTLAB_PROBE (default: the installed one),
# CC (default cc: builds tests/probe/progs/periodic.c).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-.venv/bin/python}
exec "$PYTHON" bench/sched.py "$@"
