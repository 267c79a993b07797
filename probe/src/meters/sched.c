/*
 * sched — the latency of the threads of an unmodified program, observed from outside:
 * a process (--pid), the processes of a name (--process), threads by name (--comm), by
 * TID (--tid) or a command started and followed (-- CMD ARGS). The probe's measuring
 * thread 0 reads a private tracefs instance (sched_trace.c) and records one "thread" per
 * observed thread; the other measuring threads only hold the slots of the document and
 * wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/explain.h"
#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "meters/sched.h"
#include "probe.h"

#define READ_PERIOD_NS (10 * NSEC_PER_MSEC)
#define TERM_GRACE_NS (1000 * NSEC_PER_MSEC) /* from SIGTERM to SIGKILL */
#define NOMINAL_PERIOD_NS NSEC_PER_MSEC      /* raw ring sizing: activations are not ours */

static const char *const sched_sample_words[] = { "any", "timer", "wakeup", NULL };

static void sched_defaults(void *p)
{
	struct sched_params *s = p;

	s->st = &s->trace;
	s->st->fd = -1;
	for (int c = 0; c < CPULIST_MAX; c++)
		s->st->cb[c].slot = -1;
}

static int64_t sched_period(const void *p, int index)
{
	(void)p;
	(void)index;
	return NOMINAL_PERIOD_NS;
}

static int sched_nthreads(void *p, const struct common_params *c, struct opt_fault *at, char *err,
			  size_t errlen)
{
	struct sched_params *s = p;
	int selectors = s->pid_set + (s->tids != NULL) + (c->command != NULL), rc;

	selectors += s->process != NULL;
	s->command = c->command;
	s->st->samples = s->samples;
	if (c->cpus_set)
		return opts_refusef(at, "cpus", NULL, err, errlen,
				    "--cpus: sched observes threads it does not place (the reader "
				    "runs where --main-cpus says)");
	if (c->loops_set)
		return opts_refusef(at, "loops", NULL, err, errlen,
				    "--loops: sched counts no cycles of its own; use --duration");
	if (selectors > 1)
		return opts_refusef(at, NULL, NULL, err, errlen,
				    "--pid, --process, --tid and -- CMD exclude each other");
	if (!selectors && !s->comm)
		return opts_refusef(at, NULL, NULL, err, errlen,
				    "name the threads to observe: --pid PID, --process NAME, "
				    "--comm NAME, --tid TID or -- CMD ARGS");
	if (c->threads_set && c->threads > SCHED_THREADS_MAX)
		return opts_refusef(at, "threads", NULL, err, errlen,
				    "--threads: at most %d threads are observed",
				    SCHED_THREADS_MAX);
	if (s->tids) {
		if (c->threads_set || s->comm)
			return opts_refusef(at, "tid", s->tids, err, errlen,
					    "--tid names its threads: no --threads or --comm");
		if ((rc = sched_by_tids(s, at, err, errlen)))
			return rc;
		return s->st->nthreads;
	}
	s->slots = c->threads_set ? c->threads : SCHED_THREADS_MAX;
	if (c->command) {
		if (!sched_runnable(c->command[0]))
			return opts_refusef(at, NULL, c->command[0], err, errlen,
					    "cannot run \"%s\": no such program", c->command[0]);
		s->slots = c->threads_set ? c->threads : 1;
		return (int)s->slots;
	}
	if (s->pid_set) {
		if (!sched_alive((pid_t)s->pid))
			return opts_refusef(at, "pid", NULL, err, errlen, "--pid: no process %lld",
					    (long long)s->pid);
		s->proc = (pid_t)s->pid;
		rc = sched_discover(s, s->proc, s->slots);
	} else if (s->process) {
		if ((rc = sched_by_process(s, s->slots)) == -ESRCH)
			return opts_refusef(at, "process", s->process, err, errlen,
					    "--process: no process named %.15s", s->process);
	} else {
		rc = sched_by_comm(s, s->slots);
	}
	if (rc <= 0 && !c->threads_set)
		return opts_refusef(at, s->comm ? "comm" : "pid", s->comm, err, errlen,
				    "no thread to observe%s%s", s->comm ? " named " : "",
				    s->comm ? s->comm : "");
	s->slots = c->threads_set ? c->threads : s->st->nthreads;
	return (int)s->slots;
}

