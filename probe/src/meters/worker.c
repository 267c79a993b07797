/*
 * worker — polled vs event-driven hand-off: a producer thread timestamps an item at a
 * fixed rate and hands it to the measuring thread, the worker, which either polls a
 * shared slot (busy, yield, sleep:P) or blocks on a futex or an eventfd. Records
 * hand-off latency (worker sees the item − producer's timestamp) and the worker's CPU use.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/companion.h"
#include "lib/futex.h"
#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/policy.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

#define RATE_MAX_HZ 1000000 /* 1 us between items */
#define POLL_MIN_NS NSEC_PER_USEC
#define POLL_MAX_NS NSEC_PER_SEC
#define IDLE_LOOK_NS (100 * NSEC_PER_MSEC) /* rate 0: the producer checks for a stop this often */

enum go_state { GO_WAIT, GO_RUN, GO_QUIT };

struct worker_params {
	const char *design_text;
	int64_t rate_hz;
	struct cpulist prod_cpus;
	bool prod_cpu_set;
	struct policy_spec prod_policy;
	bool prod_policy_set;
	/* Derived by check(). */
	int design;          /* index in designs[] */
	int64_t poll_ns;     /* sleep:P, 0 for the other designs */
	int64_t interval_ns; /* 1/rate, rounded; 0 at rate 0 */
	int prod_cpu;        /* -1: where the worker is */
};

/* One worker's hand-off; the producer writes the first line, the worker the slot's zero. */
struct wk_state {
	_Atomic int64_t slot;   /* producer's timestamp of the pending item (ns), 0: none */
	_Atomic uint32_t gen;   /* futex word: +1 per item and at the end */
	_Atomic int done;       /* the producer made its last item */
	char pad[64];           /* keep the producer's bookkeeping off the hand-off line */
	_Atomic uint32_t go;    /* futex word: enum go_state */
	struct comp_report rep; /* the producer says it is set up */
	int efd;                /* eventfd design, else -1 */
	const struct worker_params *p;
	_Atomic int *stop; /* the run's stop flag */
	uint64_t limit;    /* items to make, 0: no limit */
	int64_t start_ns, duration_ns;
	/* The producer's results, read after done (acquire) or after join. */
	uint64_t items, lost, overruns;
	int64_t prod_cpu_ns, prod_wall_ns;
	struct companion prod; /* a thread */
	/* The worker's own. */
	int64_t cpu_ns, wall_ns; /* thread CPU time and wall time of the loop */
};

/* ---- the designs: how the worker waits, how the producer tells it ---- */

#if defined(__x86_64__) || defined(__i386__)
#define SPIN_HINT() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define SPIN_HINT() __asm__ __volatile__("yield")
#else
#define SPIN_HINT() ((void)0)
#endif

/* Nothing to take yet and not the end: the polled designs loop on this. */
static inline bool idle(struct wk_state *st)
{
	return !atomic_load_explicit(&st->slot, memory_order_relaxed) &&
	       !atomic_load_explicit(&st->done, memory_order_relaxed);
}

static void busy_wait(struct wk_state *st)
{
	while (idle(st))
		SPIN_HINT();
}

static void yield_wait(struct wk_state *st)
{
	while (idle(st))
		(void)sched_yield();
}

static void sleep_wait(struct wk_state *st)
{
	while (idle(st))
		sleep_for_ns(st->p->poll_ns);
}

/* gen is read before the slot: an item published after the check bumps gen first. */
static void futex_design_wait(struct wk_state *st)
{
	uint32_t g = atomic_load_explicit(&st->gen, memory_order_acquire);

	if (idle(st))
		(void)futex_wait(&st->gen, g, 0, false);
}

static void futex_design_notify(struct wk_state *st)
{
	atomic_fetch_add_explicit(&st->gen, 1, memory_order_release);
	(void)futex_wake(&st->gen, 1, false);
}

static void eventfd_wait(struct wk_state *st)
{
	uint64_t v;

	while (read(st->efd, &v, sizeof(v)) < 0 && errno == EINTR)
		;
}

static void eventfd_notify(struct wk_state *st)
{
	uint64_t one = 1;

	(void)!write(st->efd, &one, sizeof(one));
}

struct design {
	const char *name;
	bool takes_period; /* sleep:P */
	/* Until an item may be in the slot or the producer is done (spurious returns: fine). */
	void (*wait)(struct wk_state *st);
	void (*notify)(struct wk_state *st); /* after each item and the end; NULL: polled */
	/* Starves a producer on its CPU unless the producer's priority is above (1) or at
	 * least equal (0) to the worker's real-time one; -1: never starves it. */
	int needs_higher;
};

