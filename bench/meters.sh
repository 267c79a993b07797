#!/usr/bin/env bash
# Fidelity of the noise and periodic meters, side by side in one run (bench/meters.py):
#   noise vs rt-tests oslat (max gap, gap rate) with the same planted spinning thread,
#   periodic --mechanism nanosleep-abs vs wakeup (p50/p90 ratios, target 0.9..1.1).
#   bench/meters.sh [--rounds N] [--seconds S] [--cpu CPU] [--loops N]   (as root)
# Environment: PYTHON (default .venv/bin/python), RTLAB_PROBE (default: the installed one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-.venv/bin/python}
exec "$PYTHON" bench/meters.py "$@"
