#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/utsname.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "explain.h"
#include "explain_priv.h"
#include "jsonw.h"
#include "probe.h"
#include "run.h"
#include "timeutil.h"
#include "tracefs.h"
#include "xattr.h"

#define RING_EVENTS_FEW_CPUS (1u << 15) /* recent events kept per traced CPU */
#define RING_EVENTS_MANY_CPUS (1u << 12)
#define MANY_CPUS 16
#define TRACE_KB_TRACED 4096 /* kernel buffer of a traced CPU */
#define TRACE_KB_OTHER 16
#define READ_PERIOD_NS (10 * NSEC_PER_MSEC)
#define LOOKBACK_MIN_NS (50 * NSEC_PER_USEC)
#define LOOKBACK_MAX_NS NSEC_PER_MSEC

/* sched_switch is required; the rest are taken where the kernel has them. */
static const char *const wanted[][2] = {
	{ "sched", "sched_switch" },
	{ "sched", "sched_wakeup" },
	{ "sched", "sched_waking" },
	{ "sched", "sched_migrate_task" },
	{ "irq", "irq_handler_entry" },
	{ "irq", "irq_handler_exit" },
	{ "irq", "softirq_entry" },
	{ "irq", "softirq_exit" },
	{ "irq", "softirq_raise" },
	{ "timer", "hrtimer_start" },
	{ "timer", "hrtimer_expire_entry" },
	{ "timer", "hrtimer_expire_exit" },
	{ "workqueue", "workqueue_execute_start" },
	{ "workqueue", "workqueue_execute_end" },
	{ "ipi", NULL },
	{ "irq_vectors", NULL }, /* every *_entry/_exit (and ipi_*) present */
};

static void list_add(char *list, const char *sys, const char *ev)
{
	size_t n = strlen(list);

	snprintf(list + n, EVENTS_TEXT - n, "%s%s:%s", n ? "," : "", sys, ev);
}

static int enable(struct explain *x, const char *sys, const char *ev)
{
	int rc = tracefs_event_enable(&x->inst, sys, ev);

	list_add(rc ? x->missing : x->events, sys, ev);
	return rc;
}

/* Every event of SYS whose name ends in _entry or _exit (or, for ipi, every event). */
static void enable_system(struct explain *x, const char *sys)
{
	char dir[sizeof(x->inst.path) + 64];
	struct dirent *e;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/events/%s", x->inst.path, sys);
	if (!(d = opendir(dir))) {
		list_add(x->missing, sys, "*");
		return;
	}
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		bool entry_exit = (n > 6 && !strcmp(e->d_name + n - 6, "_entry")) ||
				  (n > 5 && !strcmp(e->d_name + n - 5, "_exit"));

		if (e->d_name[0] != '.' && strcmp(e->d_name, "enable") &&
		    strcmp(e->d_name, "filter") && (entry_exit || !strcmp(sys, "ipi")))
			(void)enable(x, sys, e->d_name);
	}
	(void)closedir(d);
}

/* tracing_cpumask: 32-bit hex words, most significant first. */
static int set_cpumask(struct explain *x)
{
	char mask[CPULIST_MAX / 4 + CPULIST_MAX / 32 + 8];
	uint32_t word[CPULIST_MAX / 32] = { 0 };
	int top = 0;
	size_t n = 0;

	for (int i = 0; i < x->ncpus; i++) {
		word[x->cpus[i].cpu / 32] |= 1u << (x->cpus[i].cpu % 32);
		if (x->cpus[i].cpu / 32 > top)
			top = x->cpus[i].cpu / 32;
	}
	for (int w = top; w >= 0; w--)
		n += (size_t)snprintf(mask + n, sizeof(mask) - n, w == top ? "%x" : ",%08x",
				      word[w]);
	return tracefs_write(&x->inst, "tracing_cpumask", mask);
}

