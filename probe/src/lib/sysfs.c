#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "sysfs.h"

int sysfs_path(char *buf, size_t len, const char *rel)
{
	const char *root = getenv(SYSFS_ROOT_ENV);

	if (!root || !*root)
		root = SYSFS_DEFAULT_ROOT;
	if (snprintf(buf, len, "%s/%s", root, rel) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}
