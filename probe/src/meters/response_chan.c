/* response's transports: the handler waits on fd[0] (or sh), the stimulus fires. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <linux/gpio.h>
#include <mqueue.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/fail.h"
#include "lib/futex.h"
#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

#include "meters/response.h"

/* ---- transports: the handler waits on fd[0] (or sh), the stimulus fires on fd[1] ---- */

static int fd_wr8(int fd, uint64_t v)
{
	ssize_t n;

	while ((n = write(fd, &v, sizeof(v))) < 0 && errno == EINTR)
		;
	return n == sizeof(v) ? 0 : n < 0 ? -errno : -EIO;
}

static int fd_rd8(int fd)
{
	uint64_t v;
	ssize_t n;

	while ((n = read(fd, &v, sizeof(v))) < 0 && errno == EINTR)
		;
	return n == sizeof(v) ? 0 : n < 0 ? -errno : -EPIPE;
}

void chan_close(struct resp_chan *c)
{
	for (int i = 0; i < 2; i++)
		if (c->fd[i] >= 0)
			(void)close(c->fd[i]);
	if (c->mq != (mqd_t)-1)
		(void)mq_close(c->mq);
	c->fd[0] = c->fd[1] = -1;
	c->mq = (mqd_t)-1;
}

static int pipe_setup(struct resp_chan *c, char *err, size_t errlen)
{
	return pipe2(c->fd, O_CLOEXEC) ? fail_errno(err, errlen, "--transport: pipe2 failed") : 0;
}

static int unix_setup(struct resp_chan *c, char *err, size_t errlen)
{
	if (!socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, c->fd))
		return 0;
	return fail_errno(err, errlen, "--transport: socketpair(AF_UNIX, SOCK_DGRAM) failed");
}

static int eventfd_setup(struct resp_chan *c, char *err, size_t errlen)
{
	c->fd[0] = eventfd(0, EFD_CLOEXEC);
	return c->fd[0] < 0 ? fail_errno(err, errlen, "--transport: eventfd failed") : 0;
}

static int fd_fire(struct resp_chan *c)
{
	return fd_wr8(c->fd[1], c->seq);
}
static int fd_wait(struct resp_chan *c)
{
	return fd_rd8(c->fd[0]);
}
static int eventfd_fire(struct resp_chan *c)
{
	return fd_wr8(c->fd[0], 1);
}

static int futex_tp_fire(struct resp_chan *c)
{
	int rc = futex_wake(&c->sh->gen, 1, c->pshared);

	return rc < 0 ? rc : 0;
}

/* The futex word is gen itself: a fire before the wait makes it return at once. */
static int futex_tp_wait(struct resp_chan *c)
{
	int rc = futex_wait(&c->sh->gen, c->gen, 0, c->pshared);

	return rc == -EAGAIN || rc == -EINTR ? 0 : rc;
}

