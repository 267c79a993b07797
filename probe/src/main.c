/* rtlab-probe: the target-side measurement engine. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "probe.h"
#include "sysinfo.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: rtlab-probe COMMAND [options]    (rtlab-probe COMMAND --help)\n\n"
		   "meters:\n");
	for (int i = 0; probe_meters[i]; i++)
		fprintf(f, "  %-12s %s\n", probe_meters[i]->name, probe_meters[i]->summary);
	fprintf(f, "\nother commands:\n"
		   "  load         run load generators alone (SPEC = KIND:ARGS[@CPUS])\n"
		   "  list         meters, loads and their options (--json for machines)\n"
		   "  sysinfo      the system files the readiness audit reads (--json FILE)\n"
		   "\nexit codes: 0 ok, 1 threshold exceeded, 2 bad usage, 3 unsupported here, 4 internal error\n");
}

static int list_cmd(int argc, char **argv)
{
	struct jw w;

	if (argc == 0) {
		usage(stdout);
		printf("\nloads:\n");
		for (int i = 0; probe_load_kinds[i]; i++)
			printf("  %-24s %s\n", probe_load_kinds[i]->syntax, probe_load_kinds[i]->summary);
		return EXIT_OK;
	}
	if (argc != 1 || strcmp(argv[0], "--json")) {
		fprintf(stderr, "rtlab-probe list: unexpected argument \"%s\"\n", argv[0]);
		return EXIT_USAGE;
	}
	jw_init(&w, stdout);
	jw_obj_begin(&w);
	jw_kstr(&w, "version", RTLAB_PROBE_VERSION);
	jw_key(&w, "meters");
	jw_arr_begin(&w);
	for (int i = 0; probe_meters[i]; i++) {
		jw_obj_begin(&w);
		jw_kstr(&w, "name", probe_meters[i]->name);
		jw_kstr(&w, "summary", probe_meters[i]->summary);
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
	return EXIT_OK;
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
	(void)sigemptyset(&sigs);
	(void)sigaddset(&sigs, SIGINT);
	(void)sigaddset(&sigs, SIGTERM);
	(void)sigaddset(&sigs, SIGHUP);
	(void)sigprocmask(SIG_BLOCK, &sigs, NULL);
	(void)signal(SIGPIPE, SIG_IGN);
	/* Load grandchildren orphaned by a dying worker come back to us to be reaped. */
	(void)prctl(PR_SET_CHILD_SUBREAPER, 1);

	if (!strcmp(argv[1], "sysinfo"))
		return sysinfo_main(argc - 2, argv + 2);
	if (!strcmp(argv[1], "list"))
		return list_cmd(argc - 2, argv + 2);
	if (!strcmp(argv[1], "load"))
		return run_loads_only(argc - 2, argv + 2);
	m = find_meter(argv[1]);
	if (!m) {
		fprintf(stderr, "rtlab-probe: unknown command \"%s\" (meters: ", argv[1]);
		for (int i = 0; probe_meters[i]; i++)
			fprintf(stderr, "%s%s", i ? ", " : "", probe_meters[i]->name);
		fprintf(stderr, "; also load, list, sysinfo)\n");
		return EXIT_USAGE;
	}
	return run_meter(m, argc - 2, argv + 2, argc, argv);
}