/* A stack at each timer interrupt that stopped a task other than idle: what held the
 * CPU when a measured thread's timer expired (only the traced CPUs record events, and a
 * filtered trigger runs on recorded events only). Stacks are optional: without the
 * trigger the spikes say why they have none. */
static void setup_stacks(struct explain *x)
{
	struct utsname u;
	char path[64];
	int rc;

	if (!xstack_trigger_per_instance(uname(&u) ? "" : u.release, x->stacks_off,
					 sizeof(x->stacks_off)))
		return;
	(void)tracefs_write(&x->inst, "options/sym-offset", "1");
	snprintf(x->stack_trigger, sizeof(x->stack_trigger), "stacktrace if common_pid != 0");
	snprintf(path, sizeof(path), "events/timer/hrtimer_expire_entry/trigger");
	if ((rc = tracefs_write(&x->inst, path, x->stack_trigger))) {
		snprintf(x->stacks_off, sizeof(x->stacks_off),
			 "the kernel has no stacktrace trigger on timer:hrtimer_expire_entry (%s)",
			 strerror(-rc));
		return;
	}
	x->stacks_on = x->stacks_recorded = true;
}

/* Remove the trigger (the instance cannot go while an event has one). */
void explain_remove_stacks(struct explain *x)
{
	char undo[sizeof(x->stack_trigger) + 1];

	if (!x->stacks_on)
		return;
	snprintf(undo, sizeof(undo), "!%s", x->stack_trigger);
	(void)tracefs_write(&x->inst, "events/timer/hrtimer_expire_entry/trigger", undo);
	x->stacks_on = false;
}

/* The events and the stack trigger of the explanation in x->inst; -errno without
 * sched_switch (the others are taken where the kernel has them). */
int explain_enable_events(struct explain *x)
{
	int rc;

	for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		if (!wanted[i][1])
			enable_system(x, wanted[i][0]);
		else if ((rc = enable(x, wanted[i][0], wanted[i][1])) && i == 0)
			return rc;
	}
	setup_stacks(x);
	return 0;
}

static void keep(struct explain *x, const struct xspike *s)
{
	int slot = x->nkept;

	if (x->nkept == x->max) {
		slot = 0;
		for (int i = 1; i < x->nkept; i++)
			if (x->kept[i].m.lat_ns < x->kept[slot].m.lat_ns)
				slot = i;
	} else {
		x->nkept++;
	}
	x->kept[slot] = *s;
}

static bool worth_explaining(const struct explain *x, int64_t lat_ns)
{
	if (x->nkept < x->max)
		return true;
	for (int i = 0; i < x->nkept; i++)
		if (x->kept[i].m.lat_ns < lat_ns)
			return true;
	return false;
}

/* Explain M (thread TID) from CPU C's recent events when it can still be kept. */
void explain_one(struct explain *x, struct xcpu *c, const struct xmark *m, pid_t tid)
{
	int64_t offset, lookback;

	if (!worth_explaining(x, m->lat_ns))
		return;
	/* trace clock - CLOCK_MONOTONIC: 0 for "mono", else from the marker's own time */
	offset = x->clock_mono ? 0 : x->mark_ts_ns - m->write_ns;
	lookback = m->lat_ns < LOOKBACK_MIN_NS   ? LOOKBACK_MIN_NS
		   : m->lat_ns > LOOKBACK_MAX_NS ? LOOKBACK_MAX_NS
						 : m->lat_ns;
	xattr_explain(&c->ring, m, c->cpu, tid, offset, lookback, &x->scratch);
	if (x->scratch.stack_id) {
		const struct xstack *st = xstacks_get(&c->stacks, x->scratch.stack_id);

		if (st)
			x->scratch.stack = *st;
		else
			x->scratch.stack_why = XSW_LOST;
	} else if (!x->stacks_recorded) {
		x->scratch.stack_why = XSW_OFF;
	}
	keep(x, &x->scratch);
}

