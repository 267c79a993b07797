/*
 * --explain THRESH: while measuring, trace the measured CPUs in a private tracefs
 * instance; a sample above THRESH is marked in the trace (trace_marker, from the
 * measuring thread: one write) and a reader thread, off the measured CPUs, drains the
 * per-CPU buffers, keeps each CPU's recent events and explains the marked samples
 * (xattr.h). The worst --explain-max are kept for the document's "spikes". A meter
 * that reads a trace of its own feeds it instead (explain_feed.c).
 */
#ifndef RTLAB_EXPLAIN_H
#define RTLAB_EXPLAIN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXPLAIN_DEFAULT_MAX 10
#define EXPLAIN_MAX_MAX 1000

struct run;
struct jw;

/* Set up tracing for R when --explain was given. 0; -errno with a reason when it
 * cannot be done (the run exits 3) unless --allow-fallback (then 0, and the document
 * says why there is no explanation). */
int explain_start(struct run *r, char *err, size_t errlen);

/* After the measuring threads ended: drain, explain, remove the instance. Idempotent. */
void explain_stop(struct run *r);

/* Free what explain_start() allocated (stopping first if needed). */
void explain_free(struct run *r);

/* The document's "explain" (null without --explain) and "spikes" values. */
void explain_json(struct jw *w, const struct run *r);
void explain_spikes_json(struct jw *w, const struct run *r);

/*
 * A meter that reads a trace of its own (meter.explain_fed; explain_feed.c): no
 * instance, reader or marker of the explanation's own. The meter's thread calls these;
 * the state is NULL without --explain.
 */
struct mthread;
struct tracefs_instance;

struct explain_sample {
	int thread; /* index of the measuring thread whose sample it is */
	pid_t tid;  /* the thread that was late */
	int cpu;    /* where it was switched in */
	uint64_t cycle;
	int64_t act_ns;   /* when it was due, CLOCK_MONOTONIC (the trace clock "mono") */
	int64_t lat_ns;   /* it ran at act_ns + lat_ns */
	int64_t slack_ns; /* its timer's slack: may fire this long after act_ns, else 0 */
};

/* The run's --explain state of measuring thread T's run, or NULL. */
struct explain *explain_of(const struct mthread *t);
/* Before tracing starts: the explanation's events and stack trigger in INST (the
 * meter's instance, trace clock "mono"). */
void explain_attach(struct explain *x, const struct tracefs_instance *inst);
/* Before the meter removes INST: the trigger off (an instance cannot go with one). */
void explain_detach(struct explain *x);
/* One line of the instance's trace_pipe, in order. */
void explain_feed(struct explain *x, const char *line);
/* A sample, once every line up to its switch-in was fed: explained when it is above
 * the threshold and among the worst kept so far. */
void explain_offer(struct explain *x, const struct explain_sample *s);

/* `rtlab-probe explain --cleanup`: remove the instances of dead runs. */
int explain_cmd(int argc, char **argv);

#endif
