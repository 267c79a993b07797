/* Log-linear histogram: bucket geometry (inverse of hist_index), merge, quantiles. */
#include "hist.h"

#include <string.h>

void hist_bounds(int i, int64_t *lower, int64_t *upper)
{
	int j, e, sub;
	int64_t width;

	if (i < HIST_SUB_COUNT) {
		*lower = *upper = i < 0 ? 0 : i;
		return;
	}
	if (i >= HIST_NBUCKETS)
		i = HIST_NBUCKETS - 1;
	/* octave e holds [2^e, 2^(e+1)) in HIST_HALF buckets of width 2^(e-7) */
	j = i - HIST_SUB_COUNT;
	e = HIST_SUB_BITS + j / HIST_HALF;
	sub = HIST_HALF + j % HIST_HALF;
	width = (int64_t)1 << (e - (HIST_SUB_BITS - 1));
	*lower = (int64_t)sub * width;
	*upper = *lower + width - 1;
}

void hist_reset(struct hist *h)
{
	memset(h, 0, sizeof(*h));
}

void hist_merge(struct hist *dst, const struct hist *src)
{
	int i;

	for (i = 0; i < HIST_NBUCKETS; i++)
		dst->count[i] += src->count[i];
	dst->overflow += src->overflow;
	dst->total += src->total;
}

int64_t hist_quantile(const struct hist *h, double q, int64_t lo, int64_t hi)
{
	uint64_t rank, seen = 0;
	double r;
	int i;

	if (!h->total)
		return -1;
	if (!(q > 0.0))
		q = 0.0;
	if (q > 1.0)
		q = 1.0;
	/* nearest rank: the smallest value with at least ceil(q * total) values <= it */
	r = q * (double)h->total;
	rank = (uint64_t)r;
	if ((double)rank < r)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > h->total)
		rank = h->total;

	for (i = 0; i < HIST_NBUCKETS; i++) {
		seen += h->count[i];
		if (seen >= rank) {
			int64_t l, u, mid;

			hist_bounds(i, &l, &u);
			mid = l + (u - l) / 2;
			if (mid < lo)
				mid = lo;
			if (mid > hi)
				mid = hi;
			return mid;
		}
	}
	/* the rank lies among the overflowed values, all above every bucket */
	return hi;
}
