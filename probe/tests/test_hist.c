/* Histogram geometry, binning, merge and quantile accuracy. */
#include "check.h"
#include "lib/hist.h"

#include <stdlib.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;

/* xorshift64*: deterministic, so failures reproduce */
static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

/* One check per call, so the count stays readable even for millions of values. */
static int index_in_bounds(int64_t v)
{
	int64_t lo, hi;
	int i = hist_index(v);

	if (i < 0 || i >= HIST_NBUCKETS)
		return 0;
	hist_bounds(i, &lo, &hi);
	return lo <= v && v <= hi;
}

static void test_geometry(void)
{
	int64_t lo, hi, prev_hi = -1;
	int i, contiguous = 1, narrow = 1, self = 1;

	for (i = 0; i < HIST_NBUCKETS; i++) {
		hist_bounds(i, &lo, &hi);
		if (lo != prev_hi + 1 || hi < lo)
			contiguous = 0;
		/* relative width (upper - lower + 1) / lower <= 1/128 above the exact range */
		if (lo >= HIST_SUB_COUNT && (hi - lo + 1) * 128 > lo)
			narrow = 0;
		if (lo < HIST_SUB_COUNT && hi != lo)
			narrow = 0;
		if (hist_index(lo) != i || hist_index(hi) != i)
			self = 0;
		prev_hi = hi;
	}
	CHECK(contiguous);
	CHECK(narrow);
	CHECK(self);
	hist_bounds(0, &lo, &hi);
	CHECK_INT(lo, 0);
	CHECK_INT(hi, 0);
	hist_bounds(1, &lo, &hi);
	CHECK_INT(lo, 1);
	CHECK_INT(hi, 1);
	hist_bounds(HIST_NBUCKETS - 1, &lo, &hi);
	CHECK_INT(hi, ((int64_t)1 << HIST_MAX_EXP) - 1);
	CHECK(hi >= 10 * 1000000000LL); /* at least 10 s in ns */
	CHECK_INT(hist_index(((int64_t)1 << HIST_MAX_EXP) - 1), HIST_NBUCKETS - 1);
	CHECK_INT(hist_index((int64_t)1 << HIST_MAX_EXP), -1);
	CHECK_INT(hist_index(INT64_MAX), -1);
	CHECK_INT(hist_index(-1), 0);
	CHECK_INT(hist_index(INT64_MIN), 0);
}

