/*
 * noise — how much the OS steals from a busy thread (the question of oslat and
 * of the osnoise tracer, asked from user space): read CLOCK_MONOTONIC in a
 * tight loop; a gap between two consecutive reads above --threshold is time
 * the thread did not run, and is recorded as one sample (the gap, in ns). With
 * --tracer osnoise the kernel's osnoise tracer measures instead (lib/ktracer.h): one
 * sample per period, its largest single noise.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/jsonw.h"
#include "lib/ktracer.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

#define NOISE_DEFAULT_THRESHOLD_NS NSEC_PER_USEC
#define RT_RUNTIME_PATH "/proc/sys/kernel/sched_rt_runtime_us"
#define RT_PERIOD_PATH "/proc/sys/kernel/sched_rt_period_us"
#define OSNOISE_PERIOD_NS NSEC_PER_SEC /* the tracer's default period, all of it runtime */

struct noise_params {
	int64_t threshold_ns; /* a gap above this is noise */
	bool threshold_set;
	struct ktracer_opt tracer;
	/* The real-time throttling setting, read once before measuring. */
	bool rt_known;         /* both files were read */
	int64_t rt_runtime_us; /* -1: throttling off */
	int64_t rt_period_us;
};

struct noise_thread {
	uint64_t reads;           /* clock reads */
	int64_t measured_ns;      /* from the first read to the last */
	bool watch_throttle;      /* real-time policy under active throttling */
	uint64_t throttled;       /* gaps recognised as throttling */
	int64_t throttled_ns;     /* their total length */
	struct ktracer_thread kt; /* --tracer osnoise */
};

/* SCHED_OTHER by default, as oslat (without --rtprio) and the osnoise tracer's threads
 * (without rtla's -P): at fifo:99 a busy thread would hide every real-time thread below
 * it, starve its CPU and measure the throttling gaps instead of the noise. */
static const struct policy_spec noise_policy = { .policy = SCHED_OTHER };

static void noise_defaults(void *p)
{
	struct noise_params *np = p;

	np->threshold_ns = NOISE_DEFAULT_THRESHOLD_NS;
	np->rt_known = false;
	np->rt_runtime_us = -1;
	np->rt_period_us = 0;
}

/* A whole number from a one-line /proc file; 0 or -errno. */
static int read_proc_int(const char *path, int64_t *out)
{
	char buf[32];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	(void)close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return parse_int64(buf, out);
}

/* Active: real-time tasks get RUNTIME of every PERIOD (runtime -1 or = period: never throttled). */
static bool throttling_active(const struct noise_params *np)
{
	return np->rt_known && np->rt_runtime_us >= 0 && np->rt_runtime_us < np->rt_period_us;
}

/* A throttling gap lasts about period - runtime: recognise [1/2, 3/2] of it. */
static void throttle_window(const struct noise_params *np, int64_t *lo, int64_t *hi)
{
	int64_t off = (np->rt_period_us - np->rt_runtime_us) * NSEC_PER_USEC;

	*lo = off / 2;
	*hi = off + off / 2;
}

static int noise_check(void *p, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	struct noise_params *np = p;

	(void)nthreads;
	(void)at;
	(void)err;
	(void)errlen;
	/* Here, not in the loop: the setting goes into "params" and must be known before measuring. */
	np->rt_known = !read_proc_int(RT_RUNTIME_PATH, &np->rt_runtime_us) &&
		       !read_proc_int(RT_PERIOD_PATH, &np->rt_period_us) && np->rt_period_us > 0;
	return 0;
}

static int noise_check_common(void *p, const struct common_params *c, struct opt_fault *at,
			      char *err, size_t errlen)
{
	struct noise_params *np = p;

	if (np->tracer.choice != KTRACER_USER && np->threshold_set)
		return opts_refusef(at, "threshold", NULL, err, errlen,
				    "--threshold: the osnoise "
				    "tracer's is the kernel's tracing_thresh (5us when 0)");
	return ktracer_opt_check(&np->tracer, KTRACER_OSNOISE, OSNOISE_PERIOD_NS, c, at, err,
				 errlen);
}

