/*
 * The trace of the sched meter: one private instance (instances/rtlab-<pid>) with the
 * scheduler and hrtimer events, its merged trace_pipe read as text, and what each line
 * means for the observed threads. The formats are the kernel's TP_printk strings
 * (include/trace/events/sched.h, include/trace/events/timer.h):
 *
 *   hrtimer_start: hrtimer=%p function=%ps expires=%llu softexpires=%llu mode=%s ...
 *   hrtimer_expire_entry: hrtimer=%p function=%ps now=%llu
 *   sched_waking: comm=%s pid=%d prio=%d target_cpu=%03d
 *   sched_switch: prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=...
 *   sched_migrate_task: comm=%s pid=%d prio=%d orig_cpu=%d dest_cpu=%d
 *
 * A timer activation is the soft expiry (softexpires: the time the program asked for)
 * of an hrtimer the thread armed, when a wake-up of an observed thread happens inside
 * that timer's callback; its latency ends when the thread is switched in. Any other
 * wake-up is measured from sched_waking. The trace clock is "mono": timestamps are
 * CLOCK_MONOTONIC, printed with µs resolution.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../lib/explain.h"
#include "../lib/jsonw.h"
#include "../lib/sampler.h"
#include "../lib/timeutil.h"
#include "../lib/xtrace.h"
#include "sched.h"

#define TRACE_KB 4096                      /* per-CPU buffer of the instance */
#define NON_MONO_NS (1000 * NSEC_PER_USEC) /* now - timestamp beyond this: another clock */

static const char *const events[][2] = {
	{ "sched", "sched_switch" },        { "sched", "sched_waking" },
	{ "timer", "hrtimer_start" },       { "timer", "hrtimer_expire_entry" },
	{ "timer", "hrtimer_expire_exit" }, { "sched", "sched_migrate_task" },
};
#define EVENTS_REQUIRED 5 /* the first ones; sched_migrate_task only counts migrations */

/* Callbacks that wake the thread that armed the timer (kernel/time/hrtimer.c,
 * fs/timerfd.c, kernel/time/posix-timers.c). */
static const char *const wake_functions[] = { "hrtimer_wakeup", "timerfd_tmrproc",
					      "posix_timer_fn" };

static int fail(char *err, size_t errlen, int rc, const char *what)
{
	snprintf(err, errlen, "%s (%s)", what, strerror(-rc));
	return rc;
}

