#!/usr/bin/env bash
# The effect of `rtlab tune` on this machine: the quick preset untuned, then --tuned
# (applied for the run, reset after), then `rtlab compare` of the two, side by side.
# Figures, not a claim: a VM has few knobs.
#   bench/tune.sh [--scale S]   (as root; default scale 1: two runs of about 3 minutes)
# Environment: RTLAB (default .venv/bin/rtlab), RTLAB_STATE (journal; default a temp dir).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
RTLAB=${RTLAB:-.venv/bin/rtlab}
scale=1
if [ "${1:-}" = "--scale" ]; then scale=$2; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RTLAB_STATE=${RTLAB_STATE:-$work/state}
id_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$1"; }
echo "quick preset at scale $scale: untuned" >&2
"$RTLAB" run quick --scale "$scale" --results "$work/r" --json > "$work/a.json" || true
echo "quick preset at scale $scale: --tuned" >&2
"$RTLAB" run quick --scale "$scale" --results "$work/r" --tuned --json > "$work/b.json" || true
a=$(id_of "$work/a.json")
b=$(id_of "$work/b.json")
python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); print("tuning:", t.get("summary")); [print("  ", c["state"], c["target"], repr(c["original"]), "->", repr(c["new"])) for c in t["changes"]]' "$work/r/$b/tuning.json"
"$RTLAB" compare "$a" "$b" --results "$work/r"
