/*
 * spin:PCT%[:PERIOD] — CPU load at PCT % of every CPU of @CPUS: one worker
 * pinned per CPU busy-loops on CLOCK_MONOTONIC until it has had PCT % of a
 * window in CPU time (its thread CPU clock, so other tasks on the CPU do not
 * shrink the load), then sleeps to the window's end. Window lengths vary at
 * random around PERIOD (default 10 ms) so that tick-based CPU accounting does
 * not alias with them.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/timeutil.h"
#include "probe.h"

#define SPIN_DEFAULT_PERIOD_NS (10 * NSEC_PER_MSEC)
#define SPIN_CHECK_NS (20 * NSEC_PER_USEC) /* CPU clock reads are system calls: not every loop */

struct spin_cfg {
	double pct;        /* 0..100 */
	int64_t period_ns; /* mean window length */
};

static int spin_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct spin_cfg *cfg = (struct spin_cfg *)spec->cfg;
	char buf[LOAD_TEXT_MAX], derr[120], *end;

	if (!args || !*args) {
		snprintf(err, errlen, "missing the percentage");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", args);
	char *period = strchr(buf, ':');

	if (period)
		*period++ = '\0';
	errno = 0;
	cfg->pct = strtod(buf, &end);
	if (end != buf && *end == '%')
		end++;
	if (end == buf || *end || errno || !(cfg->pct >= 0.0 && cfg->pct <= 100.0)) {
		snprintf(err, errlen, "percentage \"%s\" must be 0%%..100%%", buf);
		return -EINVAL;
	}
	cfg->period_ns = SPIN_DEFAULT_PERIOD_NS;
	if (period) {
		if (parse_duration_ns(period, &cfg->period_ns, derr, sizeof(derr))) {
			snprintf(err, errlen, "period: %s", derr);
			return -EINVAL;
		}
		if (cfg->period_ns < 100 * NSEC_PER_USEC || cfg->period_ns > NSEC_PER_SEC) {
			snprintf(err, errlen, "period \"%s\" must be 100us..1s", period);
			return -EINVAL;
		}
	}
	spec->nprocs = spec->cpus.n;
	return 0;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void spin_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct spin_cfg *cfg = (const void *)spec->cfg;
	uint64_t seed = (uint64_t)mono_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)index;
	int64_t start = mono_now_ns();

	if (!seed)
		seed = 1;
	for (;;) {
		/* window uniformly in [period/2, 3 period/2): the mean is the period */
		int64_t len =
			cfg->period_ns / 2 + (int64_t)(xorshift(&seed) % (uint64_t)cfg->period_ns);
		int64_t target =
			(int64_t)llround(len * cfg->pct / 100.0); /* CPU ns in this window */
		int64_t end = start + len, cpu0 = thread_cpu_ns(), now, check = start;
		uint64_t n = 0;

		/* Busy until the thread has had TARGET of CPU time (others may take the CPU
		 * meanwhile) or the window ends; the CPU clock is read every SPIN_CHECK_NS. */
		while (target > 0 && (now = mono_now_ns()) < end) {
			n++;
			if (now >= check) {
				if (thread_cpu_ns() - cpu0 >= target)
					break;
				check = now + SPIN_CHECK_NS;
			}
		}
		*iter += n;
		if (end > mono_now_ns())
			sleep_until_ns(end);
		/* preempted past the window: start afresh, never catch up */
		start = end > mono_now_ns() - cfg->period_ns ? end : mono_now_ns();
	}
}

static void spin_json(struct jw *w, const struct load_spec *spec)
{
	const struct spin_cfg *cfg = (const void *)spec->cfg;

	jw_kdouble(w, "percent", cfg->pct);
	jw_kint(w, "period_ns", cfg->period_ns);
}

const struct load_kind load_spin = {
	.name = "spin",
	.syntax = "spin:PCT%[:PERIOD]",
	.summary = "PCT % busy on every CPU of @CPUS (one pinned worker each; windows of ~10ms)",
	.parse = spin_parse,
	.worker = spin_worker,
	.params_json = spin_json,
	.work_unit = "busy-loop clock read",
	.per_cpu = 1,
};
