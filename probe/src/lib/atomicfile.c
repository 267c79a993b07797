#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomicfile.h"

/* PATH.tmp.<pid>: beside PATH, so that the rename stays on one file system. */
static int tmp_name(const char *path, char *tmp, size_t len)
{
	if (snprintf(tmp, len, "%s.tmp.%d", path, (int)getpid()) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* A device, FIFO or socket (/dev/stdout, /dev/null, a pipe): written in place, since
 * renaming over it would replace the special file itself. */
static int write_special(const char *path, atomic_fill_fn fill, const void *arg,
			 bool *open_failed)
{
	FILE *f = fopen(path, "w");
	int rc;

	if (!f) {
		if (open_failed)
			*open_failed = true;
		return -errno;
	}
	rc = fill(f, arg);
	if (!rc && fflush(f))
		rc = -errno;
	if (fclose(f) && !rc)
		rc = -errno;
	return rc;
}

int atomic_write(const char *path, atomic_fill_fn fill, const void *arg, bool *open_failed)
{
	char tmp[PATH_MAX];
	struct stat st;
	FILE *f;
	int rc;

	if (open_failed)
		*open_failed = false;
	if (!strcmp(path, "-")) {
		rc = fill(stdout, arg);
		return rc ? rc : (fflush(stdout) ? -errno : 0);
	}
	if (!stat(path, &st) && !S_ISREG(st.st_mode))
		return write_special(path, fill, arg, open_failed);
	if (tmp_name(path, tmp, sizeof(tmp)))
		f = NULL, errno = ENAMETOOLONG;
	else
		f = fopen(tmp, "w");
	if (!f) {
		if (open_failed)
			*open_failed = true;
		return -errno;
	}
	rc = fill(f, arg);
	if (!rc && (fflush(f) || fsync(fileno(f))))
		rc = -errno;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		(void)unlink(tmp);
	return rc;
}

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

int atomic_check(const char *path)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	struct stat st;

	if (!strcmp(path, "-"))
		return 0;
	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return -EISDIR; /* rename() would refuse it after the whole run */
	if (!stat(path, &st) && !S_ISREG(st.st_mode))
		return access(path, W_OK) ? -errno : 0; /* written in place (write_special) */
	if (tmp_name(path, tmp, sizeof(tmp)) || dir_of(path, dir, sizeof(dir)))
		return -ENAMETOOLONG;
	return try_create(dir, tmp);
}

int file_check_writable(const char *path)
{
	char dir[PATH_MAX];
	struct stat st;

	if (!stat(path, &st)) {
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		return access(path, W_OK) ? -errno : 0; /* opening it would truncate it */
	}
	if (errno != ENOENT)
		return -errno;
	if (dir_of(path, dir, sizeof(dir)))
		return -ENAMETOOLONG;
	return try_create(dir, path);
}
