/* periodic: the shared types of the meter (periodic.c) and its mechanisms (periodic_mech.c). */
#ifndef RTLAB_METER_PERIODIC_H
#define RTLAB_METER_PERIODIC_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "lib/opts.h"
#include "lib/sampler.h"

#define DL_MIN_RUNTIME_NS 1024           /* the kernel's 1 << DL_SCALE */
#define NOTIFIER_STACK_BYTES (64 * 1024) /* posix-timer-thread: per-expiry thread */

struct mechanism;

/* --mechanism's words, in the order of periodic_mechanism_names and periodic_mechanisms. */
enum mech_id {
	MECH_NANOSLEEP_ABS,
	MECH_NANOSLEEP_REL,
	MECH_BUSY_POLL,
	MECH_SETITIMER,
	MECH_TIMER_SIGNAL,
	MECH_TIMER_THREAD,
	MECH_TIMERFD,
	MECH_CONDVAR,
	MECH_DEADLINE,
	MECH_COUNT
};

struct periodic_params {
	int64_t interval_ns; /* activation period of every thread */
	int mechanism;       /* enum mech_id (a choice option) */
	int64_t runtime_ns;  /* deadline: SCHED_DEADLINE runtime per period */
	bool runtime_set;
	const struct mechanism *mech; /* resolved by check() */
};

/* Per measuring thread, at mthread.mstate (zeroed: every "made" flag starts false). */
struct periodic_state {
	const struct periodic_params *p;
	const struct mthread *t;
	int64_t cpu_ns; /* CLOCK_THREAD_CPUTIME_ID consumed by the loop */
	uint64_t activations;
	int64_t drift_ns;       /* last wake - (start + activations x interval); relative only */
	uint64_t mech_overruns; /* expirations the mechanism itself reported as missed */

	int fd; /* timerfd */
	bool fd_open;
	timer_t timer; /* posix-timer-* */
	bool timer_made;
	bool itimer_armed;     /* setitimer */
	sigset_t sigs;         /* the signal sigwaitinfo takes */
	pthread_mutex_t mutex; /* condvar: held by the thread, released while it waits */
	pthread_cond_t cond;
	bool mutex_made, cond_made, mutex_locked;

	_Atomic uint32_t fired; /* posix-timer-thread: expiries notified, the futex word */
	uint32_t seen;          /* posix-timer-thread: fired at the last wake */
};

/* How the intended activation times advance. */
enum grid {
	GRID_SKIP,    /* start + k x interval; a late activation skips what it missed (wakeup's
			* rule), so a wake before the target is a skipped expiry, not an activation */
	GRID_COUNTED, /* start + k x interval; the timer counts its expirations, which move the grid */
	GRID_RELATIVE, /* previous actual wake + interval: the activation times drift */
	GRID_INFERRED, /* the kernel's period starts, not visible: the earliest consistent grid */
};

struct mechanism {
	enum grid grid;
	bool uses_runtime; /* takes --runtime */
	/* In the main thread after parsing, NTHREADS measuring threads to come (0: not
	 * known): 0 or -EINVAL with a reason. */
	int (*check)(struct periodic_params *p, int nthreads, struct opt_fault *at, char *err,
		     size_t errlen);
	/* In the measuring thread s->t before the start barrier: 0 or -errno with a reason. */
	int (*setup)(struct periodic_state *s, char *err, size_t errlen);
	/* Arm at the loop's start for *FIRST_NS, then every interval (a relative timer
	 * moves *FIRST_NS to what it really armed). 0 or -errno. */
	int (*start)(struct periodic_state *s, int64_t *first_ns);
	/* Block until the activation due at TARGET_NS; the expirations it stands for (>= 1). */
	uint64_t (*wait)(struct periodic_state *s, int64_t target_ns);
	/* Undo setup, also a half-done one (the flags in S say what was done). */
	void (*teardown)(struct periodic_state *s);
};

/* The mechanisms, one const entry each, and their names (NULL-terminated), by enum mech_id
 * (periodic_mech.c). */
extern const struct mechanism periodic_mechanisms[MECH_COUNT];
extern const char *const periodic_mechanism_names[MECH_COUNT + 1];

#endif
