/* A meter's companion thread or process: spawn, set up, ready handshake, stop. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "companion.h"
#include "jsonw.h"
#include "loadrun.h"
#include "sampler.h"

int comp_setup(const struct companion *c, struct comp_report *r)
{
	struct comp_info *in = &r->info;
	int rc = 0;

	if (c->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(c->cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			rc = -errno;
			snprintf(in->why, sizeof(in->why), "cannot pin the %s to CPU %d (%s)",
				 c->name, c->cpu, strerror(errno));
		}
	}
	if (!rc && (rc = policy_apply(&c->spec, 0, in->why, sizeof(in->why))) && c->may_fall_back) {
		in->policy_fallback = true; /* --allow-fallback let the meter fall back too */
		rc = 0;
	}
	(void)policy_read(0, &in->policy);
	in->tid = gettid();
	comp_prefault_stack(); /* no page faults in the schedule */
	atomic_store_explicit(&r->ready, rc ? rc : 1, memory_order_release);
	return rc;
}

static void *comp_thread(void *arg)
{
	const struct companion *c = arg;

	c->run(c->arg);
	return NULL;
}

/* A SCHED_DEADLINE task may neither fork nor clone: it leaves the policy for a moment. */
int comp_spawn(struct companion *c, const struct policy_spec *own, char *err, size_t errlen)
{
	static const struct policy_spec other = { .policy = SCHED_OTHER };
	bool dl = own->policy == SCHED_DEADLINE;
	char name[16];
	pthread_attr_t attr;
	int rc = 0, rc2;

	if (dl && (rc = policy_apply(&other, 0, err, errlen)))
		return rc;
	snprintf(name, sizeof(name), "rtlab:%s", c->name);
	if (c->process) {
		pid_t pid =
			load_fork_child(); /* same group; dies with this thread, even on SIGKILL */

		if (pid == 0) {
			(void)prctl(PR_SET_NAME, name);
			c->run(c->arg);
			_exit(0);
		}
		rc = pid < 0 ? -errno : 0;
		c->pid = pid > 0 ? pid : 0;
	} else {
		(void)pthread_attr_init(&attr);
		(void)pthread_attr_setstacksize(&attr, COMP_STACK_BYTES);
		rc = -pthread_create(&c->pth, &attr, comp_thread, c);
		(void)pthread_attr_destroy(&attr);
		c->thread = !rc;
		if (!rc)
			(void)pthread_setname_np(c->pth, name);
	}
	if (rc)
		snprintf(err, errlen, "cannot start the %s (%s)", c->name, strerror(-rc));
	if (dl && (rc2 = policy_apply(own, 0, err, errlen)))
		rc = rc ? rc : rc2;
	return rc;
}

bool comp_gone(struct companion *c)
{
	if (c->pid <= 0 || waitpid(c->pid, NULL, WNOHANG) != c->pid)
		return false;
	c->pid = 0;
	return true;
}

int comp_wait_ready(struct companion *c, struct comp_report *r, struct comp_info *seen,
		    const char *prefix, char *err, size_t errlen)
{
	struct comp_info *in = &r->info;
	int64_t until = mono_now_ns() + COMP_READY_NS;
	struct timespec nap = ns_to_ts(200 * NSEC_PER_USEC);
	int rc;

	while (!(rc = atomic_load_explicit(&r->ready, memory_order_acquire))) {
		if (comp_gone(c)) {
			snprintf(in->why, sizeof(in->why), "the %s process ended", c->name);
			rc = -ECHILD;
		} else if (mono_now_ns() > until) {
			snprintf(in->why, sizeof(in->why), "the %s did not start", c->name);
			rc = -ETIMEDOUT;
		} else {
			(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &nap, NULL);
		}
	}
	if (seen != in) /* the report may be unmapped before the document is written */
		*seen = *in;
	if (rc > 0)
		return 0;
	snprintf(err, errlen, "%s%s", prefix, in->why);
	return rc;
}

void comp_stop(struct companion *c)
{
	if (c->thread)
		(void)pthread_join(c->pth, NULL);
	c->thread = false;
	if (c->pid > 0) {
		(void)kill(c->pid, SIGKILL);
		while (waitpid(c->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	c->pid = 0;
}

void comp_json(struct jw *w, const struct companion *c, const struct comp_info *seen)
{
	jw_kint(w, "tid", seen->tid);
	jw_key(w, "cpu");
	c->cpu >= 0 ? jw_int(w, c->cpu) : jw_null(w);
	jw_key(w, "policy"); /* as the runner writes the measuring thread's */
	policy_json(w, &seen->policy);
	jw_kbool(w, "policy_fallback", seen->policy_fallback);
	if (seen->policy_fallback)
		jw_kstr(w, "policy_fallback_reason", seen->why);
}

void comp_prefault_stack(void)
{
	volatile char stack[COMP_PREFAULT_BYTES];

	memset((char *)stack, 0, sizeof(stack));
}

void comp_cow_touch(void *p, size_t len)
{
	volatile char *c = p;

	for (size_t off = 0; off < len; off += 4096)
		c[off] = c[off];
	if (len)
		c[len - 1] = c[len - 1];
}

void comp_unshare_mthread(struct mthread *t)
{
	comp_cow_touch(t, sizeof(*t));
	comp_cow_touch(t->hist, sizeof(*t->hist));
	comp_cow_touch(t->series.slot, t->series.cap * sizeof(*t->series.slot));
	if (t->ring)
		comp_cow_touch(t->ring->buf, (t->ring->mask + 1) * sizeof(*t->ring->buf));
}
