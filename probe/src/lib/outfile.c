#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "timeutil.h"

void stopsig_set(sigset_t *s)
{
	(void)sigemptyset(s);
	(void)sigaddset(s, SIGINT);
	(void)sigaddset(s, SIGTERM);
	(void)sigaddset(s, SIGHUP);
}

int stopsig_take(int64_t wait_ns)
{
	struct timespec ts = ns_to_ts(wait_ns > 0 ? wait_ns : 0);
	sigset_t s;
	int sig;

	stopsig_set(&s);
	sig = sigtimedwait(&s, NULL, &ts);
	return sig > 0 ? sig : 0;
}

const char *stopsig_name(int sig)
{
	return sig == SIGINT    ? "SIGINT"
	       : sig == SIGTERM ? "SIGTERM"
	       : sig == SIGHUP  ? "SIGHUP"
				: "signal";
}

int outfile_open(struct outfile *o, const char *path, int stopping)
{
	bool noted = false;
	struct stat st;
	int e;

	o->fifo = false;
	o->stop_signal = 0;
	o->err = 0;
	/* O_NONBLOCK: a FIFO without a reader fails with ENXIO instead of blocking in open() */
	while ((o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666)) <
	       0) {
		e = errno;
		if (e != ENXIO || stat(path, &st) || !S_ISFIFO(st.st_mode))
			return -e; /* ENXIO on a socket: nothing to wait for */
		if (stopping) {
			o->stop_signal = stopping;
			return -EINTR;
		}
		if (!noted)
			fprintf(stderr,
				"rtlab-probe: waiting for a reader of \"%.300s\" (SIGINT or "
				"SIGTERM stops)\n",
				path);
		noted = true;
		o->stop_signal = stopsig_take(OUTFILE_WAIT_SLICE_MS * NSEC_PER_MSEC);
		if (o->stop_signal)
			return -EINTR;
	}
	if (fstat(o->fd, &st))
		goto out_close;
	o->fifo = S_ISFIFO(st.st_mode);
	/* Anything but a FIFO is written with ordinary blocking writes. */
	if (!o->fifo && fcntl(o->fd, F_SETFL, fcntl(o->fd, F_GETFL) & ~O_NONBLOCK))
		goto out_close;
	return 0;
out_close:
	e = errno;
	(void)close(o->fd);
	o->fd = -1;
	return -e;
}

static ssize_t write_all(struct outfile *o, const void *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = write(o->fd, (const char *)buf + done, len - done);
		struct pollfd p = { .fd = o->fd, .events = POLLOUT };

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno; /* EPIPE: the reader went away (SIGPIPE is ignored) */
		if (o->stop_signal)
			return -EINTR;
		if (poll(&p, 1, OUTFILE_WAIT_SLICE_MS) > 0)
			continue;
		o->stop_signal = stopsig_take(0);
		if (o->stop_signal)
			return -EINTR;
	}
	return (ssize_t)done;
}

ssize_t outfile_write(struct outfile *o, const void *buf, size_t len)
{
	ssize_t n = write_all(o, buf, len);

	if (n < 0 && !o->err)
		o->err = (int)-n;
	return n;
}

static ssize_t stream_write(void *cookie, const char *buf, size_t len)
{
	ssize_t n = outfile_write(cookie, buf, len);

	if (n >= 0)
		return n;
	errno = (int)-n;
	return 0; /* fopencookie: 0 is an error, errno says which */
}

static int stream_close(void *cookie)
{
	struct outfile *o = cookie;
	int rc = close(o->fd);

	o->fd = -1;
	return rc;
}

FILE *outfile_stream(struct outfile *o)
{
	cookie_io_functions_t io = { .write = stream_write, .close = stream_close };

	return fopencookie(o, "w", io);
}
