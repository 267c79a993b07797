/*
 * periodic's mechanisms: how the thread is woken for each activation. Each is one
 * entry of periodic_mechanisms (setup, start, wait, teardown); periodic.c drives them.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/fail.h"
#include "lib/futex.h"
#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/policy.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

#include "meters/periodic.h"

/* Block SIGNO in the calling thread, for sigwaitinfo. */
static void take_signal(struct periodic_state *s, int signo)
{
	(void)sigemptyset(&s->sigs);
	(void)sigaddset(&s->sigs, signo);
	(void)pthread_sigmask(SIG_BLOCK, &s->sigs, NULL);
}

static uint64_t sigwait_wait(struct periodic_state *s, int64_t target)
{
	(void)target;
	while (sigwaitinfo(&s->sigs, NULL) < 0)
		;
	return 1;
}

/* nanosleep-abs, nanosleep-rel, busy-poll */

static uint64_t abs_sleep_wait(struct periodic_state *s, int64_t target)
{
	(void)s;
	sleep_until_ns(target);
	return 1;
}

static uint64_t rel_sleep_wait(struct periodic_state *s, int64_t target)
{
	(void)target;
	sleep_for_ns(s->p->interval_ns);
	return 1;
}

static uint64_t busy_poll_wait(struct periodic_state *s, int64_t target)
{
	(void)s;
	while (mono_now_ns() < target)
		;
	return 1;
}

/* setitimer */

static int setitimer_check(struct periodic_params *p, int nthreads, struct opt_fault *at, char *err,
			   size_t errlen)
{
	sigset_t alrm;

	if (nthreads > 1) {
		snprintf(err, errlen,
			 "--mechanism setitimer: ITIMER_REAL is per process, so one "
			 "measuring thread only (not %d)",
			 nthreads);
		return opts_refuse(at, "mechanism", periodic_mechanism_names[p->mechanism]);
	}
	if (p->interval_ns % NSEC_PER_USEC)
		return opts_refusef(at, "interval", NULL, err, errlen,
				    "--interval: setitimer takes whole microseconds");
	/* ITIMER_REAL signals the process, delivered to the main thread unless it blocks
	 * SIGALRM: block it here, before any thread exists, so that every thread inherits
	 * the mask and only the measuring thread's sigwaitinfo takes it. */
	(void)sigemptyset(&alrm);
	(void)sigaddset(&alrm, SIGALRM);
	(void)pthread_sigmask(SIG_BLOCK, &alrm, NULL);
	return 0;
}

static int setitimer_setup(struct periodic_state *s, char *err, size_t errlen)
{
	if (s->t->index > 0) { /* defence: check() refuses this first when told the count */
		snprintf(err, errlen,
			 "--mechanism setitimer: ITIMER_REAL is per process, so one "
			 "measuring thread only");
		return -EINVAL;
	}
	take_signal(s, SIGALRM);
	return 0;
}

static int setitimer_start(struct periodic_state *s, int64_t *first_ns)
{
	int64_t period = s->p->interval_ns;
	struct timeval tv = { .tv_sec = period / NSEC_PER_SEC,
			      .tv_usec = period % NSEC_PER_SEC / NSEC_PER_USEC };
	struct itimerval it = { .it_interval = tv, .it_value = tv };

	/* A relative timer: the kernel reads its clock after ours, so the grid read here
	 * is at most the call's entry early (counted as latency, never hidden). */
	*first_ns = mono_now_ns() + period;
	if (setitimer(ITIMER_REAL, &it, NULL))
		return -errno;
	s->itimer_armed = true;
	return 0;
}

static void setitimer_teardown(struct periodic_state *s)
{
	struct itimerval off = { 0 };

	if (s->itimer_armed)
		(void)setitimer(ITIMER_REAL, &off, NULL);
	s->itimer_armed = false;
	/* SIGALRM stays blocked: a late one pending must not kill the process. */
}

/* posix-timer-signal, posix-timer-thread */

static int timer_start(struct periodic_state *s, int64_t *first_ns)
{
	struct itimerspec its = { ns_to_ts(s->p->interval_ns), ns_to_ts(*first_ns) };

	return timer_settime(s->timer, TIMER_ABSTIME, &its, NULL) ? -errno : 0;
}

static int timer_signal_setup(struct periodic_state *s, char *err, size_t errlen)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGRTMIN };

	sev._sigev_un._tid = s->t->tid;
	take_signal(s, SIGRTMIN);
	if (timer_create(CLOCK_MONOTONIC, &sev, &s->timer))
		return fail_errno(err, errlen,
				  "--mechanism posix-timer-signal: timer_create failed");
	s->timer_made = true;
	return 0;
}

