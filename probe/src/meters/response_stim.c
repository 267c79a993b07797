/* response's stimulus: a thread, or a process of its own with --handler-process. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <linux/futex.h>
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

#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

#include "meters/response.h"

/* ---- the stimulus: a thread, or a process of its own with --handler-process ---- */

uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int64_t draw_interval(uint64_t *rng, int64_t lo, int64_t hi)
{
	return lo == hi ? lo : lo + (int64_t)(splitmix64(rng) % (uint64_t)(hi - lo + 1));
}

static void sleep_ns(int64_t ns)
{
	struct timespec ts = ns_to_ts(ns);

	(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}


/* The event's slot before its fire; gen (release) makes seq and fire_ns visible. */
static void publish(struct resp_shared *sh, uint64_t seq, int64_t now)
{
	SH_SET(sh, fire_ns, now);
	SH_SET(sh, seq, seq);
	atomic_fetch_add_explicit(&sh->gen, 1, memory_order_release);
}

/* One phase: events on an absolute schedule; one due while the handler has not taken the
 * previous one is not fired but counted lost. Ends with SEQ_END once the last is taken. */
static void stim_phase(struct resp_chan *c, const struct transport *tp, uint32_t phase,
		       uint64_t *rng)
{
	struct resp_shared *sh = c->sh;
	const int64_t start = sh->start_ns, dur = sh->duration_ns;
	const uint64_t limit = sh->limit;
	int64_t target = start, iv, now, drawn = 0;
	uint64_t last = 0, fired = 0, lost = 0, over = 0;
	struct timespec ts;
	int rc;

	for (uint64_t k = 1; !limit || k <= limit; k++) {
		iv = draw_interval(rng, sh->iv_min_ns, sh->iv_max_ns);
		if (dur && target + iv - start >= dur)
			break;
		target += iv;
		ts = ns_to_ts(target);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		if (SH_GET(sh, phase) != phase || (c->stop && atomic_load(c->stop)))
			break;
		now = mono_now_ns();
		SH_SET(sh, drawn_ns, drawn += iv);
		if (now - target >= iv) { /* a whole interval late: move the schedule past now */
			SH_SET(sh, overruns, ++over);
			target = now;
		}
		if (atomic_load_explicit(&sh->consumed, memory_order_acquire) != last) {
			SH_SET(sh, lost, ++lost);
			continue;
		}
		publish(sh, c->seq = k, now);
		if ((rc = tp->fire(c))) {
			sh->fire_err = rc;
			break;
		}
		last = k;
		SH_SET(sh, fired, ++fired);
	}
	for (int64_t until = mono_now_ns() + DRAIN_NS;
	     atomic_load_explicit(&sh->consumed, memory_order_acquire) != last &&
	     SH_GET(sh, phase) == phase && mono_now_ns() < until;)
		sleep_ns(20 * NSEC_PER_USEC);
	if (SH_GET(sh, phase) != phase)
		return; /* teardown: nobody waits for the end */
	publish(sh, c->seq = SEQ_END, mono_now_ns());
	(void)tp->fire(c);
}

/* Set up as asked, say so through sh->ready, then run each phase the handler starts. */
static void stim_run(struct resp_state *st)
{
	struct resp_chan c = st->stim_ch; /* on this stack: in a process, only sh is shared */
	struct resp_shared *sh = st->sh;
	uint64_t rng = st->rng;
	uint32_t seen = 0, ph;
	int rc = 0;

	c.self = getpid();
	if (st->stim_cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(st->stim_cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			rc = -errno;
			snprintf(sh->why, sizeof(sh->why), "cannot pin the stimulus to CPU %d (%s)",
				 st->stim_cpu, strerror(errno));
		}
	}
	if (!rc && (rc = policy_apply(&st->stim_spec, 0, sh->why, sizeof(sh->why))) &&
	    st->stim_may_fall_back) {
		sh->policy_fallback = true; /* --allow-fallback let the handler fall back too */
		rc = 0;
	}
	(void)policy_read(0, &sh->policy);
	sh->tid = gettid();
	{
		volatile char stack[STIM_PREFAULT_BYTES];

		memset((char *)stack, 0, sizeof(stack));
	}
	atomic_store_explicit(&sh->ready, rc ? rc : 1, memory_order_release);
	while (!rc) {
		while ((ph = atomic_load_explicit(&sh->phase, memory_order_acquire)) == seen)
			(void)resp_futex(&sh->phase, FUTEX_WAIT, seen, true);
		if (ph == PHASE_QUIT)
			break;
		seen = ph;
		c.stop = st->stop; /* published by the phase bump; NULL in a process */
		stim_phase(&c, st->tp, ph, &rng);
	}
}

static void *stim_thread(void *arg)
{
	stim_run(arg);
	return NULL;
}

/* A SCHED_DEADLINE task may neither fork nor clone: it leaves the policy for a moment. */
int stim_spawn(struct resp_state *st, const struct policy_spec *own, char *err,
		      size_t errlen)
{
	static const struct policy_spec other = { .policy = SCHED_OTHER };
	bool dl = own->policy == SCHED_DEADLINE;
	pthread_attr_t attr;
	int rc = 0, rc2;

	if (dl && (rc = policy_apply(&other, 0, err, errlen)))
		return rc;
	if (st->ch.pshared) {
		pid_t pid = load_fork_child(); /* dies with this thread, even on SIGKILL */

		if (pid == 0) {
			(void)prctl(PR_SET_NAME, "rtlab:stimulus");
			stim_run(st);
			_exit(0);
		}
		rc = pid < 0 ? -errno : 0;
		st->stim_pid = pid > 0 ? pid : 0;
	} else {
		(void)pthread_attr_init(&attr);
		(void)pthread_attr_setstacksize(&attr, STIM_STACK_BYTES);
		rc = -pthread_create(&st->stim_pthread, &attr, stim_thread, st);
		(void)pthread_attr_destroy(&attr);
		st->stim_thread = !rc;
		if (!rc)
			(void)pthread_setname_np(st->stim_pthread, "rtlab:stimulus");
	}
	if (rc)
		snprintf(err, errlen, "cannot start the stimulus (%s)", strerror(-rc));
	if (dl && (rc2 = policy_apply(own, 0, err, errlen)))
		rc = rc ? rc : rc2;
	return rc;
}

int stim_wait_ready(struct resp_state *st, const struct response_params *p, char *err,
			   size_t errlen)
{
	struct resp_shared *sh = st->sh;
	int64_t until = mono_now_ns() + READY_NS;
	int rc;

	while (!(rc = atomic_load_explicit(&sh->ready, memory_order_acquire))) {
		if (st->stim_pid && waitpid(st->stim_pid, NULL, WNOHANG) == st->stim_pid) {
			st->stim_pid = 0;
			snprintf(sh->why, sizeof(sh->why), "the stimulus process ended");
			rc = -ECHILD;
		} else if (mono_now_ns() > until) {
			snprintf(sh->why, sizeof(sh->why), "the stimulus did not start");
			rc = -ETIMEDOUT;
		} else {
			sleep_ns(200 * NSEC_PER_USEC);
		}
	}
	st->stim_tid = sh->tid;
	st->stim_policy = sh->policy;
	st->stim_fallback = sh->policy_fallback;
	snprintf(st->stim_why, sizeof(st->stim_why), "%s", sh->why);
	if (rc > 0)
		return 0;
	snprintf(err, errlen, "%s%s", p->stim_policy_set ? "--stimulus-policy: " : "stimulus: ",
		 sh->why);
	return rc;
}

