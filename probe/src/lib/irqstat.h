/*
 * /proc/interrupts: read (bounded), parse for a few CPUs, and the per-CPU counts between
 * two reads. The header names the online CPUs ("CPU0 CPU2 ..."; a column is not a CPU
 * number when CPUs are offline); each row is "LABEL: COUNT... DESCRIPTION" with one count
 * per header column, except global rows (x86 ERR/MIS, arm64 Err) that have one.
 * Numeric labels are device interrupts (kernel/irq/proc.c show_interrupts); others are
 * the architecture's own (x86 LOC/RES/CAL/TLB/..., arm64 and riscv IPI0..n).
 */
#ifndef RTLAB_IRQSTAT_H
#define RTLAB_IRQSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IRQSTAT_PATH "/proc/interrupts"
#define IRQSTAT_READ_MAX (4u << 20) /* bytes read of /proc/interrupts; more: truncated */
#define IRQSTAT_CPUS_MAX 64         /* CPUs followed */
#define IRQSTAT_ROWS_MAX 16384      /* rows kept of one read */
#define IRQSTAT_LABEL_MAX 16        /* bytes of a row's label, "LOC" or "36" */
#define IRQSTAT_NAME_MAX 160        /* bytes of a row's description, blanks collapsed */
#define IRQSTAT_TOP 32              /* rows listed per CPU, largest first */

struct irq_row {
	char label[IRQSTAT_LABEL_MAX];
	char name[IRQSTAT_NAME_MAX];
	int occurrence; /* rows of the same label before this one (powerpc has two LOC) */
	bool device;    /* numeric label, not a per-CPU GIC PPI (see irqstat_device) */
	int timer;      /* a local timer row of kind TIMER - 1 (irqstat.c), or 0 */
};

/* One read, restricted to the CPUs asked for. */
struct irq_table {
	int ncpus;
	int cpu[IRQSTAT_CPUS_MAX];
	bool present[IRQSTAT_CPUS_MAX]; /* the CPU has a column in the header */
	int nrows;
	struct irq_row *row;
	uint64_t *count; /* nrows x ncpus */
	int64_t t_ns;    /* CLOCK_MONOTONIC when the read ended */
	bool truncated;  /* longer than IRQSTAT_READ_MAX, or more than IRQSTAT_ROWS_MAX rows */
};

/* Counts of one CPU between two reads. */
struct irq_cpu_delta {
	int cpu;
	uint64_t total;
	int timer_kind;         /* the kind counted in timer (irq_row.timer), 0: none */
	const char *timer_name; /* NULL: no local timer row */
	uint64_t timer;
	int ntop;
	struct {
		int row; /* in the later table */
		uint64_t count;
	} top[IRQSTAT_TOP];
};

/* Parse TEXT (LEN bytes) for CPUS[0..NCPUS) (at most IRQSTAT_CPUS_MAX) into T; a last
 * line without its newline (a cut read) is ignored. 0, -EINVAL (no header) or -ENOMEM. */
int irqstat_parse(const char *text, size_t len, const int *cpus, int ncpus, struct irq_table *t);

/* Read PATH (IRQSTAT_PATH when NULL) and parse it as irqstat_parse. 0 or -errno. */
int irqstat_read(const char *path, const int *cpus, int ncpus, struct irq_table *t);

void irqstat_free(struct irq_table *t);

/* Counts on the I-th CPU of A (and B: both parsed for the same CPUs) from A to B into
 * D. Counters are 32-bit in the kernel: a smaller later value is a wrap. False when the
 * CPU has no column in one of them. */
bool irqstat_delta(const struct irq_table *a, const struct irq_table *b, int i,
		   struct irq_cpu_delta *d);

/* Row ROW of B is a device interrupt: numeric, not the local timer of D, not a PPI. */
bool irqstat_device(const struct irq_table *b, int row, const struct irq_cpu_delta *d);

#endif