/* No activation period: the threshold stands in (raw header, ring and series sizing);
 * the tracer's period with --tracer osnoise. */
static int64_t noise_period(const void *p, int index)
{
	const struct noise_params *np = p;

	(void)index;
	return np->tracer.kt ? OSNOISE_PERIOD_NS : np->threshold_ns;
}

static int noise_thread_setup(struct mthread *t, const void *p, char *err, size_t errlen)
{
	const struct noise_params *np = p;
	struct noise_thread *s = t->mstate;

	return np->tracer.kt ? ktracer_thread_setup(np->tracer.kt, t, &s->kt, err, errlen) : 0;
}

static void noise_thread_teardown(struct mthread *t, const void *p)
{
	const struct noise_params *np = p;
	struct noise_thread *s = t->mstate;

	if (np->tracer.kt)
		ktracer_thread_teardown(np->tracer.kt, t, &s->kt);
}

static void noise_loop(struct mthread *t, const void *p, const struct run_ctl *ctl)
{
	const struct noise_params *np = p;
	struct noise_thread *s = t->mstate;
	const int64_t threshold = np->threshold_ns;
	int64_t lo = INT64_MAX, hi = INT64_MAX, prev, now, gap;
	uint64_t reads = 1, gaps = 0;

	if (np->tracer.kt) {
		ktracer_thread_loop(np->tracer.kt, t, &s->kt, ctl);
		return;
	}
	s->watch_throttle = (t->policy.policy == SCHED_FIFO || t->policy.policy == SCHED_RR) &&
			    throttling_active(np);
	if (s->watch_throttle)
		throttle_window(np, &lo, &hi);
	prev = t->start_ns = mono_now_ns();
	/* Every ns between the first and the last read is a read interval or part of a gap:
	 * recording a gap is charged to the next interval, never hidden. */
	while (!run_should_stop(ctl, reads, prev - t->start_ns)) {
		now = mono_now_ns();
		reads++;
		gap = now - prev;
		prev = now;
		if (gap <= threshold)
			continue;
		sample_record(t, gap, gaps++, now);
		if (gap >= lo && gap <= hi) {
			s->throttled++;
			s->throttled_ns += gap;
		}
	}
	s->reads = reads;
	s->measured_ns = prev - t->start_ns;
}

static void noise_thread_json(struct jw *w, const struct mthread *t, const void *p)
{
	const struct noise_thread *s = t->mstate;
	uint64_t gaps = MT_GET(t, count);
	int64_t noise = gaps ? MT_GET(t, sum_ns) : 0;
	double measured = (double)s->measured_ns;
	uint64_t quiet = s->reads > gaps + 1 ? s->reads - 1 - gaps : 0; /* intervals below it */
	const struct noise_params *np = p;

	if (np->tracer.kt) { /* the periods' sums; no clock reads of ours */
		noise = s->kt.noise_ns;
		measured = (double)s->kt.runtime_ns;
		jw_key(w, "reads");
		jw_null(w);
		jw_kint(w, "measured_ns", s->kt.runtime_ns);
		jw_kint(w, "noise_ns", noise);
		jw_kdouble(w, "noise_ns_per_s",
			   measured > 0 ? (double)noise * 1e9 / measured : NAN);
		jw_kdouble(w, "noise_pct", measured > 0 ? (double)noise * 100.0 / measured : NAN);
		jw_kdouble(w, "read_interval_ns", NAN);
		jw_key(w, "throttled");
		jw_null(w);
		ktracer_thread_json(w, np->tracer.kt, &s->kt);
		return;
	}
	jw_kuint(w, "reads", s->reads);
	jw_kint(w, "measured_ns", s->measured_ns);
	jw_kint(w, "noise_ns", noise);
	/* NaN (null) when nothing was measured */
	jw_kdouble(w, "noise_ns_per_s", s->measured_ns > 0 ? (double)noise * 1e9 / measured : NAN);
	jw_kdouble(w, "noise_pct", s->measured_ns > 0 ? (double)noise * 100.0 / measured : NAN);
	jw_kdouble(w, "read_interval_ns",
		   quiet ? (double)(s->measured_ns - noise) / (double)quiet : NAN);
	jw_key(w, "throttled");
	if (!s->watch_throttle) {
		jw_null(w);
		return;
	}
	jw_obj_begin(w);
	jw_kuint(w, "count", s->throttled);
	jw_kint(w, "total_ns", s->throttled_ns);
	jw_obj_end(w);
}

