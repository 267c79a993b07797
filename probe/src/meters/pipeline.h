/* pipeline: the shared types of the meter (pipeline.c) and its producer (pipeline_prod.c). */
#ifndef RTLAB_METER_PIPELINE_H
#define RTLAB_METER_PIPELINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/companion.h"
#include "lib/policy.h"
#include "lib/timeutil.h"

#define RING_BYTES_MAX ((int64_t)256 << 20) /* records of one ring, locked in memory */
#define LOOK_NS (100 * NSEC_PER_MSEC)       /* the consumer checks stop and producer this often */
#define END_NS NSEC_PER_SEC                 /* for the producer to see a stop, after its sleep */

struct pipeline_params {
	const char *consumer_text;
	int64_t ring;        /* records */
	int64_t rate_hz;     /* records produced per second */
	int64_t record_size; /* bytes, header included */
	bool processes;
	int64_t work_ns; /* the consumer's busy time per record taken */
	struct cpulist prod_cpus;
	bool prod_cpu_set;
	/* Derived by check(). */
	bool periodic;
	int64_t period_ns; /* the periodic consumer's; 0 for aperiodic */
	int prod_cpu;      /* -1: where the consumer is */
	char fault[48];    /* a refused value argv does not hold as such */
};

/* The head of every record; the rest of record_size is payload the producer fills. */
struct pipe_rec {
	int64_t stamp_ns; /* CLOCK_MONOTONIC when the producer wrote it */
	uint64_t seq;     /* 0-based record number, dropped ones included */
};

/* MAP_SHARED, followed by the records: the same for a producer thread and process. */
struct pipe_shared {
	_Alignas(64) _Atomic uint64_t head;                 /* records written (producer) */
	_Atomic uint64_t produced, dropped, late, max_fill; /* records */
	_Atomic uint32_t done;              /* the producer has ended: the counters are final */
	_Alignas(64) _Atomic uint64_t tail; /* records taken (consumer) */
	_Atomic uint32_t waiting;           /* the aperiodic consumer is about to sleep on bell */
	_Alignas(64) _Atomic uint32_t bell; /* futex: bumped to wake the consumer */
	_Atomic uint32_t go;                /* futex: the consumer has set the schedule */
	_Atomic uint32_t quit;              /* the consumer stops: produce no more */
	struct comp_report rep;             /* the producer says it is set up */
	int64_t start_ns, duration_ns;      /* of the schedule; duration 0: none */
	uint64_t loops;                     /* records to produce, 0: no limit */
};

#define SH_BYTES ((sizeof(struct pipe_shared) + 63) & ~(size_t)63)
#define RECS(sh) ((unsigned char *)(sh) + SH_BYTES)
#define LD(sh, f) atomic_load_explicit(&(sh)->f, memory_order_relaxed)
#define ST(sh, f, v) atomic_store_explicit(&(sh)->f, (v), memory_order_relaxed)

struct pipe_state {
	const struct pipeline_params *p;
	struct pipe_shared *sh;
	size_t map_bytes;
	unsigned char *copy; /* the consumer takes each record out into this */
	struct companion prod;
	uint64_t tail; /* the consumer's copy of sh->tail */
	/* What the run saw; copied out of sh, which teardown unmaps. */
	struct comp_info prod_seen; /* the producer as it really ran */
	const char *err;            /* why the consumer ended early, or NULL */
	uint64_t records, unread, late, max_fill;
	int64_t cpu_ns, wall_ns; /* the consumer's thread CPU time and wall time in its loop */
};

/* The producer (pipeline_prod.c). */
void ring_bell(struct pipe_shared *sh, bool pshared);
/* The producer's body, as a companion thread or process (arg: the pipe_state). */
void producer_run(void *arg);

#endif
