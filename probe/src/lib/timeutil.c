/* Human duration/size parsing and formatting; integer math only, so no rounding. */
#include "timeutil.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DURATION_UNITS "(ns, us, ms, s, m, h, d)"

struct unit {
	const char *name;
	int64_t mult;
};

static const struct unit duration_units[] = {
	{ "ns", 1 },
	{ "us", NSEC_PER_USEC },
	{ "\xc2\xb5s", NSEC_PER_USEC }, /* U+00B5 MICRO SIGN */
	{ "\xce\xbcs", NSEC_PER_USEC }, /* U+03BC GREEK SMALL LETTER MU */
	{ "ms", NSEC_PER_MSEC },
	{ "s", NSEC_PER_SEC },
	{ "m", 60 * NSEC_PER_SEC },
	{ "h", 3600 * NSEC_PER_SEC },
	{ "d", 86400 * NSEC_PER_SEC },
};

static int is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Accumulate decimal digits into *v; -ERANGE once it no longer fits an int64. */
static int scan_digits(const char **p, int64_t *v)
{
	*v = 0;
	for (; is_digit(**p); (*p)++) {
		int d = **p - '0';

		if (*v > (INT64_MAX - d) / 10)
			return -ERANGE;
		*v = *v * 10 + d;
	}
	return 0;
}

int parse_duration_ns(const char *s, int64_t *out_ns, char *err, size_t errlen)
{
	const char *p = s, *frac = NULL, *unit;
	const struct unit *u = NULL;
	int64_t whole, frac_ns = 0, step;
	size_t nfrac = 0, i;

	if (!*s) {
		snprintf(err, errlen, "\"\": empty duration");
		return -EINVAL;
	}
	if (*s == '-') {
		snprintf(err, errlen, "\"%s\": a duration cannot be negative", s);
		return -EINVAL;
	}
	if (!is_digit(*s)) {
		snprintf(err, errlen, "\"%s\": a duration must start with a number", s);
		return -EINVAL;
	}
	if (scan_digits(&p, &whole) < 0)
		goto too_large;
	if (*p == '.') {
		frac = ++p;
		while (is_digit(*p))
			p++;
		nfrac = (size_t)(p - frac);
		if (!nfrac) {
			snprintf(err, errlen, "\"%s\": missing digits after '.'", s);
			return -EINVAL;
		}
	}
	unit = p;
	if (!*unit) {
		/* a bare zero is unambiguous whatever the unit */
		if (whole == 0 && !frac) {
			*out_ns = 0;
			return 0;
		}
		snprintf(err, errlen, "\"%s\": a duration needs a unit " DURATION_UNITS, s);
		return -EINVAL;
	}
	for (i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
		if (!strcmp(unit, duration_units[i].name)) {
			u = &duration_units[i];
			break;
		}
	}
	if (!u) {
		snprintf(err, errlen, "\"%s\": unknown unit \"%s\" " DURATION_UNITS, s, unit);
		return -EINVAL;
	}

	/* each fraction digit is worth mult/10^k ns, exact while 10^k divides mult */
	step = u->mult;
	for (i = 0; i < nfrac; i++) {
		int d = frac[i] - '0';

		if (step % 10) {
			if (d) {
				snprintf(err, errlen, "\"%s\": finer than 1 ns", s);
				return -EINVAL;
			}
			continue;
		}
		step /= 10;
		frac_ns += d * step;
	}
	if (whole > (INT64_MAX - frac_ns) / u->mult)
		goto too_large;
	*out_ns = whole * u->mult + frac_ns;
	return 0;

too_large:
	snprintf(err, errlen, "\"%s\": duration is too large", s);
	return -EINVAL;
}

int parse_size_bytes(const char *s, int64_t *out_bytes, char *err, size_t errlen)
{
	static const char *const suffixes = "KMGT";
	const char *p = s, *sfx;
	int64_t v, mult = 1;

	if (!*s) {
		snprintf(err, errlen, "\"\": empty size");
		return -EINVAL;
	}
	if (*s == '-') {
		snprintf(err, errlen, "\"%s\": a size cannot be negative", s);
		return -EINVAL;
	}
	if (!is_digit(*s)) {
		snprintf(err, errlen, "\"%s\": a size must start with a number", s);
		return -EINVAL;
	}
	if (scan_digits(&p, &v) < 0)
		goto too_large;
	if (*p == '.') {
		snprintf(err, errlen, "\"%s\": a size must be a whole number", s);
		return -EINVAL;
	}
	if (*p) {
		char c = *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;

		sfx = strchr(suffixes, c);
		/* "K" and "KiB" both mean 1024: a probe buffer is never sized in SI units */
		if (!sfx || (p[1] && strcmp(p + 1, "iB") && strcmp(p + 1, "B"))) {
			snprintf(
				err, errlen,
				"\"%s\": unknown size unit \"%s\" (K, M, G, T or KiB, MiB, GiB, TiB)",
				s, p);
			return -EINVAL;
		}
		mult = (int64_t)1 << (10 * (sfx - suffixes + 1));
	}
	if (v > INT64_MAX / mult)
		goto too_large;
	*out_bytes = v * mult;
	return 0;

too_large:
	snprintf(err, errlen, "\"%s\": size is too large", s);
	return -EINVAL;
}

int parse_int64(const char *s, int64_t *out)
{
	const char *p = s;
	char *end;
	long long v;

	if (*p == '-' || *p == '+')
		p++;
	/* strtoll would skip leading blanks and accept "" as 0 */
	if (!is_digit(*p))
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

void format_duration(int64_t ns, char *buf, size_t len)
{
	static const struct unit units[] = {
		{ "us", NSEC_PER_USEC },
		{ "ms", NSEC_PER_MSEC },
		{ "s", NSEC_PER_SEC },
	};
	const char *sign = ns < 0 ? "-" : "";
	uint64_t a = ns < 0 ? -(uint64_t)ns : (uint64_t)ns;
	size_t i;

	if (a < 1000) {
		snprintf(buf, len, "%s%" PRIu64 "ns", sign, a);
		return;
	}
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		uint64_t m = (uint64_t)units[i].mult;
		double v = (double)a / (double)m;

		/* move up a unit when rounding would print "1000" */
		if (v >= 999.5 && i + 1 < sizeof(units) / sizeof(units[0]))
			continue;
		if (a % m == 0)
			snprintf(buf, len, "%s%" PRIu64 "%s", sign, a / m, units[i].name);
		else if (v < 9.995)
			snprintf(buf, len, "%s%.2f%s", sign, v, units[i].name);
		else if (v < 99.95)
			snprintf(buf, len, "%s%.1f%s", sign, v, units[i].name);
		else
			snprintf(buf, len, "%s%.0f%s", sign, v, units[i].name);
		return;
	}
}

void utc_now_iso(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char date[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%03ldZ", date, ts.tv_nsec / 1000000);
}
