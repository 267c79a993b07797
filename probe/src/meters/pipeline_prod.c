/* pipeline's producer: a thread, or a process of its own with --processes. */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
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

#include "meters/pipeline.h"

long pipe_futex(_Atomic uint32_t *w, int op, uint32_t val, int64_t rel_ns, bool pshared)
{
	struct timespec ts = ns_to_ts(rel_ns);

	return syscall(SYS_futex, (void *)w, pshared ? op : op | FUTEX_PRIVATE_FLAG, val,
		       rel_ns ? &ts : NULL, NULL, 0);
}

void ring_bell(struct pipe_shared *sh, bool pshared)
{
	atomic_fetch_add(&sh->bell, 1);
	(void)pipe_futex(&sh->bell, FUTEX_WAKE, 1, 0, pshared);
}

/* When record K (0-based) is due after the start: (K + 1) / rate s, without overflow. */
static int64_t due_ns(uint64_t k, int64_t rate)
{
	uint64_t n = k + 1, r = (uint64_t)rate;

	return (int64_t)(n / r * NSEC_PER_SEC + n % r * NSEC_PER_SEC / r);
}

/* ---- the producer: a thread, or a process of its own with --processes ---- */

/* Records on an absolute schedule; one due while the ring is full is dropped. */
static void produce(struct pipe_shared *sh, const struct pipeline_params *p)
{
	const uint64_t n = (uint64_t)p->ring, loops = sh->loops;
	const size_t rs = (size_t)p->record_size;
	const int64_t start = sh->start_ns, iv = NSEC_PER_SEC / p->rate_hz;
	uint64_t head = 0, dropped = 0, late = 0, max_fill = 0, fill;
	struct timespec ts;
	int64_t due, now;

	for (uint64_t k = 0; !loops || k < loops; k++) {
		due = due_ns(k, p->rate_hz);
		if (sh->duration_ns && due >= sh->duration_ns)
			break;
		ts = ns_to_ts(start + due);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		if (LD(sh, quit))
			break;
		now = mono_now_ns();
		if (now - (start + due) >= iv)
			ST(sh, late, ++late);
		fill = head - atomic_load_explicit(&sh->tail, memory_order_acquire);
		if (fill >= n) { /* never wait for the consumer */
			ST(sh, dropped, ++dropped);
			ST(sh, produced, k + 1);
			continue;
		}
		unsigned char *rec = RECS(sh) + (head % n) * rs;

		*(struct pipe_rec *)rec = (struct pipe_rec){ now, k };
		memset(rec + sizeof(struct pipe_rec), (int)(k & 0xff), rs - sizeof(struct pipe_rec));
		/* seq_cst: ordered before the load of waiting (the consumer does the converse) */
		atomic_store(&sh->head, ++head);
		if (fill + 1 > max_fill)
			ST(sh, max_fill, max_fill = fill + 1);
		ST(sh, produced, k + 1);
		if (atomic_load(&sh->waiting))
			ring_bell(sh, p->processes);
	}
}

/* Set up as asked, say so through sh->ready, produce once the consumer says go. */
static void *producer_run(void *arg)
{
	struct pipe_state *st = arg;
	struct pipe_shared *sh = st->sh;
	int rc = 0;

	if (st->prod_cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(st->prod_cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			rc = -errno;
			snprintf(sh->why, sizeof(sh->why), "cannot pin the producer to CPU %d (%s)",
				 st->prod_cpu, strerror(errno));
		}
	}
	if (!rc && (rc = policy_apply(&st->prod_spec, 0, sh->why, sizeof(sh->why))) &&
	    st->may_fall_back) {
		sh->policy_fallback = true; /* --allow-fallback let the consumer fall back too */
		rc = 0;
	}
	(void)policy_read(0, &sh->policy);
	sh->tid = gettid();
	{
		volatile char stack[PROD_PREFAULT_BYTES];

		memset((char *)stack, 0, sizeof(stack));
	}
	atomic_store_explicit(&sh->ready, rc ? rc : 1, memory_order_release);
	if (rc)
		return NULL;
	while (!atomic_load_explicit(&sh->go, memory_order_acquire))
		(void)pipe_futex(&sh->go, FUTEX_WAIT, 0, 0, st->p->processes);
	if (!LD(sh, quit))
		produce(sh, st->p);
	atomic_store(&sh->done, 1);
	ring_bell(sh, st->p->processes);
	return NULL;
}

/* A SCHED_DEADLINE task may neither fork nor clone: it leaves the policy for a moment. */
int producer_spawn(struct pipe_state *st, const struct policy_spec *own, char *err,
			  size_t errlen)
{
	static const struct policy_spec other = { .policy = SCHED_OTHER };
	bool dl = own->policy == SCHED_DEADLINE;
	pthread_attr_t attr;
	int rc = 0, rc2;

	if (dl && (rc = policy_apply(&other, 0, err, errlen)))
		return rc;
	if (st->p->processes) {
		pid_t pid = load_fork_child(); /* same group; dies with this thread, even on SIGKILL */

		if (pid == 0) {
			(void)prctl(PR_SET_NAME, "rtlab:producer");
			(void)producer_run(st);
			_exit(0);
		}
		rc = pid < 0 ? -errno : 0;
		st->prod_pid = pid > 0 ? pid : 0;
	} else {
		(void)pthread_attr_init(&attr);
		(void)pthread_attr_setstacksize(&attr, PROD_STACK_BYTES);
		rc = -pthread_create(&st->prod_pthread, &attr, producer_run, st);
		(void)pthread_attr_destroy(&attr);
		st->prod_thread = !rc;
		if (!rc)
			(void)pthread_setname_np(st->prod_pthread, "rtlab:producer");
	}
	if (rc)
		snprintf(err, errlen, "cannot start the producer (%s)", strerror(-rc));
	if (dl && (rc2 = policy_apply(own, 0, err, errlen)))
		rc = rc ? rc : rc2;
	return rc;
}

/* Has the producer process ended by itself? (A thread cannot.) */
bool producer_gone(struct pipe_state *st)
{
	if (st->prod_pid <= 0 || waitpid(st->prod_pid, NULL, WNOHANG) != st->prod_pid)
		return false;
	st->prod_pid = 0;
	return true;
}

int producer_wait_ready(struct pipe_state *st, char *err, size_t errlen)
{
	struct pipe_shared *sh = st->sh;
	int64_t until = mono_now_ns() + READY_NS;
	struct timespec nap = ns_to_ts(200 * NSEC_PER_USEC);
	int rc;

	while (!(rc = atomic_load_explicit(&sh->ready, memory_order_acquire))) {
		if (producer_gone(st)) {
			snprintf(sh->why, sizeof(sh->why), "the producer process ended");
			rc = -ECHILD;
		} else if (mono_now_ns() > until) {
			snprintf(sh->why, sizeof(sh->why), "the producer did not start");
			rc = -ETIMEDOUT;
		} else {
			(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &nap, NULL);
		}
	}
	st->prod_tid = sh->tid;
	st->prod_policy = sh->policy;
	st->prod_fallback = sh->policy_fallback;
	snprintf(st->prod_why, sizeof(st->prod_why), "%s", sh->why);
	if (rc > 0)
		return 0;
	snprintf(err, errlen, "producer: %s", sh->why);
	return rc;
}

