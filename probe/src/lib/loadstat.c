#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonw.h"
#include "loadstat.h"
#include "timeutil.h"

#define LOADAVG_PATH "/proc/loadavg"
#define LOADAVG_READ_MAX 256 /* bytes of /proc/loadavg read: one short line */
#define LOADAVG_MAX 1e6      /* a larger load average is not one */

const char *const loadstat_cat_name[LS_NCAT] = {
	[LS_USER] = "user",     [LS_NICE] = "nice", [LS_SYSTEM] = "system",   [LS_IDLE] = "idle",
	[LS_IOWAIT] = "iowait", [LS_IRQ] = "irq",   [LS_SOFTIRQ] = "softirq", [LS_STEAL] = "steal",
};

/* Decimal digits at *P (blanks first) into V, ended by a blank, '/' or the end; false on
 * none, a sign, an overflow or another character. */
static bool parse_u64(const char **p, uint64_t *v)
{
	const char *q = *p;
	uint64_t n = 0;

	while (*q == ' ' || *q == '\t')
		q++;
	if (!isdigit((unsigned char)*q))
		return false;
	for (; isdigit((unsigned char)*q); q++) {
		if (n > (UINT64_MAX - (uint64_t)(*q - '0')) / 10)
			return false;
		n = n * 10 + (uint64_t)(*q - '0');
	}
	if (*q && !strchr(" \t\n/", *q)) /* "1/467" in /proc/loadavg */
		return false;
	*p = q;
	*v = n;
	return true;
}

static int find_cpu(const struct loadstat *s, int cpu)
{
	for (int i = 0; i < s->ncpus; i++)
		if (s->cpu[i] == cpu)
			return i;
	return -1;
}

/* "cpuN user nice system idle [iowait irq softirq steal guest guest_nice]": the first
 * four columns are required (older kernels print fewer of the rest: 0). */
static void cpu_line(const char *p, struct loadstat *s)
{
	uint64_t cpu, v[LS_NCAT] = { 0 };
	int n = 0;

	if (!parse_u64(&p, &cpu) || cpu > LOADSTAT_CPU_MAX || s->ncpus >= LOADSTAT_MAX_CPUS ||
	    find_cpu(s, (int)cpu) >= 0)
		return;
	while (n < LS_NCAT && parse_u64(&p, &v[n]))
		n++;
	if (n < 4)
		return;
	s->cpu[s->ncpus] = (int)cpu;
	memcpy(s->ticks[s->ncpus], v, sizeof(v));
	/* unsigned: absurd counters wrap in the sums, never undefined */
	s->busy[s->ncpus] =
		v[LS_USER] + v[LS_NICE] + v[LS_SYSTEM] + v[LS_IRQ] + v[LS_SOFTIRQ] + v[LS_STEAL];
	s->total[s->ncpus] = s->busy[s->ncpus] + v[LS_IDLE] + v[LS_IOWAIT];
	s->ncpus++;
}

static void counter_line(const char *line, const char *key, uint64_t *out)
{
	size_t n = strlen(key);
	const char *p = line + n;
	uint64_t v;

	if (!strncmp(line, key, n) && line[n] == ' ' && parse_u64(&p, &v))
		*out = v;
}

int loadstat_parse(FILE *f, struct loadstat *s)
{
	char line[LOADSTAT_LINE_MAX];
	size_t read = 0;
	bool at_start = true;

	s->ok = s->truncated = false;
	s->ncpus = 0;
	s->ctxt = s->intr = s->softirq = 0;
	/* Lines longer than the buffer (intr) are read in pieces: only a line's first counts. */
	while (fgets(line, sizeof(line), f)) {
		bool start = at_start;
		size_t len = strlen(line);

		if (read + len > LOADSTAT_READ_MAX) {
			s->truncated = true;
			break;
		}
		read += len;
		at_start = len && line[len - 1] == '\n';
		if (!start)
			continue;
		if (!strncmp(line, "cpu", 3) && isdigit((unsigned char)line[3]))
			cpu_line(line + 3, s);
		counter_line(line, "ctxt", &s->ctxt);
		counter_line(line, "intr", &s->intr);
		counter_line(line, "softirq", &s->softirq);
	}
	s->ok = s->ncpus > 0;
	return s->ok ? 0 : -EINVAL;
}

int loadavg_parse(const char *text, struct loadavg *l)
{
	const char *p = text;
	char *end;
	uint64_t run, threads;

	l->ok = false;
	for (int i = 0; i < 3; i++) {
		while (*p == ' ')
			p++;
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		l->avg[i] = strtod(p, &end);
		if (end == p || !(l->avg[i] >= 0 && l->avg[i] < LOADAVG_MAX) || *end != ' ')
			return -EINVAL;
		p = end;
	}
	if (!parse_u64(&p, &run) || *p != '/')
		return -EINVAL;
	p++;
	if (!parse_u64(&p, &threads) || run > INT64_MAX || threads > INT64_MAX)
		return -EINVAL;
	l->runnable = (int64_t)run;
	l->threads = (int64_t)threads;
	l->ok = true;
	return 0;
}