static uint64_t timer_signal_wait(struct periodic_state *s, int64_t target)
{
	siginfo_t si;

	(void)target;
	while (sigwaitinfo(&s->sigs, &si) < 0)
		;
	/* si_overrun is timer_getoverrun() for this signal, without a second system call. */
	return 1 + (uint64_t)(si.si_overrun > 0 ? si.si_overrun : 0);
}

static void timer_teardown(struct periodic_state *s)
{
	if (s->timer_made)
		(void)timer_delete(s->timer);
	s->timer_made = false;
	/* A signal stays blocked: one still queued must not kill the process. */
}

/* Runs in a thread the C library starts for each expiry. One started before
 * timer_delete may run after teardown: it touches only S, which outlives the run. */
static void timer_thread_notify(union sigval v)
{
	struct periodic_state *s = v.sival_ptr;

	atomic_fetch_add(&s->fired, 1);
	(void)futex_wake(&s->fired, 1, false);
}

static int timer_thread_setup(struct periodic_state *s, char *err, size_t errlen)
{
	struct sigevent sev = { .sigev_notify = SIGEV_THREAD, .sigev_value.sival_ptr = s };
	struct policy_spec pol;
	pthread_attr_t attr;
	int rc = 0;

	/* The notifier inherits the library helper's policy; it runs where we run. */
	(void)pthread_attr_init(&attr);
	(void)pthread_attr_setstacksize(&attr, NOTIFIER_STACK_BYTES);
	if (s->t->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(s->t->cpu, &set);
		(void)pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
	}
	sev.sigev_notify_function = timer_thread_notify;
	sev.sigev_notify_attributes = &attr;
	if (timer_create(CLOCK_MONOTONIC, &sev, &s->timer)) {
		rc = -errno;
		snprintf(
			err, errlen, "--mechanism posix-timer-thread: timer_create failed (%s)%s",
			strerror(-rc),
			!policy_read(0, &pol) && pol.policy == SCHED_DEADLINE
				? ": a SCHED_DEADLINE thread cannot start the library's helper thread"
				: "");
	} else {
		s->timer_made = true;
	}
	(void)pthread_attr_destroy(&attr); /* timer_create keeps its own copy */
	return rc;
}

static uint64_t timer_thread_wait(struct periodic_state *s, int64_t target)
{
	uint32_t fired;

	(void)target;
	while ((fired = atomic_load(&s->fired)) == s->seen)
		(void)futex_wait(&s->fired, fired, 0, false);
	/* Every notification so far: the library drops the kernel's overrun count, so
	 * missed expiries are known from the clock only (GRID_SKIP). */
	s->seen = fired;
	return 1;
}

/* timerfd */

static int timerfd_setup(struct periodic_state *s, char *err, size_t errlen)
{
	s->fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (s->fd < 0)
		return fail_errno(err, errlen, "--mechanism timerfd: timerfd_create failed");
	s->fd_open = true;
	return 0;
}

static int timerfd_start(struct periodic_state *s, int64_t *first_ns)
{
	struct itimerspec its = { ns_to_ts(s->p->interval_ns), ns_to_ts(*first_ns) };

	return timerfd_settime(s->fd, TFD_TIMER_ABSTIME, &its, NULL) ? -errno : 0;
}

static uint64_t timerfd_wait(struct periodic_state *s, int64_t target)
{
	uint64_t expirations = 0;
	ssize_t n;

	(void)target;
	do
		n = read(s->fd, &expirations, sizeof(expirations));
	while (n < 0 && errno == EINTR);
	return n == sizeof(expirations) && expirations ? expirations : 1;
}

static void timerfd_teardown(struct periodic_state *s)
{
	if (s->fd_open)
		(void)close(s->fd);
	s->fd_open = false;
}

/* condvar */

static int condvar_setup(struct periodic_state *s, char *err, size_t errlen)
{
	pthread_condattr_t ca;
	int rc;

	if ((rc = pthread_mutex_init(&s->mutex, NULL)))
		goto out_err;
	s->mutex_made = true;
	if ((rc = pthread_condattr_init(&ca)))
		goto out_err;
	if (!(rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC)))
		rc = pthread_cond_init(&s->cond, &ca);
	(void)pthread_condattr_destroy(&ca);
	if (rc)
		goto out_err;
	s->cond_made = true;
	if ((rc = pthread_mutex_lock(&s->mutex)))
		goto out_err;
	s->mutex_locked = true;
	return 0;
out_err:
	snprintf(err, errlen,
		 "--mechanism condvar: cannot set up a CLOCK_MONOTONIC condition "
		 "variable (%s)",
		 strerror(rc));
	return -rc;
}

static uint64_t condvar_wait(struct periodic_state *s, int64_t target)
{
	struct timespec ts = ns_to_ts(target);

	while (!pthread_cond_timedwait(&s->cond, &s->mutex, &ts))
		; /* nobody signals: a return before the deadline is spurious */
	return 1;
}

