/* Clock reads, timespec math and human duration/size parsing. */
#ifndef RTLAB_TIMEUTIL_H
#define RTLAB_TIMEUTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define NSEC_PER_USEC 1000LL
#define NSEC_PER_MSEC 1000000LL
#define NSEC_PER_SEC 1000000000LL

static inline int64_t ts_to_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * NSEC_PER_SEC + ts->tv_nsec;
}

static inline struct timespec ns_to_ts(int64_t ns)
{
	struct timespec ts = { .tv_sec = ns / NSEC_PER_SEC, .tv_nsec = ns % NSEC_PER_SEC };
	return ts;
}

/* CLOCK_MONOTONIC in ns (vDSO, no system call on common architectures). */
static inline int64_t mono_now_ns(void)
{
	struct timespec ts;
	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts_to_ns(&ts);
}

/* CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID), in ns. */
static inline int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	(void)clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts_to_ns(&ts);
}

/* Sleep until TARGET_NS on CLOCK_MONOTONIC (absolute: no drift), a signal's EINTR retried. */
static inline void sleep_until_ns(int64_t target_ns)
{
	struct timespec ts = ns_to_ts(target_ns);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Sleep NS on CLOCK_MONOTONIC from now; after a signal, for what was left. */
static inline void sleep_for_ns(int64_t ns)
{
	struct timespec ts = ns_to_ts(ns);
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/*
 * Parse a duration with a mandatory unit: "500ns", "200us" ("µs"), "1ms",
 * "1.5s", "10m", "2h", "1d". A bare "0" is accepted. Result in ns.
 * Returns 0, or -EINVAL with a reason in err.
 */
int parse_duration_ns(const char *s, int64_t *out_ns, char *err, size_t errlen);

/*
 * Parse a byte size: "4096", "64K", "1M", "2G", also "KiB"/"MiB"/"GiB"
 * (all binary multiples). Returns 0 or -EINVAL with a reason in err.
 */
int parse_size_bytes(const char *s, int64_t *out_bytes, char *err, size_t errlen);

/* Parse a whole decimal integer (optional sign); 0 or -EINVAL. */
int parse_int64(const char *s, int64_t *out);

/* Format ns as a short human string ("12.3us", "1.20ms", "3s"). */
void format_duration(int64_t ns, char *buf, size_t len);

/* Current wall-clock time as ISO-8601 UTC with ms ("2026-11-22T00:51:26.123Z"). */
void utc_now_iso(char *buf, size_t len);

#endif
