/* A meter's companion: the task at the other end of what it measures (response's
 * stimulus, pipeline's and worker's producer), a thread or a forked process at a
 * policy and CPU of its own, that says through a comp_report when it is set up. */
#ifndef RTLAB_COMPANION_H
#define RTLAB_COMPANION_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy.h"
#include "timeutil.h"

#define COMP_READY_NS (5 * NSEC_PER_SEC) /* for the companion to set itself up */
#define COMP_STACK_BYTES (128 * 1024)
#define COMP_PREFAULT_BYTES (16 * 1024)

struct jw;
struct mthread;

/* What the companion found when it set itself up. */
struct comp_info {
	pid_t tid;                 /* the companion, as it really runs */
	struct policy_spec policy; /* read back */
	bool policy_fallback;
	char why[200]; /* why it refused, or fell back */
};

/* Written by the companion; MAP_SHARED when it is a process. */
struct comp_report {
	_Atomic int ready; /* 0 starting, 1 ready, -errno refused */
	struct comp_info info;
};

struct companion {
	const char *name;       /* "stimulus", "producer": its task name and reasons */
	void (*run)(void *arg); /* its body: comp_setup() first */
	void *arg;
	bool process;            /* forked, else a thread */
	int cpu;                 /* -1: unpinned */
	struct policy_spec spec; /* to apply */
	bool may_fall_back;      /* --allow-fallback: a refused policy is not an error */
	/* Set by comp_spawn(). */
	pthread_t pth;
	bool thread; /* pth to join */
	pid_t pid;   /* the process, 0: none */
};

/* In the companion: pin, apply the policy, read it back, prefault the stack, then
 * publish ready. 0 or -errno with the reason in r->info.why. */
int comp_setup(const struct companion *c, struct comp_report *r);

/* Start c->run(c->arg) as a thread, or a process that dies with the caller, while
 * the caller runs at OWN. 0 or -errno with a reason in err. */
int comp_spawn(struct companion *c, const struct policy_spec *own, char *err, size_t errlen);

/* Wait until the companion is set up and copy what it found to SEEN (may be &r->info);
 * 0 or -errno with PREFIX and the reason in err. */
int comp_wait_ready(struct companion *c, struct comp_report *r, struct comp_info *seen,
		    const char *prefix, char *err, size_t errlen);

/* Has the companion process ended by itself? (A thread cannot.) */
bool comp_gone(struct companion *c);

/* Join the thread (told to end by the caller), or kill and reap the process. */
void comp_stop(struct companion *c);

/* The companion's members of its result object: tid, cpu, policy, policy_fallback(_reason). */
void comp_json(struct jw *w, const struct companion *c, const struct comp_info *seen);

/* Fault the next COMP_PREFAULT_BYTES of the caller's stack in now. */
void comp_prefault_stack(void);

/* After a fork: write each page of [P, P+LEN) once, so that it is this process's again. */
void comp_cow_touch(void *p, size_t len);

/* comp_cow_touch() the measuring thread's record: its struct, histogram, series, ring. */
void comp_unshare_mthread(struct mthread *t);

#endif
