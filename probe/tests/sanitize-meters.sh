#!/bin/bash
# Short runs of a sanitizer build of rtlab-probe (make sanitize): every meter that
# `rtlab-probe list --json` names (raw capture and the progress stream on, so the ring,
# its writer thread and the status reader run too), then variants of the meters
# (mechanisms, transports, designs, companions as processes, --explain, loads) and the
# other commands. Any sanitizer report, in the probe or in a process it forked, fails.
#
# usage: sanitize-meters.sh PROBE asan|tsan
# Without root the runs use SCHED_OTHER and no mlock; a variant this system cannot run
# (exit 3: no timerlat tracer, no stress-ng, ...) is listed as skipped.
set -u

probe=$(realpath "$1") || exit 1
mode=$2
python=${PYTHON:-python3}
out=$(mktemp -d "${TMPDIR:-/tmp}/rtlab-sanitize.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT
cd "$out" || exit 1 # loads such as stress-ng write into the working directory

# Reports go to files (children's too); exit status 99 marks a report.
opts="halt_on_error=1:exitcode=99:log_path=$out/report"
export ASAN_OPTIONS="$opts:detect_leaks=1"
export UBSAN_OPTIONS="$opts:print_stacktrace=1"
export TSAN_OPTIONS="$opts:second_deadlock_stack=1"

if [ "$(id -u)" -eq 0 ]; then
	common=(--allow-fallback)
else
	common=(--policy other --no-mlock)
fi
runs=0 skipped=0 failed=0

# A report file with an error in it (ASan also writes warnings there, e.g. that it
# only partly supports swapcontext, which pagefault's stack region uses).
reports() {
	compgen -G "$out/report*" >/dev/null &&
		grep -qE 'ERROR: |runtime error:|WARNING: ThreadSanitizer:' "$out"/report*
}

# run strict|may-skip|exit-N ARGS...: one probe run; strict runs must exit 0, exit-N
# runs N; may-skip runs 0, or 3 (unsupported here). Returns 0 when the run passed.
run() {
	local kind=$1 want=0 rc
	shift
	[ "${kind#exit-}" != "$kind" ] && want=${kind#exit-}
	runs=$((runs + 1))
	rm -f "$out"/report*
	timeout 120 "$probe" "$@" >"$out/stdout" 2>"$out/stderr"
	rc=$?
	if reports || [ $rc -eq 99 ] || [ $rc -ge 124 ]; then
		echo "FAIL (exit $rc, sanitizer report or timeout): $*"
		cat "$out/stderr" "$out"/report* 2>/dev/null | head -60
	elif [ $rc -eq 3 ] && [ "$kind" = may-skip ]; then
		echo "skip (unsupported here: $(head -1 "$out/stderr" | cut -c1-150)): $*"
		skipped=$((skipped + 1))
		return 0
	elif [ $rc -ne "$want" ]; then
		echo "FAIL (exit $rc, want $want): $*"
		head -20 "$out/stderr"
	else
		echo "ok: $*"
		return 0
	fi
	failed=$((failed + 1))
	return 1
}

# The document of a strict run: complete, and every sample either in the raw file or
# counted in raw_lost.
check_doc() {
	local meter=$1
	"$python" - "$out/$meter.json" "$out/$meter.raw" "$meter" <<'EOF' || failed=$((failed + 1))
import json, os, sys

doc_path, raw, meter = sys.argv[1:4]
d = json.load(open(doc_path))
assert d["meter"] == meter and d["complete"], (meter, d.get("complete"))
threads = d["threads"]
for i, t in enumerate(threads):
    path = raw if len(threads) == 1 else f"{raw}.{i}"
    samples = (os.path.getsize(path) - 64) // 8
    assert samples + t["raw_lost"] == t["count"], (meter, i, samples, t["raw_lost"], t["count"])
EOF
}

start=$(date +%s)
meters=$("$probe" list --json | "$python" -c \
	'import json, sys; print(" ".join(m["name"] for m in json.load(sys.stdin)["meters"]))') || exit 1
[ -n "$meters" ] || { echo "no meters listed"; exit 1; }

for m in $meters; do
	[ "$m" = sched ] && continue # observes a program: below
	run strict "$m" --loops 200 --quiet "${common[@]}" --json "$out/$m.json" \
		--raw "$out/$m.raw" --progress "$out/$m.progress" && check_doc "$m"
done

# Variants: each a few hundred cycles.
short=(--quiet "${common[@]}")
mechanisms="nanosleep-abs nanosleep-rel busy-poll setitimer posix-timer-signal timerfd condvar deadline"
# glibc starts the SIGEV_THREAD helper thread behind TSan's back: TSan crashes in it.
[ "$mode" = tsan ] || mechanisms="$mechanisms posix-timer-thread"
for mech in $mechanisms; do
	run may-skip periodic --mechanism "$mech" --loops 100 --interval 200us "${short[@]}"
done
for tr in pipe eventfd futex condvar signal mq unix semaphore; do
	run may-skip response --transport "$tr" --loops 100 --interval 200us --threads 2 "${short[@]}"
done
run may-skip response --handler-process --loops 100 --interval 200us "${short[@]}"
run may-skip response --find-max-rate --loops 100 "${short[@]}"
for d in busy yield sleep:50us futex eventfd; do
	run may-skip worker --design "$d" --loops 200 --rate 5000 "${short[@]}"
done
run may-skip worker --loops 300 --rate 10000 --threads 2 "${short[@]}"
run may-skip worker --design futex --rate 0 --duration 200ms "${short[@]}"
run may-skip pipeline --consumer aperiodic --loops 200 --rate 5000 --threads 2 "${short[@]}"
run may-skip pipeline --processes --loops 200 --rate 5000 "${short[@]}"
run may-skip pipeline --work 100us --loops 200 --rate 5000 "${short[@]}"
for reg in static stack heap mmap file; do
	run may-skip pagefault --region "$reg" --size 4M --protect prefault "${short[@]}"
done
for pat in pairs batch random; do
	run may-skip alloc --pattern "$pat" --loops 50 --sizes 16,4K,1M "${short[@]}"
done
run may-skip alloc --touch --loops 50 --sizes 16,4K,1M "${short[@]}"
run may-skip preempt --threads 1 --loops 200 "${short[@]}"
run may-skip preempt --cpus 0 --loops 200 "${short[@]}" # pinned: the sched_switch trace
run may-skip noise --duration 200ms --threads 2 "${short[@]}"
run may-skip noise --tracer osnoise --cpus 0 --loops 1 "${short[@]}"
run may-skip wakeup --tracer timerlat --cpus 0 --loops 50 "${short[@]}"
run may-skip wakeup --loops 300 --threads 2 --interval 100us --raw "$out/w.raw" \
	--progress "$out/w.progress" "${short[@]}"
# --explain: the trace reader thread; the probe mounts tracefs itself if need be.
if [ "$(id -u)" -eq 0 ] && grep -qw tracefs /proc/filesystems; then
	run strict wakeup --explain 5us --loops 300 --interval 200us --threads 2 "${short[@]}"
else
	echo "skip (needs root and tracefs): wakeup --explain"
fi
run may-skip wakeup --loops 200 --interval 100us --settle 0 --load spin:50% \
	--load forkcopy:1:64K --load stride:line:1M --load ipc:1 --load "io:$out:4M" \
	--load net --load timer:2 "${short[@]}"
for load in stress-ng:cpu:1 hackbench:1 iperf3; do
	run may-skip wakeup --loops 200 --interval 100us --settle 0 --load "$load" "${short[@]}"
done
run may-skip load spin:20% timer:1 --duration 300ms --quiet --json "$out/load.json"

# Other commands and refused input (exit 2): no report on these paths either.
run strict list --json
run strict sysinfo --json "$out/sysinfo.json"
run strict wakeup --check --loops 10
# sched observes a command's thread through tracefs (root); its reader records for it.
if [ "$(id -u)" -eq 0 ]; then
	run may-skip sched --duration 2s --quiet --json "$out/sched.json" --raw "$out/sched.raw" \
		-- sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.02; done' && check_doc sched
	# --explain: the reader feeds its trace to the explanation (every sample above 1 us)
	run may-skip sched --duration 2s --quiet --json "$out/sched.json" --raw "$out/sched.raw" \
		--explain 1us --explain-max 20 -- sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.02; done' &&
		check_doc sched
else
	echo "skip (needs root and tracefs): sched"
fi
run strict wakeup --help
run exit-2 wakeup --interval 0
run exit-2 pagefault --size 3 --loops 1
run exit-2 wakeup --load nosuchload:1 --loops 1

echo "sanitize-meters ($mode): $runs runs, $skipped skipped, $failed failed, $(($(date +%s) - start)) s"
[ "$failed" -eq 0 ]