static void opt_int(struct jw *w, const char *key, bool set, int64_t v)
{
	jw_key(w, key);
	set ? jw_int(w, v) : jw_null(w);
}

static void noise_params_json(struct jw *w, const void *p)
{
	const struct noise_params *np = p;
	bool active = throttling_active(np);
	int64_t lo = 0, hi = 0;

	if (active)
		throttle_window(np, &lo, &hi);
	if (np->tracer.kt) /* the kernel's tracing_thresh */
		opt_int(w, "threshold_ns", np->tracer.kt->threshold_ns >= 0,
			np->tracer.kt->threshold_ns);
	else
		jw_kint(w, "threshold_ns", np->threshold_ns);
	jw_kstr(w, "clock", "CLOCK_MONOTONIC");
	jw_kstr(w, "tracer", np->tracer.name);
	opt_int(w, "rt_runtime_us", np->rt_known, np->rt_runtime_us);
	opt_int(w, "rt_period_us", np->rt_known, np->rt_period_us);
	jw_kbool(w, "rt_throttling", active);
	opt_int(w, "throttle_gap_min_ns", active, lo);
	opt_int(w, "throttle_gap_max_ns", active, hi);
}

static void noise_doc_json(struct jw *w, const void *p, const struct mthread *threads, int n)
{
	(void)threads;
	(void)n;
	ktracer_doc_json(w, &((const struct noise_params *)p)->tracer);
}

static const struct opt_desc noise_opts[] = {
	/* Shadows the common options' hidden alias --threshold (of --deadline): the meter's
	 * table is searched first. */
	OPT_DESC("threshold", OPT_DURATION, 100, NSEC_PER_SEC, "DUR",
		 "a gap between two clock reads longer than DUR is noise, e.g. 1us, 500ns "
		 "(default 1us)",
		 offsetof(struct noise_params, threshold_ns),
		 offsetof(struct noise_params, threshold_set)),
	OPT_CHOICE_DESC("tracer", ktracer_osnoise_words, KTRACER_USER, "T",
			"what measures: user (this probe's threads) or osnoise (the kernel's "
			"tracer, one per --cpus CPU)",
			offsetof(struct noise_params, tracer.choice), OPT_NO_SET),
	OPT_END,
};

const struct meter meter_noise = {
	.name = "noise",
	.summary = "OS noise: CPU time stolen from a busy thread (oslat, osnoise)",
	.help = "Each measuring thread reads CLOCK_MONOTONIC in a tight loop (no other system\n"
		"call) for --duration; every gap between two consecutive reads longer than\n"
		"--threshold is noise and one sample (the gap in ns). Per thread: the gaps'\n"
		"statistics, noise_ns_per_s, noise_pct (share of the CPU stolen) and, at\n"
		"fifo/rr under real-time throttling, the gaps of about period - runtime\n"
		"recognised as throttling. --loops counts clock reads. The default policy is\n"
		"other (as oslat's and the osnoise tracer's): at fifo the thread hides every\n"
		"real-time thread below it, and busy at fifo on every CPU starves the machine\n"
		"but for throttling: measure few CPUs at a time.\n"
		"--tracer osnoise: the kernel's osnoise tracer measures instead, through a\n"
		"private tracefs instance, one thread entry per --cpus CPU: one sample per 1 s\n"
		"period (its largest single noise), --loops counts periods.",
	.options = noise_opts,
	.params_size = sizeof(struct noise_params),
	.defaults = noise_defaults,
	.policy = &noise_policy,
	.check = noise_check,
	.check_common = noise_check_common,
	.period_ns = noise_period,
	.loop = noise_loop,
	.params_json = noise_params_json,
	.thread_state_size = sizeof(struct noise_thread),
	.thread_setup = noise_thread_setup,
	.thread_teardown = noise_thread_teardown,
	.thread_json = noise_thread_json,
	.doc_json = noise_doc_json,
};
