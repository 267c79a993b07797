#!/usr/bin/env bash
# The per-case cost of an SSH target over a local run of the same case, side by side
# (bench/remote.py): target <= 0.3 s per case on localhost; and the once-per-experiment
# cost (connect, copy the probe, catalog, sysinfo).
#   bench/remote.sh [--target TARGET] [--rounds N] [--loops N]
# Without --target a throw-away sshd is started on localhost (root, openssh-server).
# Environment: PYTHON (default .venv/bin/python), RTLAB_PROBE (default: the installed one).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-.venv/bin/python}
exec "$PYTHON" bench/remote.py "$@"