static void test_index(void)
{
	int64_t v;
	int ok = 1, n;

	for (v = 0; v <= 1000000; v++)
		if (!index_in_bounds(v))
			ok = 0;
	CHECK(ok);

	/* log-spaced: every power of two and its neighbours */
	ok = 1;
	for (n = 0; n < HIST_MAX_EXP; n++) {
		int64_t p = (int64_t)1 << n;

		if (!index_in_bounds(p) || !index_in_bounds(p - 1) || !index_in_bounds(p + 1))
			ok = 0;
	}
	CHECK(ok);

	/* random values with random magnitude up to 2^40 */
	ok = 1;
	for (n = 0; n < 2000000; n++) {
		int bits = 1 + (int)(rng() % HIST_MAX_EXP);
		int64_t r = (int64_t)(rng() & (((uint64_t)1 << bits) - 1));

		if (!index_in_bounds(r))
			ok = 0;
	}
	CHECK(ok);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static void check_quantile_close(const struct hist *h, const int64_t *sorted, size_t n, double q)
{
	size_t rank = (size_t)(q * (double)n);
	int64_t exact, got;

	if ((double)rank < q * (double)n)
		rank++;
	if (rank < 1)
		rank = 1;
	exact = sorted[rank - 1];
	got = hist_quantile(h, q, sorted[0], sorted[n - 1]);
	/* |got - exact| <= 1 % of exact (+1 ns for the exact range) */
	if (!((got - exact) * 100 <= exact + 100 && (exact - got) * 100 <= exact + 100))
		fprintf(stderr, "q=%g: got %" PRId64 ", exact %" PRId64 "\n", q, got, exact);
	CHECK((got - exact) * 100 <= exact + 100 && (exact - got) * 100 <= exact + 100);
}

static void test_quantiles(void)
{
	static const double qs[] = { 0,    0.001, 0.01, 0.1,   0.25,   0.5,
				     0.75, 0.9,   0.99, 0.999, 0.9999, 1 };
	static struct hist h;
	enum { N = 200000 };
	int64_t *vals = malloc(N * sizeof(*vals));
	size_t i;

	CHECK(vals != NULL);
	if (!vals)
		return;
	hist_reset(&h);
	CHECK_INT(hist_quantile(&h, 0.5, 0, 100), -1);

	/* latency-like: a 20..60 us body with a log-uniform tail up to ~100 ms */
	for (i = 0; i < N; i++) {
		int64_t v;

		if (rng() % 100 < 95)
			v = 20000 + (int64_t)(rng() % 40000);
		else
			v = (int64_t)1 << (10 + rng() % 17), v += (int64_t)(rng() % (uint64_t)v);
		vals[i] = v;
		hist_add(&h, v);
	}
	qsort(vals, N, sizeof(*vals), cmp_i64);
	CHECK_INT(h.total, N);
	for (i = 0; i < sizeof(qs) / sizeof(qs[0]); i++)
		check_quantile_close(&h, vals, N, qs[i]);
	/* a bucket midpoint never leaves the exact [min, max] seen */
	hist_reset(&h);
	hist_add(&h, 1000); /* bucket 1000..1003, midpoint 1001 */
	CHECK_INT(hist_quantile(&h, 0.5, 1000, 1000), 1000);
	CHECK_INT(hist_quantile(&h, 0.5, 0, 5000), 1001);
	hist_add(&h, 1003);
	CHECK_INT(hist_quantile(&h, 1, 1000, 1003), 1001);
	CHECK_INT(hist_quantile(&h, 1, 1002, 1003), 1002);

	/* small exact values: 1..100, p50 is exactly 50 */
	hist_reset(&h);
	for (i = 1; i <= 100; i++)
		hist_add(&h, (int64_t)i);
	CHECK_INT(hist_quantile(&h, 0.5, 1, 100), 50);
	CHECK_INT(hist_quantile(&h, 0.99, 1, 100), 99);
	CHECK_INT(hist_quantile(&h, 0.991, 1, 100), 100);
	CHECK_INT(hist_quantile(&h, 0.01, 1, 100), 1);
	free(vals);
}

static void test_merge_overflow(void)
{
	static struct hist a, b, all;
	int i, same = 1;

	hist_reset(&a);
	hist_reset(&b);
	hist_reset(&all);
	for (i = 0; i < 100000; i++) {
		int64_t v = (int64_t)(rng() % ((uint64_t)1 << (1 + i % 42)));

		hist_add(rng() % 3 ? &a : &b, v);
		hist_add(&all, v);
	}
	CHECK(b.overflow > 0);
	hist_merge(&a, &b);
	for (i = 0; i < HIST_NBUCKETS; i++)
		if (a.count[i] != all.count[i])
			same = 0;
	CHECK(same);
	CHECK_INT(a.total, all.total);
	CHECK_INT(a.overflow, all.overflow);
	CHECK(all.overflow > 0);

	/* overflow and negative clamp */
	hist_reset(&a);
	hist_add(&a, (int64_t)1 << HIST_MAX_EXP);
	hist_add(&a, INT64_MAX);
	hist_add(&a, -5);
	hist_add(&a, 0);
	CHECK_INT(a.overflow, 2);
	CHECK_INT(a.total, 4);
	CHECK_INT(a.count[0], 2);
	/* ranks in the overflow return the exact max */
	CHECK_INT(hist_quantile(&a, 1.0, -5, INT64_MAX), INT64_MAX);
	CHECK_INT(hist_quantile(&a, 0.5, -5, INT64_MAX), 0);
}

int main(void)
{
	test_geometry();
	test_index();
	test_quantiles();
	test_merge_overflow();
	return check_report("test_hist");
}
