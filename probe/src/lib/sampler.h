/*
 * Per-thread measurement state and the one function the hot loop calls.
 * Everything here is allocated before measuring starts; recording a sample
 * touches fixed memory only.
 */
#ifndef RTLAB_SAMPLER_H
#define RTLAB_SAMPLER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include "hist.h"
#include "policy.h"
#include "rawring.h"
#include "series.h"

#define WORST_N 16

struct worst_entry {
	int64_t latency_ns;
	uint64_t cycle;
	int64_t t_ns; /* since the thread's start */
};

struct mthread {
	/* Hot: what every sample updates, in one cache line. The live status line reads
	 * them from another thread: relaxed atomics, plain moves on common CPUs. */
	_Alignas(64) _Atomic uint64_t count;
	_Atomic int64_t last_ns, min_ns, max_ns, sum_ns;
	int64_t worst_floor; /* a sample above this enters worst[] */
	double sumsq;        /* ns^2, for the standard deviation */
	struct hist *hist;

	struct series series;
	int64_t start_ns;  /* CLOCK_MONOTONIC at the first target computation */
	struct ring *ring; /* NULL when raw capture is off */
	uint64_t overruns; /* wake-ups later than a whole period */
	uint64_t raw_lost; /* raw samples dropped because the ring was full */
	struct worst_entry worst[WORST_N];
	int nworst;
	int64_t explain_floor;   /* --explain: a sample above this is marked in the trace */
	int64_t miss_floor;      /* --deadline: a sample above this is a miss; INT64_MAX without */
	_Atomic uint64_t misses; /* samples above --deadline, read live by the progress stream */

	int index;
	int cpu; /* pinned CPU, -1 when unpinned */
	pid_t tid;
	pid_t measured_tid; /* the thread measured instead of this one (a kernel tracer's), or 0 */
	int64_t period_ns;  /* nominal activation period */
	struct policy_spec policy; /* read back from the kernel */
	bool fallback;             /* the requested policy could not be set */
	char setup_err[300];
	int setup_rc; /* 0, or -errno when setup failed */
	char raw_path[4096];
	pthread_t pthread;
	bool started;
	void *run;    /* the struct run this thread belongs to */
	void *mstate; /* the meter's per-thread state (thread_state_size bytes) */
};

/* --explain: mark sample V in the trace (explain.c). */
void explain_mark(struct mthread *t, int64_t v, uint64_t cycle, int64_t now_ns);

/* Relaxed read of a field the measuring thread publishes. */
#define MT_GET(t, field) atomic_load_explicit(&(t)->field, memory_order_relaxed)
#define MT_SET(t, field, v) atomic_store_explicit(&(t)->field, (v), memory_order_relaxed)

/* V enters the worst samples: replace the smallest once full, keep worst_floor current. */
static inline void worst_insert(struct mthread *t, int64_t v, uint64_t cycle, int64_t t_rel)
{
	int slot = 0;

	if (t->nworst < WORST_N) {
		slot = t->nworst++;
	} else {
		for (int i = 1; i < WORST_N; i++)
			if (t->worst[i].latency_ns < t->worst[slot].latency_ns)
				slot = i;
	}
	t->worst[slot] = (struct worst_entry){ v, cycle, t_rel };
	if (t->nworst == WORST_N) {
		t->worst_floor = t->worst[0].latency_ns;
		for (int i = 1; i < WORST_N; i++)
			if (t->worst[i].latency_ns < t->worst_floor)
				t->worst_floor = t->worst[i].latency_ns;
	}
}

/* Record latency V (ns) of cycle CYCLE, observed at NOW_NS (CLOCK_MONOTONIC). */
static inline void sample_record(struct mthread *t, int64_t v, uint64_t cycle, int64_t now_ns)
{
	uint64_t n = MT_GET(t, count);
	int64_t t_rel = now_ns - t->start_ns;

	if (n == 0 || v < MT_GET(t, min_ns))
		MT_SET(t, min_ns, v);
	if (n == 0 || v > MT_GET(t, max_ns))
		MT_SET(t, max_ns, v);
	MT_SET(t, sum_ns, MT_GET(t, sum_ns) + v);
	MT_SET(t, last_ns, v);
	t->sumsq += (double)v * (double)v;
	hist_add(t->hist, v);
	series_add(&t->series, t_rel, v);
	if (v > t->worst_floor)
		worst_insert(t, v, cycle, t_rel);
	if (t->ring && !ring_push(t->ring, v))
		t->raw_lost++;
	MT_SET(t, count, n + 1);
	if (v > t->miss_floor)
		MT_SET(t, misses, MT_GET(t, misses) + 1);
	if (v > t->explain_floor)
		explain_mark(t, v, cycle, now_ns);
}

#endif
