#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "conditions.h"
#include "explain.h"
#include "opts.h"
#include "outfile.h"
#include "run.h"
#include "timeutil.h"

#define THREAD_STACK_BYTES (256 * 1024)
#define STACK_PREFAULT_BYTES (64 * 1024)
#define RAW_RING_MIN ((uint64_t)1 << 12) /* samples */
#define RAW_RING_MAX ((uint64_t)1 << 19) /* 4 MiB per thread: 26 s at 50 us */
#define RAW_RING_SECONDS 8               /* of samples a ring holds if the writer stalls */
#define SERIES_MAX_SLOTS (7 * 24 * 3600) /* one week of per-second slots */
#define SERIES_OPEN_SLOTS (24 * 3600)    /* when the run has no set end */
#define STATUS_PERIOD_NS (500 * NSEC_PER_MSEC)
#define PROGRESS_PERIOD_NS (250 * NSEC_PER_MSEC) /* a live view updates a few times a second */

static int fail(int code, const char *prefix, const char *msg)
{
	fprintf(stderr, "rtlab-probe %s: %s\n", prefix, msg);
	return code;
}

static uint32_t series_slots(const struct run *r, int64_t period_ns)
{
	const struct common_params *c = &r->c;
	int64_t secs;

	if (c->duration_set)
		secs = c->duration_ns / NSEC_PER_SEC + 2;
	else if (c->loops_set)
		secs = (c->loops > INT64_MAX / 2 / period_ns ? INT64_MAX / 2
							     : c->loops * period_ns) /
			       NSEC_PER_SEC * 2 +
		       10; /* overruns stretch the run */
	else
		secs = SERIES_OPEN_SLOTS;
	return (uint32_t)(secs > SERIES_MAX_SLOTS ? SERIES_MAX_SLOTS : secs);
}

/* Ring capacity (a power of two) for RAW_RING_SECONDS of samples at PERIOD_NS: small
 * rings keep start-up and locked memory low at long periods. */
static uint64_t raw_ring_samples(int64_t period_ns)
{
	uint64_t want = (uint64_t)(RAW_RING_SECONDS * NSEC_PER_SEC / period_ns), cap = RAW_RING_MIN;

	while (cap < want && cap < RAW_RING_MAX)
		cap <<= 1;
	return cap;
}

static int alloc_threads(struct run *r, char *err, size_t errlen)
{
	r->th = aligned_alloc(_Alignof(struct mthread), r->nthreads * sizeof(*r->th));
	if (r->th)
		memset(r->th, 0, r->nthreads * sizeof(*r->th));
	if (r->c.raw_path) {
		r->rings = calloc(r->nthreads, sizeof(*r->rings));
		r->ring_ptrs = calloc(r->nthreads, sizeof(*r->ring_ptrs));
	}
	if (!r->th || (r->c.raw_path && (!r->rings || !r->ring_ptrs)))
		goto out_nomem;
	for (int i = 0; i < r->nthreads; i++) {
		struct mthread *t = &r->th[i];

		t->index = i;
		t->cpu = r->c.cpus_set ? r->c.cpus.cpu[i] : -1;
		t->period_ns = r->m->period_ns(r->mparams, i);
		t->worst_floor = INT64_MIN;   /* the first WORST_N samples always enter */
		t->explain_floor = INT64_MAX; /* explain_start lowers it */
		t->miss_floor = r->c.deadline_set ? r->c.deadline_ns : INT64_MAX;
		t->hist = calloc(1, sizeof(*t->hist));
		if (!t->hist ||
		    series_init(&t->series, NSEC_PER_SEC, series_slots(r, t->period_ns)))
			goto out_nomem;
		if (r->m->thread_state_size && !(t->mstate = calloc(1, r->m->thread_state_size)))
			goto out_nomem;
		if (!r->c.raw_path)
			continue;
		run_raw_path(r, i, t->raw_path, sizeof(t->raw_path));
		int rc = ring_open(&r->rings[i], t->raw_path, i, t->cpu, t->period_ns,
				   raw_ring_samples(t->period_ns), r->stop_signal);

		if (rc == -EINTR) { /* stopped waiting for its reader: the run ends at once */
			if (!r->stop_signal)
				r->stop_signal = r->rings[i].stop_signal;
		} else if (rc) {
			snprintf(err, errlen, "--raw: cannot write \"%.300s\" (%s)", t->raw_path,
				 strerror(-rc));
			return rc;
		}
		t->ring = &r->rings[i];
		r->ring_ptrs[i] = t->ring;
	}
	return 0;
out_nomem:
	snprintf(err, errlen, "out of memory for %d threads", r->nthreads);
	return -ENOMEM;
}

