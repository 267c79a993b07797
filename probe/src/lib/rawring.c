#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rawring.h"
#include "timeutil.h"

#define RAW_DRAIN_PERIOD_NS (25 * NSEC_PER_MSEC) /* rings hold seconds: wake rarely */

static void put_le32(unsigned char *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static void put_le64(unsigned char *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

int ring_open(struct ring *r, const char *path, int thread_index, int cpu, int64_t interval_ns,
	      uint64_t capacity, int stopping)
{
	int rc;

	memset(r, 0, sizeof(*r));
	r->mask = capacity - 1;
	r->buf = calloc(capacity, sizeof(*r->buf));
	if (!r->buf)
		return -ENOMEM;
	rc = outfile_open(&r->out, path, stopping);
	if (rc == -EINTR) {
		r->err = EINTR;
		r->stop_signal = r->out.stop_signal;
		return rc;
	}
	if (rc) {
		free(r->buf);
		r->buf = NULL;
		return rc;
	}
	memcpy(r->hdr, RAW_MAGIC, 8);
	put_le32(r->hdr + 8, RAW_VERSION);
	put_le32(r->hdr + 12, RAW_HEADER_BYTES);
	put_le32(r->hdr + 16, (uint32_t)thread_index);
	put_le32(r->hdr + 20, (uint32_t)cpu); /* -1 when unpinned */
	put_le64(r->hdr + 24, (uint64_t)interval_ns);
	put_le32(r->hdr + 32, sizeof(int64_t)); /* bytes per sample */
	r->hdr_left = RAW_HEADER_BYTES;
	return 0;
}

/* Write up to LEN bytes: how many; 0 when a FIFO is full (later) or on an error (r->err). */
static size_t put(struct ring *r, const void *p, size_t len)
{
	for (;;) {
		ssize_t n = write(r->out.fd, p, len);

		if (n >= 0)
			return (size_t)n;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			r->err = errno; /* ENOSPC, EIO, EPIPE: the rest is lost */
		return 0;
	}
}

/* The little-endian layout of the file, converted once per sample. */
static void to_le(struct ring *r, uint64_t t, uint64_t idx, uint64_t run)
{
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	for (uint64_t i = r->swapped > t ? r->swapped - t : 0; i < run; i++)
		r->buf[idx + i] = (int64_t)htole64((uint64_t)r->buf[idx + i]);
	if (r->swapped < t + run)
		r->swapped = t + run;
#else
	(void)r, (void)t, (void)idx, (void)run;
#endif
}

/*
 * Write everything between tail and head (consumer side); after an error, count it
 * lost. GIVE_UP: what a FIFO does not take now is lost (err EINTR). True when samples
 * wait for a FIFO's reader.
 */
static bool ring_drain(struct ring *r, int give_up)
{
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);

	while (!r->err && r->hdr_left) {
		size_t n = put(r, r->hdr + RAW_HEADER_BYTES - r->hdr_left, r->hdr_left);

		if (!n)
			break;
		r->hdr_left -= (uint32_t)n;
	}
	while (t != h) {
		uint64_t idx = t & r->mask;
		uint64_t run = h - t, done;
		size_t n;

		if (run > r->mask + 1 - idx)
			run = r->mask + 1 - idx; /* up to the end of the buffer */
		if (r->err) {
			r->lost += run; /* with the sample a failed write may have begun */
			r->part = 0;
			done = run;
		} else {
			if (r->hdr_left)
				break;
			to_le(r, t, idx, run);
			n = put(r, (const char *)(r->buf + idx) + r->part,
				run * sizeof(int64_t) - r->part);
			if (!n && !r->err)
				break; /* a full FIFO: the samples wait in the ring */
			r->part += (uint32_t)(n % sizeof(int64_t));
			done = n / sizeof(int64_t) + r->part / sizeof(int64_t);
			r->part %= sizeof(int64_t);
			r->written += done;
		}
		t += done;
		atomic_store_explicit(&r->tail, t, memory_order_release);
	}
	if (r->err || (t == h && !r->hdr_left))
		return false;
	if (!give_up)
		return true;
	r->err = EINTR;
	r->stop_signal = give_up;
	return ring_drain(r, 0);
}

int ring_close(struct ring *r)
{
	struct stat st;

	if (r->out.fd >= 0) {
		(void)ring_drain(r, 0); /* the header at least, when no writer ran */
		/* a failed write may have left part of a sample: cut the file to whole ones */
		if (r->err && !r->hdr_left && !fstat(r->out.fd, &st) && S_ISREG(st.st_mode))
			(void)ftruncate(r->out.fd, RAW_HEADER_BYTES + (off_t)r->written * 8);
		if (close(r->out.fd) && !r->err)
			r->err = errno;
		r->out.fd = -1;
	}
	free(r->buf);
	r->buf = NULL;
	return -r->err;
}

const char *ring_error(const struct ring *r, char *buf, size_t len)
{
	if (!r->err)
		return NULL;
	if (r->err == EINTR)
		snprintf(buf, len, "stopped by %s while waiting for a reader",
			 stopsig_name(r->stop_signal));
	else
		snprintf(buf, len, "%s", strerror(r->err));
	return buf;
}

static void *writer_main(void *arg)
{
	struct raw_writer *w = arg;
	struct timespec ts = ns_to_ts(RAW_DRAIN_PERIOD_NS);

	for (;;) {
		int stop = atomic_load(&w->stop), give_up = atomic_load(&w->give_up);
		bool waiting = false;

		for (int i = 0; i < w->n; i++)
			waiting |= ring_drain(w->rings[i], give_up);
		if (stop && !waiting)
			break;
		(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	}
	atomic_store(&w->done, 1);
	return NULL;
}

int raw_writer_start(struct raw_writer *w, struct ring **rings, int n)
{
	w->rings = rings;
	w->n = n;
	atomic_store(&w->stop, 0);
	atomic_store(&w->give_up, 0);
	atomic_store(&w->done, 0);
	int rc = pthread_create(&w->thread, NULL, writer_main, w);

	w->running = rc == 0;
	return -rc;
}

int raw_writer_stop(struct raw_writer *w)
{
	int sig = 0;

	if (!w->running)
		return 0;
	atomic_store(&w->stop, 1);
	while (!atomic_load(&w->done)) {
		int s = stopsig_take(RAW_DRAIN_PERIOD_NS);

		if (s && !sig)
			atomic_store(&w->give_up, sig = s);
	}
	(void)pthread_join(w->thread, NULL);
	w->running = false;
	return sig;
}
