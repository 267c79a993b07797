/*
 * preempt — how much a busy thread is stretched, and by whom: the thread does fixed
 * units of work (a busy loop calibrated to --unit) and records, per unit, its wall
 * time minus its undisturbed (calibrated) time. Around the loop: its context switches
 * (getrusage), its time waiting for the CPU (schedstat run_delay) and, through a
 * private tracefs instance, the tasks that took its CPU (sched:sched_switch) and
 * whether each preemption came in kernel mode (prev_state R+) or on the way back to
 * user mode (R). Unpinned, also its migrations between CPUs.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/policy.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "lib/tracefs.h"
#include "probe.h"

#define PREEMPT_DEFAULT_UNIT_NS (100 * NSEC_PER_USEC)
#define CALIBRATE_NS (20 * NSEC_PER_MSEC) /* spent on the nominal time's minimum */
#define CALIBRATE_MIN_REPS 5
#define CALIBRATE_MAX_REPS 50
/* Trace buffer per second of run: 2000 preemptions/s, two sched_switch events each of
 * about 96 bytes in the ring; above that the oldest events are overwritten (counted). */
#define TRACE_KB_PER_S 384
#define TRACE_KB_MIN 1024
#define TRACE_KB_MAX (64 * 1024)
#define TRACE_KB_IDLE 64 /* every other CPU of the instance: records nothing */

struct preempt_params {
	int64_t unit_ns; /* nominal length of one unit of work */
	bool no_trace;   /* do not attribute preemptions */
};

/* One task that took the measured thread's CPU. */
struct preempt_by {
	char comm[16];
	pid_t pid;
	int prio;           /* kernel prio at its last switch-in (see tracefs.h) */
	const char *policy; /* other, batch, idle, fifo, rr, deadline; "rt" when gone */
	uint64_t count;     /* preemptions it started */
	int64_t time_ns;    /* until the measured thread ran again */
};

struct preempt_thread {
	bool set_up;          /* thread_setup ran: the fields below are valid */
	uint64_t iters;       /* work iterations per unit */
	int64_t nominal_ns;   /* a unit's undisturbed wall time: calibrated minimum */
	int64_t t0_ns, t1_ns; /* CLOCK_MONOTONIC around the units */
	long nvcsw, nivcsw;   /* context switches during the loop */
	int sched_fd;         /* /proc/self/task/TID/schedstat, -1 when unreadable */
	int debug_fd;         /* /proc/self/task/TID/sched, -1 when unreadable */
	bool mig_known;       /* se.nr_migrations read before and after the loop */
	int64_t mig0, mig1;   /* se.nr_migrations: the kernel's count of CPU changes */
	uint64_t cpu_changes; /* units that ended on another CPU than the one before */
	int64_t delay0_ns;    /* run_delay at the start */
	int64_t off_cpu_ns;
	bool off_cpu_schedstat; /* off_cpu_ns from run_delay, else the sum of stretches */
	int64_t stretch_ns;     /* sum of the samples */
	uint64_t faster;        /* units faster than nominal_ns, recorded as 0 */

	struct tracefs fs;
	struct tracefs_instance inst;
	bool tracing;    /* sched_switch recorded for this thread's CPU */
	bool mono_clock; /* trace timestamps are CLOCK_MONOTONIC */
	uint64_t buffer_kb;
	char why[240]; /* why "by" is null */
	struct preempt_by *by;
	size_t nby, cap;
	uint64_t in_kernel, to_user; /* preemptions in kernel mode (R+), at return to user (R) */
	bool lost_known;
	uint64_t lost; /* trace events overwritten */
};

static void preempt_defaults(void *p)
{
	struct preempt_params *pp = p;

	pp->unit_ns = PREEMPT_DEFAULT_UNIT_NS;
	pp->no_trace = false;
}

static int64_t preempt_period(const void *p, int index)
{
	(void)index;
	return ((const struct preempt_params *)p)->unit_ns;
}