static void loadavg_read(struct loadavg *l)
{
	char buf[LOADAVG_READ_MAX];
	FILE *f = fopen(LOADAVG_PATH, "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	l->ok = false;
	if (f)
		(void)fclose(f);
	buf[n] = '\0';
	if (n)
		(void)loadavg_parse(buf, l);
}

int loadstat_read(const char *path, struct loadstat *s)
{
	FILE *f = fopen(path ? path : "/proc/stat", "re");
	int rc;

	s->ok = false;
	s->ncpus = 0;
	s->load.ok = false;
	if (!f)
		return -errno;
	s->t_ns = mono_now_ns();
	rc = loadstat_parse(f, s);
	(void)fclose(f);
	if (!path)
		loadavg_read(&s->load);
	return rc;
}

double loadstat_busy_pct(const struct loadstat *a, const struct loadstat *b, int cpu)
{
	int i = find_cpu(a, cpu), k = find_cpu(b, cpu);

	if (!a->ok || !b->ok || i < 0 || k < 0 || b->total[k] <= a->total[i] ||
	    b->busy[k] < a->busy[i])
		return -1.0;
	return 100.0 * (double)(b->busy[k] - a->busy[i]) / (double)(b->total[k] - a->total[i]);
}

static double round_pct(double pct)
{
	return round(pct * 10.0) / 10.0; /* /proc/stat counts 10 ms ticks: no more digits */
}

static double rate(uint64_t from, uint64_t to, double secs)
{
	return secs > 0 && to >= from ? (double)(to - from) / secs : 0.0;
}

void loadstat_busy_keys(struct jw *w, const struct loadstat *a, const struct loadstat *b)
{
	uint64_t busy = 0, total = 0;
	char key[16];

	jw_key(w, "cpu_busy_pct");
	jw_obj_begin(w);
	for (int k = 0; k < b->ncpus; k++) {
		int i = find_cpu(a, b->cpu[k]);

		if (i < 0 || b->total[k] <= a->total[i] || b->busy[k] < a->busy[i])
			continue;
		snprintf(key, sizeof(key), "%d", b->cpu[k]);
		jw_kdouble(w, key,
			   round_pct(100.0 * (double)(b->busy[k] - a->busy[i]) /
				     (double)(b->total[k] - a->total[i])));
		busy += b->busy[k] - a->busy[i];
		total += b->total[k] - a->total[i];
	}
	jw_obj_end(w);
	jw_kdouble(w, "cpu_busy_pct_all",
		   total ? round_pct(100.0 * (double)busy / (double)total) : 0.0);
}

static void cat_json(struct jw *w, const char *key, const uint64_t *ticks, int64_t tick_ns)
{
	jw_key(w, key);
	jw_obj_begin(w);
	for (int c = 0; c < LS_NCAT; c++)
		jw_kuint(w, loadstat_cat_name[c], ticks[c] * (uint64_t)tick_ns);
	jw_obj_end(w);
}

/* "tick_ns" and "cpu_time_ns": each category's time from A to B per CPU listed in both,
 * and their sum "all". A counter that went back (iowait may, proc(5)) counts 0. */
static void cpu_time_json(struct jw *w, const struct loadstat *a, const struct loadstat *b)
{
	long hz = sysconf(_SC_CLK_TCK);
	int64_t tick_ns = hz > 0 && hz <= NSEC_PER_SEC ? NSEC_PER_SEC / hz : 10 * NSEC_PER_MSEC;
	uint64_t all[LS_NCAT] = { 0 }, d[LS_NCAT];
	char key[16];

	jw_kint(w, "tick_ns", tick_ns);
	jw_key(w, "cpu_time_ns");
	jw_obj_begin(w);
	for (int k = 0; k < b->ncpus; k++) {
		int i = find_cpu(a, b->cpu[k]);

		if (i < 0)
			continue;
		for (int c = 0; c < LS_NCAT; c++) {
			d[c] = b->ticks[k][c] >= a->ticks[i][c] ? b->ticks[k][c] - a->ticks[i][c]
								: 0;
			all[c] += d[c];
		}
		snprintf(key, sizeof(key), "%d", b->cpu[k]);
		cat_json(w, key, d, tick_ns);
	}
	cat_json(w, "all", all, tick_ns);
	jw_obj_end(w);
}

static void loadavg_json(struct jw *w, const char *key, const struct loadavg *l)
{
	jw_key(w, key);
	if (!l->ok) {
		jw_null(w);
		return;
	}
	jw_obj_begin(w);
	jw_kdouble(w, "avg_1min", l->avg[0]);
	jw_kdouble(w, "avg_5min", l->avg[1]);
	jw_kdouble(w, "avg_15min", l->avg[2]);
	jw_kint(w, "runnable", l->runnable);
	jw_kint(w, "threads", l->threads);
	jw_obj_end(w);
}

void loadstat_json(struct jw *w, const struct loadstat *a, const struct loadstat *b)
{
	double secs = (double)(b->t_ns - a->t_ns) / NSEC_PER_SEC;

	if (!a->ok || !b->ok) {
		jw_null(w);
		return;
	}
	jw_obj_begin(w);
	jw_kstr(w, "source", "/proc/stat");
	jw_kint(w, "interval_ns", b->t_ns - a->t_ns);
	loadstat_busy_keys(w, a, b);
	jw_kdouble(w, "ctxt_per_s", round(rate(a->ctxt, b->ctxt, secs)));
	jw_kdouble(w, "intr_per_s", round(rate(a->intr, b->intr, secs)));
	jw_kdouble(w, "softirq_per_s", round(rate(a->softirq, b->softirq, secs)));
	cpu_time_json(w, a, b);
	jw_key(w, "loadavg");
	jw_obj_begin(w);
	loadavg_json(w, "start", &a->load);
	loadavg_json(w, "end", &b->load);
	jw_obj_end(w);
	jw_obj_end(w);
}
