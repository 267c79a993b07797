#!/usr/bin/env bash
# Does the pWCET estimate earn trust? (bench/pwcet.py) Three figures in one run:
#   1. coverage of its 90 % interval on synthetic data with known tails (GPD shape -0.3,
#      -0.1, 0 over a gamma body; 200 seeded replicates each, p = 1e-6 and 1e-9),
#      target 0.85-0.95;
#   2. the same on clustered synthetic data: a max-autoregressive process (extremal index
#      0.7, 0.5, 0.3) mapped onto a known law (GPD-tailed, or Frechet), target 0.85-0.95;
#   3. prediction on real wake-up runs of this machine (as root): fit on the first 10 %,
#      the 90 % prediction interval of the max of the rest; target >= 0.8, refusals apart,
#      side by side with every gate ignored and (--baseline-src) an older estimator;
#   4. with --monitor ID: held out on a stored monitor (rtlab monitor): fit on a short raw
#      run on its CPU (--fit-raw FILE, made just before the monitor; else --seconds now),
#      the 90 % interval of the max over the monitor's activations against its observed
#      maximum, and per window; side by side with every gate ignored.
#   bench/pwcet.sh [--replicates N] [--samples N] [--runs N] [--seconds S] [--cpu CPU]
#                  [--runs-dir DIR] [--baseline-src DIR] [--skip-synthetic]
#                  [--skip-clustered] [--skip-real] [--jobs N]
#                  [--monitor ID [--results DIR] [--fit-raw FILE]]
# Environment: PYTHON (default .venv/bin/python), RTLAB_PROBE (default: the installed one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
exec "$PYTHON" bench/pwcet.py "$@"
