#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "irqstat.h"
#include "timeutil.h"

#define READ_CHUNK (64 * 1024)

/*
 * The local (per-CPU) timer interrupt, first kind found wins: x86 and powerpc print it as
 * the LOC row (arch_show_interrupts; powerpc has two, both counted); arm and arm64 name the
 * per-CPU PPI "arch_timer" (drivers/clocksource/arm_arch_timer.c), riscv "riscv-timer"
 * (timer-riscv.c), loongarch "timer" (arch/loongarch/kernel/time.c). x86's IRQ 0 "timer"
 * is the global PIT/HPET: LOC is always there first.
 */
static const struct {
	const char *name;
	bool label; /* matches the row's label; else the last word of a numeric row */
} timer_kinds[] = {
	{ "LOC", true },
	{ "arch_timer", false },
	{ "riscv-timer", false },
	{ "timer", false },
};

#define NKINDS ((int)(sizeof(timer_kinds) / sizeof(timer_kinds[0])))

/* Global counters printed with one column whatever the number of CPUs. */
static const char *const global_rows[] = { "ERR", "MIS", "Err" };

static bool is_number(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

static const char *skip_blank(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

/* Copy [P, END) into BUF with runs of blanks made one space, trimmed, cut to fit. */
static void collapse(const char *p, const char *end, char *buf, size_t len)
{
	size_t n = 0;

	p = skip_blank(p, end);
	while (p < end && n + 1 < len) {
		if (*p == ' ' || *p == '\t') {
			p = skip_blank(p, end);
			if (p < end)
				buf[n++] = ' ';
			continue;
		}
		buf[n++] = *p++;
	}
	buf[n] = '\0';
}

/* A GIC private peripheral interrupt (hwirq 16-31, GICv3.1 extended 1056-1119): per-CPU
 * like the timer or the PMU, not a device's. NAME is "CHIP HWIRQ ...". */
static bool gic_ppi(const char *name)
{
	const char *sp = strchr(name, ' ');
	long hw;

	if (strncmp(name, "GIC", 3) || !sp || !isdigit((unsigned char)sp[1]))
		return false;
	hw = strtol(sp + 1, NULL, 10);
	return (hw >= 16 && hw <= 31) || (hw >= 1056 && hw <= 1119);
}

static int row_timer_kind(const struct irq_row *r, bool numeric)
{
	const char *last = strrchr(r->name, ' ');

	last = last ? last + 1 : r->name;
	for (int k = 0; k < NKINDS; k++) {
		if (timer_kinds[k].label ? !strcmp(r->label, timer_kinds[k].name)
					 : numeric && !strcmp(last, timer_kinds[k].name))
			return k + 1;
	}
	return 0;
}

static bool global_row(const char *label)
{
	for (size_t i = 0; i < sizeof(global_rows) / sizeof(global_rows[0]); i++)
		if (!strcmp(label, global_rows[i]))
			return true;
	return false;
}

/* Header "   CPU0  CPU2 ...": which of T's CPUs each column is (-1: not followed). */
static int parse_header(const char *p, const char *end, struct irq_table *t, int **colmap)
{
	int ncols = 0;

	for (const char *q = p; q + 3 < end; q++)
		if (!strncmp(q, "CPU", 3))
			ncols++;
	if (!ncols || !(*colmap = calloc((size_t)ncols, sizeof(**colmap))))
		return ncols ? -ENOMEM : -EINVAL;
	ncols = 0;
	for (const char *q = p; q + 3 < end; q++) {
		if (strncmp(q, "CPU", 3) || !isdigit((unsigned char)q[3]))
			continue;
		int cpu = atoi(q + 3), col = -1;

		for (int i = 0; i < t->ncpus; i++)
			if (t->cpu[i] == cpu) {
				col = i;
				t->present[i] = true;
			}
		(*colmap)[ncols++] = col;
	}
	return ncols ? ncols : -EINVAL;
}

/* One row [P, END): 0 kept, 1 skipped. */
static int parse_row(const char *p, const char *end, int ncols, const int *colmap,
		     struct irq_table *t)
{
	struct irq_row *r = &t->row[t->nrows];
	uint64_t *count = &t->count[(size_t)t->nrows * (size_t)t->ncpus];
	const char *colon = memchr(p, ':', (size_t)(end - p));
	int n = 0;
	bool numeric;

	p = skip_blank(p, end);
	if (!colon || colon == p || (size_t)(colon - p) >= sizeof(r->label))
		return 1;
	memcpy(r->label, p, (size_t)(colon - p));
	r->label[colon - p] = '\0';
	if (global_row(r->label))
		return 1;
	for (p = colon + 1; n < ncols; n++) {
		char *after;
		unsigned long long v;

		p = skip_blank(p, end);
		if (p >= end || !isdigit((unsigned char)*p))
			break;
		errno = 0;
		v = strtoull(p, &after, 10);
		if (errno || after > end)
			return 1;
		if (colmap[n] >= 0)
			count[colmap[n]] = v;
		p = after;
	}
	if (n < ncols) /* not a per-CPU row */
		return 1;
	collapse(p, end, r->name, sizeof(r->name));
	numeric = is_number(r->label);
	r->occurrence = 0;
	for (int i = 0; !numeric && i < t->nrows; i++)
		r->occurrence += !strcmp(t->row[i].label, r->label);
	r->timer = row_timer_kind(r, numeric);
	r->device = numeric && !gic_ppi(r->name);
	return 0;
}

int irqstat_parse(const char *text, size_t len, const int *cpus, int ncpus, struct irq_table *t)
{
	const char *p = text, *end = text + len, *nl = memchr(p, '\n', len);
	size_t lines = 0;
	int *colmap = NULL, ncols, rc = 0;

	memset(t, 0, sizeof(*t));
	t->ncpus = ncpus < IRQSTAT_CPUS_MAX ? ncpus : IRQSTAT_CPUS_MAX;
	for (int i = 0; i < t->ncpus; i++)
		t->cpu[i] = cpus[i];
	if (!nl)
		return -EINVAL;
	if ((ncols = parse_header(p, nl, t, &colmap)) < 0)
		return ncols;
	for (const char *q = nl + 1; q < end && (q = memchr(q, '\n', (size_t)(end - q))); q++)
		lines++;
	if (lines > IRQSTAT_ROWS_MAX) {
		lines = IRQSTAT_ROWS_MAX;
		t->truncated = true; /* rows beyond are not counted */
	}
	t->row = calloc(lines ? lines : 1, sizeof(*t->row));
	t->count =
		calloc((lines ? lines : 1) * (size_t)(t->ncpus ? t->ncpus : 1), sizeof(*t->count));
	if (!t->row || !t->count) {
		rc = -ENOMEM;
		goto out;
	}
	for (p = nl + 1; p < end && (size_t)t->nrows < lines; p = nl + 1) {
		if (!(nl = memchr(p, '\n', (size_t)(end - p))))
			break; /* cut by the read limit */
		if (!parse_row(p, nl, ncols, colmap, t))
			t->nrows++;
		else
			memset(&t->count[(size_t)t->nrows * (size_t)t->ncpus], 0,
			       (size_t)t->ncpus * sizeof(*t->count));
	}
out:
	free(colmap);
	if (rc)
		irqstat_free(t);
	return rc;
}

/* Read all of FD up to IRQSTAT_READ_MAX into *BUF (*LEN bytes). 0 or -errno. */
static int read_bounded(int fd, char **buf, size_t *len, bool *truncated)
{
	size_t cap = READ_CHUNK, n = 0;
	char *b = malloc(cap), *nb;
	ssize_t got;

	*truncated = false;
	while (b) {
		if (n == cap) {
			if (cap >= IRQSTAT_READ_MAX) {
				char one;

				while ((got = read(fd, &one, 1)) < 0 && errno == EINTR)
					;
				*truncated = got > 0;
				break;
			}
			cap = cap * 2 > IRQSTAT_READ_MAX ? IRQSTAT_READ_MAX : cap * 2;
			if (!(nb = realloc(b, cap)))
				break;
			b = nb;
		}
		got = read(fd, b + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int e = errno;

			free(b);
			return -e;
		}
		if (!got)
			break;
		n += (size_t)got;
	}
	if (!b || (n == cap && cap < IRQSTAT_READ_MAX)) {
		free(b);
		return -ENOMEM;
	}
	*buf = b;
	*len = n;
	return 0;
}

int irqstat_read(const char *path, const int *cpus, int ncpus, struct irq_table *t)
{
	int fd = open(path ? path : IRQSTAT_PATH, O_RDONLY | O_CLOEXEC), rc;
	bool truncated = false;
	size_t len = 0;
	char *text = NULL;

	memset(t, 0, sizeof(*t));
	if (fd < 0)
		return -errno;
	rc = read_bounded(fd, &text, &len, &truncated);
	(void)close(fd);
	if (rc)
		return rc;
	int64_t now = mono_now_ns();

	rc = irqstat_parse(text, len, cpus, ncpus, t);
	free(text);
	t->t_ns = now;
	t->truncated = t->truncated || truncated;
	return rc;
}

void irqstat_free(struct irq_table *t)
{
	free(t->row);
	free(t->count);
	t->row = NULL;
	t->count = NULL;
	t->nrows = 0;
}

/* The row of A that is row J of B (same label, same occurrence), or -1. */
static int match_row(const struct irq_table *a, const struct irq_row *rb, int hint)
{
	for (int k = 0; k < a->nrows; k++) {
		int j = (hint + k) % a->nrows;

		if (a->row[j].occurrence == rb->occurrence && !strcmp(a->row[j].label, rb->label))
			return j;
	}
	return -1;
}

static void top_insert(struct irq_cpu_delta *d, int row, uint64_t count)
{
	int i;

	if (d->ntop == IRQSTAT_TOP) {
		if (d->top[IRQSTAT_TOP - 1].count >= count)
			return;
		i = IRQSTAT_TOP - 1;
	} else {
		i = d->ntop++;
	}
	for (; i > 0 && d->top[i - 1].count < count; i--)
		d->top[i] = d->top[i - 1];
	d->top[i].row = row;
	d->top[i].count = count;
}

bool irqstat_delta(const struct irq_table *a, const struct irq_table *b, int i,
		   struct irq_cpu_delta *d)
{
	int kind = 0, hint = 0;

	memset(d, 0, sizeof(*d));
	d->cpu = b->cpu[i];
	if (!a->present[i] || !b->present[i])
		return false;
	for (int j = 0; j < b->nrows; j++)
		if (b->row[j].timer && (!kind || b->row[j].timer < kind))
			kind = b->row[j].timer;
	for (int j = 0; j < b->nrows; j++) {
		const struct irq_row *rb = &b->row[j];
		int ja = match_row(a, rb, hint);
		uint64_t after = b->count[(size_t)j * (size_t)b->ncpus + (size_t)i];
		uint64_t before = ja < 0 ? 0 : a->count[(size_t)ja * (size_t)a->ncpus + (size_t)i];
		uint64_t delta = after - before;

		if (after < before) /* a 32-bit counter wrapped; a 64-bit one was reset */
			delta = before <= UINT32_MAX ? after + ((uint64_t)1 << 32) - before : after;
		hint = ja < 0 ? hint : ja + 1;
		d->total += delta;
		if (kind && rb->timer == kind)
			d->timer += delta;
		if (delta)
			top_insert(d, j, delta);
	}
	d->timer_kind = kind;
	d->timer_name = kind ? timer_kinds[kind - 1].name : NULL;
	return true;
}

bool irqstat_device(const struct irq_table *b, int row, const struct irq_cpu_delta *d)
{
	return b->row[row].device && b->row[row].timer != d->timer_kind;
}
