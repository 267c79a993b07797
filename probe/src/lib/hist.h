/*
 * Log-linear histogram of non-negative int64 values (ns).
 * Values below 256 have exact buckets; above, each power of two is split
 * into 128 equal buckets, so a bucket's width is at most 1/128 (0.78 %) of
 * its lower bound. Values up to 2^40 ns (~18 minutes) are binned; larger
 * ones are counted in `overflow`. Fixed size, no allocation when adding.
 */
#ifndef RTLAB_HIST_H
#define RTLAB_HIST_H

#include <stdint.h>

#define HIST_SUB_BITS 8
#define HIST_SUB_COUNT (1 << HIST_SUB_BITS) /* 256 exact buckets */
#define HIST_HALF (HIST_SUB_COUNT / 2)      /* 128 buckets per octave */
#define HIST_MAX_EXP 40                     /* values < 2^40 ns binned */
#define HIST_NBUCKETS (HIST_SUB_COUNT + (HIST_MAX_EXP - HIST_SUB_BITS) * HIST_HALF)

struct hist {
	uint64_t count[HIST_NBUCKETS];
	uint64_t overflow; /* values >= 2^40 ns */
	uint64_t total;    /* all values added, overflow included */
};

/* Bucket index of V (negative values are clamped to 0); -1 if V overflows. */
static inline int hist_index(int64_t v)
{
	if (v < HIST_SUB_COUNT)
		return v < 0 ? 0 : (int)v;
	if (v >= (int64_t)1 << HIST_MAX_EXP)
		return -1;
	int e = 63 - __builtin_clzll((unsigned long long)v); /* >= HIST_SUB_BITS */
	int shift = e - (HIST_SUB_BITS - 1);
	int sub = (int)(v >> shift); /* HIST_HALF..HIST_SUB_COUNT-1 */
	return HIST_SUB_COUNT + (e - HIST_SUB_BITS) * HIST_HALF + (sub - HIST_HALF);
}

static inline void hist_add(struct hist *h, int64_t v)
{
	int i = hist_index(v);

	if (i < 0)
		h->overflow++;
	else
		h->count[i]++;
	h->total++;
}

/* Inclusive bounds of bucket I: lower <= v <= upper. */
void hist_bounds(int i, int64_t *lower, int64_t *upper);

void hist_reset(struct hist *h);
void hist_merge(struct hist *dst, const struct hist *src);

/*
 * Value at quantile Q (0..1, nearest rank) as the midpoint of its bucket,
 * clamped to [lo, hi] (the exact min and max seen). The midpoint is within
 * 0.4 % of any value in the bucket. Returns -1 when empty.
 */
int64_t hist_quantile(const struct hist *h, double q, int64_t lo, int64_t hi);

#endif
