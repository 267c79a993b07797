/*
 * stress-ng:PRESET[:N] | stress-ng:ARGS — the stress-ng tool as a load.
 * PRESET is cpu, vm, io, hdd or full (all four), each with N workers (default:
 * one per CPU of @CPUS); ARGS starting with "-" are passed through as they
 * are (split at blanks). Files of hdd go to a private directory under $TMPDIR
 * (default /tmp) that is removed when the load stops.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/extload.h"
#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/timeutil.h"
#include "probe.h"

#define STRESSNG_SAMPLE_NS (250 * NSEC_PER_MSEC)
#define STRESSNG_RESTART_NS NSEC_PER_SEC
#define STRESSNG_CHECK_NS (5 * NSEC_PER_SEC) /* --dry-run takes milliseconds; never hang a check */

static const char *const presets[] = { "cpu", "vm", "io", "hdd", "full" };

struct stressng_cfg {
	int preset;  /* index into presets, or -1 for pass-through arguments */
	int workers; /* per stressor of a preset */
	char args[LOAD_TEXT_MAX];
};

static const char *tmp_dir(void)
{
	const char *d = getenv("TMPDIR");

	return d && *d ? d : "/tmp";
}

static int stressng_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct stressng_cfg *cfg = (struct stressng_cfg *)spec->cfg;
	char buf[LOAD_TEXT_MAX];
	int64_t n;

	if (!args || !*args) {
		snprintf(err, errlen, "missing a preset (cpu, vm, io, hdd, full) or arguments");
		return -EINVAL;
	}
	spec->nprocs = 1;
	cfg->preset = -1;
	cfg->workers = spec->cpus.n;
	snprintf(cfg->args, sizeof(cfg->args), "%s", args);
	if (args[0] == '-')
		return 0;
	snprintf(buf, sizeof(buf), "%s", args);
	char *count = strchr(buf, ':');

	if (count)
		*count++ = '\0';
	for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
		if (!strcmp(buf, presets[i]))
			cfg->preset = (int)i;
	if (cfg->preset < 0) {
		snprintf(err, errlen,
			 "unknown preset \"%s\" (cpu, vm, io, hdd, full; or arguments "
			 "starting with -)",
			 buf);
		return -EINVAL;
	}
	if (count && (parse_int64(count, &n) || n < 1 || n > LOAD_MAX_PROCS)) {
		snprintf(err, errlen, "worker count \"%s\" must be 1..%d", count, LOAD_MAX_PROCS);
		return -EINVAL;
	}
	if (count)
		cfg->workers = (int)n;
	return 0;
}

/* The stress-ng command line of CFG into ARGV; NUMS holds the number strings. */
static int build_argv(const struct stressng_cfg *cfg, char *args, char *nums, const char *temp,
		      char **argv)
{
	static const char *const opts[] = { "--cpu", "--vm", "--io", "--hdd" };
	int argc = 0;

	argv[argc++] = "stress-ng";
	if (cfg->preset < 0) {
		snprintf(args, LOAD_TEXT_MAX, "%s", cfg->args);
		return extload_split(args, argv, &argc, EXTLOAD_MAX_ARGS);
	}
	snprintf(nums, 16, "%d", cfg->workers);
	for (int i = 0; i < 4; i++) {
		if (!strcmp(presets[cfg->preset], "full") ||
		    !strcmp(presets[cfg->preset], opts[i] + 2)) {
			argv[argc++] = (char *)opts[i];
			argv[argc++] = nums;
		}
	}
	if (!strcmp(presets[cfg->preset], "hdd") || !strcmp(presets[cfg->preset], "full")) {
		argv[argc++] =
			"--hdd-bytes"; /* per worker: small enough to clean up at once on a stop */
		argv[argc++] = "64M";
		argv[argc++] = "--temp-path";
		argv[argc++] = (char *)temp;
	}
	argv[argc] = NULL;
	return 0;
}

static int stressng_prepare(const struct load_spec *spec, char *err, size_t errlen)
{
	const struct stressng_cfg *cfg = (const void *)spec->cfg;
	char args[LOAD_TEXT_MAX], nums[16], *argv[EXTLOAD_MAX_ARGS + 2];
	struct stat st;
	int rc = extload_find("stress-ng", err, errlen);

	if (rc)
		return rc;
	if (build_argv(cfg, args, nums, tmp_dir(), argv + 1)) {
		snprintf(err, errlen, "more than %d arguments", EXTLOAD_MAX_ARGS);
		return -EINVAL;
	}
	if (cfg->preset >= 3 && (stat(tmp_dir(), &st) || !S_ISDIR(st.st_mode))) {
		snprintf(err, errlen, "no directory \"%s\" for stress-ng's files ($TMPDIR)",
			 tmp_dir());
		return -EINVAL;
	}
	argv[0] = "stress-ng";
	argv[1] = "--dry-run"; /* parses the arguments and runs nothing */
	rc = extload_run_sync(argv, STRESSNG_CHECK_NS);
	if (rc < 0) {
		snprintf(err, errlen, "cannot run stress-ng --dry-run (%s)", strerror(-rc));
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "stress-ng refuses the arguments (--dry-run exits with %d)",
			 rc);
		return rc == 127 ? -ENOENT : -EINVAL;
	}
	return 0;
}

static void stressng_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct stressng_cfg *cfg = (const void *)spec->cfg;
	char args[LOAD_TEXT_MAX], nums[16], *argv[EXTLOAD_MAX_ARGS + 1];
	uint64_t before = 0; /* CPU ms of earlier runs */

	(void)index;
	extload_guard();
	const char *temp = cfg->preset >= 3 ? extload_private_dir("stress-ng") : tmp_dir();

	if (!temp || build_argv(cfg, args, nums, temp, argv))
		_exit(1);
	for (;;) {
		pid_t pid = extload_spawn(argv);
		int st;

		if (pid < 0)
			_exit(1);
		/* stress-ng runs until stopped; should it end, start it again. */
		while ((st = extload_wait(pid, STRESSNG_SAMPLE_NS)) == -ETIMEDOUT)
			*iter = before + extload_cpu_ms(pid);
		before = *iter;
		(void)extload_wait(0, STRESSNG_RESTART_NS);
	}
}

static void stressng_json(struct jw *w, const struct load_spec *spec)
{
	const struct stressng_cfg *cfg = (const void *)spec->cfg;

	jw_key(w, "preset");
	cfg->preset >= 0 ? jw_str(w, presets[cfg->preset]) : jw_null(w);
	if (cfg->preset >= 0)
		jw_kint(w, "workers_per_stressor", cfg->workers);
	else
		jw_kstr(w, "arguments", cfg->args);
}

const struct load_kind load_stressng = {
	.name = "stress-ng",
	.syntax = "stress-ng:cpu|vm|io|hdd|full[:N] | stress-ng:ARGS",
	.summary = "stress-ng presets (N workers each, default one per CPU) or its own arguments",
	.parse = stressng_parse,
	.worker = stressng_worker,
	.params_json = stressng_json,
	.prepare = stressng_prepare,
	.work_unit = "CPU ms used by stress-ng",
};
