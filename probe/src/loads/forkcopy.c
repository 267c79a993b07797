/*
 * forkcopy:N[:SIZE] — N processes that forever fork a child which allocates
 * two buffers of SIZE, fills one, copies it into the other, frees both and
 * exits. Fresh children keep the fair scheduler from de-prioritizing a
 * long-running hog, so the load stays constant over time.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/timeutil.h"
#include "probe.h"

#define FORKCOPY_DEFAULT_SIZE (1 << 20)
#define FORKCOPY_MAX_SIZE ((int64_t)1 << 32)

struct forkcopy_cfg {
	int64_t size_bytes;
};

static int forkcopy_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct forkcopy_cfg *cfg = (struct forkcopy_cfg *)spec->cfg;
	char buf[LOAD_TEXT_MAX], serr[120];
	int64_t n;

	if (!args || !*args) {
		snprintf(err, errlen, "missing the number of processes");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", args);
	char *size = strchr(buf, ':');

	if (size)
		*size++ = '\0';
	if (parse_int64(buf, &n) || n < 0 || n > LOAD_MAX_PROCS) {
		snprintf(err, errlen, "process count \"%s\" must be 0..%d", buf, LOAD_MAX_PROCS);
		return -EINVAL;
	}
	spec->nprocs = (int)n;
	cfg->size_bytes = FORKCOPY_DEFAULT_SIZE;
	if (size) {
		if (parse_size_bytes(size, &cfg->size_bytes, serr, sizeof(serr))) {
			snprintf(err, errlen, "size: %s", serr);
			return -EINVAL;
		}
		if (cfg->size_bytes < 1 || cfg->size_bytes > FORKCOPY_MAX_SIZE) {
			snprintf(err, errlen, "size \"%s\" must be 1 byte..4G", size);
			return -EINVAL;
		}
	}
	return 0;
}

static void forkcopy_child(size_t size)
{
	char *src = malloc(size), *dst = malloc(size);

	if (!src || !dst)
		_exit(1);
	memset(src, 0x5a, size); /* real pages, not the shared zero page */
	memcpy(dst, src, size);
	/* Keep the copy from being optimized away. */
	__asm__ volatile("" : : "r"(dst) : "memory");
	free(src);
	free(dst);
	_exit(0);
}

static void forkcopy_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct forkcopy_cfg *cfg = (const void *)spec->cfg;
	pid_t self = getpid();

	(void)index;
	for (;;) {
		pid_t pid = fork();

		if (pid == 0) {
			(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self)
				_exit(0);
			forkcopy_child((size_t)cfg->size_bytes);
		}
		if (pid < 0) {
			struct timespec nap = ns_to_ts(NSEC_PER_MSEC); /* fork pressure: back off */

			(void)nanosleep(&nap, NULL);
			continue;
		}
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		(*iter)++;
	}
}

static void forkcopy_json(struct jw *w, const struct load_spec *spec)
{
	const struct forkcopy_cfg *cfg = (const void *)spec->cfg;

	jw_kint(w, "size_bytes", cfg->size_bytes);
	jw_kstr(w, "work_unit", "fork+copy");
}

const struct load_kind load_forkcopy = {
	.name = "forkcopy",
	.syntax = "forkcopy:N[:SIZE]",
	.summary = "N processes forever forking children that copy SIZE bytes (default 1M)",
	.parse = forkcopy_parse,
	.worker = forkcopy_worker,
	.params_json = forkcopy_json,
};
