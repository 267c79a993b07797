#!/usr/bin/env bash
# Analysis benchmark: exact statistics over 100 million raw samples.
#
#   bench/analysis.sh [SAMPLES]
#
# Writes a synthetic experiment (bench/make_synthetic.py: lognormal around 20 µs with a
# heavy tail, 800 MB of raw samples for 100M) in the store layout results/<id>/ under a
# temporary directory, then times computing its statistics two ways and prints wall
# seconds and peak RSS of each:
#   (a) python -c calling rtlab.analysis.document_case_stats (exact, from the raw file)
#   (b) rtlab show <id> --results DIR (the `rtlab` command, else python -m rtlab.cli)
# Target: <= 30 s and <= 2 GiB peak RSS each. The raw file is read from the page cache
# (it was just written): this measures the analysis, not the disk.
# Then (c): pWCET (rtlab.analysis.pwcet, p = 1e-9, gates and both methods) of the first
# PWCET_SAMPLES (10 million) samples of the same file, target <= 5 s.
# Environment: PYTHON (a Python with numpy and scipy; default .venv/bin/python when it
# has numpy, else python3), TMPDIR (where the data goes), SAMPLES (100000000),
# PWCET_SAMPLES (10000000).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
SAMPLES=${1:-${SAMPLES:-100000000}}
PWCET_SAMPLES=${PWCET_SAMPLES:-10000000}
ID=synthetic-100m

if [[ -z ${PYTHON:-} ]]; then
	PYTHON=python3
	if [[ -x .venv/bin/python ]] && .venv/bin/python -c 'import numpy' 2>/dev/null; then
		PYTHON=.venv/bin/python
	fi
fi
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PYTHON" -c 'import numpy, scipy' 2>/dev/null; then
	echo "analysis.sh: $PYTHON lacks numpy/scipy; set PYTHON=/path/to/python" >&2
	exit 2
fi

TIME=/usr/bin/time
if [[ ! -x $TIME ]] && [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
	echo "analysis.sh: installing GNU time" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null 2>&1 || true
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rtlab-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
need_kb=$((SAMPLES * 8 / 1024 + 200 * 1024))
free_kb=$(df -Pk "$WORK" | awk 'NR == 2 { print $4 }')
if ((free_kb < need_kb)); then
	echo "analysis.sh: $WORK has $((free_kb / 1024)) MiB free, needs $((need_kb / 1024)) MiB" >&2
	exit 2
fi
RESULTS=$WORK/results

# measure NAME CMD...: run CMD, print its wall time and peak RSS, keep its output.
measure() {
	local name=$1 rc=0
	shift
	if [[ -x $TIME ]]; then
		"$TIME" -f '%e %M' -o "$WORK/time.txt" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
		read -r secs kib <"$WORK/time.txt" || true
		secs=${secs##*$'\n'}
	else
		"$PYTHON" - "$WORK/time.txt" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" <<-'EOF' || rc=$?
			import resource, subprocess, sys, time
			t = time.monotonic()
			rc = subprocess.call(sys.argv[2:])
			ru = resource.getrusage(resource.RUSAGE_CHILDREN)
			open(sys.argv[1], "w").write(f"{time.monotonic() - t:.2f} {ru.ru_maxrss}\n")
			sys.exit(rc)
		EOF
		read -r secs kib <"$WORK/time.txt" || true
	fi
	if ((rc == 0)); then
		printf '%-44s %8.2f s  peak RSS %6d MiB\n' "$name" "$secs" $((kib / 1024))
	fi
	return $rc
}

echo "analysis.sh: $SAMPLES samples, python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')," \
	"$(nproc) CPUs, data in $WORK"
measure "generate + write raw file + document" \
	"$PYTHON" bench/make_synthetic.py "$RESULTS" --id "$ID" --samples "$SAMPLES"
cat "$WORK/out.txt"
ls -l "$RESULTS/$ID/cases"

STATS='
import json, sys
from pathlib import Path
from rtlab.analysis import document_case_stats
doc_path = Path(sys.argv[1])
s = document_case_stats(json.loads(doc_path.read_text()), doc_path.parent, deadline_ns=100_000)
print(json.dumps({k: v for k, v in s.to_dict().items() if k != "error_ns"}))
'
echo
measure "(a) document_case_stats (exact, raw file)" \
	"$PYTHON" -c "$STATS" "$RESULTS/$ID/cases/000.json"
cat "$WORK/out.txt"

echo
if command -v rtlab >/dev/null 2>&1; then
	RTLAB=(rtlab)
elif "$PYTHON" -c 'import rtlab.cli' 2>/dev/null; then
	RTLAB=("$PYTHON" -m rtlab.cli)
else
	RTLAB=()
	why=$("$PYTHON" -c 'import rtlab.cli' 2>&1 | tail -n 1)
	echo "(b) rtlab show: skipped, no rtlab command and rtlab.cli does not import: $why"
fi
if ((${#RTLAB[@]})); then
	if measure "(b) ${RTLAB[*]##*/} show $ID" "${RTLAB[@]}" show "$ID" --results "$RESULTS"; then
		cat "$WORK/out.txt"
	else
		echo "(b) rtlab show: skipped, it failed: $(tail -n 1 "$WORK/err.txt")"
	fi
fi

PWCET='
import sys, time
import numpy as np
from rtlab.analysis import pwcet
from rtlab.rawfile import open_samples
x = np.asarray(open_samples(sys.argv[1])[: int(sys.argv[2])])
t = time.perf_counter()
e = pwcet(x, 1e-9)
took = time.perf_counter() - t
what = e.refused or f"{e.value_ns / 1e3:.1f} us [{e.lo_ns / 1e3:.1f}, {e.hi_ns / 1e3:.1f}] ({e.method})"
print(f"pWCET(1e-9) of {x.size} samples: {what}; {took:.2f} s in pwcet() (target <= 5 s)")
'
echo
measure "(c) pwcet(1e-9) of $PWCET_SAMPLES samples (process)" \
	"$PYTHON" -c "$PWCET" "$RESULTS/$ID/cases/000.raw" "$PWCET_SAMPLES"
cat "$WORK/out.txt"
