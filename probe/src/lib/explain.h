/*
 * --explain THRESH: while measuring, trace the measured CPUs in a private tracefs
 * instance; a sample above THRESH is marked in the trace (trace_marker, from the
 * measuring thread: one write) and a reader thread, off the measured CPUs, drains the
 * per-CPU buffers, keeps each CPU's recent events and explains the marked samples
 * (xattr.h). The worst --explain-max are kept for the document's "spikes".
 */
#ifndef RTLAB_EXPLAIN_H
#define RTLAB_EXPLAIN_H

#include <stddef.h>

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

/* `rtlab-probe explain --cleanup`: remove the instances of dead runs. */
int explain_cmd(int argc, char **argv);

#endif
