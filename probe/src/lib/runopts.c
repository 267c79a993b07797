/*
 * The options every meter takes, and every check that can be made without
 * measuring: a run and `--check` go through the same checks, so a command
 * line that passes `--check` is not refused as bad input when it runs.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "atomicfile.h"
#include "explain.h"
#include "opts.h"
#include "outfile.h"
#include "run.h"
#include "timeutil.h"

#define DEFAULT_SETTLE_NS NSEC_PER_SEC

#define CP(f) offsetof(struct common_params, f)

const struct opt_desc run_common_opts[] = {
	OPT_DESC("cpus", OPT_CPULIST, 0, 0, "LIST",
		 "one measuring thread pinned per listed CPU (e.g. 1-3)", CP(cpus), CP(cpus_set)),
	OPT_DESC("threads", OPT_INT, 1, CPULIST_MAX, "N",
		 "N unpinned measuring threads (default 1)", CP(threads), CP(threads_set)),
	OPT_DESC("main-cpus", OPT_CPULIST, 0, 0, "LIST", "pin the main and raw-writer threads",
		 CP(main_cpus), CP(main_cpus_set)),
	OPT_DESC(
		"thread-cgroup", OPT_STRING, 0, 0, "FILE",
		"each measuring thread joins this cgroup (writes its thread ID into FILE, a cgroup v1 "
		"tasks file) before it pins itself",
		CP(thread_cgroup), OPT_NO_SET),
	OPT_DESC(
		"load-cgroup", OPT_STRING, 0, 0, "FILE",
		"each load process joins this cgroup (writes its PID into FILE, a cgroup.procs file) "
		"before it sets its CPUs",
		CP(load_cgroup), OPT_NO_SET),
	OPT_DESC(
		"policy", OPT_POLICY, 0, 0, "POLICY",
		"other[:NICE] | fifo:PRIO | rr:PRIO | deadline:RUNTIME/DEADLINE/PERIOD (default fifo:99; "
		"noise: other)",
		CP(policy), OPT_NO_SET),
	OPT_DESC("allow-fallback", OPT_FLAG, 0, 0, NULL,
		 "if the policy or mlock cannot be set, go on and record what was really used",
		 CP(allow_fallback), OPT_NO_SET),
	OPT_DESC("loops", OPT_INT, 1, INT64_MAX / 2, "N",
		 "cycles per thread (default: until --duration or a signal)", CP(loops),
		 CP(loops_set)),
	OPT_DESC("duration", OPT_DURATION, NSEC_PER_MSEC, 366 * 24 * 3600 * NSEC_PER_SEC, "DUR",
		 "measure for this long, e.g. 30s, 10m", CP(duration_ns), CP(duration_set)),
	OPT_DESC("json", OPT_STRING, 0, 0, "FILE",
		 "write the result document to FILE (\"-\": stdout)", CP(json_path), OPT_NO_SET),
	OPT_DESC("raw", OPT_STRING, 0, 0, "FILE",
		 "capture every sample to FILE (FILE.N per thread when several)", CP(raw_path),
		 OPT_NO_SET),
	OPT_DESC("quiet", OPT_FLAG, 0, 0, NULL, "no live status and no summary", CP(quiet),
		 OPT_NO_SET),
	OPT_DESC("progress", OPT_STRING, 0, 0, "FILE",
		 "write live statistics as JSON lines to FILE every second (\"-\": stdout)",
		 CP(progress_path), OPT_NO_SET),
	OPT_DESC("check", OPT_FLAG, 0, 0, NULL,
		 "check everything, measure nothing; a refusal is also one JSON line on stdout",
		 CP(check_only), OPT_NO_SET),
	OPT_DESC("load", OPT_LOAD, 0, 0, "SPEC",
		 "run a load while measuring: KIND:ARGS[@CPUS][,policy=P][,nice=N] (repeatable)",
		 CP(loads), OPT_NO_SET),
	OPT_DESC("settle", OPT_DURATION, 0, 3600 * NSEC_PER_SEC, "DUR",
		 "wait after starting loads before measuring (default 1s with loads)",
		 CP(settle_ns), CP(settle_set)),
	OPT_DESC("no-mlock", OPT_FLAG, 0, 0, NULL, "do not lock memory or prefault stacks",
		 CP(no_mlock), OPT_NO_SET),
	OPT_DESC(
		"stop-on-eof", OPT_FLAG, 0, 0, NULL,
		"stop (as on SIGHUP) when standard input reaches end of file: a closed SSH channel "
		"or pipe ends the run",
		CP(stop_on_eof), OPT_NO_SET),
	{ .name = "dma-latency",
	  .type = OPT_DURATION,
	  .min = 0,
	  .max = INT32_MAX * NSEC_PER_USEC,
	  .step = NSEC_PER_USEC,
	  .metavar = "DUR",
	  .help = "hold /dev/cpu_dma_latency at DUR (whole us, e.g. 0us, 10us) during the run "
		  "(default: off)",
	  .offset = CP(dma_latency_ns),
	  .set_offset = CP(dma_latency_set) },
	OPT_DESC("deadline", OPT_DURATION, 1, 3600 * NSEC_PER_SEC, "DUR",
		 "exit 1 if any latency exceeds DUR (after writing the document)", CP(deadline_ns),
		 CP(deadline_set)),
	OPT_ALIAS("threshold", "deadline"),
	OPT_DESC("explain", OPT_DURATION, 1, 3600 * NSEC_PER_SEC, "DUR",
		 "trace the measured CPUs and explain samples above DUR: what ran instead, in ns "
		 "(wakeup, periodic, response)",
		 CP(explain_ns), CP(explain_set)),
	OPT_DESC("explain-max", OPT_INT, 1, EXPLAIN_MAX_MAX, "N",
		 "explain the N worst samples above --explain (default 10)", CP(explain_max),
		 CP(explain_max_set)),
	OPT_END,
};

static void meter_usage(const struct meter *m, const struct opt_table *t, int nt)
{
	printf("usage: rtlab-probe %s [options]\n\n%s\n\noptions:\n", m->name, m->help);
	opts_help(stdout, t, nt);
}

/* The one line on stderr; with --check also the facts as one JSON line on stdout. */
static int refuse(const struct meter *m, int code, const char *msg, const struct opt_fault *at,
		  bool check)
{
	fprintf(stderr, "rtlab-probe %s: %s\n", m->name, msg);
	if (check)
		opts_fault_json(stdout, msg, at);
	return code;
}