static int sched_check(void *p, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	(void)p;
	(void)nthreads;
	(void)at;
	(void)err;
	(void)errlen;
	return 0;
}

/* Fork and exec the command: its own policy (the fair class), every CPU, stdout on our
 * stderr (the probe's stdout may carry the document); killed if the probe dies. */
static void start_command(struct sched_params *s)
{
	int pfd[2], e = 0;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC)) {
		s->start_errno = errno;
		return;
	}
	if ((pid = fork()) < 0) {
		s->start_errno = errno;
		(void)close(pfd[0]);
		(void)close(pfd[1]);
		return;
	}
	if (!pid) {
		struct sched_param sp = { 0 };
		sigset_t all;
		cpu_set_t cpus;

		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		(void)sigemptyset(&all);
		(void)sigprocmask(SIG_SETMASK, &all, NULL);
		(void)sched_setscheduler(0, SCHED_OTHER, &sp);
		CPU_ZERO(&cpus);
		for (int c = 0; c < CPU_SETSIZE; c++)
			CPU_SET(c, &cpus);
		(void)sched_setaffinity(0, sizeof(cpus), &cpus);
		(void)dup2(STDERR_FILENO, STDOUT_FILENO);
		execvp(s->command[0], s->command);
		e = errno;
		(void)write(pfd[1], &e, sizeof(e));
		_exit(127);
	}
	(void)close(pfd[1]);
	if (read(pfd[0], &e, sizeof(e)) == sizeof(e))
		s->start_errno = e;
	(void)close(pfd[0]);
	s->child = pid;
	s->proc = pid;
}

static bool child_reaped(struct sched_params *s, int flags)
{
	if (s->child && !s->child_reaped && waitpid(s->child, &s->child_status, flags) == s->child)
		s->child_reaped = true;
	return s->child_reaped;
}

/* Stop the command by its PID: SIGTERM, then SIGKILL after a grace period; reaped. */
static void stop_command(struct sched_params *s)
{
	int64_t until = mono_now_ns() + TERM_GRACE_NS;

	if (!s->child || child_reaped(s, WNOHANG))
		return;
	s->child_stopped = true;
	(void)kill(s->child, SIGTERM);
	while (!child_reaped(s, WNOHANG) && mono_now_ns() < until)
		sleep_for_ns(10 * NSEC_PER_MSEC);
	if (!child_reaped(s, WNOHANG)) {
		(void)kill(s->child, SIGKILL);
		(void)child_reaped(s, 0);
	}
}

static int sched_thread_setup(struct mthread *t, const void *p, char *err, size_t errlen)
{
	const struct sched_params *s = p;

	int rc;

	if (t->index)
		return 0;
	s->st->x = explain_of(t);
	rc = sched_trace_open(s->st, err, errlen);
	if (rc)
		return rc;
	sched_trace_filter(s->st);
	return 0;
}

/* Thread 0 stops the command only once every measuring thread read back its observed
 * thread's settings (the runner's conditions, before this teardown). */
static void sched_thread_teardown(struct mthread *t, const void *p)
{
	struct sched_params *s = (struct sched_params *)p;
	int64_t until = mono_now_ns() + TERM_GRACE_NS;

	if (t->index) {
		atomic_fetch_add(&s->torn, 1);
		return;
	}
	atomic_store(&s->done, 1); /* also when the loop never ran */
	while (atomic_load(&s->torn) < (int)s->slots - 1 && mono_now_ns() < until)
		sleep_for_ns(NSEC_PER_MSEC);
	stop_command(s);
	sched_trace_close(s->st);
}

/* The policy of each observed thread, while it lives (read back at the end too). */
static void read_policies(struct sched_trace *st)
{
	for (int i = 0; i < st->nthreads; i++)
		if (!policy_read(st->th[i].tid, &st->th[i].policy))
			st->th[i].policy_known = true;
}

/* Each observed thread's name now: a command's exec (chrt, taskset) renamed it after it was
 * found, and a drain that never ran dry may have kept sched_discover() from seeing it. */
static void rename_threads(struct sched_trace *st)
{
	char comm[32];

	for (int i = 0; i < st->nthreads; i++)
		if (!sched_read_comm(0, st->th[i].tid, comm, sizeof(comm)))
			snprintf(st->th[i].comm, sizeof(st->th[i].comm), "%.15s", comm);
}

