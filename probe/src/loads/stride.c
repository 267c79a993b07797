/*
 * stride:STRIDE[:SIZE] — memory and cache pressure: every CPU of @CPUS runs a
 * worker that walks its own buffer, larger than the last-level cache, writing
 * one byte every STRIDE bytes. STRIDE "line" (the cache line: shared-cache and
 * bus congestion), "page" (TLB pressure) or a size in bytes; SIZE defaults
 * to twice the largest cache listed in sysfs, capped (STRIDE_CAP_BYTES and a
 * share of the physical memory) so that a huge reported cache costs no more.
 */
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/sysfs.h"
#include "lib/timeutil.h"
#include "probe.h"

#define STRIDE_CACHE_DIR "devices/system/cpu/cpu0/cache" /* under sysfs */
#define STRIDE_FALLBACK_LLC ((int64_t)32 << 20)          /* when sysfs lists no cache */
#define STRIDE_MAX_SIZE ((int64_t)1 << 34)
/* Default buffer per worker at most: twice the largest LLC of current CPUs (about 0.5 GiB). */
#define STRIDE_CAP_BYTES ((int64_t)1 << 30)
#define STRIDE_RAM_SHARE 4 /* the default buffers of one load take at most 1/4 of the RAM */
/* Writes between two updates of the work-unit count: milliseconds, whatever the buffer. */
#define STRIDE_PUBLISH_WRITES 4096

struct stride_cfg {
	int64_t stride_bytes;
	int64_t size_bytes;  /* of each worker's buffer */
	int64_t llc_bytes;   /* as read from sysfs, 0 if unknown */
	bool capped;         /* the default (2x the LLC) was cut to the cap */
	char stride_name[8]; /* "line", "page" or "" */
};

static int64_t read_sysfs_int(const char *path)
{
	char buf[64], serr[80];
	int64_t v;
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		(void)fclose(f);
		return -1;
	}
	(void)fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return parse_size_bytes(buf, &v, serr, sizeof(serr)) ? -1 : v;
}

/* Size of the highest-level cache of cpu0 and its line size; 0 when not listed. */
static void cache_geometry(int64_t *llc, int64_t *line)
{
	char dir[256], path[320];
	int64_t best_level = -1;

	*llc = 0;
	*line = 0;
	if (sysfs_path(dir, sizeof(dir), STRIDE_CACHE_DIR))
		return;
	for (int i = 0; i < 16; i++) {
		snprintf(path, sizeof(path), "%s/index%d/level", dir, i);
		int64_t level = read_sysfs_int(path);

		if (level < 0)
			continue;
		snprintf(path, sizeof(path), "%s/index%d/size", dir, i);
		int64_t size = read_sysfs_int(path);

		snprintf(path, sizeof(path), "%s/index%d/coherency_line_size", dir, i);
		int64_t ls = read_sysfs_int(path);

		if (ls > 0 && !*line)
			*line = ls;
		if (level > best_level && size > 0) {
			best_level = level;
			*llc = size;
		}
	}
}

/* The default buffer of one of NWORKERS: 2x the LLC, at most the cap. */
static void default_size(struct stride_cfg *cfg, int nworkers)
{
	int64_t want = 2 * (cfg->llc_bytes > 0 ? cfg->llc_bytes : STRIDE_FALLBACK_LLC);
	int64_t cap = STRIDE_CAP_BYTES, page = sysconf(_SC_PAGESIZE);
	long pages = sysconf(_SC_PHYS_PAGES);

	if (pages > 0 && nworkers > 0) {
		int64_t ram_share = (int64_t)pages / STRIDE_RAM_SHARE / nworkers * page;

		if (ram_share < cap)
			cap = ram_share;
	}
	if (cap < cfg->stride_bytes)
		cap = cfg->stride_bytes;
	cfg->capped = want > cap;
	cfg->size_bytes = cfg->capped ? cap : want;
}

