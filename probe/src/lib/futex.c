#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "futex.h"
#include "timeutil.h"

static long futex_call(_Atomic uint32_t *w, int op, uint32_t val, const struct timespec *ts,
		       bool pshared)
{
	return syscall(SYS_futex, (uint32_t *)w, pshared ? op : op | FUTEX_PRIVATE_FLAG, val, ts,
		       NULL, 0);
}

int futex_wait(_Atomic uint32_t *w, uint32_t val, int64_t timeout_ns, bool pshared)
{
	struct timespec ts = ns_to_ts(timeout_ns);

	return futex_call(w, FUTEX_WAIT, val, timeout_ns ? &ts : NULL, pshared) < 0 ? -errno : 0;
}

int futex_wake(_Atomic uint32_t *w, int n, bool pshared)
{
	long woken = futex_call(w, FUTEX_WAKE, (uint32_t)n, NULL, pshared);

	return woken < 0 ? -errno : (int)woken;
}