static int condvar_setup(struct resp_chan *c, char *err, size_t errlen)
{
	int ps = c->pshared ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE, rc;
	pthread_mutexattr_t ma;
	pthread_condattr_t ca;

	(void)pthread_mutexattr_init(&ma);
	(void)pthread_condattr_init(&ca);
	(void)pthread_mutexattr_setpshared(&ma, ps);
	(void)pthread_condattr_setpshared(&ca, ps);
	(void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* a timed wait never sees NTP */
	rc = pthread_mutex_init(&c->sh->mtx, &ma);
	if (!rc)
		rc = pthread_cond_init(&c->sh->cond, &ca);
	(void)pthread_mutexattr_destroy(&ma);
	(void)pthread_condattr_destroy(&ca);
	if (rc)
		snprintf(err, errlen, "--transport: pthread_cond_init failed (%s)", strerror(rc));
	return -rc;
}

/* gen was bumped before: signalled under the lock, the waiter's check cannot miss it. */
static int condvar_fire(struct resp_chan *c)
{
	(void)pthread_mutex_lock(&c->sh->mtx);
	(void)pthread_cond_signal(&c->sh->cond);
	(void)pthread_mutex_unlock(&c->sh->mtx);
	return 0;
}

static int condvar_wait(struct resp_chan *c)
{
	(void)pthread_mutex_lock(&c->sh->mtx);
	while (atomic_load_explicit(&c->sh->gen, memory_order_relaxed) == c->gen)
		(void)pthread_cond_wait(&c->sh->cond, &c->sh->mtx);
	(void)pthread_mutex_unlock(&c->sh->mtx);
	return 0;
}

static int sem_setup(struct resp_chan *c, char *err, size_t errlen)
{
	if (!sem_init(&c->sh->sem, c->pshared, 0))
		return 0;
	return fail_errno(err, errlen, "--transport: sem_init failed");
}

static int sem_fire(struct resp_chan *c)
{
	return sem_post(&c->sh->sem) ? -errno : 0;
}

static int sem_wait_ev(struct resp_chan *c)
{
	while (sem_wait(&c->sh->sem))
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* Blocked in the handler thread only: the signal is directed at its tid. */
static int signal_setup(struct resp_chan *c, char *err, size_t errlen)
{
	int rc;

	c->sig = SIGRTMIN;
	c->tgid = getpid();
	c->tid = gettid();
	(void)sigemptyset(&c->sigs);
	(void)sigaddset(&c->sigs, c->sig);
	if ((rc = pthread_sigmask(SIG_BLOCK, &c->sigs, NULL)))
		snprintf(err, errlen, "--transport: cannot block signal %d (%s)", c->sig,
			 strerror(rc));
	return -rc;
}

/* rt_tgsigqueueinfo: what pthread_sigqueue does, but also to a thread of another process. */
static int signal_fire(struct resp_chan *c)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = c->sig;
	si.si_code = SI_QUEUE;
	si.si_pid = c->self;
	si.si_value.sival_int = (int)c->seq;
	return syscall(SYS_rt_tgsigqueueinfo, c->tgid, c->tid, c->sig, &si) ? -errno : 0;
}

static int signal_wait(struct resp_chan *c)
{
	while (sigwaitinfo(&c->sigs, NULL) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* The name is unlinked as soon as it is open: even a SIGKILL leaves nothing in /dev/mqueue. */
static int mq_setup(struct resp_chan *c, char *err, size_t errlen)
{
	struct mq_attr a = { .mq_maxmsg = 4, .mq_msgsize = sizeof(uint64_t) };
	char name[64];

	snprintf(name, sizeof(name), "/rtlab-response.%d.%d", (int)getpid(), (int)gettid());
	c->mq = mq_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600, &a);
	if (c->mq == (mqd_t)-1)
		return fail_errno(err, errlen, "--transport: mq_open failed");
	(void)mq_unlink(name);
	return 0;
}

static int mq_fire(struct resp_chan *c)
{
	while (mq_send(c->mq, (const char *)&c->seq, sizeof(c->seq), 0))
		if (errno != EINTR)
			return -errno;
	return 0;
}

static int mq_wait(struct resp_chan *c)
{
	uint64_t v;

	while (mq_receive(c->mq, (char *)&v, sizeof(v), NULL) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* One request: OUT an output (starts low), IN an input with both-edge events. */
static int gpio_setup(struct resp_chan *c, char *err, size_t errlen)
{
	const struct response_params *p = c->p;
	struct gpio_v2_line_request req;
	int chip = open(p->gpio_chip, O_RDWR | O_CLOEXEC), rc;

	if (chip < 0) {
		rc = -errno;
		snprintf(err, errlen, "--gpio: cannot open %s (%s)", p->gpio_chip, strerror(-rc));
		return rc;
	}
	memset(&req, 0, sizeof(req));
	req.offsets[0] = p->gpio_out;
	req.offsets[1] = p->gpio_in;
	req.num_lines = 2;
	snprintf(req.consumer, sizeof(req.consumer), "rtlab-response");
	req.config.flags = GPIO_V2_LINE_FLAG_INPUT | GPIO_V2_LINE_FLAG_EDGE_RISING |
			   GPIO_V2_LINE_FLAG_EDGE_FALLING;
	req.config.num_attrs = 2;
	req.config.attrs[0].attr.id = GPIO_V2_LINE_ATTR_ID_FLAGS;
	req.config.attrs[0].attr.flags = GPIO_V2_LINE_FLAG_OUTPUT;
	req.config.attrs[0].mask = 1; /* bit i: offsets[i] */
	req.config.attrs[1].attr.id = GPIO_V2_LINE_ATTR_ID_OUTPUT_VALUES;
	req.config.attrs[1].attr.values = 0;
	req.config.attrs[1].mask = 1;
	rc = ioctl(chip, GPIO_V2_GET_LINE_IOCTL, &req) ? -errno : 0;
	(void)close(chip);
	if (rc) {
		snprintf(err, errlen, "--gpio: lines %u,%u of %s refused (%s)", p->gpio_out,
			 p->gpio_in, p->gpio_chip, strerror(-rc));
		return rc;
	}
	c->fd[0] = req.fd;
	return 0;
}

static int gpio_fire(struct resp_chan *c)
{
	struct gpio_v2_line_values v = { .bits = c->level ^= 1, .mask = 1 };

	return ioctl(c->fd[0], GPIO_V2_LINE_SET_VALUES_IOCTL, &v) ? -errno : 0;
}

/* Polls, so that a stop ends the wait even when the loopback wire is missing. */
static int gpio_wait(struct resp_chan *c)
{
	struct pollfd pfd = { .fd = c->fd[0], .events = POLLIN };
	struct gpio_v2_line_event ev;
	ssize_t n;

	for (;;) {
		if (poll(&pfd, 1, 200) > 0) {
			n = read(c->fd[0], &ev, sizeof(ev));
			if (n == sizeof(ev) && ev.offset == c->p->gpio_in) {
				c->kernel_ns = (int64_t)ev.timestamp_ns;
				return 0;
			}
			if (n < 0 && errno != EINTR && errno != EAGAIN)
				return -errno;
		}
		if (c->stop && atomic_load_explicit(c->stop, memory_order_relaxed))
			return -EINTR;
	}
}

const struct transport response_transports[TP_COUNT] = {
	[TP_PIPE] = { pipe_setup, fd_fire, fd_wait, chan_close },
	[TP_EVENTFD] = { eventfd_setup, eventfd_fire, fd_wait, chan_close },
	[TP_FUTEX] = { NULL, futex_tp_fire, futex_tp_wait, chan_close },
	[TP_CONDVAR] = { condvar_setup, condvar_fire, condvar_wait, chan_close },
	[TP_SIGNAL] = { signal_setup, signal_fire, signal_wait, chan_close },
	[TP_MQ] = { mq_setup, mq_fire, mq_wait, chan_close },
	[TP_UNIX] = { unix_setup, fd_fire, fd_wait, chan_close },
	[TP_SEMAPHORE] = { sem_setup, sem_fire, sem_wait_ev, chan_close },
	[TP_GPIO] = { gpio_setup, gpio_fire, gpio_wait, chan_close },
};

const char *const response_transport_names[TP_COUNT + 1] = {
	[TP_PIPE] = "pipe",       [TP_EVENTFD] = "eventfd",     [TP_FUTEX] = "futex",
	[TP_CONDVAR] = "condvar", [TP_SIGNAL] = "signal",       [TP_MQ] = "mq",
	[TP_UNIX] = "unix",       [TP_SEMAPHORE] = "semaphore", [TP_GPIO] = "gpio",
	[TP_COUNT] = NULL,
};
