#!/usr/bin/env bash
# Report benchmark: `rtlab report` on a 27-case experiment of 60,000 samples per case.
#
#   bench/report.sh [SAMPLES]
#
# Writes a synthetic sweep (bench/make_sweep.py: three series over 0-8 fork-copy loads,
# probe histograms, per-second series, worst samples, no raw files) and a second one
# from another "host" under a temporary results directory, then times side by side in
# this one run: `rtlab show` (statistics only, the baseline), `rtlab report` of the one
# experiment, and `rtlab report` comparing the two. Prints wall seconds, peak RSS, the
# ratio to `rtlab show`, the size of the HTML file and of its CSV files. CPU seconds
# (user + system) are printed beside wall time: on a busy machine they tell more.
# Target: the one-experiment report under 10 s.
# Environment: PYTHON (a Python with rtlab's dependencies; default .venv/bin/python
# when it has matplotlib, else python3), TMPDIR (where the data goes).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
SAMPLES=${1:-60000}

if [[ -z ${PYTHON:-} ]]; then
	PYTHON=python3
	if [[ -x .venv/bin/python ]] && .venv/bin/python -c 'import matplotlib' 2>/dev/null; then
		PYTHON=.venv/bin/python
	fi
fi
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PYTHON" -c 'import numpy, matplotlib, jinja2' 2>/dev/null; then
	echo "report.sh: $PYTHON lacks numpy/matplotlib/jinja2; set PYTHON=/path/to/python" >&2
	exit 2
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/rtlab-report-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
RESULTS=$WORK/results

# measure NAME CMD...: run CMD, print wall time and peak RSS (KiB) to $WORK/last.
measure() {
	local name=$1
	shift
	"$PYTHON" - "$WORK/last" "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" <<-'EOF' || {
		import resource, subprocess, sys, time
		t = time.monotonic()
		rc = subprocess.call(sys.argv[2:])
		ru = resource.getrusage(resource.RUSAGE_CHILDREN)
		cpu = ru.ru_utime + ru.ru_stime
		open(sys.argv[1], "w").write(f"{time.monotonic() - t:.2f} {ru.ru_maxrss} {cpu:.2f}\n")
		sys.exit(0 if rc in (0, 1) else rc)  # 1: the verdict is FAIL, all is written
	EOF
		echo "report.sh: $name failed: $(tail -n 1 "$WORK/err.txt")" >&2
		exit 1
	}
	read -r secs kib cpu <"$WORK/last"
	printf '%-44s %6.2f s wall %6.2f s CPU  peak RSS %4d MiB' "$name" "$secs" "$cpu" $((kib / 1024))
	if [[ -n ${BASE:-} ]]; then
		"$PYTHON" -c "import sys; print(f'  {float(sys.argv[1]) / float(sys.argv[2]):5.1f}x show')" \
			"$secs" "$BASE"
	else
		echo
	fi
	LAST=$secs
}

echo "report.sh: 27 cases x $SAMPLES samples, python $("$PYTHON" -c 'import sys; print(sys.version.split()[0])')," \
	"matplotlib $("$PYTHON" -c 'import matplotlib; print(matplotlib.__version__)'), $(nproc) CPUs," \
	"load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$PYTHON" bench/make_sweep.py "$RESULTS" --id sweep-a --samples "$SAMPLES" --host host-a
"$PYTHON" bench/make_sweep.py "$RESULTS" --id sweep-b --samples "$SAMPLES" --seed 28 --host host-b
RTLAB=("$PYTHON" -m rtlab.cli)

BASE=
measure "rtlab show sweep-a (statistics only)" "${RTLAB[@]}" show sweep-a --results "$RESULTS"
BASE=$LAST
measure "rtlab report sweep-a --deadline 500us" \
	"${RTLAB[@]}" report sweep-a --results "$RESULTS" --deadline 500us -o "$WORK/one.html"
measure "rtlab report sweep-a sweep-b (comparison)" \
	"${RTLAB[@]}" report sweep-a sweep-b --results "$RESULTS" --deadline 500us -o "$WORK/two.html"
echo
for f in "$WORK"/one.html "$WORK"/two.html; do
	printf '%s: %d KiB HTML, %d figures, %d CSV files (%d KiB)\n' "$(basename "$f")" \
		$(($(stat -c %s "$f") / 1024)) "$(grep -c '<figure' "$f")" \
		"$(find "$WORK" -name "$(basename "$f" .html).*.csv" | wc -l)" \
		$(($(find "$WORK" -name "$(basename "$f" .html).*.csv" -exec cat {} + | wc -c) / 1024))
done
