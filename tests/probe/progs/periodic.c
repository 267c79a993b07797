/*
 * A periodic program that measures itself, for the sched meter's ground-truth tests:
 * MODE "abs" (clock_nanosleep TIMER_ABSTIME), "rel" (relative clock_nanosleep) or
 * "timerfd"; every activation writes "SEQ TARGET_NS WOKE_NS" (CLOCK_MONOTONIC) to OUT.
 * usage: periodic MODE PERIOD_US COUNT OUT [CPU [FIFO_PRIO]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec ts_of(int64_t ns)
{
	struct timespec ts = { ns / 1000000000, ns % 1000000000 };

	return ts;
}

int main(int argc, char **argv)
{
	int64_t period, target, woke, *log_t, *log_w;
	long count;
	FILE *out;
	int fd = -1;

	if (argc < 5)
		return 2;
	period = atoll(argv[2]) * 1000;
	count = atol(argv[3]);
	if (period <= 0 || count <= 0 || !(out = fopen(argv[4], "w")))
		return 2;
	if (argc > 5) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(atoi(argv[5]), &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			return 3;
	}
	if (argc > 6) {
		struct sched_param sp = { .sched_priority = atoi(argv[6]) };

		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			return 3;
	}
	log_t = calloc((size_t)count, sizeof(*log_t));
	log_w = calloc((size_t)count, sizeof(*log_w));
	if (!log_t || !log_w)
		return 3;
	(void)mlockall(MCL_CURRENT | MCL_FUTURE);
	target = now_ns() + period;
	if (!strcmp(argv[1], "timerfd")) {
		struct itimerspec its = { ts_of(period), ts_of(target) };

		fd = timerfd_create(CLOCK_MONOTONIC, 0);
		if (fd < 0 || timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL))
			return 3;
	}
	for (long i = 0; i < count; i++) {
		if (fd >= 0) {
			uint64_t n;

			if (read(fd, &n, sizeof(n)) != sizeof(n) || !n)
				return 3;
			target += ((int64_t)n - 1) * period; /* expiries missed: the latest one woke it */
		} else if (!strcmp(argv[1], "rel")) {
			struct timespec d = ts_of(period);

			target = now_ns() + period;
			clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL);
		} else {
			struct timespec t = ts_of(target);

			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL);
		}
		woke = now_ns();
		log_t[i] = target;
		log_w[i] = woke;
		if (fd >= 0 || strcmp(argv[1], "rel"))
			target += period;
	}
	for (long i = 0; i < count; i++)
		fprintf(out, "%ld %lld %lld\n", i, (long long)log_t[i], (long long)log_w[i]);
	return fclose(out) ? 3 : 0;
}