static const struct design designs[] = {
	{ "busy", false, busy_wait, NULL, 1 },
	{ "yield", false, yield_wait, NULL, 0 },
	{ "sleep", true, sleep_wait, NULL, -1 },
	{ "futex", false, futex_design_wait, futex_design_notify, -1 },
	{ "eventfd", false, eventfd_wait, eventfd_notify, -1 },
};
#define NDESIGNS ((int)(sizeof(designs) / sizeof(designs[0])))

/* ---- the producer: a helper thread of each worker ---- */

/* Rate 0: no item, only the end; the worker's cost is that of waiting idle. */
static void producer_idle(struct wk_state *st)
{
	const int64_t start = st->start_ns, dur = st->duration_ns;
	int64_t now, step;

	while (!atomic_load_explicit(st->stop, memory_order_relaxed)) {
		now = mono_now_ns();
		if (dur && now - start >= dur)
			break;
		step = dur && start + dur - now < IDLE_LOOK_NS ? start + dur - now : IDLE_LOOK_NS;
		sleep_for_ns(step);
	}
	st->prod_cpu_ns = thread_cpu_ns();
	st->prod_wall_ns = mono_now_ns() - start;
}

/* Items on an absolute schedule; one made while the previous is still in the slot
 * overwrites it: that one is lost. */
static void producer_phase(struct wk_state *st)
{
	const struct design *d = &designs[st->p->design];
	const int64_t iv = st->p->interval_ns, start = st->start_ns, dur = st->duration_ns;
	int64_t target = start, now, cpu0 = thread_cpu_ns();
	uint64_t items = 0, lost = 0, over = 0;

	if (!st->p->rate_hz) {
		producer_idle(st);
		st->prod_cpu_ns -= cpu0;
		goto out_done;
	}
	while (!st->limit || items < st->limit) {
		if (dur && target + iv - start >= dur)
			break;
		target += iv;
		sleep_until_ns(target);
		if (atomic_load_explicit(st->stop, memory_order_relaxed))
			break;
		now = mono_now_ns();
		if (now - target >= iv) { /* a whole interval late: move the schedule past now */
			over++;
			target = now;
		}
		if (atomic_exchange(&st->slot, now))
			lost++;
		items++;
		if (d->notify)
			d->notify(st);
	}
	st->items = items;
	st->lost = lost;
	st->overruns = over;
	st->prod_cpu_ns = thread_cpu_ns() - cpu0;
	st->prod_wall_ns = mono_now_ns() - start;
out_done:
	atomic_store_explicit(&st->done, 1, memory_order_release);
	if (d->notify)
		d->notify(st);
}

static void producer_main(void *arg)
{
	struct wk_state *st = arg;
	uint32_t go;

	if (comp_setup(&st->prod, &st->rep))
		return;
	while ((go = atomic_load_explicit(&st->go, memory_order_acquire)) == GO_WAIT)
		(void)futex_wait(&st->go, GO_WAIT, 0, false);
	if (go == GO_RUN)
		producer_phase(st);
}

static bool is_rt(int policy)
{
	return policy == SCHED_FIFO || policy == SCHED_RR || policy == SCHED_DEADLINE;
}

/* Would a worker of design D at OWN keep a producer at PROD off their shared CPU? */
static bool starves(const struct design *d, const struct policy_spec *own,
		    const struct policy_spec *prod)
{
	if (d->needs_higher < 0 || !is_rt(own->policy))
		return false;
	if (prod->policy == SCHED_DEADLINE)
		return false; /* deadline tasks run before every fifo/rr one */
	if (own->policy == SCHED_DEADLINE || !is_rt(prod->policy))
		return true;
	return d->needs_higher ? prod->priority <= own->priority : prod->priority < own->priority;
}

/* ---- the worker: the runner's measuring thread ---- */

static int worker_thread_setup(struct mthread *t, const void *pp, char *err, size_t errlen)
{
	const struct worker_params *p = pp;
	const struct design *d = &designs[p->design];
	struct wk_state *st = t->mstate;
	struct policy_spec own;
	int rc;

	st->p = p;
	st->efd = -1;
	(void)policy_read(0, &own);
	st->prod = (struct companion){ .name = "producer",
				       .run = producer_main,
				       .arg = st,
				       .cpu = p->prod_cpu >= 0 ? p->prod_cpu : t->cpu,
				       .spec = p->prod_policy_set ? p->prod_policy : own,
				       .may_fall_back = t->fallback };
	if (st->prod.cpu >= 0 && st->prod.cpu == t->cpu && starves(d, &own, &st->prod.spec)) {
		snprintf(err, errlen,
			 "--design %s: the real-time worker on CPU %d would keep the "
			 "producer there from running; give --producer-cpu another CPU or "
			 "--producer-policy a higher priority",
			 d->name, t->cpu);
		return -EINVAL;
	}
	if (!strcmp(d->name, "eventfd") && (st->efd = eventfd(0, EFD_CLOEXEC)) < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create an eventfd (%s)", strerror(errno));
		return rc;
	}
	if ((rc = comp_spawn(&st->prod, &own, err, errlen)))
		return rc;
	return comp_wait_ready(&st->prod, &st->rep, &st->rep.info,
			       p->prod_policy_set ? "--producer-policy: " : "producer: ", err,
			       errlen);
}