static void on_marker(struct explain *x, struct xcpu *c, const struct xev *ev, const char *text)
{
	struct xmark m = { 0 };

	if (xmark_parse(text, &m) || m.thread >= x->nthreads)
		return; /* someone else's marker in our instance: not possible, but harmless */
	x->markers_seen++;
	x->mark_ts_ns = ev->ts_ns;
	explain_one(x, c, &m, x->threads[m.thread].tid);
}

void explain_event(struct explain *x, struct xcpu *c, const struct xev *ev, const char *mark)
{
	if (ev->type == XE_STACK) {
		x->stacks_read++;
		(void)xring_attach_stack(&c->ring, ev->ts_ns, xstacks_begin(&c->stacks));
		return;
	}
	if (ev->type == XE_MARK) {
		if (mark && !x->fed)
			on_marker(x, c, ev, mark);
		return;
	}
	if (ev->type == XE_LOST)
		x->lost_events += (uint64_t)ev->num;
	if (ev->type != XE_NONE)
		xring_push(&c->ring, ev);
}

static void on_line(struct explain *x, struct xcpu *c, const char *line)
{
	const char *mark;
	struct xev ev;
	int cpu;

	if (!xstacks_frame(&c->stacks, line))
		return;
	if (!xtrace_parse(line, &ev, &cpu, &mark))
		explain_event(x, c, &ev, mark);
}

struct drain_ctx {
	struct explain *x;
	struct xcpu *c;
};

static void drain_line(const char *line, void *arg)
{
	struct drain_ctx *d = arg;

	on_line(d->x, d->c, line);
}

/* Read what CPU C's buffer holds now (non-blocking), for at most SLICE_NS: a buffer filled
 * faster than it is read must leave the reader to the other CPUs and to its stop. */
static void drain(struct explain *x, struct xcpu *c, int64_t slice_ns)
{
	struct drain_ctx d = { x, c };

	tracefs_drain_lines(c->fd, c->buf, sizeof(c->buf), &c->len, mono_now_ns() + slice_ns,
			    drain_line, &d);
}

static void *reader_main(void *arg)
{
	struct explain *x = arg;
	struct timespec ts = ns_to_ts(READ_PERIOD_NS);

	while (!atomic_load(&x->stop)) {
		for (int i = 0; i < x->ncpus; i++)
			drain(x, &x->cpus[i], TRACEFS_DRAIN_SLICE_NS);
		(void)nanosleep(&ts, NULL);
	}
	for (int i = 0; i < x->ncpus; i++) /* what the last samples left */
		drain(x, &x->cpus[i], TRACEFS_DRAIN_LAST_NS);
	return NULL;
}

/* The reader runs where the measuring threads do not: --main-cpus, else the others. */
static void reader_affinity(const struct run *r, pthread_attr_t *attr)
{
	cpu_set_t set;
	bool any = false;

	CPU_ZERO(&set);
	if (r->c.main_cpus_set) {
		cpulist_to_set(&r->c.main_cpus, &set);
		any = true;
	} else if (r->c.cpus_set) {
		for (int i = 0; i < r->online.n; i++) {
			bool measured = false;

			for (int j = 0; j < r->c.cpus.n; j++)
				measured |= r->c.cpus.cpu[j] == r->online.cpu[i];
			if (!measured) {
				CPU_SET(r->online.cpu[i], &set);
				any = true;
			}
		}
	}
	if (any)
		(void)pthread_attr_setaffinity_np(attr, sizeof(set), &set);
}

static int fail_setup(struct explain *x, int rc, const char *what)
{
	snprintf(x->reason, sizeof(x->reason), "--explain: %s (%s)", what, strerror(-rc));
	return rc;
}