static int preempt_check(void *p, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	(void)p;
	if (nthreads == 1)
		return 0;
	/* One private tracefs instance per run, named by the PID, traces one CPU. */
	snprintf(err, errlen, "preempt measures one thread: give --cpus one CPU");
	at->option = "cpus";
	return -EINVAL;
}

/* ITERS steps of a dependent multiply-add chain: the compiler can neither drop nor fold it. */
static inline uint64_t work(uint64_t iters)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	for (uint64_t i = 0; i < iters; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

static int64_t unit_wall(uint64_t iters, uint64_t *sink)
{
	int64_t t0 = mono_now_ns();

	*sink += work(iters);
	return mono_now_ns() - t0;
}

/* Iterations for about UNIT_NS, and the least wall time of such a unit over several. */
static void calibrate(struct preempt_thread *s, int64_t unit_ns)
{
	uint64_t iters = 256, sink = 0;
	int64_t best = INT64_MAX, el;
	int64_t reps = CALIBRATE_NS / unit_ns;

	while (unit_wall(iters, &sink) < unit_ns / 8 && iters < ((uint64_t)1 << 40))
		iters *= 2;
	for (int i = 0; i < CALIBRATE_MIN_REPS; i++)
		if ((el = unit_wall(iters, &sink)) < best)
			best = el;
	iters = (uint64_t)((double)iters * (double)unit_ns / (double)(best > 0 ? best : 1));
	s->iters = iters ? iters : 1;
	reps = reps < CALIBRATE_MIN_REPS   ? CALIBRATE_MIN_REPS
	       : reps > CALIBRATE_MAX_REPS ? CALIBRATE_MAX_REPS
					   : reps;
	best = INT64_MAX;
	for (int64_t i = 0; i < reps; i++)
		if ((el = unit_wall(s->iters, &sink)) < best)
			best = el;
	s->nominal_ns = best;
	if (sink == 1)
		s->nominal_ns++; /* never: keeps SINK (the work's result) alive */
}

/* run_delay (ns waiting on a run queue) of the thread; 0 or -errno. */
static int read_run_delay(int fd, int64_t *out)
{
	char buf[96];
	unsigned long long run, delay;
	ssize_t n = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;

	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	if (sscanf(buf, "%llu %llu", &run, &delay) != 2)
		return -EINVAL;
	*out = (int64_t)delay;
	return 0;
}

/* se.nr_migrations of /proc/self/task/TID/sched (kernel/sched/debug.c); 0 or -errno. */
static int read_migrations(int fd, int64_t *out)
{
	static const char key[] = "\nse.nr_migrations";
	char buf[8192];
	long long v;
	ssize_t n = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
	const char *p;

	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	if (!(p = strstr(buf, key)) || !(p = strchr(p + 1, ':')) || sscanf(p + 1, "%lld", &v) != 1)
		return -ENOENT;
	*out = v;
	return 0;
}

/* Instance with only this CPU, the monotonic clock and a small buffer; the event and
 * the buffer for the run's length come in the loop, which knows that length. */
static void trace_prepare(struct preempt_thread *s, const struct mthread *t)
{
	char err[200];
	int removed, rc;

	if (t->cpu < 0) {
		snprintf(s->why, sizeof(s->why),
			 "the thread is not pinned: attribution needs --cpus");
		return;
	}
	if (tracefs_open(&s->fs, true, err, sizeof(err))) {
		snprintf(s->why, sizeof(s->why), "%s", err);
		return;
	}
	(void)tracefs_remove_stale(&s->fs, &removed); /* instances of killed runs */
	if (tracefs_instance_create(&s->fs, getpid(), &s->inst, err, sizeof(err))) {
		snprintf(s->why, sizeof(s->why), "%s", err);
		return;
	}
	s->mono_clock = !tracefs_write(&s->inst, "trace_clock", "mono");
	if ((rc = tracefs_set_cpu(&s->inst, t->cpu)) ||
	    (rc = tracefs_set_buffer_kb(&s->inst, -1, TRACE_KB_IDLE))) {
		snprintf(s->why, sizeof(s->why),
			 "cannot restrict the tracefs instance to CPU %d (%s)", t->cpu,
			 strerror(-rc));
		return;
	}
	s->tracing = true;
}

static void trace_start(struct preempt_thread *s, const struct mthread *t,
			const struct run_ctl *ctl, int64_t unit_ns)
{
	int64_t secs = TRACE_KB_MAX; /* open-ended: the largest buffer */
	uint64_t kb;
	int rc;

	if (ctl->duration_ns)
		secs = ctl->duration_ns / NSEC_PER_SEC + 1;
	else if (ctl->loops)
		secs = (int64_t)((double)ctl->loops * (double)unit_ns * 2 / 1e9) + 1;
	kb = secs > (TRACE_KB_MAX - TRACE_KB_MIN) / TRACE_KB_PER_S
		     ? TRACE_KB_MAX
		     : (uint64_t)(TRACE_KB_MIN + secs * TRACE_KB_PER_S);
	if ((rc = tracefs_set_buffer_kb(&s->inst, t->cpu, kb)) ||
	    (rc = tracefs_event_enable(&s->inst, "sched", "sched_switch"))) {
		snprintf(s->why, sizeof(s->why), "cannot enable sched:sched_switch on CPU %d (%s)",
			 t->cpu, strerror(-rc));
		s->tracing = false;
		return;
	}
	s->buffer_kb = kb;
}

static int preempt_thread_setup(struct mthread *t, const void *p, char *err, size_t errlen)
{
	const struct preempt_params *pp = p;
	struct preempt_thread *s = t->mstate;
	char path[64];

	(void)err;
	(void)errlen;
	s->set_up = true;
	snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat", (int)t->tid);
	s->sched_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/self/task/%d/sched", (int)t->tid);
	/* se.nr_migrations; the file needs CONFIG_SCHED_DEBUG on older kernels */
	s->debug_fd = open(path, O_RDONLY | O_CLOEXEC);
	calibrate(s, pp->unit_ns); /* at the thread's own policy, on its own CPU */
	if (pp->no_trace)
		snprintf(s->why, sizeof(s->why), "not asked for (--no-trace)");
	else
		trace_prepare(s, t);
	return 0; /* without attribution the run still measures */
}

static void preempt_loop(struct mthread *t, const void *p, const struct run_ctl *ctl)
{
	const struct preempt_params *pp = p;
	struct preempt_thread *s = t->mstate;
	const uint64_t iters = s->iters;
	const int64_t nominal = s->nominal_ns, unit = pp->unit_ns;
	int64_t begin, now, stretch, delay1 = 0;
	uint64_t cycle = 0, sink = 0, changes = 0;
	struct rusage ru0, ru1;
	const bool unpinned = t->cpu < 0; /* pinned: it cannot change CPU, nothing to look at */
	int cpu, now_cpu;

	if (s->tracing)
		trace_start(s, t, ctl, unit);
	(void)getrusage(RUSAGE_THREAD, &ru0);
	s->off_cpu_schedstat = !read_run_delay(s->sched_fd, &s->delay0_ns);
	s->mig_known = !read_migrations(s->debug_fd, &s->mig0);
	cpu = unpinned ? sched_getcpu() : t->cpu; /* after the count: a change is one of it */
	now = t->start_ns = s->t0_ns = mono_now_ns();
	for (;;) {
		begin = now;
		sink += work(iters);
		if (unpinned && (now_cpu = sched_getcpu()) != cpu) { /* glibc: rseq or vDSO */
			changes++;
			cpu = now_cpu;
		}
		now = mono_now_ns();
		stretch = now - begin - nominal;
		if (stretch < 0) { /* faster than calibrated: not stretched */
			s->faster++;
			stretch = 0;
		}
		sample_record(t, stretch, cycle, now);
		cycle++;
		s->stretch_ns += stretch;
		if (stretch >= unit)
			t->overruns++; /* stretched by at least a whole unit */
		if (run_should_stop(ctl, cycle, now - t->start_ns))
			break;
	}
	s->t1_ns = mono_now_ns();
	(void)getrusage(RUSAGE_THREAD, &ru1);
	s->off_cpu_schedstat = s->off_cpu_schedstat && !read_run_delay(s->sched_fd, &delay1);
	s->mig_known = s->mig_known && !read_migrations(s->debug_fd, &s->mig1);
	s->cpu_changes = changes;
	s->off_cpu_ns = s->off_cpu_schedstat ? delay1 - s->delay0_ns : s->stretch_ns;
	s->nvcsw = ru1.ru_nvcsw - ru0.ru_nvcsw;
	s->nivcsw = ru1.ru_nivcsw - ru0.ru_nivcsw;
	if (sink == 1)
		s->stretch_ns++; /* never: keeps the work's result alive */
}

/* Policy name of a task seen at kernel prio PRIO: its own when it still exists and
 * agrees with PRIO's class, else what PRIO tells. */
static const char *policy_of(pid_t pid, int prio)
{
	struct policy_spec sp;
	bool rt = prio >= 0 && prio < 100;

	if (pid > 0 && !policy_read(pid, &sp)) {
		if (prio < 0 && sp.policy == SCHED_DEADLINE)
			return "deadline";
		if (rt && (sp.policy == SCHED_FIFO || sp.policy == SCHED_RR))
			return policy_name(sp.policy);
		if (prio >= 100 && sp.policy != SCHED_FIFO && sp.policy != SCHED_RR &&
		    sp.policy != SCHED_DEADLINE)
			return policy_name(sp.policy);
	}
	return prio < 0 ? "deadline" : rt ? "rt" : "other";
}

struct switch_scan {
	struct preempt_thread *s;
	pid_t tid;
	int64_t from_ns, to_ns; /* window of the units, trace clock; INT64_MIN/MAX: all */
	bool out;               /* the thread is off its CPU */
	int64_t out_ns;
	size_t taker; /* index in s->by of who took the CPU */
};

static size_t by_slot(struct preempt_thread *s, const struct tracefs_switch *ev)
{
	size_t i;

	for (i = 0; i < s->nby && s->by[i].pid != ev->next_pid; i++)
		;
	if (i == s->nby) {
		if (s->nby == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 16;
			struct preempt_by *by = realloc(s->by, cap * sizeof(*by));

			if (!by)
				return SIZE_MAX;
			s->by = by;
			s->cap = cap;
		}
		memset(&s->by[i], 0, sizeof(s->by[i]));
		s->by[i].pid = ev->next_pid;
		s->nby++;
	}
	memcpy(s->by[i].comm, ev->next_comm, sizeof(s->by[i].comm));
	s->by[i].prio = ev->next_prio;
	return i;
}

/* A preemption runs from the thread's switch-out while runnable to its next switch-in;
 * it is charged to the task that took the CPU first. */
static int scan_line(const char *line, void *arg)
{
	struct switch_scan *c = arg;
	struct tracefs_switch ev;

	if (tracefs_parse_switch(line, &ev))
		return 0;
	if (ev.prev_pid == c->tid && ev.next_pid != c->tid) {
		c->out = ev.prev_runnable && ev.ts_ns >= c->from_ns && ev.ts_ns <= c->to_ns;
		c->out_ns = ev.ts_ns;
		if (c->out && (c->taker = by_slot(c->s, &ev)) == SIZE_MAX)
			return -ENOMEM;
		if (c->out)
			*(ev.prev_preempt ? &c->s->in_kernel : &c->s->to_user) += 1;
	} else if (ev.next_pid == c->tid && c->out) {
		c->s->by[c->taker].count++;
		c->s->by[c->taker].time_ns += ev.ts_ns - c->out_ns;
		c->out = false;
	}
	return 0;
}

static int by_cmp(const void *a, const void *b)
{
	const struct preempt_by *x = a, *y = b;

	if (x->time_ns != y->time_ns)
		return x->time_ns < y->time_ns ? 1 : -1;
	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

static void trace_collect(struct preempt_thread *s, const struct mthread *t)
{
	struct switch_scan c = { .s = s, .tid = t->tid, .from_ns = INT64_MIN, .to_ns = INT64_MAX };
	size_t kept = 0;
	int rc;

	if (s->mono_clock) { /* µs in the text: widen the window by one */
		c.from_ns = s->t0_ns - NSEC_PER_USEC;
		c.to_ns = s->t1_ns + NSEC_PER_USEC;
	}
	s->lost_known = !tracefs_cpu_lost(&s->inst, t->cpu, &s->lost);
	if ((rc = tracefs_read_cpu_trace(&s->inst, t->cpu, scan_line, &c))) {
		snprintf(s->why, sizeof(s->why), "cannot read the trace of CPU %d (%s)", t->cpu,
			 strerror(-rc));
		s->tracing = false;
		return;
	}
	for (size_t i = 0; i < s->nby; i++)
		if (s->by[i].count)
			s->by[kept++] = s->by[i]; /* a switch-out the trace never closed */
	s->nby = kept;
	for (size_t i = 0; i < s->nby; i++)
		s->by[i].policy = policy_of(s->by[i].pid, s->by[i].prio);
	if (s->nby)
		qsort(s->by, s->nby, sizeof(*s->by), by_cmp);
}

static void preempt_thread_teardown(struct mthread *t, const void *p)
{
	struct preempt_thread *s = t->mstate;
	struct sched_param other = { 0 };

	(void)p;
	if (!s->set_up)
		return;
	if (s->inst.path[0]) {
		(void)tracefs_write(&s->inst, "tracing_on", "0");
		if (s->tracing && s->t1_ns) {
			/* Measuring is over: reading the trace must not hold the CPU at fifo. */
			(void)sched_setscheduler(0, SCHED_OTHER, &other);
			trace_collect(s, t);
		} else if (s->tracing) {
			snprintf(s->why, sizeof(s->why), "the run ended before measuring");
			s->tracing = false;
		}
		(void)tracefs_instance_remove(&s->inst);
	}
	if (s->sched_fd >= 0)
		(void)close(s->sched_fd);
	if (s->debug_fd >= 0)
		(void)close(s->debug_fd);
	s->sched_fd = s->debug_fd = -1;
}

static void preempt_thread_json(struct jw *w, const struct mthread *t, const void *p)
{
	const struct preempt_thread *s = t->mstate;

	(void)p;
	jw_kint(w, "unit_nominal_ns", s->nominal_ns);
	jw_kuint(w, "unit_iterations", s->iters);
	jw_kuint(w, "units_faster", s->faster);
	jw_kint(w, "measured_ns", s->t1_ns - s->t0_ns);
	jw_key(w, "migrations");
	jw_obj_begin(w);
	jw_kbool(w, "pinned", t->cpu >= 0);
	jw_key(w, "nr_migrations");
	s->mig_known ? jw_int(w, s->mig1 - s->mig0) : jw_null(w);
	jw_key(w, "cpu_changes");
	t->cpu < 0 ? jw_uint(w, s->cpu_changes) : jw_null(w);
	jw_obj_end(w);
	jw_key(w, "preemptions");
	jw_obj_begin(w);
	jw_kint(w, "voluntary", s->nvcsw);
	jw_kint(w, "involuntary", s->nivcsw);
	jw_kint(w, "off_cpu_ns", s->off_cpu_ns);
	jw_kstr(w, "off_cpu_source", s->off_cpu_schedstat ? "schedstat" : "stretch");
	jw_key(w, "kernel_mode"); /* null without the trace: the split needs sched_switch */
	s->tracing ? jw_uint(w, s->in_kernel) : jw_null(w);
	jw_key(w, "user_mode");
	s->tracing ? jw_uint(w, s->to_user) : jw_null(w);
	jw_key(w, "by");
	if (!s->tracing) {
		jw_null(w);
		jw_kstr(w, "by_unavailable", s->why);
	} else {
		jw_arr_begin(w);
		for (size_t i = 0; i < s->nby; i++) {
			const struct preempt_by *b = &s->by[i];
			int prio = b->prio;

			jw_obj_begin(w);
			jw_kstr(w, "comm", b->comm);
			jw_kint(w, "pid", b->pid);
			jw_kstr(w, "policy", b->policy);
			/* rt: 1..99; fair: the nice value; deadline: 0 */
			jw_kint(w, "priority", prio < 0 ? 0 : prio < 100 ? 99 - prio : prio - 120);
			jw_kuint(w, "count", b->count);
			jw_kint(w, "time_ns", b->time_ns);
			jw_obj_end(w);
		}
		jw_arr_end(w);
	}
	jw_key(w, "trace_events_lost");
	s->tracing && s->lost_known ? jw_uint(w, s->lost) : jw_null(w);
	jw_key(w, "trace_buffer_kb");
	s->tracing ? jw_uint(w, s->buffer_kb) : jw_null(w);
	jw_obj_end(w);
}

static void preempt_params_json(struct jw *w, const void *p)
{
	const struct preempt_params *pp = p;

	jw_kint(w, "unit_ns", pp->unit_ns);
	jw_kbool(w, "trace", !pp->no_trace);
	jw_kstr(w, "clock", "CLOCK_MONOTONIC");
	jw_kstr(w, "work", "calibrated busy loop");
}

static const struct opt_desc preempt_opts[] = {
	OPT_DESC("unit", OPT_DURATION, NSEC_PER_USEC, 100 * NSEC_PER_MSEC, "DUR",
		 "undisturbed length of one unit of work, e.g. 100us, 1ms (default 100us)",
		 offsetof(struct preempt_params, unit_ns), OPT_NO_SET),
	OPT_DESC("no-trace", OPT_FLAG, 0, 0, NULL,
		 "do not attribute preemptions through tracefs (default: attribute)",
		 offsetof(struct preempt_params, no_trace), OPT_NO_SET),
	OPT_END,
};

static void preempt_thread_free(struct mthread *t)
{
	struct preempt_thread *s = t->mstate;

	free(s->by);
	s->by = NULL;
	s->nby = s->cap = 0;
}

const struct meter meter_preempt = {
	.name = "preempt",
	.summary = "preemption of a busy thread: how much, how often, by whom",
	.help = "One thread does units of work (a busy loop calibrated, at its policy on its\n"
		"CPU, to --unit) for --duration; each unit records its stretch: wall time -\n"
		"the calibrated undisturbed time, in ns. Per thread also its voluntary and\n"
		"involuntary context switches (getrusage), its time waiting for the CPU\n"
		"(schedstat run_delay) and, with tracefs, who preempted it: sched_switch on its\n"
		"CPU in a private instance (instances/rtlab-PID, removed after the run), per\n"
		"task that took the CPU the count and the time until the thread ran again,\n"
		"and how many preemptions came in kernel mode (prev_state R+) or on the way\n"
		"back to user mode (R). Unpinned (--threads 1), its migrations: the kernel's\n"
		"se.nr_migrations and the units that ended on another CPU (sched_getcpu).\n"
		"--loops counts units. One thread per run: --cpus CPU or --threads 1.",
	.options = preempt_opts,
	.params_size = sizeof(struct preempt_params),
	.defaults = preempt_defaults,
	.check = preempt_check,
	.period_ns = preempt_period,
	.loop = preempt_loop,
	.params_json = preempt_params_json,
	.thread_state_size = sizeof(struct preempt_thread),
	.thread_setup = preempt_thread_setup,
	.thread_teardown = preempt_thread_teardown,
	.thread_json = preempt_thread_json,
	.thread_free = preempt_thread_free,
};
