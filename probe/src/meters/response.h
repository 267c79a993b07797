/* response: the shared types of the meter (response.c), its transports
 * (response_chan.c) and its stimulus (response_stim.c). */
#ifndef RTLAB_METER_RESPONSE_H
#define RTLAB_METER_RESPONSE_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/companion.h"
#include "lib/hist.h"
#include "lib/policy.h"
#include "lib/timeutil.h"

#define IV_MIN_NS NSEC_PER_USEC
#define IV_MAX_NS NSEC_PER_SEC /* a stop waits for the next event: keep it short */
#define SEQ_END UINT64_MAX     /* the phase is over */
#define PHASE_QUIT UINT32_MAX  /* the stimulus returns */
#define STEP_EVENTS 1000       /* per --find-max-rate step without --loops */
#define MAX_STEPS 24
#define DRAIN_NS NSEC_PER_SEC /* for the handler to take the last event */

/* --transport's words, in the order of response_transport_names and response_transports. */
enum resp_transport {
	TP_PIPE,
	TP_EVENTFD,
	TP_FUTEX,
	TP_CONDVAR,
	TP_SIGNAL,
	TP_MQ,
	TP_UNIX,
	TP_SEMAPHORE,
	TP_GPIO,
	TP_COUNT
};

struct response_params {
	int transport; /* enum resp_transport (a choice option) */
	const char *interval_text;
	int64_t seed;
	bool seed_set;
	struct cpulist stim_cpus;
	bool stim_cpu_set;
	struct policy_spec stim_policy;
	bool stim_policy_set;
	bool handler_process;
	bool find_max_rate;
	const char *gpio_text;
	/* Derived by check(). */
	int64_t iv_min_ns, iv_max_ns; /* equal: a fixed interval */
	int stim_cpu;                 /* -1: where the handler is */
	char gpio_chip[128];          /* device path */
	uint32_t gpio_out, gpio_in;   /* line offsets */
};

/* MAP_SHARED: the same for a stimulus thread and a stimulus process. */
struct resp_shared {
	_Atomic uint32_t phase;    /* futex: the handler bumps it to start a phase */
	_Atomic uint32_t gen;      /* futex word (futex transport): +1 per fire */
	_Atomic uint64_t seq;      /* 1-based event of the last fire; SEQ_END ends the phase */
	_Atomic int64_t fire_ns;   /* CLOCK_MONOTONIC just before that fire */
	_Atomic uint64_t consumed; /* the last seq the handler took out of the transport */
	_Atomic uint64_t fired, lost, overruns;
	_Atomic int64_t drawn_ns; /* sum of the intervals drawn for fired and lost events */
	struct comp_report rep;   /* the stimulus says it is set up */
	int fire_err;             /* -errno that ended a phase early */
	int64_t start_ns, iv_min_ns, iv_max_ns, duration_ns; /* of the phase */
	uint64_t limit;                                      /* events of the phase, 0: no limit */
	pthread_mutex_t mtx; /* condvar, semaphore: no kernel object behind them */
	pthread_cond_t cond;
	sem_t sem;
};

struct resp_chan {
	int fd[2]; /* [0] the handler's end, [1] the stimulus's (or -1) */
	mqd_t mq;
	struct resp_shared *sh;
	bool pshared;          /* handler and stimulus in two processes */
	pid_t tgid, tid, self; /* signal: the handler; the sender */
	int sig;
	sigset_t sigs;
	uint64_t level;    /* gpio: the output's value */
	uint64_t seq;      /* stimulus: the event being fired (the payload) */
	uint32_t gen;      /* handler: the last gen it saw */
	int64_t kernel_ns; /* handler: the gpio event's timestamp, 0 for the others */
	const struct response_params *p;
	_Atomic int *stop; /* the run's stop flag, NULL in a stimulus process */
};

/* A transport: the stimulus fires, the handler waits; a table entry each. */
struct transport {
	int (*setup)(struct resp_chan *c, char *err, size_t errlen); /* NULL: nothing to set up */
	int (*fire)(struct resp_chan *c);
	/* Block until an event (or a spurious wake: the caller checks gen). 0 or -errno. */
	int (*wait)(struct resp_chan *c);
	void (*teardown)(struct resp_chan *c);
};

struct mmm {
	uint64_t n;
	int64_t min, max, sum; /* ns */
};

static inline void mmm_add(struct mmm *m, int64_t v)
{
	if (!m->n || v < m->min)
		m->min = v;
	if (!m->n || v > m->max)
		m->max = v;
	m->sum += v;
	m->n++;
}

struct rate_step {
	int64_t interval_ns, p99_ns;
	uint64_t count, lost;
	bool ok;
};

struct resp_state {
	struct resp_shared *sh;
	const struct transport *tp;
	struct resp_chan ch, stim_ch; /* the handler's side, the stimulus's copy */
	bool chan_open;
	struct companion stim;
	uint64_t rng;
	_Atomic int *stop;
	/* What the run saw; copied out of sh, which teardown unmaps. */
	struct comp_info stim_seen; /* the stimulus as it really ran */
	int err;                    /* -errno that ended the measurement early */
	uint64_t lost, events;
	int64_t interval_ns, drawn_ns;
	struct mmm to_kernel, from_kernel; /* gpio: kernel timestamp − fire, wake − timestamp */
	struct hist step_hist;             /* --find-max-rate */
	struct mmm step;
	int nsteps;
	struct rate_step steps[MAX_STEPS];
	int64_t max_rate_iv; /* 0: no step sustained */
};

#define SH_GET(sh, f) atomic_load_explicit(&(sh)->f, memory_order_relaxed)
#define SH_SET(sh, f, v) atomic_store_explicit(&(sh)->f, (v), memory_order_relaxed)

/* The transports, one const entry each, and their names (NULL-terminated), by enum
 * resp_transport (response_chan.c). */
extern const struct transport response_transports[TP_COUNT];
extern const char *const response_transport_names[TP_COUNT + 1];
void chan_close(struct resp_chan *c);

/* The stimulus (response_stim.c). */
/* The stimulus's body, as a companion thread or process (arg: the resp_state). */
void stim_run(void *arg);

#endif
