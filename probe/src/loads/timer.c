/*
 * timer:N[:INTERVAL] — interrupt and softirq pressure: on every CPU of @CPUS a
 * pinned worker arms N periodic timerfds of INTERVAL (default 1ms), their
 * expiries spread evenly over the interval so they do not coalesce, and reads
 * every expiration.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/timeutil.h"
#include "probe.h"

#define TIMER_MAX 1000 /* timerfds per worker: under the usual 1024 open files */
#define TIMER_DEFAULT_INTERVAL_NS NSEC_PER_MSEC

struct timer_cfg {
	int ntimers;
	int64_t interval_ns;
};

static int timer_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct timer_cfg *cfg = (struct timer_cfg *)spec->cfg;
	char buf[LOAD_TEXT_MAX], derr[120];
	int64_t n;

	if (!args || !*args) {
		snprintf(err, errlen, "missing the number of timers");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", args);
	char *interval = strchr(buf, ':');

	if (interval)
		*interval++ = '\0';
	if (parse_int64(buf, &n) || n < 1 || n > TIMER_MAX) {
		snprintf(err, errlen, "timer count \"%s\" must be 1..%d", buf, TIMER_MAX);
		return -EINVAL;
	}
	cfg->ntimers = (int)n;
	cfg->interval_ns = TIMER_DEFAULT_INTERVAL_NS;
	if (interval) {
		if (parse_duration_ns(interval, &cfg->interval_ns, derr, sizeof(derr))) {
			snprintf(err, errlen, "interval: %s", derr);
			return -EINVAL;
		}
		if (cfg->interval_ns < 10 * NSEC_PER_USEC || cfg->interval_ns > NSEC_PER_SEC) {
			snprintf(err, errlen, "interval \"%s\" must be 10us..1s", interval);
			return -EINVAL;
		}
	}
	spec->nprocs = spec->cpus.n;
	return 0;
}

static void timer_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct timer_cfg *cfg = (const void *)spec->cfg;
	struct epoll_event ev[64];
	int ep = epoll_create1(EPOLL_CLOEXEC);
	int64_t first = mono_now_ns() + cfg->interval_ns;

	(void)index;
	if (ep < 0)
		_exit(1);
	for (int i = 0; i < cfg->ntimers; i++) {
		struct itimerspec its = {
			.it_interval = ns_to_ts(cfg->interval_ns),
			.it_value = ns_to_ts(first + cfg->interval_ns * i / cfg->ntimers),
		};
		struct epoll_event e = { .events = EPOLLIN };
		int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);

		e.data.fd = fd;
		if (fd < 0 || timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL) ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e))
			_exit(1);
	}
	for (;;) {
		int n = epoll_wait(ep, ev, 64, -1);

		for (int i = 0; i < n; i++) {
			uint64_t expirations;

			if (read(ev[i].data.fd, &expirations, sizeof(expirations)) ==
			    sizeof(expirations))
				*iter += expirations;
		}
	}
}

static void timer_json(struct jw *w, const struct load_spec *spec)
{
	const struct timer_cfg *cfg = (const void *)spec->cfg;

	jw_kint(w, "timers_per_cpu", cfg->ntimers);
	jw_kint(w, "interval_ns", cfg->interval_ns);
}

const struct load_kind load_timer = {
	.name = "timer",
	.syntax = "timer:N[:INTERVAL]",
	.summary = "N periodic timerfds of INTERVAL (1ms), spread over it, on every CPU of @CPUS",
	.parse = timer_parse,
	.worker = timer_worker,
	.params_json = timer_json,
	.work_unit = "timer expiration",
	.per_cpu = 1,
};
