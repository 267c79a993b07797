/* futex(2) on a 32-bit word, private to the process or shared through MAP_SHARED memory. */
#ifndef RTLAB_FUTEX_H
#define RTLAB_FUTEX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * Sleep while *W == VAL, at most TIMEOUT_NS (relative, CLOCK_MONOTONIC; 0: no limit).
 * PSHARED: the word is in memory shared between processes. 0 once woken (perhaps
 * spuriously: the caller checks its condition), -EAGAIN when *W != VAL already,
 * -ETIMEDOUT, -EINTR or another -errno.
 */
int futex_wait(_Atomic uint32_t *w, uint32_t val, int64_t timeout_ns, bool pshared);

/* Wake at most N waiters of W; how many were woken, or -errno. */
int futex_wake(_Atomic uint32_t *w, int n, bool pshared);

#endif
