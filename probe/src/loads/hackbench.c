/*
 * hackbench:GROUPS[:pipe|socket][:FDS] — the rt-tests hackbench as a load:
 * rounds of `hackbench -g GROUPS -f FDS -l 200` run back to back, so the load
 * lasts as long as the case; each completed round counts its messages.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "lib/extload.h"
#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/timeutil.h"
#include "probe.h"

#define HACKBENCH_LOOPS 200 /* messages per sender and receiver in a round: ~0.2 s */
#define HACKBENCH_DEFAULT_FDS 20
#define HACKBENCH_MAX_FDS 256

static int hackbench_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct groups_args *cfg = (struct groups_args *)spec->cfg;

	if (groups_args_parse(args, 1, HACKBENCH_DEFAULT_FDS, HACKBENCH_MAX_FDS, cfg, err, errlen))
		return -EINVAL;
	spec->nprocs = 1;
	return 0;
}

static int hackbench_prepare(const struct load_spec *spec, char *err, size_t errlen)
{
	(void)spec;
	return extload_find("hackbench", err, errlen);
}

static void hackbench_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct groups_args *cfg = (const void *)spec->cfg;
	char g[16], f[16], l[16];
	char *argv[] = { "hackbench", "-g", g, "-f", f, "-l", l, cfg->pipes ? "-p" : NULL, NULL };
	uint64_t per_round = (uint64_t)cfg->groups * cfg->fds * cfg->fds * HACKBENCH_LOOPS;

	(void)index;
	snprintf(g, sizeof(g), "%d", cfg->groups);
	snprintf(f, sizeof(f), "%d", cfg->fds);
	snprintf(l, sizeof(l), "%d", HACKBENCH_LOOPS);
	extload_guard();
	for (;;) {
		pid_t pid = extload_spawn(argv);
		int st;

		if (pid < 0)
			_exit(1);
		while ((st = extload_wait(pid, NSEC_PER_SEC)) == -ETIMEDOUT)
			;
		if (st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			*iter += per_round;
		} else {
			(void)extload_wait(0, 100 * NSEC_PER_MSEC); /* failed: do not spin */
		}
	}
}

static void hackbench_json(struct jw *w, const struct load_spec *spec)
{
	const struct groups_args *cfg = (const void *)spec->cfg;

	jw_kint(w, "groups", cfg->groups);
	jw_kint(w, "senders_per_group", cfg->fds);
	jw_kint(w, "receivers_per_group", cfg->fds);
	jw_kstr(w, "channel", cfg->pipes ? "pipe" : "unix-socket");
	jw_kint(w, "loops_per_round", HACKBENCH_LOOPS);
}

const struct load_kind load_hackbench = {
	.name = "hackbench",
	.syntax = "hackbench:GROUPS[:pipe|socket][:FDS]",
	.summary =
		"rt-tests hackbench rounds back to back (GROUPS of FDS=20 senders and receivers)",
	.parse = hackbench_parse,
	.worker = hackbench_worker,
	.params_json = hackbench_json,
	.prepare = hackbench_prepare,
	.work_unit = "message (completed rounds)",
};
