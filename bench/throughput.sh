#!/usr/bin/env bash
# rtlab's hackbench and iperf3 figures against running hackbench and iperf3 directly,
# interleaved round by round (bench/throughput.py). Target ratio 0.85..1.15.
#   bench/throughput.sh [--rounds N]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" bench/throughput.py "$@"
