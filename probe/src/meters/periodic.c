/*
 * periodic — activation latency of a thread that must run every --interval, woken
 * by one --mechanism. Each mechanism is one entry of a const table (setup, start,
 * wait, teardown); one loop drives them all and records through sample_record.
 */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/policy.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

#include "meters/periodic.h"

/* The intended time of the activation after the one due at TARGET, which came at NOW. */
static inline int64_t grid_next(enum grid g, int64_t target, int64_t now, int64_t period,
				uint64_t expirations)
{
	int64_t late = now - target;

	switch (g) {
	case GRID_SKIP:
		return target + (late >= period ? late / period : 0) * period + period;
	case GRID_COUNTED:
		return target + (int64_t)expirations * period;
	case GRID_RELATIVE:
		return now + period;
	case GRID_INFERRED: /* after a whole missed period the kernel starts a new one */
		return late >= period ? now + period : target + period;
	}
	return target + period;
}

static void periodic_loop(struct mthread *t, const void *p, const struct run_ctl *ctl)
{
	const struct mechanism *m = ((const struct periodic_params *)p)->mech;
	struct periodic_state *s = t->mstate;
	const int64_t period = t->period_ns;
	int64_t target, now = 0, late, cpu0;
	uint64_t cycle = 0, n;

	t->start_ns = mono_now_ns();
	target = t->start_ns + period;
	if (m->start && m->start(s, &target))
		return; /* cannot happen with the values setup accepted; never block forever */
	cpu0 = thread_cpu_ns();
	for (;;) {
		n = m->wait(s, target);
		now = mono_now_ns();
		late = now - target;
		if (late < 0 && m->grid == GRID_SKIP)
			continue; /* an expiry already counted as missed */
		if (late < 0 && m->grid == GRID_INFERRED) {
			target = now; /* woke before the assumed period start: it starts earlier */
			late = 0;
		}
		sample_record(t, late, cycle, now);
		cycle++;
		s->mech_overruns += n - 1;
		t->overruns += (late >= period) + (n - 1);
		target = grid_next(m->grid, target, now, period, n);
		if (run_should_stop(ctl, cycle, now - t->start_ns))
			break;
	}
	s->cpu_ns = thread_cpu_ns() - cpu0;
	s->activations = cycle;
	if (m->grid == GRID_RELATIVE)
		s->drift_ns = now - (t->start_ns + (int64_t)cycle * period);
}

static void periodic_defaults(void *p)
{
	struct periodic_params *pp = p;

	pp->interval_ns = NSEC_PER_MSEC;
}

static int64_t periodic_period(const void *p, int index)
{
	(void)index;
	return ((const struct periodic_params *)p)->interval_ns;
}

static int periodic_check(void *p, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	struct periodic_params *pp = p;

	pp->mech = &periodic_mechanisms[pp->mechanism];
	if (pp->runtime_set && !pp->mech->uses_runtime)
		return opts_refusef(at, "runtime", NULL, err, errlen,
				    "--runtime applies to --mechanism deadline only");
	return pp->mech->check ? pp->mech->check(pp, nthreads, at, err, errlen) : 0;
}

static int periodic_thread_setup(struct mthread *t, const void *p, char *err, size_t errlen)
{
	const struct periodic_params *pp = p;
	struct periodic_state *s = t->mstate;

	s->p = pp;
	s->t = t;
	return pp->mech->setup ? pp->mech->setup(s, err, errlen) : 0;
}

static void periodic_thread_teardown(struct mthread *t, const void *p)
{
	const struct periodic_params *pp = p;

	if (pp->mech->teardown)
		pp->mech->teardown(t->mstate);
}