static void condvar_teardown(struct periodic_state *s)
{
	if (s->mutex_locked)
		(void)pthread_mutex_unlock(&s->mutex);
	if (s->cond_made)
		(void)pthread_cond_destroy(&s->cond);
	if (s->mutex_made)
		(void)pthread_mutex_destroy(&s->mutex);
	s->mutex_locked = s->cond_made = s->mutex_made = false;
}

/* deadline */

static int deadline_check(struct periodic_params *p, int nthreads, struct opt_fault *at, char *err,
			  size_t errlen)
{
	(void)nthreads;
	if (!p->runtime_set)
		p->runtime_ns = p->interval_ns / 10 > DL_MIN_RUNTIME_NS ? p->interval_ns / 10
									: DL_MIN_RUNTIME_NS;
	if (p->runtime_ns <= p->interval_ns)
		return 0;
	return opts_refusef(at, p->runtime_set ? "runtime" : "interval", NULL, err, errlen,
			    "--runtime: %lldns exceeds the interval %lldns (SCHED_DEADLINE needs "
			    "runtime <= period)",
			    (long long)p->runtime_ns, (long long)p->interval_ns);
}

static int deadline_setup(struct periodic_state *s, char *err, size_t errlen)
{
	struct policy_spec dl = { .policy = SCHED_DEADLINE,
				  .runtime_ns = (uint64_t)s->p->runtime_ns,
				  .deadline_ns = (uint64_t)s->p->interval_ns,
				  .period_ns = (uint64_t)s->p->interval_ns };
	char why[200], spec[96];
	int rc;

	if (!(rc = policy_apply(&dl, 0, why, sizeof(why))))
		return 0;
	/* Shorter than policy_apply's reason: the runner keeps 200 bytes of it. */
	policy_format(&dl, spec, sizeof(spec));
	snprintf(
		err, errlen, "--mechanism deadline: the kernel refused %s (%s)%s", spec,
		strerror(-rc),
		rc == -EPERM || rc == -EBUSY
			? ": it needs CAP_SYS_NICE, no --cpus pinning (root domain) and admission room"
		: rc == -EINVAL ? ": see /proc/sys/kernel/sched_deadline_period_min_us"
				: "");
	return rc;
}

static uint64_t deadline_wait(struct periodic_state *s, int64_t target)
{
	(void)s;
	(void)target;
	(void)sched_yield(); /* done for this period: sleep until the next one starts */
	return 1;
}

const struct mechanism periodic_mechanisms[MECH_COUNT] = {
	[MECH_NANOSLEEP_ABS] = { .grid = GRID_SKIP, .wait = abs_sleep_wait },
	[MECH_NANOSLEEP_REL] = { .grid = GRID_RELATIVE, .wait = rel_sleep_wait },
	[MECH_BUSY_POLL] = { .grid = GRID_SKIP, .wait = busy_poll_wait },
	[MECH_SETITIMER] = { .grid = GRID_SKIP,
			     .check = setitimer_check,
			     .setup = setitimer_setup,
			     .start = setitimer_start,
			     .wait = sigwait_wait,
			     .teardown = setitimer_teardown },
	[MECH_TIMER_SIGNAL] = { .grid = GRID_COUNTED,
				.setup = timer_signal_setup,
				.start = timer_start,
				.wait = timer_signal_wait,
				.teardown = timer_teardown },
	[MECH_TIMER_THREAD] = { .grid = GRID_SKIP,
				.setup = timer_thread_setup,
				.start = timer_start,
				.wait = timer_thread_wait,
				.teardown = timer_teardown },
	[MECH_TIMERFD] = { .grid = GRID_COUNTED,
			   .setup = timerfd_setup,
			   .start = timerfd_start,
			   .wait = timerfd_wait,
			   .teardown = timerfd_teardown },
	[MECH_CONDVAR] = { .grid = GRID_SKIP,
			   .setup = condvar_setup,
			   .wait = condvar_wait,
			   .teardown = condvar_teardown },
	[MECH_DEADLINE] = { .grid = GRID_INFERRED,
			    .uses_runtime = true,
			    .check = deadline_check,
			    .setup = deadline_setup,
			    .wait = deadline_wait },
};

const char *const periodic_mechanism_names[MECH_COUNT + 1] = {
	[MECH_NANOSLEEP_ABS] = "nanosleep-abs",
	[MECH_NANOSLEEP_REL] = "nanosleep-rel",
	[MECH_BUSY_POLL] = "busy-poll",
	[MECH_SETITIMER] = "setitimer",
	[MECH_TIMER_SIGNAL] = "posix-timer-signal",
	[MECH_TIMER_THREAD] = "posix-timer-thread",
	[MECH_TIMERFD] = "timerfd",
	[MECH_CONDVAR] = "condvar",
	[MECH_DEADLINE] = "deadline",
	[MECH_COUNT] = NULL,
};