static void worker_thread_teardown(struct mthread *t, const void *pp)
{
	struct wk_state *st = t->mstate;

	(void)pp;
	if (st->prod.thread) {
		uint32_t wait = GO_WAIT; /* a producer that ran ends on its own */

		(void)atomic_compare_exchange_strong(&st->go, &wait, GO_QUIT);
		(void)futex_wake(&st->go, 1, false);
	}
	comp_stop(&st->prod);
	if (st->efd >= 0)
		(void)close(st->efd);
	st->efd = -1;
}

/* Take items until the producer is done; the last item is taken after done is seen. */
static void worker_loop(struct mthread *t, const void *pp, const struct run_ctl *ctl)
{
	const struct worker_params *p = pp;
	const struct design *d = &designs[p->design];
	struct wk_state *st = t->mstate;
	int64_t v, now, cpu0;
	uint64_t n = 0;
	bool end;

	st->stop = ctl->stop;
	st->limit = ctl->loops;
	st->duration_ns = ctl->duration_ns;
	cpu0 = thread_cpu_ns();
	t->start_ns = st->start_ns = mono_now_ns();
	atomic_store_explicit(&st->go, GO_RUN, memory_order_release);
	(void)futex_wake(&st->go, 1, false);
	do {
		d->wait(st);
		end = atomic_load_explicit(&st->done, memory_order_acquire);
		if ((v = atomic_exchange(&st->slot, 0))) {
			now = mono_now_ns();
			sample_record(t, now - v, n++, now);
		}
	} while (!end);
	st->cpu_ns = thread_cpu_ns() - cpu0;
	st->wall_ns = mono_now_ns() - t->start_ns;
	t->overruns = st->overruns;
}

/* ---- options ---- */

static void worker_defaults(void *pp)
{
	struct worker_params *p = pp;

	p->design_text = "futex";
	p->rate_hz = 1000;
	p->prod_cpu = -1;
}

static int64_t worker_period(const void *pp, int index)
{
	const struct worker_params *p = pp;

	(void)index;
	/* Rate 0 has no period: one second sizes the series and raw ring as 1 Hz would. */
	return p->rate_hz ? (NSEC_PER_SEC + p->rate_hz / 2) / p->rate_hz : NSEC_PER_SEC;
}

/* NAME, or sleep:DUR. */
static int parse_design(struct worker_params *p, char *err, size_t errlen)
{
	const char *s = p->design_text, *colon = strchr(s, ':');
	size_t len = colon ? (size_t)(colon - s) : strlen(s);
	char why[160];

	p->design = -1;
	for (int i = 0; i < NDESIGNS; i++)
		if (strlen(designs[i].name) == len && !strncmp(designs[i].name, s, len))
			p->design = i;
	if (p->design < 0) {
		snprintf(err, errlen,
			 "--design: \"%s\" is not one of busy, yield, sleep:DUR, futex, "
			 "eventfd",
			 s);
		return -EINVAL;
	}
	if (!designs[p->design].takes_period) {
		if (!colon)
			return 0;
		snprintf(err, errlen, "--design: \"%s\": %s takes no argument", s,
			 designs[p->design].name);
		return -EINVAL;
	}
	if (!colon) {
		snprintf(err, errlen, "--design: sleep needs its poll period, e.g. sleep:100us");
		return -EINVAL;
	}
	if (parse_duration_ns(colon + 1, &p->poll_ns, why, sizeof(why))) {
		snprintf(err, errlen, "--design: \"%s\": %s", s, why);
		return -EINVAL;
	}
	if (p->poll_ns < POLL_MIN_NS || p->poll_ns > POLL_MAX_NS) {
		snprintf(err, errlen, "--design: \"%s\": the poll period must be 1us..1s", s);
		return -EINVAL;
	}
	return 0;
}

static int worker_check(void *pp, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	struct worker_params *p = pp;

	(void)nthreads;
	p->poll_ns = 0;
	if (parse_design(p, err, errlen))
		return opts_refuse(at, "design", p->design_text);
	p->interval_ns = p->rate_hz ? worker_period(p, 0) : 0;
	p->prod_cpu = p->prod_cpu_set ? p->prod_cpus.cpu[0] : -1;
	return 0;
}

