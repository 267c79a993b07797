#!/usr/bin/env bash
# Analysis benchmark: exact statistics over a large raw-sample file, beside the time to
# merely read that file once.
#
#   bench/analysis.sh [SAMPLES]
#
# Writes a synthetic experiment (bench/make_synthetic.py: lognormal around 20 µs with a
# heavy tail, 8 bytes per sample: 800 MB for 100M, 8 GB for 1e9) in the store layout
# results/<id>/ under a temporary directory, reads it once (not counted), then, ROUNDS
# times, interleaved:
#   (f) the floor: a fresh python reads the file once with numpy (the sum over its
#       memory map, np.asarray(open_samples(raw)).sum())
#   (a) a fresh python computes the exact statistics of the case
#       (rtlab.analysis.document_case_stats: every quantile, whisker, outlier count)
# and prints both times (measured inside each process, after its imports), their ratio,
# the CPU time of (a) (its threads together) and the wall time and peak RSS of each
# process; then the median of the rounds.
# Targets: 1e9 samples in <= 10 s on 2 CPUs, <= 1 GiB peak RSS, ratio (a)/(f) <= 5.
# The file is read from the page cache (it was just written): this measures the
# analysis, not the disk.
# With REFERENCE=1, (r) times once the numpy implementation the compiled one replaced
# (tests/_exact_reference.py) on the same file and checks that both give the same numbers.
# Then (b) rtlab show <id> (the `rtlab` command) and (c) pWCET (rtlab.analysis.pwcet,
# p = 1e-9, gates and both methods) of the first PWCET_SAMPLES samples, target <= 5 s.
# It runs the installed rtlab (make install: the statistics need its compiled part).
# Environment: PYTHON (default .venv/bin/python when it has numpy, else python3),
# TMPDIR (where the data goes), SAMPLES (100000000), ROUNDS (5), REFERENCE (0),
# PWCET_SAMPLES (10000000; 0 skips (c)).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
SAMPLES=${1:-${SAMPLES:-100000000}}
ROUNDS=${ROUNDS:-5}
PWCET_SAMPLES=${PWCET_SAMPLES:-10000000}
ID=synthetic

if [[ -z ${PYTHON:-} ]]; then
	PYTHON=python3
	if [[ -x .venv/bin/python ]] && .venv/bin/python -c 'import numpy' 2>/dev/null; then
		PYTHON=.venv/bin/python
	fi
fi
if ! where=$("$PYTHON" -c 'import scipy, rtlab.analysis._scan as s; s._library(); print(s.__file__)' 2>&1); then
	echo "analysis.sh: $PYTHON cannot run rtlab's exact statistics (${where##*$'\n'});" \
		"run make install, or set PYTHON=/path/to/python" >&2
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
RAW=$RESULTS/$ID/cases/000.raw
DOC=$RESULTS/$ID/cases/000.json

# measure CMD...: run CMD; sets $secs (wall) and $kib (peak RSS) and keeps its output.
measure() {
	local rc=0
	if [[ -x $TIME ]]; then
		"$TIME" -f '%e %M' -o "$WORK/time.txt" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
	else
		"$PYTHON" - "$WORK/time.txt" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" <<-'EOF' || rc=$?
			import resource, subprocess, sys, time
			t = time.monotonic()
			rc = subprocess.call(sys.argv[2:])
			ru = resource.getrusage(resource.RUSAGE_CHILDREN)
			open(sys.argv[1], "w").write(f"{time.monotonic() - t:.2f} {ru.ru_maxrss}\n")
			sys.exit(rc)
		EOF
	fi
	read -r secs kib < <(tail -n 1 "$WORK/time.txt") || true
	if ((rc != 0)); then
		echo "analysis.sh: $* failed: $(tail -n 1 "$WORK/err.txt")" >&2
	fi
	return $rc
}

load() { cut -d ' ' -f 1-3 /proc/loadavg; }
echo "analysis.sh: $SAMPLES samples, python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')," \
	"$(nproc) CPUs, load average $(load), rtlab from ${where%/analysis/_scan.py}, data in $WORK"
measure "$PYTHON" bench/make_synthetic.py "$RESULTS" --id "$ID" --samples "$SAMPLES"
printf 'generate + write raw file + document: %.1f s\n' "$secs"
cat "$WORK/out.txt"
ls -l "$RAW"

