/*
 * Achieved activity: snapshots of /proc/stat and /proc/loadavg at the start and end of a
 * run, so a document shows that its load was real (per-CPU busy %, the CPU time split
 * per category, context switches, interrupts and softirqs per second, load average).
 */
#ifndef RTLAB_LOADSTAT_H
#define RTLAB_LOADSTAT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define LOADSTAT_MAX_CPUS 1024
#define LOADSTAT_READ_MAX (4u << 20) /* bytes read of /proc/stat; the rest is ignored */
#define LOADSTAT_LINE_MAX 4096       /* longer lines (intr) count by their first piece */
#define LOADSTAT_CPU_MAX 1048575     /* a larger CPU number is not a CPU line */

/* The categories of a "cpuN" line, in the kernel's column order (fs/proc/stat.c
 * show_stat): user nice system idle iowait irq softirq steal; guest and guest_nice
 * follow but are already inside user and nice. */
enum loadstat_cat {
	LS_USER,
	LS_NICE,
	LS_SYSTEM,
	LS_IDLE,
	LS_IOWAIT,
	LS_IRQ,
	LS_SOFTIRQ,
	LS_STEAL,
	LS_NCAT
};

struct jw;

/* /proc/loadavg: "0.52 0.58 0.59 1/467 12345". */
struct loadavg {
	bool ok;
	double avg[3]; /* 1, 5 and 15 minutes */
	int64_t runnable, threads;
};

struct loadstat {
	bool ok;        /* the snapshot was read */
	bool truncated; /* /proc/stat was longer than LOADSTAT_READ_MAX */
	int64_t t_ns;   /* CLOCK_MONOTONIC when read */
	int ncpus;      /* per-CPU lines */
	int cpu[LOADSTAT_MAX_CPUS];
	uint64_t ticks[LOADSTAT_MAX_CPUS][LS_NCAT]; /* USER_HZ ticks per category */
	uint64_t busy[LOADSTAT_MAX_CPUS];  /* USER_HZ ticks: user+nice+system+irq+softirq+steal */
	uint64_t total[LOADSTAT_MAX_CPUS]; /* USER_HZ ticks: busy + idle + iowait */
	uint64_t ctxt;                     /* context switches since boot */
	uint64_t intr;                     /* interrupts since boot */
	uint64_t softirq;                  /* softirqs since boot */
	struct loadavg load;               /* read just after /proc/stat */
};

/* The category names as in the document ("user", "nice", ...), indexed by loadstat_cat. */
extern const char *const loadstat_cat_name[LS_NCAT];

/* Parse /proc/stat text from F into S (at most LOADSTAT_READ_MAX bytes, lines cut at
 * LOADSTAT_LINE_MAX; malformed lines are skipped). 0, or -EINVAL with no CPU line. */
int loadstat_parse(FILE *f, struct loadstat *s);

/* Parse /proc/loadavg TEXT into L. 0 or -EINVAL (L->ok false). */
int loadavg_parse(const char *text, struct loadavg *l);

/* Read PATH (NULL: /proc/stat, and then /proc/loadavg) into S. 0 or -errno (S->ok false). */
int loadstat_read(const char *path, struct loadstat *s);

/* Busy % of CPU between A and B, or a negative value when it is unknown. */
double loadstat_busy_pct(const struct loadstat *a, const struct loadstat *b, int cpu);

/* The keys "cpu_busy_pct" {"CPU": %} and "cpu_busy_pct_all" from A to B, in an open object. */
void loadstat_busy_keys(struct jw *w, const struct loadstat *a, const struct loadstat *b);

/*
 * "activity" object: interval_ns, cpu_busy_pct {"CPU": %}, cpu_busy_pct_all,
 * ctxt_per_s, intr_per_s, softirq_per_s, tick_ns, cpu_time_ns {"CPU"|"all": {category:
 * ns}}, loadavg {"start", "end"}; null when either snapshot is missing.
 */
void loadstat_json(struct jw *w, const struct loadstat *a, const struct loadstat *b);

#endif
