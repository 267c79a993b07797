#!/usr/bin/env bash
# Store benchmark: `rtlab list` over many stored experiments.
#
#   bench/store.sh [N]
#
# Writes N experiments (default 1000, 27 cases each, as `rtlab run quick` stores them)
# into a temporary results directory, then times `rtlab list --json` three ways and
# prints wall seconds of each: cold (no index yet: every manifest is read once),
# warm (the index is fresh: only stat calls), and after one experiment changed.
# Target: warm under 1 s for 1,000 experiments.
# Environment: PYTHON (default .venv/bin/python), TMPDIR.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
N=${1:-1000}
PYTHON=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

"$PYTHON" - "$DIR" "$N" <<'PY'
import json, sys
from pathlib import Path
from rtlab.records import CaseRecord, SeriesRecord, new_manifest

root, n = Path(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    cases = [
        CaseRecord(k, f"series {k // 9}", f"forkcopy={k % 9}", {"forkcopy": k % 9},
                   {"meter": "wakeup", "loops": 4000}, ["wakeup", "--loops", "4000"],
                   "done", f"cases/{k:03d}.json", 4.5)
        for k in range(27)
    ]
    m = new_manifest(name="quick", description="bench", source="quick",
                     series=[SeriesRecord(f"series {s}", "", ["forkcopy"]) for s in range(3)],
                     cases=cases)
    m.id = f"20260101-{i:06d}-quick"
    d = root / m.id
    (d / "cases").mkdir(parents=True)
    (d / "experiment.json").write_text(json.dumps(m.to_dict(), indent=1))
    (d / "system.json").write_text(json.dumps({"hostname": "bench", "kernel_release": "6.1"}))
PY

timed() {
	local t0 t1
	t0=$(date +%s.%N)
	"$PYTHON" -m rtlab.cli list --results "$DIR" --json >"$DIR/.out"
	t1=$(date +%s.%N)
	echo "$1: $(echo "$t1 - $t0" | bc) s ($("$PYTHON" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$DIR/.out") experiments)"
}
echo "rtlab list over $N experiments of 27 cases"
timed "cold (index built)"
timed "warm (index fresh)"
timed "warm again"
touch "$DIR/20260101-000007-quick/experiment.json"
timed "one manifest changed"
t0=$(date +%s.%N)
"$PYTHON" -c 'import rtlab.cli' 
t1=$(date +%s.%N)
echo "of which Python start-up and imports: $(echo "$t1 - $t0" | bc) s"