int sched_trace_open(struct sched_trace *s, char *err, size_t errlen)
{
	char path[sizeof(s->inst.path) + 32];
	int rc, removed;
	size_t n = 0;

	s->fd = -1;
	if ((rc = tracefs_open(&s->fs, true, err, errlen)))
		return rc;
	(void)tracefs_remove_stale(&s->fs, &removed);
	if ((rc = tracefs_instance_create(&s->fs, getpid(), &s->inst, err, errlen)))
		return rc;
	snprintf(s->instance, sizeof(s->instance), "%s", strrchr(s->inst.path, '/') + 1);
	if ((rc = tracefs_write(&s->inst, "trace_clock", "mono")))
		return fail(err, errlen, rc,
			    "the trace clock \"mono\" is needed to compare timestamps with "
			    "hrtimer expiries");
	if ((rc = tracefs_write(&s->inst, "tracing_on", "0")) ||
	    (rc = tracefs_set_buffer_kb(&s->inst, -1, TRACE_KB)))
		return fail(err, errlen, rc, "cannot configure the tracefs instance");
	for (size_t i = 0; i < sizeof(events) / sizeof(events[0]); i++) {
		rc = tracefs_event_enable(&s->inst, events[i][0], events[i][1]);
		if (rc && i < EVENTS_REQUIRED) {
			snprintf(err, errlen, "the kernel has no %s:%s event (%s)", events[i][0],
				 events[i][1], strerror(-rc));
			return rc;
		}
		if (!rc)
			n += (size_t)snprintf(s->events + n, sizeof(s->events) - n, "%s%s:%s",
					      n ? "," : "", events[i][0], events[i][1]);
	}
	if (s->x)
		explain_attach(s->x, &s->inst);
	snprintf(path, sizeof(path), "%s/trace_pipe", s->inst.path);
	if ((s->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return fail(err, errlen, -errno, "cannot open the instance's trace_pipe");
	s->start_ns = mono_now_ns();
	if ((rc = tracefs_write(&s->inst, "tracing_on", "1")))
		return fail(err, errlen, rc, "cannot start tracing");
	return 0;
}

void sched_trace_filter(struct sched_trace *s)
{
	char filter[SCHED_THREADS_MAX * 24 + 8];
	size_t n = 0;

	if (!s->inst.path[0] || s->filtered == s->nthreads || !s->nthreads)
		return;
	for (int i = 0; i < s->nthreads; i++)
		n += (size_t)snprintf(filter + n, sizeof(filter) - n, "%scommon_pid == %d",
				      i ? " || " : "", s->th[i].tid);
	if (tracefs_write(&s->inst, "events/raw_syscalls/sys_exit/filter", filter))
		return;
	s->filtered = s->nthreads;
	if (!s->sys_exit_on && !tracefs_event_enable(&s->inst, "raw_syscalls", "sys_exit")) {
		s->sys_exit_on = true;
		n = strlen(s->events);
		snprintf(s->events + n, sizeof(s->events) - n, ",raw_syscalls:sys_exit");
	}
}

void sched_trace_close(struct sched_trace *s)
{
	if (s->fd >= 0)
		(void)close(s->fd);
	s->fd = -1;
	if (s->inst.path[0]) {
		(void)tracefs_write(&s->inst, "tracing_on", "0");
		if (s->x)
			explain_detach(s->x);
		(void)tracefs_instance_remove(&s->inst);
		s->inst.path[0] = '\0';
	}
}

int sched_trace_slot(const struct sched_trace *s, pid_t tid)
{
	for (int i = 0; i < s->nthreads; i++)
		if (s->th[i].tid == tid)
			return i;
	return -1;
}

/* The integer after KEY in F (the first one after AFTER when given). */
static int key_i64(const char *f, const char *key, int64_t *out)
{
	const char *p = strstr(f, key);
	char *end;
	long long v;

	if (!p)
		return -EINVAL;
	p += strlen(key);
	errno = 0;
	v = strtoll(p, &end, 10);
	if (errno || end == p)
		return -EINVAL;
	*out = v;
	return 0;
}

/* The word after KEY in F into BUF. */
static int key_word(const char *f, const char *key, char *buf, size_t len)
{
	const char *p = strstr(f, key);
	size_t n;

	if (!p)
		return -EINVAL;
	p += strlen(key);
	n = strcspn(p, " ");
	if (!n || n >= len)
		return -EINVAL;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return 0;
}

static bool wakes_its_thread(const char *fn)
{
	for (size_t i = 0; i < sizeof(wake_functions) / sizeof(wake_functions[0]); i++)
		if (!strcmp(fn, wake_functions[i]))
			return true;
	return false;
}

static struct sched_timer *timer_find(struct sched_trace *s, const char *id, int *slot, int *idx)
{
	for (int i = 0; i < s->nthreads; i++)
		for (int k = 0; k < SCHED_TIMERS; k++)
			if (s->th[i].timers[k].id[0] && !strcmp(s->th[i].timers[k].id, id)) {
				*slot = i;
				*idx = k;
				return &s->th[i].timers[k];
			}
	return NULL;
}

static void on_hrtimer_start(struct sched_trace *s, const struct xev *ev, const char *f)
{
	char id[sizeof(s->th[0].timers[0].id)], fn[48];
	int64_t soft, hard;
	int slot, idx;
	struct sched_timer *tm;

	if (key_word(f, "hrtimer=", id, sizeof(id)) || key_i64(f, " expires=", &hard) ||
	    key_i64(f, " softexpires=", &soft))
		return;
	if (key_word(f, " function=", fn, sizeof(fn)))
		return;
	tm = timer_find(s, id, &slot, &idx);
	/* a sleeper's address is reused by other sleeps: only its thread arms it; a timerfd
	 * or POSIX timer re-armed from its callback or another context stays the thread's */
	if (tm && tm->sleeper && s->th[slot].tid != ev->cur_pid)
		return;
	if (!tm) {
		struct sched_thread *t;

		if ((slot = sched_trace_slot(s, ev->cur_pid)) < 0 || !wakes_its_thread(fn))
			return;
		t = &s->th[slot];
		for (idx = 0; idx < SCHED_TIMERS && t->timers[idx].id[0] && t->timers[idx].armed;
		     idx++)
			;
		if (idx == SCHED_TIMERS) {
			idx = t->next_timer;
			t->next_timer = (t->next_timer + 1) % SCHED_TIMERS;
		}
		tm = &t->timers[idx];
		snprintf(tm->id, sizeof(tm->id), "%s", id);
		tm->sleeper = !strcmp(fn, "hrtimer_wakeup");
	}
	tm->soft_ns = soft;
	tm->hard_ns = hard;
	tm->armed = true;
	if (hard - soft > s->th[slot].slack_max_ns)
		s->th[slot].slack_max_ns = hard - soft;
}

/* SOFT_NS in the timer's clock as CLOCK_MONOTONIC: the clock is told by NOW_NS, the
 * timer base's time at expiry, against the event's monotonic timestamp. */
static int64_t to_mono(const struct sched_trace *s, int64_t soft_ns, int64_t now_ns, int64_t ts_ns,
		       bool *other)
{
	int64_t d = now_ns - ts_ns, best = 0;

	*other = d > NON_MONO_NS || d < -NON_MONO_NS;
	if (!*other)
		return soft_ns;
	best = s->clock_off[0];
	for (int i = 1; i < 3; i++)
		if (llabs(s->clock_off[i] - d) < llabs(best - d))
			best = s->clock_off[i];
	return soft_ns - best;
}

static void on_expire(struct sched_trace *s, const struct xev *ev, int cpu, const char *f)
{
	char id[sizeof(s->th[0].timers[0].id)];
	struct sched_cb *cb = &s->cb[cpu];
	struct sched_thread *t;
	struct sched_timer *tm;
	int64_t now, act;
	int slot, idx;
	bool other;

	cb->slot = -1;
	if (key_word(f, "hrtimer=", id, sizeof(id)) || key_i64(f, " now=", &now) ||
	    !(tm = timer_find(s, id, &slot, &idx)) || !tm->armed)
		return;
	tm->armed = false;
	if (tm->sleeper)
		tm->id[0] = '\0';
	t = &s->th[slot];
	act = to_mono(s, tm->soft_ns, now, ev->ts_ns, &other);
	t->non_mono_clock |= other;
	if (t->running || (t->act_ns != INT64_MIN && t->act_timer))
		t->overruns++; /* still running, or not yet run since its last expiry */
	if (t->last_timer_act != INT64_MIN && t->nintervals < SCHED_PERIODS &&
	    act > t->last_timer_act)
		t->interval[t->nintervals++] = act - t->last_timer_act;
	t->last_timer_act = act;
	cb->slot = slot;
	cb->timer = idx;
	cb->act_ns = act;
	cb->slack_ns = tm->hard_ns - tm->soft_ns;
}

/* One activation of T (its mthread M) LAT_NS late, at TS_NS on CPU; a timer's (its slack
 * SLACK_NS) or another wake-up's. A sample is offered to --explain once recorded. */
static void record(struct sched_trace *s, struct sched_thread *t, struct mthread *m, int64_t lat,
		   bool timer, int64_t slack, int64_t ts, int cpu)
{
	uint64_t cycle = MT_GET(m, count);

	if (lat < 0)
		lat = 0; /* the timestamp's µs resolution */
	nstat_add(timer ? &t->timer : &t->wakeup, lat);
	t->activations++;
	if (s->samples != SCHED_S_ANY && (s->samples == SCHED_S_TIMER) != timer)
		return;
	sample_record(m, lat, cycle, ts);
	if (s->x) {
		struct explain_sample e = {
			.thread = m->index,
			.tid = t->tid,
			.cpu = cpu,
			.cycle = cycle,
			.act_ns = ts - lat,
			.lat_ns = lat,
			.slack_ns = timer ? slack : 0,
		};

		explain_offer(s->x, &e);
	}
}

static void on_waking(struct sched_trace *s, struct mthread *th, const struct xev *ev, int cpu)
{
	int slot = sched_trace_slot(s, ev->pid);
	struct sched_thread *t;

	if (slot < 0)
		return;
	t = &s->th[slot];
	t->seen = true;
	if (t->running && s->cb[cpu].slot >= 0) {
		/* its timer expired while it ran (armed for a time already past): it goes on
		 * at once, as late as the expiry was processed */
		record(s, t, &th[slot], ev->ts_ns - s->cb[cpu].act_ns, true, s->cb[cpu].slack_ns,
		       ev->ts_ns, cpu);
		return;
	}
	if (t->running) {
		t->wakeups_running++;
		return;
	}
	if (s->cb[cpu].slot >= 0) {
		t->act_ns = s->cb[cpu].act_ns; /* woken by the callback of its timer */
		t->act_timer = true;
		t->act_slack_ns = s->cb[cpu].slack_ns;
	} else if (t->act_ns == INT64_MIN) {
		t->act_ns = ev->ts_ns;
		t->act_timer = false;
	}
}

static void switch_out(struct sched_thread *t, int64_t ts, bool runnable)
{
	t->seen = true;
	if (t->running) {
		t->oncpu_ns += ts - t->run_start_ns;
		t->run_acc_ns += ts - t->run_start_ns;
	}
	t->running = false;
	if (runnable) {
		t->preemptions++;
	} else if (t->in_activation) {
		nstat_add(&t->runtime, t->run_acc_ns);
		t->in_activation = false;
		t->run_acc_ns = 0;
	}
}

static void switch_in(struct sched_trace *s, struct sched_thread *t, struct mthread *m, int64_t ts,
		      int cpu)
{
	t->seen = true;
	t->running = true;
	t->run_start_ns = ts;
	if (t->act_ns == INT64_MIN)
		return; /* back after a preemption */
	record(s, t, m, ts - t->act_ns, t->act_timer, t->act_slack_ns, ts, cpu);
	t->act_ns = INT64_MIN;
	t->in_activation = true;
	t->run_acc_ns = 0;
}

static void on_switch(struct sched_trace *s, struct mthread *th, const char *line, int cpu)
{
	struct tracefs_switch sw;
	int slot;

	if (tracefs_parse_switch(line, &sw))
		return;
	if ((slot = sched_trace_slot(s, sw.prev_pid)) >= 0)
		switch_out(&s->th[slot], sw.ts_ns, sw.prev_runnable);
	if ((slot = sched_trace_slot(s, sw.next_pid)) >= 0)
		switch_in(s, &s->th[slot], &th[slot], sw.ts_ns, cpu);
}

static void on_lost(struct sched_trace *s, int32_t n)
{
	s->lost_events += (uint64_t)n;
	for (int i = 0; i < s->nthreads; i++)
		s->th[i].act_ns = INT64_MIN; /* what is pending may have been lost */
	for (int c = 0; c < CPULIST_MAX; c++)
		s->cb[c].slot = -1;
}

void sched_trace_line(struct sched_trace *s, struct mthread *th, const char *line)
{
	const char *mark, *f;
	struct xev ev;
	int64_t pid;
	int cpu, slot;

	if (s->x) /* first: a sample of this line is explained with the line in the window */
		explain_feed(s->x, line);
	if (xtrace_parse(line, &ev, &cpu, &mark))
		return;
	s->lines++;
	if (ev.type == XE_LOST) {
		on_lost(s, ev.num);
		return;
	}
	if (cpu < 0 || cpu >= CPULIST_MAX)
		return;
	/* A line in the context of an observed thread the trace did not switch in (some
	 * kernels do not trace the switch out of a CPU's idle task): it ran by its return
	 * from the call that slept, else since at least the CPU's previous event. */
	if (ev.cur_pid > 0 && (slot = sched_trace_slot(s, ev.cur_pid)) >= 0 &&
	    !s->th[slot].running) {
		int64_t at = s->cb[cpu].last_ts && !strstr(line, ": sys_exit: ")
				     ? s->cb[cpu].last_ts
				     : ev.ts_ns;

		if (s->th[slot].act_ns != INT64_MIN)
			s->th[slot].switch_untraced++;
		switch_in(s, &s->th[slot], &th[slot], at, cpu);
	}
	s->cb[cpu].last_ts = ev.ts_ns;
	if (ev.ts_ns > s->last_ts)
		s->last_ts = ev.ts_ns;
	switch (ev.type) {
	case XE_SWITCH:
		on_switch(s, th, line, cpu);
		return;
	case XE_WAKING:
		if (strstr(line, ": sched_waking: "))
			on_waking(s, th, &ev, cpu);
		return;
	case XE_HRT_IN:
		if ((f = strstr(line, ": hrtimer_expire_entry: ")))
			on_expire(s, &ev, cpu, f + 23);
		return;
	case XE_HRT_OUT:
		s->cb[cpu].slot = -1;
		return;
	default:
		break;
	}
	if ((f = strstr(line, ": hrtimer_start: ")))
		on_hrtimer_start(s, &ev, f + 16);
	else if ((f = strstr(line, ": sched_migrate_task: ")) && !key_i64(f, " pid=", &pid) &&
		 (slot = sched_trace_slot(s, (pid_t)pid)) >= 0)
		s->th[slot].migrations++;
}

void sched_trace_finish(struct sched_trace *s)
{
	for (int i = 0; i < s->nthreads; i++) {
		struct sched_thread *t = &s->th[i];

		if (t->running && s->last_ts > t->run_start_ns)
			t->oncpu_ns += s->last_ts - t->run_start_ns;
		t->run_start_ns = s->last_ts;
	}
}

static void read_clock_offsets(struct sched_trace *s)
{
	static const clockid_t ids[3] = { CLOCK_REALTIME, CLOCK_BOOTTIME, CLOCK_TAI };
	struct timespec ts;

	for (int i = 0; i < 3; i++) {
		int64_t mono = mono_now_ns();

		if (!clock_gettime(ids[i], &ts))
			s->clock_off[i] = ts_to_ns(&ts) - mono;
	}
}

struct drain_ctx {
	struct sched_trace *s;
	struct mthread *th;
};

static void drain_line(const char *line, void *arg)
{
	struct drain_ctx *d = arg;

	sched_trace_line(d->s, d->th, line);
}

void sched_trace_drain(struct sched_trace *s, struct mthread *th, int64_t until_ns)
{
	struct drain_ctx d = { s, th };

	read_clock_offsets(s);
	(void)tracefs_drain_lines(s->fd, s->buf, sizeof(s->buf), &s->len, until_ns, drain_line, &d);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The median of the first intervals between timer activations, 0 without two of them. */
int64_t sched_thread_period(const struct sched_thread *t)
{
	int64_t v[SCHED_PERIODS];

	if (!t->nintervals)
		return 0;
	memcpy(v, t->interval, (size_t)t->nintervals * sizeof(v[0]));
	qsort(v, (size_t)t->nintervals, sizeof(v[0]), cmp_i64);
	return v[t->nintervals / 2];
}

void sched_thread_json(struct jw *w, const struct sched_thread *t, const struct sched_trace *s)
{
	const char *note = NULL;

	jw_key(w, "sched");
	jw_obj_begin(w);
	jw_kint(w, "tid", t->tid);
	jw_kstr(w, "comm", t->comm);
	jw_kuint(w, "activations", t->activations);
	nstat_json(w, "timer_latency", &t->timer, false);
	nstat_json(w, "wakeup_latency", &t->wakeup, false);
	nstat_json(w, "runtime", &t->runtime, false);
	jw_key(w, "period_ns");
	sched_thread_period(t) ? jw_int(w, sched_thread_period(t)) : jw_null(w);
	jw_kint(w, "oncpu_ns", t->oncpu_ns);
	jw_kuint(w, "overruns", t->overruns);
	jw_kuint(w, "preemptions", t->preemptions);
	jw_kuint(w, "migrations", t->migrations);
	jw_kint(w, "timer_slack_max_ns", t->slack_max_ns);
	jw_kuint(w, "switch_in_untraced", t->switch_untraced);
	jw_kbool(w, "timer_clock_not_monotonic", t->non_mono_clock);
	if (!t->seen)
		note = "the thread did not run during the measurement (blocked throughout, or "
		       "it had exited): nothing to measure";
	else if (!t->activations && t->oncpu_ns)
		note = "the thread ran but never slept and was woken: a thread that busy-waits "
		       "or polls has no wake-up whose latency could be measured";
	else if (!t->activations)
		note = "no wake-up of the thread was seen";
	jw_key(w, "note");
	note ? jw_str(w, note) : jw_null(w);
	(void)s;
	jw_obj_end(w);
}
