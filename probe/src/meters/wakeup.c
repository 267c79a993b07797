/*
 * wakeup — timer wake-up latency, as cyclictest measures it: sleep until an
 * absolute CLOCK_MONOTONIC target and record how late the thread woke. With
 * --tracer timerlat the kernel's timerlat tracer measures instead (lib/ktracer.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "lib/jsonw.h"
#include "lib/ktracer.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

struct wakeup_params {
	int64_t interval_ns; /* base period of thread 0 */
	int64_t distance_ns; /* added to the period of each further thread */
	struct ktracer_opt tracer;
};

static void wakeup_defaults(void *p)
{
	struct wakeup_params *w = p;

	w->interval_ns = NSEC_PER_MSEC;
	w->distance_ns = 0;
}

static int64_t wakeup_period(const void *p, int index)
{
	const struct wakeup_params *w = p;

	return w->interval_ns + (int64_t)index * w->distance_ns;
}

static int wakeup_check(void *p, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	(void)nthreads;
	(void)p;
	(void)at;
	(void)err;
	(void)errlen;
	return 0;
}

static int wakeup_check_common(void *p, const struct common_params *c, struct opt_fault *at,
			       char *err, size_t errlen)
{
	struct wakeup_params *w = p;

	if (w->tracer.choice != KTRACER_USER && w->distance_ns)
		return opts_refusef(at, "distance", NULL, err, errlen,
				    "--distance: the timerlat tracer has one period for all CPUs");
	return ktracer_opt_check(&w->tracer, KTRACER_TIMERLAT, w->interval_ns, c, at, err, errlen);
}

static int wakeup_thread_setup(struct mthread *t, const void *p, char *err, size_t errlen)
{
	const struct wakeup_params *w = p;

	return w->tracer.kt ? ktracer_thread_setup(w->tracer.kt, t, t->mstate, err, errlen) : 0;
}

static void wakeup_thread_teardown(struct mthread *t, const void *p)
{
	const struct wakeup_params *w = p;

	if (w->tracer.kt)
		ktracer_thread_teardown(w->tracer.kt, t, t->mstate);
}

static void wakeup_loop(struct mthread *t, const void *p, const struct run_ctl *ctl)
{
	struct ktracer *kt = ((const struct wakeup_params *)p)->tracer.kt;
	const int64_t period = t->period_ns;
	int64_t target, now;
	uint64_t cycle = 0;

	if (kt) { /* the kernel's timerlat measures; this thread reads its CPU's samples */
		ktracer_thread_loop(kt, t, t->mstate, ctl);
		return;
	}
	t->start_ns = mono_now_ns();
	target = t->start_ns;
	for (;;) {
		target += period;
		sleep_until_ns(target);
		now = mono_now_ns();
		sample_record(t, now - target, cycle, now);
		cycle++;
		if (now - target >= period) {
			/* Missed at least one whole period: count it and skip past now. */
			t->overruns++;
			target += ((now - target) / period) * period;
		}
		if (run_should_stop(ctl, cycle, now - t->start_ns))
			break;
	}
}

static void wakeup_params_json(struct jw *w, const void *p)
{
	const struct wakeup_params *wp = p;

	jw_kint(w, "interval_ns", wp->interval_ns);
	jw_kint(w, "distance_ns", wp->distance_ns);
	jw_kstr(w, "clock", "CLOCK_MONOTONIC");
	jw_kstr(w, "sleep", wp->tracer.kt ? "timerlat tracer" : "clock_nanosleep TIMER_ABSTIME");
	jw_kstr(w, "tracer", wp->tracer.name);
}

static void wakeup_thread_json(struct jw *w, const struct mthread *t, const void *p)
{
	const struct wakeup_params *wp = p;

	if (wp->tracer.kt)
		ktracer_thread_json(w, wp->tracer.kt, t->mstate);
}

static void wakeup_doc_json(struct jw *w, const void *p, const struct mthread *threads, int n)
{
	(void)threads;
	(void)n;
	ktracer_doc_json(w, &((const struct wakeup_params *)p)->tracer);
}

static const struct opt_desc wakeup_opts[] = {
	OPT_DESC("interval", OPT_DURATION, NSEC_PER_USEC, 10 * NSEC_PER_SEC, "DUR",
		 "wake-up period of thread 0, e.g. 1ms, 200us (default 1ms)",
		 offsetof(struct wakeup_params, interval_ns), OPT_NO_SET),
	OPT_DESC("distance", OPT_DURATION, 0, NSEC_PER_SEC, "DUR",
		 "added to the period of each further thread (default 0)",
		 offsetof(struct wakeup_params, distance_ns), OPT_NO_SET),
	OPT_CHOICE_DESC("tracer", ktracer_timerlat_words, KTRACER_USER, "T",
			"what measures: user (this probe's threads) or timerlat (the kernel's "
			"tracer, one per --cpus CPU)",
			offsetof(struct wakeup_params, tracer.choice), OPT_NO_SET),
	OPT_END,
};

const struct meter meter_wakeup = {
	.name = "wakeup",
	.summary = "timer wake-up latency (cyclictest's measurement)",
	.help = "Each measuring thread sleeps until an absolute CLOCK_MONOTONIC target\n"
		"(clock_nanosleep TIMER_ABSTIME), reads the clock and records how late it\n"
		"woke, in ns. A wake-up later than a whole period counts as an overrun and\n"
		"the next target moves past now. --tracer timerlat: the kernel's timerlat\n"
		"tracer measures instead (its thread's latency; the IRQ's per thread), driven\n"
		"through a private tracefs instance, one thread entry per --cpus CPU.",
	.options = wakeup_opts,
	.params_size = sizeof(struct wakeup_params),
	.defaults = wakeup_defaults,
	.check = wakeup_check,
	.check_common = wakeup_check_common,
	.period_ns = wakeup_period,
	.loop = wakeup_loop,
	.params_json = wakeup_params_json,
	.thread_state_size = sizeof(struct ktracer_thread),
	.thread_setup = wakeup_thread_setup,
	.thread_teardown = wakeup_thread_teardown,
	.thread_json = wakeup_thread_json,
	.doc_json = wakeup_doc_json,
	.explainable = true,
};
