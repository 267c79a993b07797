#include <math.h>

#include "jsonw.h"
#include "nstat.h"

void nstat_json(struct jw *w, const char *key, const struct nstat *st, bool null_if_none)
{
	jw_key(w, key);
	if (null_if_none && !st->count) {
		jw_null(w);
		return;
	}
	jw_obj_begin(w);
	jw_kuint(w, "count", st->count);
	jw_key(w, "min_ns");
	st->count ? jw_int(w, st->min_ns) : jw_null(w);
	jw_kdouble(w, "mean_ns", st->count ? (double)st->sum_ns / (double)st->count : NAN);
	jw_key(w, "max_ns");
	st->count ? jw_int(w, st->max_ns) : jw_null(w);
	jw_obj_end(w);
}
