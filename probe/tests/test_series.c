/* Per-second series: slot boundaries, gaps, truncation and per-slot statistics. */
#include "check.h"
#include "lib/series.h"

#include <stdint.h>

#define P 1000 /* ns: period of the small series */

static void check_slot(const struct series *s, uint32_t i, int64_t min, int64_t max, int64_t sum,
		       uint64_t count)
{
	CHECK(i < s->n);
	if (i >= s->n)
		return;
	CHECK_INT(s->slot[i].count, count);
	if (!count)
		return;
	CHECK_INT(s->slot[i].min, min);
	CHECK_INT(s->slot[i].max, max);
	CHECK_INT(s->slot[i].sum, sum);
}

static void test_init(void)
{
	struct series s;

	CHECK_INT(series_init(&s, P, 4), 0);
	CHECK_INT(s.period_ns, P);
	CHECK_INT(s.cap, 4);
	CHECK_INT(s.n, 0); /* no slot before the first sample */
	CHECK(!s.truncated);
	CHECK(s.slot != NULL);
	for (uint32_t i = 0; i < s.cap; i++)
		CHECK_INT(s.slot[i].count, 0);
	series_free(&s);
	CHECK(s.slot == NULL);
	series_free(&s); /* twice is harmless */
}

/* A slot is [k P, (k+1) P): its last ns stays, the next one opens a slot. */
static void test_boundaries(void)
{
	struct series s;

	CHECK_INT(series_init(&s, P, 4), 0);
	series_add(&s, 0, 10);
	CHECK_INT(s.n, 1);
	series_add(&s, P - 1, 30);
	CHECK_INT(s.n, 1);
	series_add(&s, P - 1, 20);
	check_slot(&s, 0, 10, 30, 60, 3);
	series_add(&s, P, 5);
	CHECK_INT(s.n, 2);
	check_slot(&s, 0, 10, 30, 60, 3); /* the closed slot is left alone */
	check_slot(&s, 1, 5, 5, 5, 1);
	CHECK_INT(s.edge_ns, 2 * P);
	CHECK(!s.truncated);
	series_free(&s);
}

/* Seconds without a sample stay in the series, empty. */
static void test_gap(void)
{
	struct series s;

	CHECK_INT(series_init(&s, P, 8), 0);
	series_add(&s, 10, 7);
	series_add(&s, 5 * P + 3, 9);
	CHECK_INT(s.n, 6);
	check_slot(&s, 0, 7, 7, 7, 1);
	for (uint32_t i = 1; i < 5; i++)
		check_slot(&s, i, 0, 0, 0, 0);
	check_slot(&s, 5, 9, 9, 9, 1);
	series_free(&s);
}

/* Negative values and the extremes keep min and max right; the first value of a slot
 * sets both, whatever the zeroed slot held. */
static void test_values(void)
{
	struct series s;

	CHECK_INT(series_init(&s, P, 2), 0);
	series_add(&s, 0, -5);
	series_add(&s, 1, -7);
	series_add(&s, 2, 3);
	check_slot(&s, 0, -7, 3, -9, 3);
	series_add(&s, P, INT64_MAX);
	check_slot(&s, 1, INT64_MAX, INT64_MAX, INT64_MAX, 1);
	series_free(&s);

	CHECK_INT(series_init(&s, P, 1), 0);
	series_add(&s, 0, 42); /* above zero: min must not stay at the slot's initial 0 */
	check_slot(&s, 0, 42, 42, 42, 1);
	series_free(&s);
}

/* Past the last slot nothing is written: the series says it was truncated. */
static void test_truncation(void)
{
	struct series s;

	CHECK_INT(series_init(&s, P, 3), 0);
	series_add(&s, 0, 1);
	series_add(&s, 2 * P, 2);
	CHECK_INT(s.n, 3);
	CHECK(!s.truncated);
	series_add(&s, 3 * P, 100);
	CHECK(s.truncated);
	CHECK_INT(s.n, 3);
	check_slot(&s, 2, 2, 2, 2, 1);
	series_add(&s, INT64_MAX / 2, 100); /* far past the end: bounded by cap, no wrap */
	CHECK_INT(s.n, 3);
	check_slot(&s, 2, 2, 2, 2, 1);
	series_free(&s);

	CHECK_INT(series_init(&s, P, 1), 0); /* one slot: the second second is already past */
	series_add(&s, P, 1);
	CHECK(s.truncated);
	CHECK_INT(s.n, 1);
	CHECK_INT(s.slot[0].count, 0);
	series_free(&s);
}

/* A sample stamped before the start (clocks read in another order) counts in slot 0. */
static void test_before_start(void)
{
	struct series s;

	CHECK_INT(series_init(&s, P, 2), 0);
	series_add(&s, -1, 4);
	series_add(&s, INT64_MIN, 6);
	CHECK_INT(s.n, 1);
	check_slot(&s, 0, 4, 6, 10, 2);
	series_free(&s);
}

/* A day of one sample per second at the runner's period: one slot each, all kept. */
static void test_day(void)
{
	const int64_t sec = 1000000000;
	const uint32_t slots = 24 * 3600;
	struct series s;
	uint64_t total = 0;
	int bad = 0;

	CHECK_INT(series_init(&s, sec, slots), 0);
	for (uint32_t i = 0; i < slots; i++)
		series_add(&s, (int64_t)i * sec + sec / 2, (int64_t)i);
	CHECK_INT(s.n, slots);
	CHECK(!s.truncated);
	for (uint32_t i = 0; i < s.n; i++) {
		total += s.slot[i].count;
		bad += s.slot[i].min != (int64_t)i || s.slot[i].max != (int64_t)i;
	}
	CHECK_INT(total, slots);
	CHECK_INT(bad, 0);
	series_free(&s);
}

int main(void)
{
	test_init();
	test_boundaries();
	test_gap();
	test_values();
	test_truncation();
	test_before_start();
	test_day();
	return check_report("test_series");
}