static int worker_check_common(void *pp, const struct common_params *c, struct opt_fault *at,
			       char *err, size_t errlen)
{
	const struct worker_params *p = pp;

	if (!p->rate_hz && c->loops_set)
		return opts_refusef(at, "rate", "0", err, errlen,
				    "--rate 0 makes no items, so --loops (items made) would never "
				    "be reached: give --duration");
	return 0;
}

/* ---- the document ---- */

static double pct(int64_t part, int64_t whole)
{
	return whole > 0 ? 100.0 * (double)part / (double)whole : 0.0;
}

static void worker_params_json(struct jw *w, const void *pp)
{
	const struct worker_params *p = pp;
	char pol[96];

	jw_kstr(w, "design", designs[p->design].name);
	jw_kint(w, "rate_hz", p->rate_hz);
	jw_key(w, "interval_ns");
	p->interval_ns ? jw_int(w, p->interval_ns) : jw_null(w);
	jw_key(w, "poll_sleep_ns");
	p->poll_ns ? jw_int(w, p->poll_ns) : jw_null(w);
	jw_key(w, "producer_cpu");
	p->prod_cpu >= 0 ? jw_int(w, p->prod_cpu) : jw_null(w);
	if (p->prod_policy_set)
		policy_format(&p->prod_policy, pol, sizeof(pol));
	jw_kstr(w, "producer_policy", p->prod_policy_set ? pol : NULL);
	jw_kstr(w, "clock", "CLOCK_MONOTONIC");
}

static void worker_thread_json(struct jw *w, const struct mthread *t, const void *pp)
{
	const struct worker_params *p = pp;
	const struct wk_state *st = t->mstate;

	jw_kstr(w, "design", designs[p->design].name);
	jw_kint(w, "rate_hz", p->rate_hz);
	jw_kuint(w, "items", st->items);
	jw_kuint(w, "lost", st->lost);
	jw_kdouble(w, "cpu_pct", pct(st->cpu_ns, st->wall_ns));
	jw_kint(w, "cpu_ns", st->cpu_ns);
	jw_kint(w, "wall_ns", st->wall_ns);
	jw_key(w, "producer");
	jw_obj_begin(w);
	comp_json(w, &st->prod, &st->rep.info);
	jw_kdouble(w, "cpu_pct", pct(st->prod_cpu_ns, st->prod_wall_ns));
	jw_obj_end(w);
}

#define WP(f) offsetof(struct worker_params, f)

static const struct opt_desc worker_opts[] = {
	OPT_DESC("design", OPT_STRING, 0, 0, "NAME",
		 "how the worker waits: busy, yield, sleep:DUR (poll period 1us..1s), futex or "
		 "eventfd (default futex)",
		 WP(design_text), OPT_NO_SET),
	OPT_DESC("rate", OPT_INT, 0, RATE_MAX_HZ, "HZ",
		 "items the producer makes per second, at a fixed interval; 0: none, the idle "
		 "worker's cost (default 1000)",
		 WP(rate_hz), OPT_NO_SET),
	OPT_DESC("producer-cpu", OPT_CPULIST, 0, 1, "CPU",
		 "pin every producer to CPU (default: the worker's CPU, unpinned if it is)",
		 WP(prod_cpus), WP(prod_cpu_set)),
	OPT_DESC("producer-policy", OPT_POLICY, 0, 0, "POLICY",
		 "policy of the producer (default: what the worker really runs with)",
		 WP(prod_policy), WP(prod_policy_set)),
	OPT_END,
};

const struct meter meter_worker = {
	.name = "worker",
	.summary = "polled vs event-driven hand-off: latency and the worker's CPU use",
	.help = "A producer thread timestamps an item at a fixed rate (absolute CLOCK_MONOTONIC\n"
		"sleeps) and hands it to the measuring thread, the worker, which polls a shared\n"
		"slot (busy, yield, sleep:P) or blocks on a futex or an eventfd. Records the\n"
		"hand-off latency (worker sees it − producer's timestamp) in ns and the worker's\n"
		"thread CPU time over the loop as cpu_pct. An item made while the previous one\n"
		"is still in the slot overwrites it: that one counts as lost. --loops counts\n"
		"items made (samples + lost). --rate 0 makes none: the run (--duration)\n"
		"measures what the waiting worker costs.",
	.options = worker_opts,
	.params_size = sizeof(struct worker_params),
	.defaults = worker_defaults,
	.check = worker_check,
	.check_common = worker_check_common,
	.period_ns = worker_period,
	.loop = worker_loop,
	.params_json = worker_params_json,
	.thread_state_size = sizeof(struct wk_state),
	.thread_setup = worker_thread_setup,
	.thread_teardown = worker_thread_teardown,
	.thread_json = worker_thread_json,
};