static int fault(struct opt_fault *at, const char *option, const char *value)
{
	at->option = option;
	at->value = value;
	return -EINVAL;
}

void run_raw_path(const struct run *r, int index, char *buf, size_t len)
{
	if (r->nthreads == 1)
		snprintf(buf, len, "%s", r->c.raw_path);
	else
		snprintf(buf, len, "%s.%d", r->c.raw_path, index);
}

/* Rules between options; fills the defaults that depend on others. */
static int check_common(struct run *r, struct opt_fault *at, char *err, size_t errlen)
{
	struct common_params *c = &r->c;

	if (c->cpus_set && c->threads_set) {
		snprintf(err, errlen, "--cpus and --threads exclude each other");
		return fault(at, NULL, NULL);
	}
	if (c->loops_set && c->duration_set) {
		snprintf(err, errlen, "--loops and --duration exclude each other");
		return fault(at, NULL, NULL);
	}
	if (c->explain_max_set && !c->explain_set) {
		snprintf(err, errlen, "--explain-max needs --explain");
		return fault(at, "explain-max", NULL);
	}
	if (c->explain_set && !r->m->explainable) {
		snprintf(err, errlen,
			 "--explain: the %s meter cannot be explained (wakeup, periodic, "
			 "response and sched can)",
			 r->m->name);
		return fault(at, "explain", NULL);
	}
	if (!c->settle_set)
		c->settle_ns = c->loads.n ? DEFAULT_SETTLE_NS : 0;
	r->nthreads = c->cpus_set ? c->cpus.n : (c->threads_set ? (int)c->threads : 1);
	return 0;
}

/* Each load's own check (external tools parse their arguments); -EINVAL or -ENOENT etc. */
static int check_loads(struct run *r, struct opt_fault *at, char *err, size_t errlen)
{
	int bad, rc = load_list_check(&r->c.loads, &bad, err, errlen);

	if (rc) {
		at->option = "load";
		at->value = bad >= 0 ? r->c.loads.spec[bad].text : NULL;
	}
	return rc;
}

