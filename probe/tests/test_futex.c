/* lib/futex: wait and wake between two threads and between two processes. */
#include "check.h"
#include "lib/futex.h"
#include "lib/timeutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define WAIT_LIMIT_NS (10 * NSEC_PER_SEC) /* a lost wake-up fails the test, never hangs it */

struct shared {
	_Atomic uint32_t word; /* 0 until the waker says go */
	_Atomic int ready;     /* the waiter is about to wait */
	_Atomic int woken;     /* its waits that returned 0 (a wake, perhaps spurious) */
	_Atomic int timeouts;
};

/* Wait while word is 0, counting how each wait ended. */
static void wait_for_go(struct shared *s, bool pshared)
{
	atomic_store(&s->ready, 1);
	while (!atomic_load(&s->word)) {
		int rc = futex_wait(&s->word, 0, WAIT_LIMIT_NS, pshared);

		if (rc == 0)
			atomic_fetch_add(&s->woken, 1);
		else if (rc == -ETIMEDOUT)
			atomic_fetch_add(&s->timeouts, 1);
	}
}

static void *waiter(void *arg)
{
	wait_for_go(arg, false);
	return NULL;
}

/* Wake until a wake finds the waiter asleep (for WAIT_LIMIT_NS at most), then say go; how
 * many it woke in all. */
static int wake_sleeper(struct shared *s, bool pshared)
{
	int64_t until = mono_now_ns() + WAIT_LIMIT_NS;
	int n = 0, rc;

	while (!atomic_load(&s->ready))
		sleep_for_ns(NSEC_PER_MSEC);
	while ((rc = futex_wake(&s->word, 1, pshared)) == 0 && mono_now_ns() < until)
		sleep_for_ns(NSEC_PER_MSEC); /* not asleep in the kernel yet */
	n += rc > 0 ? rc : 0;
	atomic_store(&s->word, 1);
	rc = futex_wake(&s->word, 1, pshared);
	return n + (rc > 0 ? rc : 0);
}

static void test_threads(void)
{
	struct shared s = { 0 };
	pthread_t t;

	CHECK_INT(pthread_create(&t, NULL, waiter, &s), 0);
	CHECK(wake_sleeper(&s, false) >= 1);
	CHECK_INT(pthread_join(t, NULL), 0);
	CHECK(atomic_load(&s.woken) >= 1); /* the wake that found it asleep ended a wait */
	CHECK_INT(atomic_load(&s.timeouts), 0);
}

/* A word in MAP_SHARED memory, the waiter a forked child: pshared on both sides. */
static void test_processes(void)
{
	struct shared *s =
		mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status = -1;
	pid_t pid;

	CHECK(s != MAP_FAILED);
	if (s == MAP_FAILED)
		return;
	pid = fork();
	if (pid == 0) {
		wait_for_go(s, true);
		_exit(atomic_load(&s->woken) >= 1 && !atomic_load(&s->timeouts) ? 0 : 1);
	}
	CHECK(pid > 0);
	if (pid > 0) {
		CHECK(wake_sleeper(s, true) >= 1);
		CHECK_INT(waitpid(pid, &status, 0), pid);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	(void)munmap(s, sizeof(*s));
}

static void test_no_sleep(void)
{
	_Atomic uint32_t w = 7;

	CHECK_INT(futex_wait(&w, 6, 0, false), -EAGAIN); /* the word is not what was seen */
	CHECK_INT(futex_wait(&w, 7, NSEC_PER_MSEC, false), -ETIMEDOUT);
	CHECK_INT(futex_wait(&w, 7, NSEC_PER_MSEC, true), -ETIMEDOUT);
	CHECK_INT(futex_wake(&w, 1, false), 0); /* nobody waits */
	CHECK_INT(w, 7);
}

int main(void)
{
	test_no_sleep();
	test_threads();
	test_processes();
	return check_report("test_futex");
}
