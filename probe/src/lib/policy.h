/* Scheduling policies: parse "other[:NICE] | batch | idle | fifo:PRIO | rr:PRIO |
 * deadline:RUNTIME/DEADLINE/PERIOD", apply to one thread, read back. */
#ifndef RTLAB_POLICY_H
#define RTLAB_POLICY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef SCHED_DEADLINE
#define SCHED_DEADLINE 6
#endif

struct policy_spec {
	int policy;           /* SCHED_OTHER, SCHED_FIFO, ... */
	int priority;         /* 1..99 for fifo/rr, 0 otherwise */
	int nice;             /* -20..19, other/batch only */
	uint64_t runtime_ns;  /* deadline only */
	uint64_t deadline_ns; /* deadline only */
	uint64_t period_ns;   /* deadline only */
};

int policy_parse(const char *s, struct policy_spec *out, char *err, size_t errlen);

/* Apply to thread TID (0 = caller). 0 or -errno with a reason in err. */
int policy_apply(const struct policy_spec *p, pid_t tid, char *err, size_t errlen);

/* Read back what the kernel really uses for TID (0 = caller). 0 or -errno. */
int policy_read(pid_t tid, struct policy_spec *out);

/* "other", "fifo", "rr", "batch", "idle", "deadline" or "unknown". */
const char *policy_name(int policy);

/* Canonical text form, parseable by policy_parse ("fifo:80", "other:0"). */
void policy_format(const struct policy_spec *p, char *buf, size_t len);

struct jw;

/* As an object of the result document: name, priority, nice (and deadline's times). */
void policy_json(struct jw *w, const struct policy_spec *p);

#endif
