/* Tiny assertion helpers for the unit tests: count checks, report, keep going. */
#ifndef RTLAB_CHECK_H
#define RTLAB_CHECK_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int checks_run, checks_failed;

#define CHECK(cond)                                                                              \
	do {                                                                                     \
		checks_run++;                                                                    \
		if (!(cond)) {                                                                   \
			checks_failed++;                                                         \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		}                                                                                \
	} while (0)

#define CHECK_INT(got, want)                                                                     \
	do {                                                                                     \
		int64_t g_ = (int64_t)(got), w_ = (int64_t)(want);                               \
		checks_run++;                                                                    \
		if (g_ != w_) {                                                                  \
			checks_failed++;                                                         \
			fprintf(stderr, "%s:%d: %s = %" PRId64 ", want %" PRId64 "\n", __FILE__, \
				__LINE__, #got, g_, w_);                                         \
		}                                                                                \
	} while (0)

#define CHECK_STR(got, want)                                                                     \
	do {                                                                                     \
		const char *g_ = (got), *w_ = (want);                                            \
		checks_run++;                                                                    \
		if (strcmp(g_, w_)) {                                                            \
			checks_failed++;                                                         \
			fprintf(stderr, "%s:%d: %s = \"%s\", want \"%s\"\n", __FILE__, __LINE__, \
				#got, g_, w_);                                                   \
		}                                                                                \
	} while (0)

/* Final summary line; the return value is the exit status. */
static inline int check_report(const char *name)
{
	if (checks_failed) {
		printf("%s: %d of %d checks failed\n", name, checks_failed, checks_run);
		return 1;
	}
	printf("%s: %d checks passed\n", name, checks_run);
	return 0;
}

#endif
