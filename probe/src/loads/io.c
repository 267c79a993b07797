/*
 * io:DIR[:SIZE] — block I/O and writeback: one worker writes 1 MiB blocks to
 * an unnamed file in DIR and fsyncs each, cycling over SIZE bytes (default
 * 64M). The file has no name (O_TMPFILE, or unlinked at once), so nothing is
 * left in DIR however the load ends.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/timeutil.h"
#include "probe.h"

#define IO_BLOCK_BYTES (1 << 20)
#define IO_DEFAULT_SIZE ((int64_t)64 << 20)
#define IO_MAX_SIZE ((int64_t)1 << 40)

struct io_cfg {
	int64_t size_bytes;
	char dir[LOAD_TEXT_MAX];
};

static int io_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct io_cfg *cfg = (struct io_cfg *)spec->cfg;
	char serr[120];
	struct stat st;

	if (!args || !*args) {
		snprintf(err, errlen, "missing the directory");
		return -EINVAL;
	}
	snprintf(cfg->dir, sizeof(cfg->dir), "%s", args);
	cfg->size_bytes = IO_DEFAULT_SIZE;
	/* DIR:SIZE when what follows the last ':' is a size; a directory may contain ':' */
	char *colon = strrchr(cfg->dir, ':');

	if (colon && !parse_size_bytes(colon + 1, &cfg->size_bytes, serr, sizeof(serr))) {
		*colon = '\0';
		if (cfg->size_bytes < IO_BLOCK_BYTES || cfg->size_bytes > IO_MAX_SIZE) {
			snprintf(err, errlen, "size \"%s\" must be 1M..1T", colon + 1);
			return -EINVAL;
		}
	}
	if (stat(cfg->dir, &st) || !S_ISDIR(st.st_mode) || access(cfg->dir, W_OK | X_OK)) {
		snprintf(err, errlen, "\"%s\" is not a writable directory", cfg->dir);
		return -EINVAL;
	}
	spec->nprocs = 1;
	return 0;
}

static int io_open(const char *dir)
{
	char path[LOAD_TEXT_MAX + 32];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0)
		return fd;
	snprintf(path, sizeof(path), "%s/.rtlab-io.%d", dir, (int)getpid());
	fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0)
		(void)unlink(path);
	return fd;
}

static void io_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct io_cfg *cfg = (const void *)spec->cfg;
	char *block = malloc(IO_BLOCK_BYTES);
	int fd = io_open(cfg->dir);
	uint64_t seq = 0;

	(void)index;
	if (fd < 0 || !block)
		_exit(1);
	for (off_t off = 0;; off += IO_BLOCK_BYTES) {
		size_t done = 0;

		if (off + IO_BLOCK_BYTES > cfg->size_bytes)
			off = 0;
		/* Fresh content each pass, so no layer can skip an unchanged block. */
		memset(block, (int)(seq++ & 0xff), IO_BLOCK_BYTES);
		while (done < IO_BLOCK_BYTES) {
			ssize_t w =
				pwrite(fd, block + done, IO_BLOCK_BYTES - done, off + (off_t)done);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				struct timespec nap =
					ns_to_ts(10 * NSEC_PER_MSEC); /* disk full: back off */

				(void)nanosleep(&nap, NULL);
				break;
			}
			done += (size_t)w;
		}
		if (done == IO_BLOCK_BYTES && fsync(fd) == 0)
			*iter += IO_BLOCK_BYTES;
	}
}

static void io_json(struct jw *w, const struct load_spec *spec)
{
	const struct io_cfg *cfg = (const void *)spec->cfg;

	jw_kstr(w, "dir", cfg->dir);
	jw_kint(w, "size_bytes", cfg->size_bytes);
	jw_kint(w, "block_bytes", IO_BLOCK_BYTES);
}

const struct load_kind load_io = {
	.name = "io",
	.syntax = "io:DIR[:SIZE]",
	.summary = "write 1 MiB blocks + fsync to an unnamed file in DIR, cycling over SIZE (64M)",
	.parse = io_parse,
	.worker = io_worker,
	.params_json = io_json,
	.work_unit = "byte written and synced",
};
