#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonw.h"
#include "loadstat.h"
#include "timeutil.h"

int loadstat_read(const char *path, struct loadstat *s)
{
	char line[4096];
	FILE *f = fopen(path ? path : "/proc/stat", "r");

	s->ok = false;
	s->ncpus = 0;
	s->ctxt = s->intr = s->softirq = 0;
	if (!f)
		return -errno;
	s->t_ns = mono_now_ns();
	/* Lines longer than the buffer (intr) are read in pieces: only a piece at a line start counts. */
	bool at_start = true;

	while (fgets(line, sizeof(line), f)) {
		bool start = at_start;
		unsigned long long v[8] = { 0 };
		int cpu;

		at_start = strchr(line, '\n') != NULL;
		if (!start)
			continue;
		if (!strncmp(line, "cpu", 3) && line[3] >= '0' && line[3] <= '9') {
			if (s->ncpus >= LOADSTAT_MAX_CPUS ||
			    sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu,
				   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 5)
				continue;
			/* user nice system idle iowait irq softirq steal; guest is inside user */
			s->cpu[s->ncpus] = cpu;
			s->busy[s->ncpus] = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
			s->total[s->ncpus] = s->busy[s->ncpus] + v[3] + v[4];
			s->ncpus++;
		} else if (sscanf(line, "ctxt %llu", &v[0]) == 1) {
			s->ctxt = v[0];
		} else if (sscanf(line, "intr %llu", &v[0]) == 1) {
			s->intr = v[0];
		} else if (sscanf(line, "softirq %llu", &v[0]) == 1) {
			s->softirq = v[0];
		}
	}
	(void)fclose(f);
	s->ok = s->ncpus > 0;
	return s->ok ? 0 : -EINVAL;
}

static int find_cpu(const struct loadstat *s, int cpu)
{
	for (int i = 0; i < s->ncpus; i++)
		if (s->cpu[i] == cpu)
			return i;
	return -1;
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
	jw_obj_end(w);
}