static int stride_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct stride_cfg *cfg = (struct stride_cfg *)spec->cfg;
	char buf[LOAD_TEXT_MAX], serr[120];
	int64_t line;

	if (!args || !*args) {
		snprintf(err, errlen, "missing the stride (line, page or bytes)");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", args);
	char *size = strchr(buf, ':');

	if (size)
		*size++ = '\0';
	cache_geometry(&cfg->llc_bytes, &line);
	if (!strcmp(buf, "line")) {
		cfg->stride_bytes = line > 0 ? line : 64;
		strcpy(cfg->stride_name, "line");
	} else if (!strcmp(buf, "page")) {
		cfg->stride_bytes = sysconf(_SC_PAGESIZE);
		strcpy(cfg->stride_name, "page");
	} else if (parse_size_bytes(buf, &cfg->stride_bytes, serr, sizeof(serr)) ||
		   cfg->stride_bytes < 1 || cfg->stride_bytes > (1 << 30)) {
		snprintf(err, errlen, "stride \"%s\" must be line, page or 1..1G bytes", buf);
		return -EINVAL;
	}
	spec->nprocs = spec->cpus.n;
	default_size(cfg, spec->nprocs);
	if (size) {
		cfg->capped = false;
		if (parse_size_bytes(size, &cfg->size_bytes, serr, sizeof(serr)) ||
		    cfg->size_bytes < cfg->stride_bytes || cfg->size_bytes > STRIDE_MAX_SIZE ||
		    (uint64_t)cfg->size_bytes > SIZE_MAX / 2) {
			snprintf(err, errlen,
				 "size \"%s\" must be at least the stride and at most 16G", size);
			return -EINVAL;
		}
	}
	return 0;
}

/* Walk the buffer forever; the count grows every STRIDE_PUBLISH_WRITES writes, not per pass. */
static void stride_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct stride_cfg *cfg = (const void *)spec->cfg;
	size_t size = (size_t)cfg->size_bytes, stride = (size_t)cfg->stride_bytes, off = 0;
	volatile unsigned char *buf;
	unsigned char v = 1;

	(void)index;
	buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		_exit(1);
	/* Small pages: a page stride must miss the TLB, not hit one huge page. */
	if (stride >= (size_t)sysconf(_SC_PAGESIZE))
		(void)madvise((void *)buf, size, MADV_NOHUGEPAGE);
	for (;;) {
		for (int n = 0; n < STRIDE_PUBLISH_WRITES; n++) {
			buf[off] += v;
			if (off < size - stride) {
				off += stride;
			} else {
				off = 0;
				v++;
			}
		}
		*iter += STRIDE_PUBLISH_WRITES;
	}
}

/* Why the buffer is not larger than the LLC, or NULL when it is (or the LLC is unknown). */
static const char *stride_note(const struct stride_cfg *cfg)
{
	if (cfg->llc_bytes <= 0 || cfg->size_bytes > cfg->llc_bytes)
		return NULL;
	return cfg->capped
		       ? "the buffer is capped at or below the last-level cache: part of each "
			 "pass may hit the cache (give SIZE to choose)"
		       : "SIZE is not larger than the last-level cache: part of each pass may hit "
			 "the cache";
}

static void stride_json(struct jw *w, const struct load_spec *spec)
{
	const struct stride_cfg *cfg = (const void *)spec->cfg;

	jw_kint(w, "stride_bytes", cfg->stride_bytes);
	jw_kint(w, "size_bytes", cfg->size_bytes);
	jw_key(w, "llc_bytes");
	cfg->llc_bytes > 0 ? jw_int(w, cfg->llc_bytes) : jw_null(w);
	jw_kbool(w, "size_capped", cfg->capped);
}

/* What ran: the memory of the buffers, the LLC they were sized from, and why when too small. */
static void stride_report(struct jw *w, const struct load_spec *spec, int workers)
{
	const struct stride_cfg *cfg = (const void *)spec->cfg;
	const char *note = stride_note(cfg);

	stride_json(w, spec);
	jw_kint(w, "memory_bytes", cfg->size_bytes * workers);
	jw_key(w, "size_note");
	note ? jw_str(w, note) : jw_null(w);
}

const struct load_kind load_stride = {
	.name = "stride",
	.syntax = "stride:line|page|BYTES[:SIZE]",
	.summary = "walk a buffer of SIZE (2x the last-level cache, at most 1G) writing every "
		   "STRIDE bytes, per CPU",
	.parse = stride_parse,
	.worker = stride_worker,
	.params_json = stride_json,
	.report_json = stride_report,
	.work_unit = "strided write",
	.per_cpu = 1,
};