/* What the document says of each slot: the observed thread, its policy read back. */
static void publish(struct mthread *th, int n, const struct sched_trace *st)
{
	for (int i = 0; i < n; i++) {
		pid_t tid = i < st->nthreads ? st->th[i].tid : 0;

		th[i].tid = tid;
		th[i].measured_tid = tid;
		th[i].cpu = -1;
		memset(&th[i].policy, 0, sizeof(th[i].policy));
		if (tid && st->th[i].policy_known)
			th[i].policy = st->th[i].policy;
		th[i].period_ns = i < st->nthreads ? sched_thread_period(&st->th[i]) : 0;
		th[i].overruns = i < st->nthreads ? st->th[i].overruns : 0;
	}
}

static void sched_loop(struct mthread *t, const void *p, const struct run_ctl *ctl)
{
	struct sched_params *s = (struct sched_params *)p;
	struct mthread *th = t - t->index; /* the run's array of measuring threads */
	int n = (int)s->slots;
	int64_t now;

	if (t->index) { /* a slot thread 0 records into */
		while (!atomic_load(&s->done) && !run_should_stop(ctl, 0, 0))
			sleep_for_ns(20 * NSEC_PER_MSEC);
		return;
	}
	for (int i = 0; i < n; i++)
		th[i].start_ns = s->st->start_ns;
	if (s->command)
		start_command(s);
	for (;;) {
		if (s->proc && !s->start_errno)
			(void)sched_discover(s, s->proc, s->slots);
		sched_trace_filter(s->st);
		read_policies(s->st);
		sched_trace_drain(s->st, th, mono_now_ns() + TRACEFS_DRAIN_SLICE_NS);
		now = mono_now_ns();
		if (run_should_stop(ctl, 0, now - s->st->start_ns) || s->start_errno)
			break;
		if (s->child ? child_reaped(s, WNOHANG) : (s->proc && !sched_alive(s->proc)))
			break; /* the program ended */
		sleep_for_ns(READ_PERIOD_NS);
	}
	sched_trace_drain(s->st, th, mono_now_ns() + TRACEFS_DRAIN_LAST_NS);
	sched_trace_finish(s->st);
	read_policies(s->st);
	rename_threads(s->st);
	publish(th, n, s->st);
	atomic_store(&s->done, 1);
}

static void sched_params_json(struct jw *w, const void *p)
{
	const struct sched_params *s = p;

	jw_key(w, "pid");
	s->pid_set ? jw_int(w, s->pid) : jw_null(w);
	jw_key(w, "comm");
	s->comm ? jw_str(w, s->comm) : jw_null(w);
	jw_key(w, "process");
	s->process ? jw_str(w, s->process) : jw_null(w);
	jw_key(w, "tids");
	s->tids ? jw_str(w, s->tids) : jw_null(w);
	jw_key(w, "command");
	if (s->command) {
		jw_arr_begin(w);
		for (char **a = s->command; *a; a++)
			jw_str(w, *a);
		jw_arr_end(w);
	} else {
		jw_null(w);
	}
	jw_kstr(w, "samples", sched_sample_words[s->samples]);
	jw_kstr(w, "timer_latency_from", "softexpires");
	jw_kstr(w, "trace_clock", "mono");
	jw_kint(w, "timestamp_resolution_ns", NSEC_PER_USEC);
}

static void sched_thread_json_cb(struct jw *w, const struct mthread *t, const void *p)
{
	const struct sched_params *s = p;

	if (t->index < s->st->nthreads) {
		sched_thread_json(w, &s->st->th[t->index], s->st);
		return;
	}
	jw_key(w, "sched");
	jw_obj_begin(w);
	jw_kint(w, "tid", 0);
	jw_kstr(w, "note", "no thread of the program took this slot during the measurement");
	jw_obj_end(w);
}

