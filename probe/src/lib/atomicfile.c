#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomicfile.h"
#include "outfile.h"

static int dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	int n;

	if (!slash)
		n = snprintf(dir, len, ".");
	else if (slash == path)
		n = snprintf(dir, len, "/");
	else
		n = snprintf(dir, len, "%.*s", (int)(slash - path), path);
	return n >= (int)len ? -ENAMETOOLONG : 0;
}

/* The longest file name DIR's file system takes. */
static size_t name_max(const char *dir)
{
	long n = pathconf(dir, _PC_NAME_MAX);

	return n > 0 ? (size_t)n : NAME_MAX;
}

static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* 0, or -ENAMETOOLONG when PATH or its last component is longer than its file system takes. */
static int name_fits(const char *path, const char *dir)
{
	if (strlen(path) >= PATH_MAX || strlen(base_of(path)) > name_max(dir))
		return -ENAMETOOLONG;
	return 0;
}

/* PATH.tmp.<pid>, beside PATH so that the rename stays on one file system; PATH's
 * name is shortened when the whole would be longer than the file system takes. */
static int tmp_name(const char *path, const char *dir, char *tmp, size_t len)
{
	const char *base = base_of(path);
	char suffix[32];
	size_t keep = strlen(base), max = name_max(dir);

	snprintf(suffix, sizeof(suffix), ".tmp.%d", (int)getpid());
	if (keep + strlen(suffix) > max)
		keep = max > strlen(suffix) ? max - strlen(suffix) : 0;
	if (snprintf(tmp, len, "%.*s%.*s%s", (int)(base - path), path, (int)keep, base, suffix) >=
	    (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* FILL into O, then flushed: 0 or -errno (the first write error). Closes O. */
static int fill_and_close(struct outfile *o, atomic_fill_fn fill, const void *arg, bool sync)
{
	FILE *f = outfile_stream(o);
	int rc;

	if (!f) {
		rc = -errno;
		(void)close(o->fd);
		return rc;
	}
	rc = fill(f, arg);
	if (!rc && (fflush(f) || ferror(f)))
		rc = o->err ? -o->err : -EIO;
	if (!rc && sync && fsync(o->fd))
		rc = -errno;
	if (fclose(f) && !rc)
		rc = o->err ? -o->err : -EIO;
	return rc;
}

/* A device, FIFO or socket (/dev/stdout, /dev/null, a pipe): written in place, since
 * renaming over it would replace the special file itself. */
static int write_special(const char *path, atomic_fill_fn fill, const void *arg, int *stop_sig)
{
	struct outfile o;
	int rc = outfile_open(&o, path, 0);

	if (!rc)
		rc = fill_and_close(&o, fill, arg, false);
	if (o.stop_signal && stop_sig)
		*stop_sig = o.stop_signal;
	return o.stop_signal ? -EINTR : rc;
}

static int write_stdout(atomic_fill_fn fill, const void *arg)
{
	struct outfile o = { .fd = -1 };

	if (fflush(stdout))
		return -errno;
	o.fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
	if (o.fd < 0)
		return -errno;
	return fill_and_close(&o, fill, arg, false);
}

int atomic_write(const char *path, atomic_fill_fn fill, const void *arg, int *stop_sig)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	struct outfile o;
	struct stat st;
	int rc;

	if (!strcmp(path, "-"))
		return write_stdout(fill, arg);
	if (!stat(path, &st) && !S_ISREG(st.st_mode))
		return write_special(path, fill, arg, stop_sig);
	if ((rc = dir_of(path, dir, sizeof(dir))) || (rc = tmp_name(path, dir, tmp, sizeof(tmp))))
		return rc;
	if ((rc = outfile_open(&o, tmp, 0)))
		return rc;
	rc = fill_and_close(&o, fill, arg, true);
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		(void)unlink(tmp);
	return rc;
}

/*
 * Create a file in DIR and remove it: an unnamed O_TMPFILE where the file system
 * has it (nothing can be left behind), else NAME (which must not exist) unlinked.
 */
static int try_create(const char *dir, const char *name)
{
	int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);

	if (fd >= 0)
		return close(fd) ? -errno : 0;
	/* EOPNOTSUPP: not on this file system; EISDIR: a kernel without O_TMPFILE */
	if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
		return -errno;
	fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? (access(dir, W_OK | X_OK) ? -errno : 0) : -errno;
	(void)close(fd);
	return unlink(name) ? -errno : 0;
}

/* An existing PATH that is not a regular file: 1 when written in place, else -errno. */
static int check_special(const char *path, const struct stat *st)
{
	if (S_ISDIR(st->st_mode))
		return -EISDIR; /* rename() would refuse it after the whole run */
	if (S_ISSOCK(st->st_mode))
		return -ENXIO; /* open() refuses a socket */
	return access(path, W_OK) ? -errno : 1;
}

int atomic_check(const char *path)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	struct stat st;
	int rc;

	if (!strcmp(path, "-"))
		return 0;
	if (!stat(path, &st)) {
		if (!S_ISREG(st.st_mode))
			return (rc = check_special(path, &st)) < 0 ? rc : 0; /* written in place */
	} else if (errno != ENOENT) {
		return -errno; /* ENAMETOOLONG, ENOTDIR, EACCES, ELOOP */
	}
	if ((rc = dir_of(path, dir, sizeof(dir))) || (rc = name_fits(path, dir)) ||
	    (rc = tmp_name(path, dir, tmp, sizeof(tmp))))
		return rc;
	return try_create(dir, tmp);
}

int file_check_writable(const char *path)
{
	char dir[PATH_MAX];
	struct stat st;
	int rc;

	if (!stat(path, &st)) {
		if (!S_ISREG(st.st_mode))
			return (rc = check_special(path, &st)) < 0 ? rc : 0;
		return access(path, W_OK) ? -errno : 0; /* opening it would truncate it */
	}
	if (errno != ENOENT)
		return -errno;
	if ((rc = dir_of(path, dir, sizeof(dir))) || (rc = name_fits(path, dir)))
		return rc;
	return try_create(dir, path);
}