/* Affinity, policy, stack prefault; then wait for the start signal and measure. */
static void *mthread_main(void *arg)
{
	struct mthread *t = arg;
	struct run *r = t->run;
	char why[240];
	int rc;

	t->tid = gettid();
	if (r->c.thread_cgroup && (rc = cgroup_join(r->c.thread_cgroup, t->tid))) {
		t->setup_rc = rc;
		snprintf(t->setup_err, sizeof(t->setup_err),
			 "--thread-cgroup: thread %d cannot join "
			 "%.200s (%s)",
			 t->index, r->c.thread_cgroup, strerror(-rc));
	}
	if (t->cpu >= 0 && !t->setup_rc) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(t->cpu, &set);
		rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
		if (rc) {
			t->setup_rc = -rc;
			snprintf(t->setup_err, sizeof(t->setup_err),
				 "cannot pin thread %d to CPU %d (%s)", t->index, t->cpu,
				 strerror(rc));
		}
	}
	rc = t->setup_rc ? 0 : policy_apply(&r->c.policy, 0, why, sizeof(why));
	if (rc) {
		if (r->c.allow_fallback) {
			t->fallback = true;
			snprintf(t->setup_err, sizeof(t->setup_err), "%s", why);
		} else {
			t->setup_rc = rc;
			snprintf(t->setup_err, sizeof(t->setup_err), "--policy: %s", why);
		}
	}
	if (!t->setup_rc && r->m->thread_setup &&
	    (rc = r->m->thread_setup(t, r->mparams, why, sizeof(why)))) {
		t->setup_rc = rc;
		snprintf(t->setup_err, sizeof(t->setup_err), "%s", why);
	}
	(void)policy_read(0, &t->policy);
	if (!r->c.no_mlock) {
		volatile char stack[STACK_PREFAULT_BYTES];

		memset((char *)stack, 0, sizeof(stack)); /* no page faults in the loop */
	}
	(void)pthread_barrier_wait(&r->ready);
	(void)pthread_barrier_wait(&r->go);
	/* Stopped before measuring (while settling, or waiting for an output's reader): nothing. */
	if (!atomic_load(&r->abort) && !atomic_load(&r->stop)) {
		struct run_ctl ctl = { &r->stop, (uint64_t)r->c.loops, r->c.duration_ns };

		if (t->policy.policy == SCHED_DEADLINE)
			(void)sched_yield(); /* start at the beginning of a fresh period */
		r->m->loop(t, r->mparams, &ctl);
	}
	conditions_thread_end(r, t);
	if (r->m->thread_teardown)
		r->m->thread_teardown(t, r->mparams);
	atomic_fetch_sub(&r->running, 1);
	return NULL;
}

static int start_threads(struct run *r, char *err, size_t errlen)
{
	pthread_attr_t attr;
	int rc, created = 0;

	(void)pthread_barrier_init(&r->ready, NULL, r->nthreads + 1);
	(void)pthread_barrier_init(&r->go, NULL, r->nthreads + 1);
	(void)pthread_attr_init(&attr);
	(void)pthread_attr_setstacksize(&attr, THREAD_STACK_BYTES);
	atomic_store(&r->running, r->nthreads);
	for (int i = 0; i < r->nthreads; i++) {
		r->th[i].run = r;
		rc = pthread_create(&r->th[i].pthread, &attr, mthread_main, &r->th[i]);
		if (rc) {
			/* Threads already waiting at the barrier cannot be released: give up. */
			snprintf(err, errlen, "cannot create thread %d (%s)", i, strerror(rc));
			_exit(EXIT_INTERNAL);
		}
		r->th[i].started = true;
		created++;
	}
	(void)pthread_attr_destroy(&attr);
	(void)pthread_barrier_wait(&r->ready);
	rc = 0;
	for (int i = 0; i < created; i++) {
		if (r->th[i].setup_rc) {
			snprintf(err, errlen, "%s", r->th[i].setup_err);
			rc = r->th[i].setup_rc;
			atomic_store(&r->abort, 1);
			break;
		}
	}
	if (r->c.main_cpus_set) {
		cpu_set_t set;

		cpulist_to_set(&r->c.main_cpus, &set);
		(void)sched_setaffinity(0, sizeof(set), &set); /* the writer inherits this */
	}
	if (!rc && r->ring_ptrs && (rc = raw_writer_start(&r->writer, r->ring_ptrs, r->nthreads))) {
		snprintf(err, errlen, "--raw: cannot start the writer thread (%s)", strerror(-rc));
		atomic_store(&r->abort, 1);
	}
	conditions_start(r); /* the threads wait at the barrier: not measuring yet */
	utc_now_iso(r->start_utc, sizeof(r->start_utc));
	(void)loadstat_read(NULL, &r->act0);
	r->t0_ns = mono_now_ns();
	(void)pthread_barrier_wait(&r->go);
	return rc;
}