static void periodic_thread_json(struct jw *w, const struct mthread *t, const void *p)
{
	const struct periodic_params *pp = p;
	const struct periodic_state *s = t->mstate;

	jw_kstr(w, "mechanism", periodic_mechanism_names[pp->mechanism]);
	jw_kint(w, "cpu_ns", s->cpu_ns);
	jw_kdouble(w, "cpu_ns_per_activation",
		   s->activations ? (double)s->cpu_ns / (double)s->activations : NAN);
	jw_kint(w, "drift_ns", s->drift_ns);
	jw_kuint(w, "mechanism_overruns", s->mech_overruns);
}

static void periodic_params_json(struct jw *w, const void *p)
{
	const struct periodic_params *pp = p;

	jw_kint(w, "interval_ns", pp->interval_ns);
	jw_kstr(w, "mechanism", periodic_mechanism_names[pp->mechanism]);
	jw_kstr(w, "clock", "CLOCK_MONOTONIC");
	jw_key(w, "runtime_ns");
	pp->mech->uses_runtime ? jw_int(w, pp->runtime_ns) : jw_null(w);
}

static const struct opt_desc periodic_opts[] = {
	OPT_DESC("interval", OPT_DURATION, NSEC_PER_USEC, 10 * NSEC_PER_SEC, "DUR",
		 "activation period of every thread, e.g. 1ms, 200us (default 1ms)",
		 offsetof(struct periodic_params, interval_ns), OPT_NO_SET),
	OPT_CHOICE_DESC("mechanism", periodic_mechanism_names, MECH_NANOSLEEP_ABS, "M",
			"what wakes the thread, see the mechanisms above",
			offsetof(struct periodic_params, mechanism), OPT_NO_SET),
	OPT_DESC(
		"runtime", OPT_DURATION, DL_MIN_RUNTIME_NS, 10 * NSEC_PER_SEC, "DUR",
		"deadline only: SCHED_DEADLINE runtime per period (default interval/10, >= 1024ns)",
		offsetof(struct periodic_params, runtime_ns),
		offsetof(struct periodic_params, runtime_set)),
	OPT_END,
};

const struct meter meter_periodic = {
	.name = "periodic",
	.summary = "activation latency of a periodic thread, per wake-up mechanism",
	.help = "A thread that must run every --interval, woken by one --mechanism. Each\n"
		"activation records its latency: actual wake - intended activation, in ns on\n"
		"CLOCK_MONOTONIC. Per thread also the CPU time per activation\n"
		"(CLOCK_THREAD_CPUTIME_ID over the loop), overruns (activations later than a\n"
		"whole period, plus the expirations the mechanism reports as missed) and, for\n"
		"nanosleep-rel, the drift of the last activation from start + n x interval.\n"
		"\n"
		"mechanisms:\n"
		"  nanosleep-abs       clock_nanosleep TIMER_ABSTIME to start + k x interval\n"
		"  nanosleep-rel       clock_nanosleep of one interval after each wake: times drift\n"
		"  busy-poll           spin reading the clock until the activation (floor, 100% CPU)\n"
		"  setitimer           ITIMER_REAL, SIGALRM taken by sigwaitinfo (one thread only)\n"
		"  posix-timer-signal  timer_create, a real-time signal to this thread, sigwaitinfo\n"
		"  posix-timer-thread  timer_create SIGEV_THREAD: a library thread per expiry wakes us\n"
		"  timerfd             absolute timerfd_settime, blocking read of the expirations\n"
		"  condvar             pthread_cond_timedwait on CLOCK_MONOTONIC, never signalled\n"
		"  deadline            SCHED_DEADLINE (--runtime, period = interval), sched_yield",
	.options = periodic_opts,
	.params_size = sizeof(struct periodic_params),
	.defaults = periodic_defaults,
	.check = periodic_check,
	.period_ns = periodic_period,
	.loop = periodic_loop,
	.params_json = periodic_params_json,
	.thread_state_size = sizeof(struct periodic_state),
	.thread_setup = periodic_thread_setup,
	.thread_teardown = periodic_thread_teardown,
	.thread_json = periodic_thread_json,
	.explainable = true,
};
