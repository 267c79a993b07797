#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "fail.h"

int fail_errno(char *err, size_t errlen, const char *fmt, ...)
{
	int e = errno ? errno : EIO; /* never 0: the caller returns it as a failure */
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < errlen)
		snprintf(err + n, errlen - (size_t)n, " (%s)", strerror(e));
	return -e;
}