/* Every output file can be written, tried for real and left as it was: a bad path costs no run. */
static int check_outputs(struct run *r, struct opt_fault *at, char *err, size_t errlen)
{
	const struct common_params *c = &r->c;
	char path[PATH_MAX];
	int rc;

	if (c->json_path && (rc = atomic_check(c->json_path))) {
		snprintf(err, errlen, "--json: cannot write \"%.300s\" (%s)", c->json_path,
			 strerror(-rc));
		return fault(at, "json", c->json_path);
	}
	for (int i = 0; c->raw_path && i < r->nthreads; i++) {
		run_raw_path(r, i, path, sizeof(path));
		if ((rc = file_check_writable(path))) {
			snprintf(err, errlen, "--raw: cannot write \"%.300s\" (%s)", path,
				 strerror(-rc));
			return fault(at, "raw", c->raw_path);
		}
	}
	if (c->progress_path && strcmp(c->progress_path, "-") &&
	    (rc = file_check_writable(c->progress_path))) {
		snprintf(err, errlen, "--progress: cannot write \"%.300s\" (%s)", c->progress_path,
			 strerror(-rc));
		return fault(at, "progress", c->progress_path);
	}
	return 0;
}

/*
 * Opened before measuring so that the host sees the settle phase; after every check.
 * A stop signal while waiting for a FIFO's reader stops the run before it starts.
 */
static int open_progress(struct run *r, struct opt_fault *at, char *err, size_t errlen)
{
	const char *path = r->c.progress_path;
	struct outfile *o = &r->progress_out;
	int rc = 0;

	if (!path)
		return 0;
	if (strcmp(path, "-"))
		rc = outfile_open(o, path, 0);
	else if ((o->fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0)) < 0)
		rc = -errno;
	if (rc == -EINTR) {
		r->stop_signal = o->stop_signal;
		progress_fail(r, EINTR);
		return 0;
	}
	if (!rc && !(r->progress = outfile_stream(o)))
		rc = -errno;
	if (rc) {
		snprintf(err, errlen, "--progress: cannot write \"%.300s\" (%s)", path,
			 strerror(-rc));
		return fault(at, "progress", path);
	}
	(void)setvbuf(r->progress, NULL, _IOLBF, 0);
	return 0;
}

int run_parse(struct run *r, int argc, char **argv)
{
	const struct meter *m = r->m;
	struct opt_table tables[] = { { m->options, r->mparams }, { run_common_opts, &r->c } };
	struct opt_fault at = { NULL, NULL };
	const char *pos[1];
	int npos = 0, rc, nopts = argc;
	char err[512];
	bool check;

	for (int i = 0; m->takes_command && i < nopts; i++)
		if (!strcmp(argv[i], "--"))
			nopts = i;                  /* what follows is the command's */
	check = opts_given(nopts, argv, "--check"); /* even when parsing stops before it */

	r->c.policy.policy = SCHED_FIFO;
	r->c.policy.priority = 99;
	if (m->policy)
		r->c.policy = *m->policy;
	m->defaults(r->mparams);
	if (nopts < argc) {
		if (nopts + 1 == argc) {
			snprintf(err, sizeof(err), "\"--\" needs a command after it");
			return refuse(m, EXIT_USAGE, err, &at, check);
		}
		r->c.command = argv + nopts + 1; /* argv ends with NULL */
		argc = nopts;
	}
	if (cpulist_online(NULL, &r->online))
		return refuse(m, EXIT_INTERNAL, "cannot read the online CPUs", &at, check);
	rc = opts_parse(argc, argv, tables, 2, &r->online, pos, &npos, &at, err, sizeof(err));
	if (rc == 1) {
		meter_usage(m, tables, 2);
		return EXIT_OK;
	}
	if (!rc)
		rc = check_common(r, &at, err, sizeof(err));
	if (!rc && m->nthreads &&
	    (rc = m->nthreads(r->mparams, &r->c, &at, err, sizeof(err))) > 0) {
		r->nthreads = rc;
		rc = 0;
	}
	if (!rc)
		rc = m->check(r->mparams, r->nthreads, &at, err, sizeof(err));
	if (!rc && m->check_common)
		rc = m->check_common(r->mparams, &r->c, &at, err, sizeof(err));
	if (!rc)
		rc = check_loads(r, &at, err, sizeof(err));
	if (!rc)
		rc = check_outputs(r, &at, err, sizeof(err));
	if (!rc && !r->c.check_only)
		rc = open_progress(r, &at, err, sizeof(err));
	if (rc)
		return refuse(m, rc == -EINVAL ? EXIT_USAGE : EXIT_UNSUPPORTED, err, &at, check);
	return r->c.check_only ? EXIT_OK : -1;
}
