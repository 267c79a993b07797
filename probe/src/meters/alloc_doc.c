/* alloc: the per-size statistics in the result document. */
#include <math.h>
#include <stdbool.h>

#include "lib/jsonw.h"

#include "meters/alloc.h"

void alloc_faults_json(struct jw *w, const struct fault_count *f)
{
	jw_key(w, "faults");
	jw_obj_begin(w);
	jw_kuint(w, "minor", f->minor);
	jw_kuint(w, "major", f->major);
	jw_obj_end(w);
}

/* count, min_ns, max_ns, mean_ns, p50_ns, p99_ns (null when empty or H is NULL). */
static void summary_json(struct jw *w, uint64_t n, int64_t mn, int64_t mx, int64_t sum,
			 const struct hist *h)
{
	jw_kuint(w, "count", n);
	jw_key(w, "min_ns");
	n ? jw_int(w, mn) : jw_null(w);
	jw_key(w, "max_ns");
	n ? jw_int(w, mx) : jw_null(w);
	jw_kdouble(w, "mean_ns", n ? (double)sum / (double)n : NAN);
	jw_key(w, "p50_ns");
	n &&h ? jw_int(w, hist_quantile(h, 0.5, mn, mx)) : jw_null(w);
	jw_key(w, "p99_ns");
	n &&h ? jw_int(w, hist_quantile(h, 0.99, mn, mx)) : jw_null(w);
}

static void call_json(struct jw *w, const char *key, const struct call_stats *c)
{
	jw_key(w, key);
	jw_obj_begin(w);
	summary_json(w, c->count, c->min_ns, c->max_ns, c->sum_ns, &c->hist);
	jw_obj_end(w);
}

void alloc_size_json(struct jw *w, int64_t bytes, const struct size_stats *z, bool touch,
		     struct hist *both)
{
	const struct call_stats *a = &z->malloc_c, *f = &z->free_c;
	int64_t mn = !f->count || (a->count && a->min_ns < f->min_ns) ? a->min_ns : f->min_ns;
	int64_t mx = !f->count || (a->count && a->max_ns > f->max_ns) ? a->max_ns : f->max_ns;

	if (both) {
		hist_reset(both);
		hist_merge(both, &a->hist);
		hist_merge(both, &f->hist);
	}
	jw_obj_begin(w);
	jw_kint(w, "size_bytes", bytes);
	summary_json(w, a->count + f->count, mn, mx, a->sum_ns + f->sum_ns, both);
	call_json(w, "malloc", a);
	call_json(w, "free", f);
	if (touch) /* not in the merged figures: those are the allocator's calls */
		call_json(w, "touch", &z->touch_c);
	jw_kuint(w, "failed", z->failed);
	alloc_faults_json(w, &z->faults);
	jw_obj_end(w);
}
