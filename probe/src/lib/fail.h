/* The reason of a failed system call, in the one-line form setup functions return. */
#ifndef RTLAB_FAIL_H
#define RTLAB_FAIL_H

#include <stddef.h>

/* "WHAT (strerror(errno))" in ERR, WHAT formatted from FMT; returns -errno (of the call
 * that failed: read before anything else can change it). */
int fail_errno(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
