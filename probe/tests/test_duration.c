/* Duration, size and integer parsing; duration formatting; ISO timestamps. */
#include "check.h"
#include "lib/timeutil.h"

#include <ctype.h>
#include <errno.h>

static void dur_ok(const char *s, int64_t want)
{
	char err[256] = "";
	int64_t v = -42;

	CHECK_INT(parse_duration_ns(s, &v, err, sizeof(err)), 0);
	CHECK_INT(v, want);
	if (err[0])
		fprintf(stderr, "unexpected error for \"%s\": %s\n", s, err);
}

static void dur_bad(const char *s, const char *want_err)
{
	char err[256] = "";
	int64_t v = -42;

	CHECK_INT(parse_duration_ns(s, &v, err, sizeof(err)), -EINVAL);
	CHECK_INT(v, -42);
	CHECK_STR(err, want_err);
}

static void size_ok(const char *s, int64_t want)
{
	char err[256] = "";
	int64_t v = -42;

	CHECK_INT(parse_size_bytes(s, &v, err, sizeof(err)), 0);
	CHECK_INT(v, want);
}

static void size_bad(const char *s, const char *want_err)
{
	char err[256] = "";
	int64_t v = -42;

	CHECK_INT(parse_size_bytes(s, &v, err, sizeof(err)), -EINVAL);
	CHECK_INT(v, -42);
	CHECK_STR(err, want_err);
}

static void fmt(int64_t ns, const char *want)
{
	char buf[32];

	format_duration(ns, buf, sizeof(buf));
	CHECK_STR(buf, want);
}

static void test_durations(void)
{
	dur_ok("1ms", 1000000);
	dur_ok("200us", 200000);
	dur_ok("200\xc2\xb5s", 200000); /* µ, MICRO SIGN */
	dur_ok("200\xce\xbcs", 200000); /* μ, GREEK SMALL LETTER MU */
	dur_ok("10m", 600 * NSEC_PER_SEC);
	dur_ok("1.5s", 1500000000);
	dur_ok("500ns", 500);
	dur_ok("2h", 7200 * NSEC_PER_SEC);
	dur_ok("1d", 86400 * NSEC_PER_SEC);
	dur_ok("0", 0);
	dur_ok("0s", 0);
	dur_ok("0.25ms", 250000);
	dur_ok("1.000000001s", 1000000001);
	dur_ok("1.00ns", 1); /* zeros below 1 ns are harmless */
	dur_ok("0.5m", 30 * NSEC_PER_SEC);
	dur_ok("106751d", 106751LL * 86400 * NSEC_PER_SEC); /* just fits in int64 */
	dur_ok("9223372036854775807ns", INT64_MAX);

	dur_bad("", "\"\": empty duration");
	dur_bad("200", "\"200\": a duration needs a unit (ns, us, ms, s, m, h, d)");
	dur_bad("1.5", "\"1.5\": a duration needs a unit (ns, us, ms, s, m, h, d)");
	dur_bad("-1ms", "\"-1ms\": a duration cannot be negative");
	dur_bad("1xs", "\"1xs\": unknown unit \"xs\" (ns, us, ms, s, m, h, d)");
	dur_bad("1 ms", "\"1 ms\": unknown unit \" ms\" (ns, us, ms, s, m, h, d)");
	dur_bad("1MS", "\"1MS\": unknown unit \"MS\" (ns, us, ms, s, m, h, d)");
	dur_bad("ms", "\"ms\": a duration must start with a number");
	dur_bad(".5s", "\".5s\": a duration must start with a number");
	dur_bad("1.s", "\"1.s\": missing digits after '.'");
	dur_bad("1.5ns", "\"1.5ns\": finer than 1 ns");
	dur_bad("99999999999d", "\"99999999999d\": duration is too large");
	dur_bad("106752d", "\"106752d\": duration is too large");
	dur_bad("9223372036854775808ns", "\"9223372036854775808ns\": duration is too large");
	dur_bad("99999999999999999999999s", "\"99999999999999999999999s\": duration is too large");
}

static void test_sizes(void)
{
	size_ok("4096", 4096);
	size_ok("0", 0);
	size_ok("64K", 64 * 1024);
	size_ok("64k", 64 * 1024);
	size_ok("1M", 1 << 20);
	size_ok("1MiB", 1 << 20);
	size_ok("2G", 2LL << 30);
	size_ok("3GiB", 3LL << 30);
	size_ok("1T", 1LL << 40);

	size_bad("", "\"\": empty size");
	size_bad("1X", "\"1X\": unknown size unit \"X\" (K, M, G, T or KiB, MiB, GiB, TiB)");
	size_bad("1Mx", "\"1Mx\": unknown size unit \"Mx\" (K, M, G, T or KiB, MiB, GiB, TiB)");
	size_bad("-1", "\"-1\": a size cannot be negative");
	size_bad("K", "\"K\": a size must start with a number");
	size_bad("1.5M", "\"1.5M\": a size must be a whole number");
	size_bad("9999999999T", "\"9999999999T\": size is too large");
}

static void test_int64(void)
{
	int64_t v = 0;

	CHECK_INT(parse_int64("0", &v), 0);
	CHECK_INT(v, 0);
	CHECK_INT(parse_int64("-20", &v), 0);
	CHECK_INT(v, -20);
	CHECK_INT(parse_int64("+7", &v), 0);
	CHECK_INT(v, 7);
	CHECK_INT(parse_int64("9223372036854775807", &v), 0);
	CHECK_INT(v, INT64_MAX);
	CHECK_INT(parse_int64("-9223372036854775808", &v), 0);
	CHECK_INT(v, INT64_MIN);
	v = 5;
	CHECK_INT(parse_int64("", &v), -EINVAL);
	CHECK_INT(parse_int64("-", &v), -EINVAL);
	CHECK_INT(parse_int64(" 1", &v), -EINVAL);
	CHECK_INT(parse_int64("1 ", &v), -EINVAL);
	CHECK_INT(parse_int64("12a", &v), -EINVAL);
	CHECK_INT(parse_int64("0x10", &v), -EINVAL);
	CHECK_INT(parse_int64("9223372036854775808", &v), -EINVAL);
	CHECK_INT(v, 5);
}

static void test_format(void)
{
	fmt(0, "0ns");
	fmt(999, "999ns");
	fmt(1000, "1us");
	fmt(12345, "12.3us");
	fmt(1200000, "1.20ms");
	fmt(3 * NSEC_PER_SEC, "3s");
	fmt(1500 * NSEC_PER_MSEC, "1.50s");
	fmt(200000, "200us");
	fmt(999600, "1.00ms"); /* no "1000us" */
	fmt(9996, "10.0us");   /* no "10.00us" */
	fmt(123456789, "123ms");
	fmt(-12345, "-12.3us");
	fmt(INT64_MIN, "-9223372037s");
}

static void test_iso(void)
{
	char buf[64];
	int i;

	utc_now_iso(buf, sizeof(buf));
	CHECK_INT(strlen(buf), 24);
	/* "2026-11-22T00:51:26.123Z" */
	for (i = 0; i < 24; i++) {
		const char *shape = "dddd-dd-ddTdd:dd:dd.dddZ";

		if (shape[i] == 'd')
			CHECK(isdigit((unsigned char)buf[i]));
		else
			CHECK(buf[i] == shape[i]);
	}
	CHECK(strncmp(buf, "2020", 4) > 0);
}

int main(void)
{
	test_durations();
	test_sizes();
	test_int64();
	test_format();
	test_iso();
	return check_report("test_duration");
}
