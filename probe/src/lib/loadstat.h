/*
 * Achieved activity: snapshots of /proc/stat at the start and end of a run,
 * so a document shows that its load was real (per-CPU busy %, context
 * switches, interrupts and softirqs per second).
 */
#ifndef RTLAB_LOADSTAT_H
#define RTLAB_LOADSTAT_H

#include <stdbool.h>
#include <stdint.h>

#define LOADSTAT_MAX_CPUS 1024

struct jw;

struct loadstat {
	bool ok;      /* the snapshot was read */
	int64_t t_ns; /* CLOCK_MONOTONIC when read */
	int ncpus;    /* per-CPU lines */
	int cpu[LOADSTAT_MAX_CPUS];
	uint64_t busy[LOADSTAT_MAX_CPUS];  /* USER_HZ ticks: user+nice+system+irq+softirq+steal */
	uint64_t total[LOADSTAT_MAX_CPUS]; /* USER_HZ ticks: busy + idle + iowait */
	uint64_t ctxt;                     /* context switches since boot */
	uint64_t intr;                     /* interrupts since boot */
	uint64_t softirq;                  /* softirqs since boot */
};

/* Read PATH (NULL: /proc/stat) into S. 0 or -errno (S->ok false). */
int loadstat_read(const char *path, struct loadstat *s);

/* Busy % of CPU between A and B, or a negative value when it is unknown. */
double loadstat_busy_pct(const struct loadstat *a, const struct loadstat *b, int cpu);

/* The keys "cpu_busy_pct" {"CPU": %} and "cpu_busy_pct_all" from A to B, in an open object. */
void loadstat_busy_keys(struct jw *w, const struct loadstat *a, const struct loadstat *b);

/*
 * "activity" object: interval_ns, cpu_busy_pct {"CPU": %}, cpu_busy_pct_all,
 * ctxt_per_s, intr_per_s, softirq_per_s; null when either snapshot is missing.
 */
void loadstat_json(struct jw *w, const struct loadstat *a, const struct loadstat *b);

#endif