static void sched_doc_json(struct jw *w, const void *p, const struct mthread *threads, int n)
{
	const struct sched_params *s = p;

	(void)threads;
	(void)n;
	jw_key(w, "sched");
	jw_obj_begin(w);
	jw_kstr(w, "instance", s->st->instance);
	jw_kstr(w, "events", s->st->events);
	jw_kint(w, "trace_start_ns", s->st->start_ns);
	jw_kuint(w, "trace_lines", s->st->lines);
	jw_kuint(w, "lost_events", s->st->lost_events);
	jw_key(w, "process");
	s->proc ? jw_int(w, s->proc) : jw_null(w);
	jw_kuint(w, "threads_not_observed", s->beyond);
	jw_key(w, "command");
	if (!s->command) {
		jw_null(w);
	} else {
		jw_obj_begin(w);
		jw_key(w, "pid");
		s->child ? jw_int(w, s->child) : jw_null(w);
		jw_key(w, "start_error");
		s->start_errno ? jw_str(w, strerror(s->start_errno)) : jw_null(w);
		jw_kbool(w, "stopped_by_probe", s->child_stopped);
		jw_key(w, "exit_status");
		s->child_reaped &&WIFEXITED(s->child_status)
			? jw_int(w, WEXITSTATUS(s->child_status))
			: jw_null(w);
		jw_key(w, "signal");
		s->child_reaped &&WIFSIGNALED(s->child_status)
			? jw_int(w, WTERMSIG(s->child_status))
			: jw_null(w);
		jw_obj_end(w);
	}
	jw_obj_end(w);
}

static const struct policy_spec sched_policy = { .policy = SCHED_OTHER };

static const struct opt_desc sched_opts[] = {
	OPT_DESC("pid", OPT_INT, 1, 0x3fffffff, "PID",
		 "observe the threads of process PID (those found at the start, and later ones "
		 "while --threads has room)",
		 offsetof(struct sched_params, pid), offsetof(struct sched_params, pid_set)),
	OPT_DESC("process", OPT_STRING, 0, 0, "NAME",
		 "observe every thread of the processes named NAME (/proc/PID/comm, 15 bytes, as "
		 "pidof); one such process is followed as --pid follows it",
		 offsetof(struct sched_params, process), OPT_NO_SET),
	OPT_DESC("comm", OPT_STRING, 0, 0, "NAME",
		 "only threads named NAME (/proc/TID/comm); alone: every such thread of the system",
		 offsetof(struct sched_params, comm), OPT_NO_SET),
	OPT_DESC("tid", OPT_STRING, 0, 0, "TIDS",
		 "observe these threads, a comma-separated list of thread IDs",
		 offsetof(struct sched_params, tids), OPT_NO_SET),
	OPT_CHOICE_DESC("samples", sched_sample_words, SCHED_S_ANY, "KIND",
			"what the samples are: any activation (default), timer (expiry to "
			"running) or wakeup (sched_waking to running)",
			offsetof(struct sched_params, samples), OPT_NO_SET),
	OPT_END,
};

const struct meter meter_sched = {
	.name = "sched",
	.summary = "latency of the threads of an unmodified program, from the trace",
	.help = "Observes threads it did not start (--pid, --process, --comm, --tid) or those\n"
		"of a command it starts (-- CMD ARGS; stopped by its PID at the end of\n"
		"--duration) through a private tracefs instance. Timer latency: from the soft\n"
		"expiry of an hrtimer the thread armed (clock_nanosleep, timerfd, POSIX timers,\n"
		"poll timeouts; the time the program asked for, so timer slack counts as latency)\n"
		"to the thread running (sched_switch). Wake-up latency for any other wake-up:\n"
		"sched_waking to running. Per thread also run time per activation, the period,\n"
		"overruns, preemptions and migrations. A thread that never sleeps (busy-waits)\n"
		"gets no samples and a note. Timestamps have a resolution of 1 us. --threads N:\n"
		"the number of threads observed with --pid, --process, --comm or a command (a\n"
		"command's first thread by default). --explain THRESH: the samples above THRESH\n"
		"are explained from the same trace (IRQ, softirq, hrtimer and scheduler events\n"
		"of every CPU): what ran on the thread's CPU between the time it was due and its\n"
		"switch-in.",
	.options = sched_opts,
	.params_size = sizeof(struct sched_params),
	.defaults = sched_defaults,
	.policy = &sched_policy,
	.check = sched_check,
	.nthreads = sched_nthreads,
	.takes_command = true,
	.period_ns = sched_period,
	.loop = sched_loop,
	.params_json = sched_params_json,
	.thread_setup = sched_thread_setup,
	.thread_teardown = sched_thread_teardown,
	.thread_json = sched_thread_json_cb,
	.doc_json = sched_doc_json,
	.explainable = true,
	.explain_fed = true,
};
