/* Where the probe reads sysfs: /sys, or a tree standing in for it. */
#ifndef RTLAB_SYSFS_H
#define RTLAB_SYSFS_H

#include <stddef.h>

#define SYSFS_DEFAULT_ROOT "/sys"
/* A directory that stands in for /sys (tests give a fixture tree); read, never written. */
#define SYSFS_ROOT_ENV "RTLAB_SYSFS"

/* REL (e.g. "devices/system/cpu/cpu0/cache") under sysfs, into BUF. 0 or -ENAMETOOLONG. */
int sysfs_path(char *buf, size_t len, const char *rel);

#endif