static int open_trace(struct explain *x, const struct run *r)
{
	char path[sizeof(x->inst.path) + 64];
	int rc, removed;

	if ((rc = tracefs_open(&x->fs, true, x->reason, sizeof(x->reason))))
		return rc;
	(void)tracefs_remove_stale(&x->fs, &removed);
	if ((rc = tracefs_instance_create(&x->fs, getpid(), &x->inst, x->reason,
					  sizeof(x->reason))))
		return rc;
	snprintf(x->instance, sizeof(x->instance), "%s", strrchr(x->inst.path, '/') + 1);
	x->clock_mono = !tracefs_write(&x->inst, "trace_clock", "mono");
	snprintf(x->clock, sizeof(x->clock), "%s", x->clock_mono ? "mono" : "local");
	if ((rc = tracefs_write(&x->inst, "tracing_on", "0")) || (rc = set_cpumask(x)) ||
	    (rc = tracefs_set_buffer_kb(&x->inst, -1, TRACE_KB_OTHER)))
		return fail_setup(x, rc, "cannot configure the tracefs instance");
	for (int i = 0; i < x->ncpus; i++)
		if ((rc = tracefs_set_buffer_kb(&x->inst, x->cpus[i].cpu, TRACE_KB_TRACED)))
			return fail_setup(x, rc, "cannot size the trace buffers");
	if ((rc = explain_enable_events(x)))
		return fail_setup(x, rc, "the kernel has no sched:sched_switch event");
	for (int i = 0; i < x->ncpus; i++) {
		snprintf(path, sizeof(path), "%s/per_cpu/cpu%d/trace_pipe", x->inst.path,
			 x->cpus[i].cpu);
		if ((x->cpus[i].fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
			return fail_setup(x, -errno, "cannot open a per-CPU trace_pipe");
	}
	snprintf(path, sizeof(path), "%s/trace_marker", x->inst.path);
	if ((x->marker_fd = open(path, O_WRONLY | O_CLOEXEC)) < 0)
		return fail_setup(x, -errno, "cannot open trace_marker");
	if ((rc = tracefs_write(&x->inst, "tracing_on", "1")))
		return fail_setup(x, rc, "cannot start tracing");
	(void)r;
	return 0;
}

static void close_trace(struct explain *x)
{
	if (x->marker_fd >= 0)
		(void)close(x->marker_fd);
	x->marker_fd = -1;
	for (int i = 0; i < x->ncpus; i++) {
		if (x->cpus[i].fd >= 0)
			(void)close(x->cpus[i].fd);
		x->cpus[i].fd = -1;
	}
	if (x->inst.path[0]) {
		(void)tracefs_write(&x->inst, "tracing_on", "0");
		explain_remove_stacks(x);
		if (!x->fed) /* a meter's own instance goes with the meter */
			(void)tracefs_instance_remove(&x->inst);
	}
}

static int alloc_explain(struct explain *x, const struct run *r)
{
	const struct cpulist *cpus = r->c.cpus_set ? &r->c.cpus : &r->online;
	uint32_t ring = cpus->n > MANY_CPUS ? RING_EVENTS_MANY_CPUS : RING_EVENTS_FEW_CPUS;

	x->ncpus = cpus->n;
	x->cpus = calloc((size_t)x->ncpus, sizeof(*x->cpus));
	x->th = calloc((size_t)r->nthreads, sizeof(*x->th));
	x->kept = calloc((size_t)x->max, sizeof(*x->kept));
	if (!x->cpus || !x->th || !x->kept)
		return -ENOMEM;
	for (int i = 0; i < x->ncpus; i++) {
		x->cpus[i].cpu = cpus->cpu[i];
		x->cpus[i].fd = -1;
		if (xring_init(&x->cpus[i].ring, ring) ||
		    xstacks_init(&x->cpus[i].stacks, XSTACK_SLOTS))
			return -ENOMEM;
	}
	for (int i = 0; i < r->nthreads; i++)
		if (!(x->th[i].top = calloc((size_t)x->max, sizeof(int64_t))))
			return -ENOMEM;
	return 0;
}

int explain_start(struct run *r, char *err, size_t errlen)
{
	struct explain *x;
	pthread_attr_t attr;
	int rc;

	if (!r->c.explain_set)
		return 0;
	if (!(x = calloc(1, sizeof(*x)))) {
		snprintf(err, errlen, "out of memory for --explain");
		return -ENOMEM;
	}
	r->explain = x;
	x->threshold_ns = r->c.explain_ns;
	x->max = r->c.explain_max_set ? (int)r->c.explain_max : EXPLAIN_DEFAULT_MAX;
	x->marker_fd = -1;
	x->threads = r->th;
	x->nthreads = r->nthreads;
	if ((rc = alloc_explain(x, r))) {
		snprintf(err, errlen, "out of memory for --explain");
		return rc;
	}
	if (r->m->explain_fed) { /* the meter's trace comes through explain_feed() */
		x->fed = true;
		x->clock_mono = true;
		snprintf(x->clock, sizeof(x->clock), "mono");
		return 0;
	}
	if (!(rc = open_trace(x, r))) {
		(void)pthread_attr_init(&attr);
		reader_affinity(r, &attr);
		rc = -pthread_create(&x->reader, &attr, reader_main, x);
		(void)pthread_attr_destroy(&attr);
		if (rc)
			(void)fail_setup(x, rc, "cannot start the trace reader");
		x->reader_started = !rc;
	}
	if (rc) {
		close_trace(x);
		x->unavailable = true;
		if (!r->c.allow_fallback) {
			snprintf(err, errlen, "%s", x->reason);
			return rc;
		}
		return 0;
	}
	for (int i = 0; i < r->nthreads; i++)
		r->th[i].explain_floor = x->threshold_ns;
	return 0;
}

void explain_stop(struct run *r)
{
	struct explain *x = r->explain;

	if (!x || x->stopped)
		return;
	x->stopped = true;
	if (x->inst.path[0])
		(void)tracefs_write(&x->inst, "tracing_on", "0");
	if (x->reader_started) {
		atomic_store(&x->stop, 1);
		(void)pthread_join(x->reader, NULL);
	}
	close_trace(x);
}

void explain_free(struct run *r)
{
	struct explain *x = r->explain;

	if (!x)
		return;
	explain_stop(r);
	for (int i = 0; x->cpus && i < x->ncpus; i++) {
		xring_free(&x->cpus[i].ring);
		xstacks_free(&x->cpus[i].stacks);
	}
	for (int i = 0; x->th && i < x->nthreads; i++)
		free(x->th[i].top);
	free(x->cpus);
	free(x->th);
	free(x->kept);
	free(x);
	r->explain = NULL;
}

/* In the measuring thread: one write to trace_marker, and the floor moves up once
 * max_spikes samples were marked (only a worse one can still be kept). */
void explain_mark(struct mthread *t, int64_t v, uint64_t cycle, int64_t now_ns)
{
	struct explain *x = ((struct run *)t->run)->explain;
	struct explain_thread *s = &x->th[t->index];
	struct xmark m = { t->index, cycle, now_ns - v, v, 0, 0 };
	char buf[200];
	int n, low = 0;

	m.write_ns = mono_now_ns();
	n = xmark_format(&m, buf, sizeof(buf));
	if (write(x->marker_fd, buf, (size_t)n) == n)
		s->marked++;
	else
		s->failed++;
	if (s->ntop < x->max) {
		s->top[s->ntop++] = v;
	} else {
		for (int i = 1; i < s->ntop; i++)
			if (s->top[i] < s->top[low])
				low = i;
		s->top[low] = v;
	}
	if (s->ntop == x->max) {
		low = 0;
		for (int i = 1; i < s->ntop; i++)
			if (s->top[i] < s->top[low])
				low = i;
		t->explain_floor = s->top[low] > x->threshold_ns ? s->top[low] : x->threshold_ns;
	}
}
