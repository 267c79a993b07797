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
	int index;
	int cpu;                  /* pinned CPU, -1 when unpinned */
	pid_t tid;
	int64_t period_ns;        /* nominal activation period */
	struct policy_spec policy; /* read back from the kernel */
	bool fallback;            /* the requested policy could not be set */
	char setup_err[256];
	int setup_rc;             /* 0, or -errno when setup failed */

	int64_t start_ns;         /* CLOCK_MONOTONIC at the first target computation */
	int64_t min_ns, max_ns, sum_ns;
	double sumsq;             /* ns^2, for the standard deviation */
	uint64_t overruns;        /* wake-ups later than a whole period */
	uint64_t lost;            /* raw samples dropped because the ring was full */
	struct hist *hist;
	struct series series;
	struct worst_entry worst[WORST_N];
	int nworst;
	int worst_min;            /* index of the smallest entry in worst[] */
	struct ring *ring;        /* NULL when raw capture is off */
	char raw_path[4096];

	/* Published for the live status line; relaxed stores, plain moves on common CPUs. */
	_Atomic uint64_t pub_count;
	_Atomic int64_t pub_last, pub_min, pub_max, pub_sum;

	pthread_t pthread;
	bool started;
	void *run;                /* the struct run this thread belongs to */
};

static inline void worst_insert(struct mthread *t, int64_t v, uint64_t cycle, int64_t t_rel)
{
	int slot;

	if (t->nworst < WORST_N) {
		slot = t->nworst++;
	} else {
		if (v <= t->worst[t->worst_min].latency_ns)
			return;
		slot = t->worst_min;
	}
	t->worst[slot] = (struct worst_entry){ v, cycle, t_rel };
	t->worst_min = 0;
	for (int i = 1; i < t->nworst; i++)
		if (t->worst[i].latency_ns < t->worst[t->worst_min].latency_ns)
			t->worst_min = i;
}

/* Record latency V (ns) of cycle CYCLE, observed at NOW_NS (CLOCK_MONOTONIC). */
static inline void sample_record(struct mthread *t, int64_t v, uint64_t cycle, int64_t now_ns)
{
	uint64_t n = atomic_load_explicit(&t->pub_count, memory_order_relaxed);
	int64_t t_rel = now_ns - t->start_ns;

	if (n == 0 || v < t->min_ns)
		t->min_ns = v;
	if (n == 0 || v > t->max_ns)
		t->max_ns = v;
	t->sum_ns += v;
	t->sumsq += (double)v * (double)v;
	hist_add(t->hist, v);
	series_add(&t->series, t_rel, v);
	if (t->nworst < WORST_N || v > t->worst[t->worst_min].latency_ns)
		worst_insert(t, v, cycle, t_rel);
	if (t->ring && !ring_push(t->ring, v))
		t->lost++;

	atomic_store_explicit(&t->pub_count, n + 1, memory_order_relaxed);
	atomic_store_explicit(&t->pub_last, v, memory_order_relaxed);
	atomic_store_explicit(&t->pub_min, t->min_ns, memory_order_relaxed);
	atomic_store_explicit(&t->pub_max, t->max_ns, memory_order_relaxed);
	atomic_store_explicit(&t->pub_sum, t->sum_ns, memory_order_relaxed);
}

#endif