/* Sleep until UNTIL_NS (CLOCK_MONOTONIC) or a stop signal; returns the signal or 0. */
static int wait_signal(int64_t until_ns)
{
	return stopsig_take(until_ns - mono_now_ns());
}

static void main_wait(struct run *r)
{
	bool live = !r->c.quiet && isatty(STDERR_FILENO);
	int64_t next_progress = mono_now_ns() + PROGRESS_PERIOD_NS;

	while (atomic_load(&r->running) > 0) {
		int sig = wait_signal(mono_now_ns() +
				      (live ? STATUS_PERIOD_NS : 100 * NSEC_PER_MSEC));

		if (sig && !r->stop_signal) {
			r->stop_signal = sig;
			atomic_store(&r->stop, 1);
		}
		if (live)
			status_draw(r);
		if (r->progress && mono_now_ns() >= next_progress) {
			progress_write(r, "measure");
			next_progress += PROGRESS_PERIOD_NS;
		}
	}
	for (int i = 0; i < r->nthreads; i++)
		if (r->th[i].started)
			(void)pthread_join(r->th[i].pthread, NULL);
	r->t1_ns = mono_now_ns();
	(void)loadstat_read(NULL, &r->act1);
	utc_now_iso(r->end_utc, sizeof(r->end_utc));
	conditions_end(r); /* memory still locked, the dma fd still held */
}

/* --stop-on-eof: a closed SSH channel sends no signal (no pty, no SIGHUP), only end of file. */
static void *eof_watch(void *arg)
{
	char buf[256];
	ssize_t n;

	(void)arg;
	while ((n = read(STDIN_FILENO, buf, sizeof(buf))) != 0)
		if (n < 0 && errno != EINTR)
			break;
	(void)kill(getpid(), SIGHUP); /* blocked in every thread: main_wait takes it */
	return NULL;
}

static void watch_stdin_eof(const struct run *r)
{
	pthread_t t;

	if (r->c.stop_on_eof && !pthread_create(&t, NULL, eof_watch, NULL))
		(void)pthread_detach(t);
}

static int hold_dma_latency(struct run *r, char *err, size_t errlen)
{
	int32_t us = (int32_t)(r->c.dma_latency_ns / NSEC_PER_USEC); /* a whole number: checked */

	r->dma_fd = -1;
	if (!r->c.dma_latency_set)
		return 0;
	/* read-write: conditions_end reads the held target back */
	r->dma_fd = open("/dev/cpu_dma_latency", O_RDWR | O_CLOEXEC);
	if (r->dma_fd < 0 || write(r->dma_fd, &us, sizeof(us)) != sizeof(us)) {
		snprintf(err, errlen, "--dma-latency: cannot hold /dev/cpu_dma_latency (%s)",
			 strerror(errno));
		return -errno;
	}
	return 0;
}

static int lock_memory(struct run *r, char *err, size_t errlen)
{
	meters_release_image(); /* never locked, whichever meter runs; also with --no-mlock */
	if (r->c.no_mlock)
		return 0;
	if (mlockall(MCL_CURRENT | MCL_FUTURE) == 0) {
		r->mlocked = true;
		return 0;
	}
	snprintf(r->mlock_err, sizeof(r->mlock_err),
		 "mlockall failed (%s): raise RLIMIT_MEMLOCK or use --no-mlock", strerror(errno));
	if (r->c.allow_fallback)
		return 0;
	snprintf(err, errlen, "%s", r->mlock_err);
	return -EPERM;
}