# Each prints the seconds of its own work (after the imports) on its last line.
FLOOR='
import sys, time
import numpy as np
from rtlab.rawfile import open_samples
t = time.perf_counter()
total = int(np.asarray(open_samples(sys.argv[1])).sum())
print(f"{time.perf_counter() - t:.4f}")
'
STATS='
import json, sys, time
from pathlib import Path
from rtlab.analysis import document_case_stats
doc_path = Path(sys.argv[1])
t, c = time.perf_counter(), time.process_time()
s = document_case_stats(json.loads(doc_path.read_text()), doc_path.parent, deadline_ns=100_000)
took, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({k: v for k, v in s.to_dict().items() if k != "error_ns"}))
print(f"{cpu:.4f}")
print(f"{took:.4f}")
'

measure "$PYTHON" -c "$FLOOR" "$RAW"
printf 'warm-up read (not counted): %s s\n' "$(tail -n 1 "$WORK/out.txt")"
echo
printf '%-6s %26s %44s %8s\n' round "(f) read once: s (process)" "(a) exact stats: s (CPU s, process)" "(a)/(f)"
ratios=()
floors=()
stats=()
rss=0
for ((r = 1; r <= ROUNDS; r++)); do
	measure "$PYTHON" -c "$FLOOR" "$RAW"
	f_in=$(tail -n 1 "$WORK/out.txt") f_wall=$secs f_kib=$kib
	measure "$PYTHON" -c "$STATS" "$DOC"
	a_in=$(tail -n 1 "$WORK/out.txt") a_cpu=$(tail -n 2 "$WORK/out.txt" | head -n 1) a_wall=$secs
	((kib > rss)) && rss=$kib
	((r == 1)) && head -n 1 "$WORK/out.txt" >"$WORK/stats.json"
	ratio=$("$PYTHON" -c "import sys; print(f'{float(sys.argv[2]) / float(sys.argv[1]):.2f}')" "$f_in" "$a_in")
	ratios+=("$ratio") floors+=("$f_in") stats+=("$a_in")
	printf '%-6s %14.3f (%6.2f wall) %20.3f (%6.3f CPU, %6.2f wall) %8s\n' "$r" "$f_in" \
		"$f_wall" "$a_in" "$a_cpu" "$a_wall" "$ratio"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
printf '%-6s %14.3f %35.3f %29s\n' median "$(median "${floors[@]}")" "$(median "${stats[@]}")" \
	"$(median "${ratios[@]}")"
echo "peak RSS: (a) exact stats $((rss / 1024)) MiB, (f) read once $((f_kib / 1024)) MiB" \
	"(the whole file mapped); targets: (a)/(f) <= 5, <= 1024 MiB; load average now $(load)"
echo "(a) statistics: $(cat "$WORK/stats.json")"

REF='
import json, math, sys, time
sys.path.insert(0, ".")
from tests._exact_reference import reference_stats
from rtlab.rawfile import open_samples
t = time.perf_counter()
s = reference_stats(open_samples(sys.argv[1]), deadline_ns=100_000).to_dict()
took = time.perf_counter() - t
new = json.loads(open(sys.argv[2]).read())
s.pop("error_ns")
sd, sd_new = s.pop("stddev"), new.pop("stddev")
same = s == new and math.isclose(sd, sd_new, rel_tol=1e-9)
print("identical" if same else f"DIFFERENT: {s} vs {new}", f"(stddev {sd!r} vs {sd_new!r})")
print(f"{took:.4f}")
'
if [[ ${REFERENCE:-0} == 1 ]]; then
	echo
	measure "$PYTHON" -c "$REF" "$RAW" "$WORK/stats.json"
	r_in=$(tail -n 1 "$WORK/out.txt")
	printf '(r) numpy reference: %.3f s (%.2f wall), peak RSS %d MiB, %s x the median floor;' \
		"$r_in" "$secs" $((kib / 1024)) \
		"$("$PYTHON" -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.1f}')" "$r_in" "$(median "${floors[@]}")")"
	echo " results $(head -n 1 "$WORK/out.txt")"
fi

echo
RTLAB=("$PYTHON" -m rtlab.cli)
if measure "${RTLAB[@]}" show "$ID" --results "$RESULTS"; then
	printf '(b) rtlab show %s: %.2f s wall, peak RSS %d MiB\n' "$ID" "$secs" $((kib / 1024))
	cat "$WORK/out.txt"
fi

((PWCET_SAMPLES > 0)) || exit 0
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
if measure "$PYTHON" -c "$PWCET" "$RAW" "$PWCET_SAMPLES"; then
	printf '(c) pwcet(1e-9) of %d samples (process): %.2f s wall, peak RSS %d MiB\n' \
		"$PWCET_SAMPLES" "$secs" $((kib / 1024))
	cat "$WORK/out.txt"
fi
