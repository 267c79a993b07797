/*
 * response — event→handler latency, the software form of a stimulus/response rig:
 * a stimulus thread (or process) reads CLOCK_MONOTONIC and fires an event over a
 * transport; the measuring thread is the handler: it blocks on the transport and
 * records wake time − fire time.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <linux/gpio.h>
#include <mqueue.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/futex.h"
#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/splitmix.h"
#include "lib/timeutil.h"
#include "probe.h"

#include "meters/response.h"

/* ---- the handler: the runner's measuring thread ---- */

static int response_thread_setup(struct mthread *t, const void *pp, char *err, size_t errlen)
{
	const struct response_params *p = pp;
	struct resp_state *st = t->mstate;
	struct policy_spec own;
	int rc;

	st->tp = &response_transports[p->transport];
	st->sh = mmap(NULL, sizeof(*st->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		      0);
	if (st->sh == MAP_FAILED) {
		st->sh = NULL;
		snprintf(err, errlen, "cannot map the shared page (%s)", strerror(errno));
		return -ENOMEM;
	}
	st->ch = (struct resp_chan){ .fd = { -1, -1 },
				     .mq = (mqd_t)-1,
				     .sh = st->sh,
				     .pshared = p->handler_process,
				     .p = p };
	if (st->tp->setup && (rc = st->tp->setup(&st->ch, err, errlen))) {
		chan_close(&st->ch);
		return rc;
	}
	st->chan_open = true;
	st->stim_ch = st->ch;
	st->rng = (uint64_t)p->seed ^ ((uint64_t)t->index * 0xd1b54a32d192ed03ULL);
	(void)policy_read(0, &own);
	st->stim = (struct companion){ .name = "stimulus",
				       .run = stim_run,
				       .arg = st,
				       .process = p->handler_process,
				       .cpu = p->stim_cpu >= 0 ? p->stim_cpu : t->cpu,
				       .spec = p->stim_policy_set ? p->stim_policy : own,
				       .may_fall_back = t->fallback };
	if ((rc = comp_spawn(&st->stim, &own, err, errlen)))
		return rc;
	return comp_wait_ready(&st->stim, &st->sh->rep, &st->stim_seen,
			       p->stim_policy_set ? "--stimulus-policy: " : "stimulus: ", err,
			       errlen);
}

static void response_thread_teardown(struct mthread *t, const void *pp)
{
	struct resp_state *st = t->mstate;

	(void)pp;
	if (st->sh) {
		atomic_store(&st->sh->phase, PHASE_QUIT);
		(void)futex_wake(&st->sh->phase, 1, true);
	}
	comp_stop(&st->stim);
	if (st->chan_open)
		st->tp->teardown(&st->ch);
	st->chan_open = false;
	if (st->sh)
		(void)munmap(st->sh, sizeof(*st->sh));
	st->sh = NULL;
}

/* Write each page once: every fork made them copy-on-write again, and the first write
 * would fault in the measuring loop. After all threads' setup, so after every fork. */
static void unshare_pages(struct mthread *t, struct resp_state *st)
{
	comp_prefault_stack();
	comp_unshare_mthread(t);
	comp_cow_touch(st, sizeof(*st));
}

static void phase_start(struct resp_state *st, int64_t start, int64_t lo, int64_t hi,
			uint64_t limit, int64_t duration)
{
	struct resp_shared *sh = st->sh;

	sh->start_ns = start;
	sh->iv_min_ns = lo;
	sh->iv_max_ns = hi;
	sh->limit = limit;
	sh->duration_ns = duration;
	SH_SET(sh, seq, 0);
	SH_SET(sh, consumed, 0);
	SH_SET(sh, fired, 0);
	SH_SET(sh, lost, 0);
	SH_SET(sh, overruns, 0);
	SH_SET(sh, drawn_ns, 0);
	atomic_fetch_add_explicit(&sh->phase, 1, memory_order_release);
	(void)futex_wake(&sh->phase, 1, true);
}

/* Take events until the stimulus ends the phase (true) or the run stops (false). With T,
 * samples go to the runner's statistics; without, to the --find-max-rate step. */
static bool phase_run(struct resp_state *st, struct mthread *t, const struct run_ctl *ctl,
		      uint64_t *taken)
{
	struct resp_shared *sh = st->sh;
	struct resp_chan *c = &st->ch;
	const struct transport *tp = st->tp;
	int64_t now, fire;
	uint64_t seq, n = 0;
	bool ended = false;
	uint32_t g;
	int rc;

	c->gen = SH_GET(sh, gen);
	for (;;) {
		rc = tp->wait(c);
		now = mono_now_ns();
		if (rc) {
			st->err = atomic_load(ctl->stop) ? 0 : rc;
			break;
		}
		g = atomic_load_explicit(&sh->gen, memory_order_acquire);
		if (g == c->gen)
			continue; /* spurious: no new event */
		c->gen = g;
		seq = SH_GET(sh, seq);
		fire = SH_GET(sh, fire_ns);
		atomic_store_explicit(&sh->consumed, seq, memory_order_release);
		if (seq == SEQ_END) {
			ended = true;
			break;
		}
		if (!t) {
			mmm_add(&st->step, now - fire);
			hist_add(&st->step_hist, now - fire);
		} else {
			sample_record(t, now - fire, n, now);
			if (c->kernel_ns) {
				mmm_add(&st->to_kernel, c->kernel_ns - fire);
				mmm_add(&st->from_kernel, now - c->kernel_ns);
			}
		}
		n++;
		if (atomic_load_explicit(ctl->stop, memory_order_relaxed))
			break;
	}
	*taken = n;
	return ended;
}

/* Events skipped by the stimulus, and at a normal end those fired but never taken. */
static uint64_t phase_lost(const struct resp_shared *sh, bool ended, uint64_t taken)
{
	uint64_t fired = SH_GET(sh, fired), lost = SH_GET(sh, lost);

	return lost + (ended && fired > taken ? fired - taken : 0);
}

/* Halve the interval from --interval until a step loses events or its p99 exceeds the
 * interval; the best interval is that of the last step that did neither (0: none). */
static int64_t find_max_rate(struct resp_state *st, const struct run_ctl *ctl, int64_t iv)
{
	uint64_t events = ctl->loops ? ctl->loops : STEP_EVENTS, taken;

	for (; iv >= IV_MIN_NS && st->nsteps < MAX_STEPS; iv /= 2) {
		struct rate_step *s = &st->steps[st->nsteps++];
		bool ended;

		hist_reset(&st->step_hist);
		st->step = (struct mmm){ 0 };
		phase_start(st, mono_now_ns(), iv, iv, events, 0);
		ended = phase_run(st, NULL, ctl, &taken);
		s->interval_ns = iv;
		s->count = taken;
		s->lost = phase_lost(st->sh, ended, taken);
		s->p99_ns = taken ? hist_quantile(&st->step_hist, 0.99, st->step.min, st->step.max)
				  : -1;
		s->ok = ended && !st->err && taken && !s->lost && s->p99_ns <= iv;
		if (!s->ok)
			break;
		st->max_rate_iv = iv;
	}
	return st->max_rate_iv;
}

static void response_loop(struct mthread *t, const void *pp, const struct run_ctl *ctl)
{
	const struct response_params *p = pp;
	struct resp_state *st = t->mstate;
	int64_t lo = p->iv_min_ns, hi = p->iv_max_ns;
	uint64_t taken;
	bool ended;

	st->stop = st->ch.stop = ctl->stop;
	if (p->handler_process)
		unshare_pages(t, st);
	if (p->find_max_rate && find_max_rate(st, ctl, lo))
		lo = hi = st->max_rate_iv; /* else measure at --interval */
	if (atomic_load(ctl->stop) || st->err)
		return;
	st->interval_ns = lo;
	t->start_ns = mono_now_ns();
	phase_start(st, t->start_ns, lo, hi, ctl->loops, ctl->duration_ns);
	ended = phase_run(st, t, ctl, &taken);
	st->lost = phase_lost(st->sh, ended, taken);
	st->events = taken + st->lost;
	st->drawn_ns = SH_GET(st->sh, drawn_ns);
	t->overruns = SH_GET(st->sh, overruns);
	if (!st->err)
		st->err = st->sh->fire_err;
}

/* ---- options ---- */

static void response_defaults(void *pp)
{
	struct response_params *p = pp;

	p->interval_text = "1ms";
	p->stim_cpu = -1;
}

static int64_t response_period(const void *pp, int index)
{
	const struct response_params *p = pp;

	(void)index;
	return (p->iv_min_ns + p->iv_max_ns) / 2;
}

static int parse_one_interval(const char *s, const char *whole, int64_t *out, char *err,
			      size_t errlen)
{
	char why[160];

	if (parse_duration_ns(s, out, why, sizeof(why))) {
		if (s == whole)
			snprintf(err, errlen, "--interval: %s", why);
		else
			snprintf(err, errlen, "--interval: \"%s\": %s", whole, why);
		return -EINVAL;
	}
	if (*out < IV_MIN_NS || *out > IV_MAX_NS) {
		snprintf(err, errlen, "--interval: \"%s\" is out of range (1us..1s)", whole);
		return -EINVAL;
	}
	return 0;
}

/* DUR, or MIN..MAX for uniformly random intervals. */
static int parse_interval(struct response_params *p, char *err, size_t errlen)
{
	const char *s = p->interval_text, *dots = strstr(s, "..");
	char lo[64];

	if (!dots) {
		if (parse_one_interval(s, s, &p->iv_min_ns, err, errlen))
			return -EINVAL;
		p->iv_max_ns = p->iv_min_ns;
		return 0;
	}
	if ((size_t)(dots - s) >= sizeof(lo)) {
		snprintf(err, errlen, "--interval: \"%s\" is not DUR or MIN..MAX", s);
		return -EINVAL;
	}
	snprintf(lo, sizeof(lo), "%.*s", (int)(dots - s), s);
	if (parse_one_interval(lo, s, &p->iv_min_ns, err, errlen) ||
	    parse_one_interval(dots + 2, s, &p->iv_max_ns, err, errlen))
		return -EINVAL;
	if (p->iv_min_ns > p->iv_max_ns) {
		snprintf(err, errlen, "--interval: \"%s\": MIN is above MAX", s);
		return -EINVAL;
	}
	return 0;
}

/* CHIP:OUT,IN; CHIP a path, a gpiochip name or its number. -EINVAL, or -ENODEV (exit 3). */
static int parse_gpio(struct response_params *p, char *err, size_t errlen)
{
	const char *s = p->gpio_text, *colon = strrchr(s, ':');
	unsigned out, in;
	struct stat sb;
	int n = 0;

	if (!colon || colon == s || (size_t)(colon - s) >= 64 ||
	    sscanf(colon + 1, "%u,%u%n", &out, &in, &n) != 2 || colon[1 + n] || !n ||
	    colon[1] < '0' || colon[1] > '9' || out == in) {
		snprintf(err, errlen,
			 "--gpio: \"%s\" is not CHIP:OUT,IN with two different line "
			 "offsets (e.g. gpiochip0:17,27)",
			 s);
		return -EINVAL;
	}
	snprintf(p->gpio_chip, sizeof(p->gpio_chip), "%s%.*s",
		 memchr(s, '/', (size_t)(colon - s))              ? ""
		 : strspn(s, "0123456789") == (size_t)(colon - s) ? "/dev/gpiochip"
								  : "/dev/",
		 (int)(colon - s), s);
	p->gpio_out = out;
	p->gpio_in = in;
	if (stat(p->gpio_chip, &sb) || !S_ISCHR(sb.st_mode)) {
		snprintf(err, errlen, "--gpio: no such chip %s (no GPIO character device here)",
			 p->gpio_chip);
		return -ENODEV;
	}
	return 0;
}

static int response_check(void *pp, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	struct response_params *p = pp;
	int rc;

	(void)nthreads;
	if (parse_interval(p, err, errlen))
		return opts_refuse(at, "interval", p->interval_text);
	if (p->find_max_rate && p->iv_min_ns != p->iv_max_ns) {
		snprintf(err, errlen, "--find-max-rate needs a fixed --interval, not MIN..MAX");
		return opts_refuse(at, "interval", p->interval_text);
	}
	p->stim_cpu = p->stim_cpu_set ? p->stim_cpus.cpu[0] : -1;
	if (!p->seed_set) /* recorded in the document, so that the run can be repeated */
		p->seed = (int64_t)(splitmix64(&(uint64_t){ (uint64_t)mono_now_ns() ^
							    ((uint64_t)getpid() << 32) }) >>
				    32);
	if (p->transport != TP_GPIO) {
		if (!p->gpio_text)
			return 0;
		snprintf(err, errlen, "--gpio is for --transport gpio only");
		return opts_refuse(at, "gpio", p->gpio_text);
	}
	if (!p->gpio_text) {
		snprintf(err, errlen, "--transport gpio needs --gpio CHIP:OUT,IN");
		return opts_refuse(at, "gpio", NULL);
	}
	if ((rc = parse_gpio(p, err, errlen)))
		(void)opts_refuse(at, "gpio", p->gpio_text);
	return rc;
}

/* ---- the document ---- */

static void response_params_json(struct jw *w, const void *pp)
{
	const struct response_params *p = pp;
	char pol[96];

	jw_kstr(w, "transport", response_transport_names[p->transport]);
	if (p->iv_min_ns == p->iv_max_ns) {
		jw_kint(w, "interval_ns", p->iv_min_ns);
	} else {
		jw_kint(w, "interval_min_ns", p->iv_min_ns);
		jw_kint(w, "interval_max_ns", p->iv_max_ns);
	}
	jw_kint(w, "seed", p->seed);
	jw_kbool(w, "seed_given", p->seed_set);
	jw_kbool(w, "handler_process", p->handler_process);
	jw_key(w, "stimulus_cpu");
	p->stim_cpu >= 0 ? jw_int(w, p->stim_cpu) : jw_null(w);
	if (p->stim_policy_set)
		policy_format(&p->stim_policy, pol, sizeof(pol));
	jw_kstr(w, "stimulus_policy", p->stim_policy_set ? pol : NULL);
	jw_kbool(w, "find_max_rate", p->find_max_rate);
	jw_kstr(w, "clock", "CLOCK_MONOTONIC");
	jw_key(w, "gpio");
	if (p->transport != TP_GPIO) {
		jw_null(w);
		return;
	}
	jw_obj_begin(w);
	jw_kstr(w, "chip", p->gpio_chip);
	jw_kuint(w, "out", p->gpio_out);
	jw_kuint(w, "in", p->gpio_in);
	jw_obj_end(w);
}

static void steps_json(struct jw *w, const struct resp_state *st)
{
	jw_kdouble(w, "max_rate_per_s", st->max_rate_iv ? 1e9 / (double)st->max_rate_iv : 0.0);
	jw_key(w, "max_rate_steps");
	jw_arr_begin(w);
	for (int i = 0; i < st->nsteps; i++) {
		const struct rate_step *s = &st->steps[i];

		jw_obj_begin(w);
		jw_kint(w, "interval_ns", s->interval_ns);
		jw_kdouble(w, "rate_per_s", 1e9 / (double)s->interval_ns);
		jw_key(w, "p99_ns");
		s->count ? jw_int(w, s->p99_ns) : jw_null(w);
		jw_kuint(w, "lost", s->lost);
		jw_kuint(w, "count", s->count);
		jw_kbool(w, "ok", s->ok);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

static void mmm_json(struct jw *w, const char *key, const struct mmm *m)
{
	jw_key(w, key);
	jw_obj_begin(w);
	jw_key(w, "min_ns");
	m->n ? jw_int(w, m->min) : jw_null(w);
	jw_kdouble(w, "mean_ns", m->n ? (double)m->sum / (double)m->n : NAN);
	jw_key(w, "max_ns");
	m->n ? jw_int(w, m->max) : jw_null(w);
	jw_obj_end(w);
}

static void response_thread_json(struct jw *w, const struct mthread *t, const void *pp)
{
	const struct response_params *p = pp;
	const struct resp_state *st = t->mstate;

	jw_kstr(w, "transport", response_transport_names[p->transport]);
	jw_kuint(w, "lost", st->lost);
	jw_kuint(w, "events", st->events);
	jw_key(w, "interval_ns");
	p->iv_min_ns == p->iv_max_ns && st->interval_ns ? jw_int(w, st->interval_ns) : jw_null(w);
	jw_kdouble(w, "interval_mean_ns",
		   st->events ? (double)st->drawn_ns / (double)st->events : NAN);
	if (st->err)
		jw_kstr(w, "transport_error", strerror(-st->err));
	jw_key(w, "stimulus");
	jw_obj_begin(w);
	jw_kbool(w, "process", p->handler_process);
	comp_json(w, &st->stim, &st->stim_seen);
	jw_obj_end(w);
	if (st->tp && p->transport == TP_GPIO) {
		jw_key(w, "gpio_events");
		jw_obj_begin(w);
		jw_kstr(w, "clock", "CLOCK_MONOTONIC");
		jw_kuint(w, "count", st->to_kernel.n);
		mmm_json(w, "fire_to_kernel", &st->to_kernel);
		mmm_json(w, "kernel_to_handler", &st->from_kernel);
		jw_obj_end(w);
	}
	if (p->find_max_rate)
		steps_json(w, st);
}

/* The rate every handler sustained: the lowest thread's, with its steps. */
static void response_doc_json(struct jw *w, const void *pp, const struct mthread *th, int n)
{
	const struct response_params *p = pp;
	int lim = 0;

	if (!p->find_max_rate || n < 1)
		return;
	for (int i = 1; i < n; i++) {
		const struct resp_state *a = th[i].mstate, *b = th[lim].mstate;

		if (!a->max_rate_iv || (b->max_rate_iv && a->max_rate_iv > b->max_rate_iv))
			lim = i;
	}
	jw_kint(w, "max_rate_thread", lim);
	steps_json(w, th[lim].mstate);
}

#define RP(f) offsetof(struct response_params, f)

static const struct opt_desc response_opts[] = {
	OPT_CHOICE_DESC("transport", response_transport_names, TP_PIPE, "NAME",
			"what carries the event from the stimulus to the handler", RP(transport),
			OPT_NO_SET),
	OPT_DESC("interval", OPT_STRING, 0, 0, "DUR|MIN..MAX",
		 "between events, 1us..1s; MIN..MAX: uniformly random (default 1ms)",
		 RP(interval_text), OPT_NO_SET),
	OPT_DESC("seed", OPT_INT, 0, UINT32_MAX, "N",
		 "seed of the random intervals (default: from the clock, recorded)", RP(seed),
		 RP(seed_set)),
	OPT_DESC("stimulus-cpu", OPT_CPULIST, 0, 1, "CPU",
		 "pin every stimulus to CPU (default: the handler's CPU, unpinned if it is)",
		 RP(stim_cpus), RP(stim_cpu_set)),
	OPT_DESC("stimulus-policy", OPT_POLICY, 0, 0, "POLICY",
		 "policy of the stimulus (default: what the handler really runs with)",
		 RP(stim_policy), RP(stim_policy_set)),
	OPT_DESC("handler-process", OPT_FLAG, 0, 0, NULL,
		 "stimulus and handler in two processes (the stimulus is forked; default: threads)",
		 RP(handler_process), OPT_NO_SET),
	OPT_DESC("find-max-rate", OPT_FLAG, 0, 0, NULL,
		 "halve the interval until events are lost or p99 exceeds it; then measure the "
		 "highest sustained rate",
		 RP(find_max_rate), OPT_NO_SET),
	OPT_DESC("gpio", OPT_STRING, 0, 0, "CHIP:OUT,IN",
		 "gpio transport: toggle line OUT, take both-edge events of line IN (wired to OUT)",
		 RP(gpio_text), OPT_NO_SET),
	OPT_END,
};

const struct meter meter_response = {
	.name = "response",
	.summary = "event-to-handler latency over a transport (stimulus/response)",
	.help = "A stimulus reads CLOCK_MONOTONIC and fires an event over the transport at a\n"
		"fixed or random interval; each measuring thread is a handler that blocks on\n"
		"the transport and records its wake time minus the fire time, in ns. An event\n"
		"due while the handler has not taken the previous one is not fired: it counts\n"
		"as lost. --loops counts events (samples + lost).",
	.options = response_opts,
	.params_size = sizeof(struct response_params),
	.defaults = response_defaults,
	.check = response_check,
	.period_ns = response_period,
	.loop = response_loop,
	.params_json = response_params_json,
	.thread_state_size = sizeof(struct resp_state),
	.thread_setup = response_thread_setup,
	.thread_teardown = response_thread_teardown,
	.thread_json = response_thread_json,
	.doc_json = response_doc_json,
	.explainable = true,
};