static void release_all(struct run *r)
{
	explain_stop(r);
	load_group_stop(&r->loads);
	(void)raw_writer_stop(&r->writer); /* after the loads: it may wait for a FIFO's reader */
	for (int i = 0; r->ring_ptrs && i < r->nthreads; i++)
		if (r->ring_ptrs[i])
			(void)ring_close(r->ring_ptrs[i]);
	if (r->dma_fd >= 0)
		(void)close(r->dma_fd);
	r->dma_fd = -1;
	if (r->mlocked)
		(void)munlockall();
}

static bool on_stdout(const char *path)
{
	return path && !strcmp(path, "-");
}

/* Everything a run allocated, once its threads have ended. */
static void run_free(struct run *r)
{
	explain_free(r);
	conditions_free(r);
	load_group_free(&r->loads);
	for (int i = 0; r->th && i < r->nthreads; i++) {
		free(r->th[i].hist);
		series_free(&r->th[i].series);
		if (r->th[i].mstate && r->m->thread_free)
			r->m->thread_free(&r->th[i]);
		free(r->th[i].mstate);
	}
	for (int i = 0; r->rings && i < r->nthreads; i++)
		if (r->rings[i].buf || r->rings[i].out.fd > 0) /* all zero: never opened (fd 0!) */
			(void)ring_close(&r->rings[i]);        /* idempotent */
	free(r->rings);
	free(r->ring_ptrs);
	free(r->th);
	free(r->mparams);
	free(r);
}

static int run_all(struct run *r, const struct meter *m, int argc, char **argv, int full_argc,
		   char **full_argv)
{
	char err[512];
	int code, rc;
	bool lost;

	r->m = m;
	r->argc = full_argc;
	r->argv = full_argv;
	r->dma_fd = -1;
	code = run_parse(r, argc, argv);
	if (code >= 0)
		return code;
	if ((rc = alloc_threads(r, err, sizeof(err))))
		return fail(rc == -ENOMEM ? EXIT_INTERNAL : EXIT_USAGE, m->name, err);
	watch_stdin_eof(r);
	if ((rc = hold_dma_latency(r, err, sizeof(err))))
		return fail(EXIT_UNSUPPORTED, m->name, err);
	/* Loads and threads were checked before: what is refused now is refused here (exit 3). */
	r->c.loads.cgroup = r->c.load_cgroup;
	/* Stopped while waiting for an output's reader: nothing to start, the run ends at once. */
	if (!r->stop_signal && (rc = load_group_start(&r->loads, &r->c.loads, err, sizeof(err)))) {
		release_all(r);
		return fail(rc == -ENOMEM ? EXIT_INTERNAL : EXIT_UNSUPPORTED, m->name, err);
	}
	if (r->progress)
		progress_write(r, r->c.settle_ns ? "settle" : "start");
	if (r->c.settle_ns && !r->stop_signal)
		r->stop_signal = wait_signal(mono_now_ns() + r->c.settle_ns);
	if ((rc = lock_memory(r, err, sizeof(err)))) {
		release_all(r);
		return fail(EXIT_UNSUPPORTED, m->name, err);
	}
	if (r->stop_signal)
		atomic_store(&r->stop, 1);
	if ((rc = explain_start(r, err, sizeof(err)))) {
		release_all(r);
		return fail(rc == -ENOMEM ? EXIT_INTERNAL : EXIT_UNSUPPORTED, m->name, err);
	}
	if ((rc = start_threads(r, err, sizeof(err)))) {
		main_wait(r);
		release_all(r);
		return fail(EXIT_UNSUPPORTED, m->name, err);
	}
	main_wait(r);
	release_all(r);
	progress_end(r);
	lost = report_lost_outputs(r, stderr);
	if (r->c.json_path && (rc = report_save(r, r->c.json_path, err, sizeof(err))))
		return fail(EXIT_OUTPUT, m->name, err);
	if (!r->c.quiet && !on_stdout(r->c.json_path) && !on_stdout(r->c.progress_path))
		report_summary(r, stdout);
	if (lost)
		return EXIT_OUTPUT; /* before 1: the record of the run is not whole */
	if (r->c.deadline_set && report_deadline_exceeded(r))
		return EXIT_DEADLINE;
	return EXIT_OK;
}

int run_meter(const struct meter *m, int argc, char **argv, int full_argc, char **full_argv)
{
	struct run *r = calloc(1, sizeof(*r));
	int code;

	if (!r || !(r->mparams = calloc(1, m->params_size))) {
		free(r);
		return fail(EXIT_INTERNAL, m->name, "out of memory");
	}
	code = run_all(r, m, argc, argv, full_argc, full_argv);
	run_free(r);
	return code;
}
