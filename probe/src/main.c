/* rtlab-probe: the target-side measurement engine. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "lib/explain.h"
#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/outfile.h"
#include "lib/runner.h"
#include "probe.h"
#include "sysinfo.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: rtlab-probe COMMAND [options]    (rtlab-probe COMMAND --help)\n\n"
		   "meters:\n");
	for (int i = 0; probe_meters[i]; i++)
		fprintf(f, "  %-12s %s\n", probe_meters[i]->name, probe_meters[i]->summary);
	fprintf(f,
		"\nother commands:\n"
		"  load         run load generators alone (SPEC = KIND:ARGS[@CPUS])\n"
		"  list         meters, loads and their options (--json for programs)\n"
		"  sysinfo      the system files the readiness audit reads (--json FILE)\n"
		"  explain      --cleanup: remove tracefs instances left by killed runs, put back\n"
		"               the osnoise/ settings a killed --tracer run changed\n"
		"\nexit codes: 0 ok, 1 a latency exceeded --deadline, 2 bad usage, 3 unsupported here,\n"
		"4 internal error, 5 an output could not be written\n");
}

static void list_usage(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe list [--json]\n\n"
		"The meters, the loads and their options. With --json, one JSON object for\n"
		"programs: \"version\", \"common_options\" (taken by every meter), \"meters\"\n"
		"(name, summary, explainable: takes --explain, options of its own) and \"loads\" (name, syntax, summary);\n"
		"each option has name, type, metavar, min/max (min_ns/max_ns for durations),\n"
		"help and aliases.\n");
}

static void list_json(void)
{
	struct jw w;

	jw_init(&w, stdout);
	jw_obj_begin(&w);
	jw_kstr(&w, "version", RTLAB_PROBE_VERSION);
	jw_key(&w, "common_options");
	opts_json(&w, run_common_opts);
	jw_key(&w, "meters");
	jw_arr_begin(&w);
	for (int i = 0; probe_meters[i]; i++) {
		jw_obj_begin(&w);
		jw_kstr(&w, "name", probe_meters[i]->name);
		jw_kstr(&w, "summary", probe_meters[i]->summary);
		jw_kbool(&w, "explainable", probe_meters[i]->explainable);
		jw_key(&w, "options");
		opts_json(&w, probe_meters[i]->options);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_key(&w, "loads");
	jw_arr_begin(&w);
	for (int i = 0; probe_load_kinds[i]; i++) {
		jw_obj_begin(&w);
		jw_kstr(&w, "name", probe_load_kinds[i]->name);
		jw_kstr(&w, "syntax", probe_load_kinds[i]->syntax);
		jw_kstr(&w, "summary", probe_load_kinds[i]->summary);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	jw_obj_end(&w);
	putchar('\n');
}

static int list_cmd(int argc, char **argv)
{
	bool json = false;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			list_usage(stdout);
			return EXIT_OK;
		}
		if (strcmp(argv[i], "--json")) {
			fprintf(stderr,
				"rtlab-probe list: unexpected argument \"%s\" (see --help)\n",
				argv[i]);
			return EXIT_USAGE;
		}
		json = true;
	}
	if (json) {
		list_json();
		return EXIT_OK;
	}
	usage(stdout);
	printf("\nloads:\n");
	for (int i = 0; probe_load_kinds[i]; i++)
		printf("  %-24s %s\n", probe_load_kinds[i]->syntax, probe_load_kinds[i]->summary);
	return EXIT_OK;
}

/* A command that is not one; with --check also as JSON, like a refused option. */
static int unknown_command(int argc, char **argv)
{
	struct opt_fault at = { NULL, argv[1] };
	char msg[512];
	size_t n;

	n = (size_t)snprintf(msg, sizeof(msg), "unknown command \"%s\" (meters: ", argv[1]);
	for (int i = 0; probe_meters[i] && n < sizeof(msg); i++)
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "%s%s", i ? ", " : "",
				      probe_meters[i]->name);
	if (n < sizeof(msg))
		snprintf(msg + n, sizeof(msg) - n, "; also explain, load, list, sysinfo)");
	fprintf(stderr, "rtlab-probe: %s\n", msg);
	if (opts_given(argc, argv, "--check"))
		opts_fault_json(stdout, msg, &at);
	return EXIT_USAGE;
}

int main(int argc, char **argv)
{
	sigset_t sigs;
	const struct meter *m;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("rtlab-probe %s\n", RTLAB_PROBE_VERSION);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return EXIT_OK;
	}
	/* Stop signals are taken synchronously by the main thread (sigtimedwait);
	 * every thread and load inherits this mask until it resets it. */
	stopsig_set(&sigs);
	(void)sigprocmask(SIG_BLOCK, &sigs, NULL);
	(void)signal(SIGPIPE, SIG_IGN);
	/* Load grandchildren orphaned by a dying worker come back to us to be reaped. */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);

	if (!strcmp(argv[1], "sysinfo"))
		return sysinfo_main(argc - 2, argv + 2);
	if (!strcmp(argv[1], "list"))
		return list_cmd(argc - 2, argv + 2);
	if (!strcmp(argv[1], "explain"))
		return explain_cmd(argc - 2, argv + 2);
	if (!strcmp(argv[1], "load"))
		return run_loads_only(argc - 2, argv + 2);
	m = find_meter(argv[1]);
	if (!m)
		return unknown_command(argc, argv);
	return run_meter(m, argc - 2, argv + 2, argc, argv);
}
