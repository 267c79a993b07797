/*
 * wakeup — timer wake-up latency, as cyclictest measures it: sleep until an
 * absolute CLOCK_MONOTONIC target and record how late the thread woke.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "lib/jsonw.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

struct wakeup_params {
	int64_t interval_ns; /* base period of thread 0 */
	int64_t distance_ns; /* added to the period of each further thread */
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

static void wakeup_loop(struct mthread *t, const void *p, const struct run_ctl *ctl)
{
	const int64_t period = t->period_ns;
	struct timespec ts;
	int64_t target, now;
	uint64_t cycle = 0;

	(void)p;
	t->start_ns = mono_now_ns();
	target = t->start_ns;
	for (;;) {
		target += period;
		ts = ns_to_ts(target);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
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
	jw_kstr(w, "sleep", "clock_nanosleep TIMER_ABSTIME");
}

static const struct opt_desc wakeup_opts[] = {
	OPT_DESC("interval", OPT_DURATION, NSEC_PER_USEC, 10 * NSEC_PER_SEC, "DUR",
		 "wake-up period of thread 0, e.g. 1ms, 200us (default 1ms)",
		 offsetof(struct wakeup_params, interval_ns), OPT_NO_SET),
	OPT_DESC("distance", OPT_DURATION, 0, NSEC_PER_SEC, "DUR",
		 "added to the period of each further thread (default 0)",
		 offsetof(struct wakeup_params, distance_ns), OPT_NO_SET),
	OPT_END,
};

const struct meter meter_wakeup = {
	.name = "wakeup",
	.summary = "timer wake-up latency (cyclictest's measurement)",
	.help = "Each measuring thread sleeps until an absolute CLOCK_MONOTONIC target\n"
		"(clock_nanosleep TIMER_ABSTIME), reads the clock and records how late it\n"
		"woke, in ns. A wake-up later than a whole period counts as an overrun and\n"
		"the next target moves past now.",
	.options = wakeup_opts,
	.params_size = sizeof(struct wakeup_params),
	.defaults = wakeup_defaults,
	.check = wakeup_check,
	.period_ns = wakeup_period,
	.loop = wakeup_loop,
	.params_json = wakeup_params_json,
};
