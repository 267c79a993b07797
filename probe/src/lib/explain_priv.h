/* The state of --explain, shared by explain.c (capture), explain_feed.c (a meter's own
 * trace) and explain_doc.c (output). */
#ifndef RTLAB_EXPLAIN_PRIV_H
#define RTLAB_EXPLAIN_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sampler.h"
#include "tracefs.h"
#include "xattr.h"
#include "xstack.h"

#define READ_BUF (1 << 16)
#define EVENTS_TEXT 1024

struct xcpu {
	int cpu, fd;
	struct xring ring;
	struct xstacks stacks;
	size_t len;
	char buf[READ_BUF];
};

struct explain_thread { /* written by its measuring thread only */
	int64_t *top;   /* latencies marked, the largest max_spikes */
	int ntop;
	uint64_t marked, failed;
};

struct explain {
	int64_t threshold_ns;
	int max;
	bool unavailable;
	char reason[300];
	struct tracefs fs;
	struct tracefs_instance inst;
	char instance[64]; /* its name, kept after removal */
	char clock[16];
	bool clock_mono;
	int marker_fd;
	int ncpus;
	struct xcpu *cpus;
	char events[EVENTS_TEXT], missing[EVENTS_TEXT]; /* "sys:ev,sys:ev" */
	bool stacks_on;                                 /* the stacktrace trigger is set */
	bool stacks_recorded;                           /* it was set for the run */
	char stack_trigger[96];                         /* its text, to remove it */
	char stacks_off[200];                           /* why stacks are not recorded */
	uint64_t stacks_read;
	pthread_t reader;
	bool reader_started, stopped;
	_Atomic int stop;
	struct explain_thread *th;
	int nthreads;
	struct mthread *threads;
	struct xspike *kept, scratch;
	int nkept;
	uint64_t lost_events, markers_seen;
	int64_t mark_ts_ns; /* trace time of the marker being explained */
	/* a meter that reads its own trace feeds it (explain_feed.c): no instance, reader
	 * or marker of our own */
	bool fed;
	struct xcpu *open; /* the CPU whose "<stack trace>" the next frame lines belong to */
};

/* explain.c, shared with explain_feed.c */
int explain_enable_events(struct explain *x);
void explain_remove_stacks(struct explain *x);
void explain_event(struct explain *x, struct xcpu *c, const struct xev *ev, const char *mark);
void explain_one(struct explain *x, struct xcpu *c, const struct xmark *m, pid_t tid);

#endif
