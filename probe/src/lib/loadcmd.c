/* `rtlab-probe load SPEC... [--duration D]`: run loads alone until signalled. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "atomicfile.h"
#include "jsonw.h"
#include "loadstat.h"
#include "opts.h"
#include "outfile.h"
#include "runner.h"
#include "timeutil.h"

struct load_params {
	int64_t duration_ns;
	bool duration_set;
	int64_t settle_ns;
	const char *json_path;
	bool quiet;
};

#define LP(f) offsetof(struct load_params, f)

static const struct opt_desc load_opts[] = {
	OPT_DESC("duration", OPT_DURATION, NSEC_PER_MSEC, 366 * 24 * 3600 * NSEC_PER_SEC, "DUR",
		 "stop DUR after settling (default: run until SIGINT/SIGTERM)", LP(duration_ns),
		 LP(duration_set)),
	OPT_DESC("settle", OPT_DURATION, 0, 3600 * NSEC_PER_SEC, "DUR",
		 "wait DUR after starting the loads before recording activity (default 0)",
		 LP(settle_ns), OPT_NO_SET),
	OPT_DESC("json", OPT_STRING, 0, 0, "FILE",
		 "write what ran (work units per load, CPU busy %, switches/s) to FILE",
		 LP(json_path), OPT_NO_SET),
	OPT_DESC("quiet", OPT_FLAG, 0, 0, NULL, "print nothing", LP(quiet), OPT_NO_SET),
	OPT_END,
};

static void load_usage(const struct opt_table *t)
{
	printf("usage: rtlab-probe load SPEC... [options]\n\n"
	       "Run load generators (SCHED_OTHER, in a process group that dies with the probe).\n"
	       "SPEC is KIND:ARGS[@CPUS][,policy=P][,nice=N]; P is other[:NICE], batch[:NICE],\n"
	       "idle, fifo:PRIO or rr:PRIO. Kinds:\n");
	for (int i = 0; probe_load_kinds[i]; i++)
		printf("  %s\n      %s\n", probe_load_kinds[i]->syntax,
		       probe_load_kinds[i]->summary);
	printf("\noptions:\n");
	opts_help(stdout, t, 1);
}

struct load_report {
	const struct load_group *g;
	const struct load_list *l;
	const struct loadstat *act; /* activity at the start [0] and end [1] */
};

static int load_report_fill(FILE *f, const void *arg)
{
	const struct load_report *lr = arg;
	struct jw w;

	jw_init(&w, f);
	jw_obj_begin(&w);
	jw_kint(&w, "schema", 1);
	jw_kstr(&w, "tool", "rtlab-probe");
	jw_kstr(&w, "version", RTLAB_PROBE_VERSION);
	jw_key(&w, "loads");
	load_group_json(&w, lr->g, lr->l);
	jw_key(&w, "activity");
	loadstat_json(&w, &lr->act[0], &lr->act[1]);
	jw_obj_end(&w);
	fputc('\n', f);
	return 0;
}

/* The document after the loads have stopped: 0, or the exit code (said on stderr). */
static int write_json(const char *path, const struct load_group *g, const struct load_list *l,
		      const struct loadstat *act)
{
	struct load_report lr = { g, l, act };
	int sig = 0, rc = atomic_write(path, load_report_fill, &lr, &sig);

	if (rc == -EINTR && sig)
		fprintf(stderr,
			"rtlab-probe load: --json: stopped by %s while waiting for a reader of "
			"\"%.300s\": nothing written\n",
			stopsig_name(sig), path);
	else if (rc)
		fprintf(stderr,
			"rtlab-probe load: --json: cannot write \"%.300s\" (%s): no document "
			"written\n",
			path, strerror(-rc));
	return rc ? EXIT_OUTPUT : EXIT_OK;
}

static int fail(int code, const char *msg)
{
	fprintf(stderr, "rtlab-probe load: %s\n", msg);
	return code;
}

int run_loads_only(int argc, char **argv)
{
	static struct load_list list;
	static struct loadstat act[2];
	struct load_params p = { 0 };
	struct opt_table t = { load_opts, &p };
	struct load_group g;
	struct cpulist online;
	const char *pos[LOAD_MAX_SPECS];
	int npos = LOAD_MAX_SPECS, bad, rc, code;
	char err[512];

	if (cpulist_online(NULL, &online))
		return fail(EXIT_INTERNAL, "cannot read the online CPUs");
	rc = opts_parse(argc, argv, &t, 1, &online, pos, &npos, NULL, err, sizeof(err));
	if (rc == 1) {
		load_usage(&t);
		return EXIT_OK;
	}
	if (!rc && !npos)
		snprintf(err, sizeof(err), "no load given (e.g. forkcopy:4)"), rc = -EINVAL;
	for (int i = 0; !rc && i < npos; i++)
		rc = load_spec_parse(pos[i], &online, &list.spec[list.n++], err, sizeof(err));
	if (!rc && p.json_path && (rc = atomic_check(p.json_path))) {
		snprintf(err, sizeof(err), "--json: cannot write \"%.300s\" (%s)", p.json_path,
			 strerror(-rc));
		rc = -EINVAL; /* found before the loads run, not after */
	}
	if (rc)
		return fail(EXIT_USAGE, err);
	if ((rc = load_list_check(&list, &bad, err, sizeof(err))))
		return fail(rc == -EINVAL ? EXIT_USAGE : EXIT_UNSUPPORTED, err);
	/* Checked above: what is refused now is refused by this system. */
	if ((rc = load_group_start(&g, &list, err, sizeof(err))))
		return fail(rc == -ENOMEM ? EXIT_INTERNAL : EXIT_UNSUPPORTED, err);
	if (!p.quiet)
		fprintf(stderr,
			"rtlab-probe load: %d processes in group %d; stop with SIGINT/SIGTERM\n",
			g.nworkers, (int)g.pgid);
	act[0].ok = false;
	for (int64_t settled = g.start_ns + p.settle_ns, end = settled + p.duration_ns;;) {
		int64_t now = mono_now_ns();
		int64_t left = p.duration_set ? end - now : NSEC_PER_SEC;

		if (!act[0].ok && now >= settled)
			(void)loadstat_read(NULL, &act[0]);
		else if (!act[0].ok && settled - now < left)
			left = settled - now;
		if ((p.duration_set && end - now <= 0) || stopsig_take(left))
			break;
	}
	(void)loadstat_read(NULL, &act[1]);
	load_group_stop(&g);
	code = p.json_path ? write_json(p.json_path, &g, &list, act) : EXIT_OK;
	load_group_free(&g);
	return code;
}
