/* Count, extremes and sum of one quantity in ns, and its JSON object. */
#ifndef RTLAB_NSTAT_H
#define RTLAB_NSTAT_H

#include <stdbool.h>
#include <stdint.h>

struct nstat {
	uint64_t count;
	int64_t min_ns, max_ns, sum_ns;
};

static inline void nstat_add(struct nstat *st, int64_t v)
{
	if (!st->count || v < st->min_ns)
		st->min_ns = v;
	if (!st->count || v > st->max_ns)
		st->max_ns = v;
	st->sum_ns += v;
	st->count++;
}

struct jw;

/* KEY: {"count", "min_ns", "mean_ns", "max_ns"} (null extremes when empty), or null
 * when empty and NULL_IF_NONE. */
void nstat_json(struct jw *w, const char *key, const struct nstat *st, bool null_if_none);

#endif
