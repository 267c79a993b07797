/* lib/splitmix.h: the published SplitMix64 sequence (Vigna's splitmix64.c). */
#include "check.h"
#include "lib/splitmix.h"

static void test_seed_zero(void)
{
	static const uint64_t want[] = { 0xe220a8397b1dcdafULL, 0x6e789e6aa1b965f4ULL,
					 0x06c45d188009454fULL, 0xf88bb8a8724c81ecULL };
	uint64_t s = 0;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(splitmix64(&s) == want[i]);
	CHECK(s == 4 * 0x9e3779b97f4a7c15ULL); /* the state is a counter */
}

static void test_seed_42(void)
{
	static const uint64_t want[] = { 0xbdd732262feb6e95ULL, 0x28efe333b266f103ULL,
					 0x47526757130f9f52ULL, 0x581ce1ff0e4ae394ULL };
	uint64_t s = 42;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		CHECK(splitmix64(&s) == want[i]);
}

int main(void)
{
	test_seed_zero();
	test_seed_42();
	return check_report("test_splitmix");
}
