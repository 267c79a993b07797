/* The result document (schema in docs/result-format.md) and the human summary. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomicfile.h"
#include "conditions.h"
#include "explain.h"
#include "host.h"
#include "jsonw.h"
#include "run.h"
#include "timeutil.h"

#define RESULT_SCHEMA \
	8 /* 2: threshold -> deadline; 3: threads[].lost -> raw_lost;
			  4: explain, spikes; 5: host.virtualization; 6: conditions;
			  7: explain.stacks, spikes[].cause_stack;
			  8: activity.cpu_time_ns, activity.loadavg */

static const struct {
	const char *key;
	double q;
} quantiles[] = {
	{ "50", 0.5 }, { "90", 0.9 }, { "99", 0.99 }, { "99.9", 0.999 }, { "99.99", 0.9999 }
};

static uint64_t thread_count(const struct mthread *t)
{
	return MT_GET(t, count);
}

/* Samples missing from the raw file: the ring was full, or they could not be written. */
static uint64_t raw_lost(const struct mthread *t)
{
	return t->raw_lost + (t->ring ? t->ring->lost : 0);
}

static void hist_json(struct jw *w, const struct hist *h)
{
	jw_obj_begin(w);
	jw_kstr(w, "unit", "ns");
	jw_kuint(w, "overflow", h->overflow);
	jw_key(w, "buckets");
	jw_arr_begin(w);
	for (int i = 0; i < HIST_NBUCKETS; i++) {
		int64_t lo, hi;

		if (!h->count[i])
			continue;
		hist_bounds(i, &lo, &hi);
		jw_arr_begin(w);
		jw_int(w, lo);
		jw_int(w, hi);
		jw_uint(w, h->count[i]);
		jw_arr_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

static int cmp_worst(const void *a, const void *b)
{
	const struct worst_entry *x = a, *y = b;

	if (x->latency_ns != y->latency_ns)
		return x->latency_ns < y->latency_ns ? 1 : -1;
	return x->cycle < y->cycle ? -1 : x->cycle > y->cycle;
}

static void series_json(struct jw *w, const struct series *s)
{
	static const char *const keys[] = { "min_ns", "mean_ns", "max_ns", "count" };

	jw_obj_begin(w);
	jw_kint(w, "period_ns", s->period_ns);
	jw_kbool(w, "truncated", s->truncated);
	for (int k = 0; k < 4; k++) {
		jw_key(w, keys[k]);
		jw_arr_begin(w);
		for (uint32_t i = 0; i < s->n; i++) {
			const struct series_slot *slot = &s->slot[i];

			if (k == 3)
				jw_uint(w, slot->count);
			else if (!slot->count)
				jw_null(w);
			else if (k == 0)
				jw_int(w, slot->min);
			else if (k == 1)
				jw_double(w, round((double)slot->sum / (double)slot->count));
			else
				jw_int(w, slot->max);
		}
		jw_arr_end(w);
	}
	jw_obj_end(w);
}

static void thread_json(struct jw *w, const struct run *r, const struct mthread *t)
{
	uint64_t n = thread_count(t);
	double mean = n ? (double)MT_GET(t, sum_ns) / (double)n : NAN;
	double var = n > 1 ? (t->sumsq - (double)n * mean * mean) / (double)(n - 1) : NAN;
	struct worst_entry worst[WORST_N];

	jw_obj_begin(w);
	jw_kint(w, "index", t->index);
	jw_key(w, "cpu");
	if (t->cpu >= 0)
		jw_int(w, t->cpu);
	else
		jw_null(w);
	jw_kint(w, "tid", t->tid);
	jw_kint(w, "period_ns", t->period_ns);
	jw_key(w, "policy");
	policy_json(w, &t->policy);
	jw_kbool(w, "policy_fallback", t->fallback);
	if (t->fallback)
		jw_kstr(w, "policy_fallback_reason", t->setup_err);
	jw_kuint(w, "count", n);
	jw_key(w, "min_ns");
	n ? jw_int(w, MT_GET(t, min_ns)) : jw_null(w);
	jw_key(w, "max_ns");
	n ? jw_int(w, MT_GET(t, max_ns)) : jw_null(w);
	jw_kdouble(w, "mean_ns", mean);
	jw_kdouble(w, "stddev_ns", var > 0 ? sqrt(var) : (n > 1 ? 0.0 : NAN));
	jw_key(w, "percentiles_ns");
	jw_obj_begin(w);
	for (size_t i = 0; i < sizeof(quantiles) / sizeof(quantiles[0]); i++) {
		jw_key(w, quantiles[i].key);
		n ? jw_int(w, hist_quantile(t->hist, quantiles[i].q, MT_GET(t, min_ns),
					    MT_GET(t, max_ns)))
		  : jw_null(w);
	}
	jw_obj_end(w);
	jw_kdouble(w, "percentiles_rel_error", 0.5 / HIST_HALF);
	jw_kuint(w, "overruns", t->overruns);
	jw_kuint(w, "raw_lost", raw_lost(t));
	if (t->ring) {
		char why[120];
		const char *e = ring_error(t->ring, why, sizeof(why));

		jw_kstr(w, "raw_file", t->raw_path);
		jw_kuint(w, "raw_samples", t->ring->written);
		if (e)
			jw_kstr(w, "raw_error", e);
	}
	jw_key(w, "histogram");
	hist_json(w, t->hist);
	memcpy(worst, t->worst, sizeof(worst));
	qsort(worst, t->nworst, sizeof(worst[0]), cmp_worst);
	jw_key(w, "worst");
	jw_arr_begin(w);
	for (int i = 0; i < t->nworst; i++) {
		jw_obj_begin(w);
		jw_kint(w, "latency_ns", worst[i].latency_ns);
		jw_kuint(w, "cycle", worst[i].cycle);
		jw_kint(w, "t_ns", worst[i].t_ns);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_key(w, "series");
	series_json(w, &t->series);
	if (r->m->thread_json)
		r->m->thread_json(w, t, r->mparams);
	jw_obj_end(w);
}

static void opt_cpulist(struct jw *w, const char *key, bool set, const struct cpulist *l)
{
	char buf[1024];

	jw_key(w, key);
	if (!set) {
		jw_null(w);
		return;
	}
	cpulist_format(l, buf, sizeof(buf));
	jw_str(w, buf);
}

static void opt_int(struct jw *w, const char *key, bool set, int64_t v)
{
	jw_key(w, key);
	set ? jw_int(w, v) : jw_null(w);
}

static void params_json(struct jw *w, const struct run *r)
{
	const struct common_params *c = &r->c;
	char pol[96];

	jw_obj_begin(w);
	r->m->params_json(w, r->mparams);
	opt_int(w, "loops", c->loops_set, c->loops);
	opt_int(w, "duration_ns", c->duration_set, c->duration_ns);
	policy_format(&c->policy, pol, sizeof(pol));
	jw_kstr(w, "policy", pol);
	jw_kbool(w, "allow_fallback", c->allow_fallback);
	opt_cpulist(w, "cpus", c->cpus_set, &c->cpus);
	jw_kint(w, "threads", r->nthreads);
	opt_cpulist(w, "main_cpus", c->main_cpus_set, &c->main_cpus);
	jw_kbool(w, "mlock", !c->no_mlock);
	opt_int(w, "dma_latency_us", c->dma_latency_set, c->dma_latency_ns / NSEC_PER_USEC);
	opt_int(w, "deadline_ns", c->deadline_set, c->deadline_ns);
	jw_kint(w, "settle_ns", c->settle_ns);
	jw_kbool(w, "raw", c->raw_path != NULL);
	jw_key(w, "loads");
	jw_arr_begin(w);
	for (int i = 0; i < c->loads.n; i++)
		load_spec_json(w, &c->loads.spec[i]);
	jw_arr_end(w);
	jw_obj_end(w);
}

static bool run_complete(const struct run *r)
{
	return !r->stop_signal && !atomic_load(&r->abort);
}

void report_json(const struct run *r, FILE *f)
{
	struct jw w;

	jw_init(&w, f);
	jw_obj_begin(&w);
	jw_kint(&w, "schema", RESULT_SCHEMA);
	jw_kstr(&w, "tool", "rtlab-probe");
	jw_kstr(&w, "version", RTLAB_PROBE_VERSION);
	jw_kstr(&w, "meter", r->m->name);
	jw_kbool(&w, "complete", run_complete(r));
	jw_kstr(&w, "stop_reason",
		r->stop_signal      ? "signal"
		: r->c.loops_set    ? "loops"
		: r->c.duration_set ? "duration"
				    : "unknown");
	jw_key(&w, "signal");
	r->stop_signal ? jw_str(&w, stopsig_name(r->stop_signal)) : jw_null(&w);
	jw_key(&w, "argv");
	jw_arr_begin(&w);
	for (int i = 0; i < r->argc; i++)
		jw_str(&w, r->argv[i]);
	jw_arr_end(&w);
	jw_kstr(&w, "start_utc", r->start_utc);
	jw_kstr(&w, "end_utc", r->end_utc);
	jw_kint(&w, "elapsed_ns", r->t1_ns - r->t0_ns);
	jw_key(&w, "host");
	host_json(&w);
	jw_key(&w, "params");
	params_json(&w, r);
	jw_kbool(&w, "mlocked", r->mlocked);
	if (r->mlock_err[0])
		jw_kstr(&w, "mlock_error", r->mlock_err);
	jw_kbool(&w, "deadline_exceeded", r->c.deadline_set && report_deadline_exceeded(r));
	jw_key(&w, "loads");
	load_group_json(&w, &r->loads, &r->c.loads);
	jw_key(&w, "activity");
	loadstat_json(&w, &r->act0, &r->act1);
	jw_key(&w, "threads");
	jw_arr_begin(&w);
	for (int i = 0; i < r->nthreads; i++)
		thread_json(&w, r, &r->th[i]);
	jw_arr_end(&w);
	jw_key(&w, "explain");
	explain_json(&w, r);
	jw_key(&w, "spikes");
	explain_spikes_json(&w, r);
	jw_key(&w, "conditions");
	conditions_json(&w, r);
	if (r->m->doc_json)
		r->m->doc_json(&w, r->mparams, r->th, r->nthreads);
	jw_obj_end(&w);
	fputc('\n', f);
}

static int report_fill(FILE *f, const void *r)
{
	report_json(r, f);
	return 0;
}

int report_save(const struct run *r, const char *path, char *err, size_t errlen)
{
	int sig = 0, rc = atomic_write(path, report_fill, r, &sig);

	if (rc == -EINTR && sig)
		snprintf(err, errlen,
			 "--json: stopped by %s while waiting for a reader of \"%.300s\": "
			 "no document written",
			 stopsig_name(sig), path);
	else if (rc)
		snprintf(err, errlen, "--json: cannot write \"%.300s\" (%s): no document written",
			 path, strerror(-rc));
	return rc;
}

bool report_lost_outputs(const struct run *r, FILE *f)
{
	bool lost = r->progress_err != 0; /* said when it happened */
	char why[120];

	for (int i = 0; i < r->nthreads; i++) {
		const struct mthread *t = &r->th[i];
		const char *e = t->ring ? ring_error(t->ring, why, sizeof(why)) : NULL;

		if (!e)
			continue;
		fprintf(f,
			"rtlab-probe %s: --raw: \"%.300s\": %s: %llu of %llu samples missing "
			"(raw_lost)\n",
			r->m->name, t->raw_path, e, (unsigned long long)raw_lost(t),
			(unsigned long long)thread_count(t));
		lost = true;
	}
	return lost;
}

bool report_deadline_exceeded(const struct run *r)
{
	for (int i = 0; i < r->nthreads; i++)
		if (thread_count(&r->th[i]) && r->th[i].max_ns > r->c.deadline_ns)
			return true;
	return false;
}

void report_summary(const struct run *r, FILE *f)
{
	char mn[24], p50[24], p99[24], mx[24], pol[64], cpu[16];

	for (int i = 0; i < r->nthreads; i++) {
		const struct mthread *t = &r->th[i];
		uint64_t n = thread_count(t);

		policy_format(&t->policy, pol, sizeof(pol));
		if (!n) {
			fprintf(f, "T%d: no samples\n", t->index);
			continue;
		}
		if (t->cpu >= 0)
			snprintf(cpu, sizeof(cpu), "%d", t->cpu);
		else
			snprintf(cpu, sizeof(cpu), "any");
		format_duration(MT_GET(t, min_ns), mn, sizeof(mn));
		format_duration(hist_quantile(t->hist, 0.5, MT_GET(t, min_ns), MT_GET(t, max_ns)),
				p50, sizeof(p50));
		format_duration(hist_quantile(t->hist, 0.99, MT_GET(t, min_ns), MT_GET(t, max_ns)),
				p99, sizeof(p99));
		format_duration(MT_GET(t, max_ns), mx, sizeof(mx));
		fprintf(f,
			"T%d cpu %s %s: %llu cycles  min %s  p50 %s  p99 %s  max %s  overruns %llu%s\n",
			t->index, cpu, pol, (unsigned long long)n, mn, p50, p99, mx,
			(unsigned long long)t->overruns, raw_lost(t) ? "  (raw samples lost)" : "");
	}
	if (r->stop_signal)
		fprintf(f, "stopped by %s: incomplete run\n", stopsig_name(r->stop_signal));
}
