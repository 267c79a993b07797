#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

int ring_open(struct ring *r, const char *path, int thread_index, int cpu,
	      int64_t interval_ns, uint64_t capacity)
{
	unsigned char hdr[RAW_HEADER_BYTES] = { 0 };

	memset(r, 0, sizeof(*r));
	r->mask = capacity - 1;
	r->buf = calloc(capacity, sizeof(*r->buf));
	if (!r->buf)
		return -ENOMEM;
	r->f = fopen(path, "wb");
	if (!r->f) {
		int e = errno;

		free(r->buf);
		r->buf = NULL;
		return -e;
	}
	(void)setvbuf(r->f, NULL, _IOFBF, 1 << 16);
	memcpy(hdr, RAW_MAGIC, 8);
	put_le32(hdr + 8, RAW_VERSION);
	put_le32(hdr + 12, RAW_HEADER_BYTES);
	put_le32(hdr + 16, (uint32_t)thread_index);
	put_le32(hdr + 20, (uint32_t)cpu); /* -1 when unpinned */
	put_le64(hdr + 24, (uint64_t)interval_ns);
	put_le32(hdr + 32, sizeof(int64_t)); /* bytes per sample */
	if (fwrite(hdr, sizeof(hdr), 1, r->f) != 1)
		r->err = errno ? errno : EIO;
	return 0;
}

/* Write everything between tail and head; consumer side. */
static void ring_drain(struct ring *r)
{
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);

	while (t != h) {
		uint64_t idx = t & r->mask;
		uint64_t run = h - t;

		if (run > r->mask + 1 - idx)
			run = r->mask + 1 - idx; /* up to the end of the buffer */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
		for (uint64_t i = 0; i < run; i++)
			r->buf[idx + i] = (int64_t)htole64((uint64_t)r->buf[idx + i]);
#endif
		if (!r->err && fwrite(r->buf + idx, sizeof(int64_t), run, r->f) != run)
			r->err = errno ? errno : EIO;
		r->written += run;
		t += run;
		atomic_store_explicit(&r->tail, t, memory_order_release);
	}
}

int ring_close(struct ring *r)
{
	if (r->f) {
		if (fclose(r->f) != 0 && !r->err)
			r->err = errno ? errno : EIO;
		r->f = NULL;
	}
	free(r->buf);
	r->buf = NULL;
	return -r->err;
}

static void *writer_main(void *arg)
{
	struct raw_writer *w = arg;
	struct timespec ts = ns_to_ts(RAW_DRAIN_PERIOD_NS);

	for (;;) {
		int stop = atomic_load(&w->stop);

		for (int i = 0; i < w->n; i++)
			ring_drain(w->rings[i]);
		if (stop)
			break;
		(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
	}
	return NULL;
}

int raw_writer_start(struct raw_writer *w, struct ring **rings, int n)
{
	w->rings = rings;
	w->n = n;
	atomic_store(&w->stop, 0);
	int rc = pthread_create(&w->thread, NULL, writer_main, w);

	w->running = rc == 0;
	return -rc;
}

void raw_writer_stop(struct raw_writer *w)
{
	if (!w->running)
		return;
	atomic_store(&w->stop, 1);
	(void)pthread_join(w->thread, NULL);
	w->running = false;
}
