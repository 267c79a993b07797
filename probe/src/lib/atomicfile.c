#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "atomicfile.h"

int atomic_write(const char *path, atomic_fill_fn fill, const void *arg, bool *open_failed)
{
	char tmp[PATH_MAX];
	FILE *f;
	int rc;

	if (open_failed)
		*open_failed = false;
	if (!strcmp(path, "-")) {
		rc = fill(stdout, arg);
		return rc ? rc : (fflush(stdout) ? -errno : 0);
	}
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
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
