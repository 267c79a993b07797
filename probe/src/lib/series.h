/* Per-period series (min/sum/max/count per second) in fixed, preallocated memory. */
#ifndef RTLAB_SERIES_H
#define RTLAB_SERIES_H

#include <stdbool.h>
#include <stdint.h>

/* One slot: a cache line holds two, so a sample touches one line. */
struct series_slot {
	int64_t min, max, sum; /* ns */
	uint64_t count;
};

struct series {
	int64_t period_ns; /* width of one slot */
	uint32_t cap;      /* slots allocated */
	uint32_t n;        /* slots in use (index of the current slot + 1) */
	int64_t edge_ns;   /* end of the current slot, relative to the start */
	bool truncated;    /* samples arrived after the last slot */
	struct series_slot *slot;
};

/* Allocate CAP slots of PERIOD_NS; 0 or -ENOMEM. */
int series_init(struct series *s, int64_t period_ns, uint32_t cap);
void series_free(struct series *s);

/* Add V observed at T_REL_NS after the start (before it: the first slot). No allocation,
 * no division. */
static inline void series_add(struct series *s, int64_t t_rel_ns, int64_t v)
{
	if (t_rel_ns < 0)
		t_rel_ns = 0; /* else no slot would be open yet */
	while (t_rel_ns >= s->edge_ns) {
		if (s->n >= s->cap) {
			s->truncated = true;
			return;
		}
		s->n++;
		s->edge_ns += s->period_ns;
	}
	struct series_slot *slot = &s->slot[s->n - 1];

	if (slot->count == 0 || v < slot->min)
		slot->min = v;
	if (slot->count == 0 || v > slot->max)
		slot->max = v;
	slot->sum += v;
	slot->count++;
}

#endif
