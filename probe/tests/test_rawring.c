/* Raw-sample ring and its file: header layout, order across wrap-around, a full ring
 * refuses without blocking (the sampler counts the sample lost), write errors. */
#include "check.h"
#include "lib/hist.h"
#include "lib/rawring.h"
#include "lib/sampler.h"

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_SAMPLES 64

static char dir[PATH_MAX];

/* Samples in PATH after its header into OUT; their number, or -1 if the file is
 * unreadable or not a whole number of samples. */
static int read_samples(const char *path, unsigned char *hdr, int64_t *out, int max)
{
	FILE *f = fopen(path, "rb");
	unsigned char b[8];
	int n = 0;

	if (!f)
		return -1;
	if (fread(hdr, RAW_HEADER_BYTES, 1, f) != 1) {
		fclose(f);
		return -1;
	}
	for (size_t got; (got = fread(b, 1, sizeof(b), f)) != 0;) {
		uint64_t le;

		if (got != sizeof(b) || n == max) {
			fclose(f);
			return -1;
		}
		memcpy(&le, b, sizeof(le));
		out[n++] = (int64_t)le64toh(le);
	}
	fclose(f);
	return n;
}

static uint32_t le32_at(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static uint64_t le64_at(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

/* The writer's only synchronous use: start it, and stop drains what is left. */
static void drain(struct ring *r)
{
	struct raw_writer w = { 0 };
	struct ring *rings[] = { r };

	CHECK_INT(raw_writer_start(&w, rings, 1), 0);
	raw_writer_stop(&w);
	CHECK(!w.running);
}

static void test_header(void)
{
	char path[PATH_MAX + 16];
	unsigned char hdr[RAW_HEADER_BYTES], zero[RAW_HEADER_BYTES - 36] = { 0 };
	int64_t s[MAX_SAMPLES];
	struct ring r;

	snprintf(path, sizeof(path), "%s/hdr.raw", dir);
	CHECK_INT(ring_open(&r, path, 3, -1, 250000, 8, 0), 0);
	CHECK_INT(ring_close(&r), 0);
	CHECK(r.buf == NULL && r.out.fd == -1);
	CHECK_INT(ring_close(&r), 0); /* twice is harmless */
	CHECK_INT(read_samples(path, hdr, s, MAX_SAMPLES), 0);
	CHECK(!memcmp(hdr, RAW_MAGIC, 8));
	CHECK_INT(le32_at(hdr + 8), RAW_VERSION);
	CHECK_INT(le32_at(hdr + 12), RAW_HEADER_BYTES);
	CHECK_INT(le32_at(hdr + 16), 3);          /* thread index */
	CHECK_INT(le32_at(hdr + 20), UINT32_MAX); /* cpu -1: unpinned */
	CHECK_INT(le64_at(hdr + 24), 250000);     /* interval, ns */
	CHECK_INT(le32_at(hdr + 32), 8);          /* bytes per sample */
	CHECK(!memcmp(hdr + 36, zero, sizeof(zero)));
}

/* Capacity 8: fill, refuse, drain, and wrap the indices around twice; every sample
 * accepted is in the file once, in push order, whatever its value. */
static void test_order_and_wrap(void)
{
	static const int64_t odd[] = { INT64_MIN, -1, 0, INT64_MAX };
	char path[PATH_MAX + 16];
	unsigned char hdr[RAW_HEADER_BYTES];
	int64_t want[MAX_SAMPLES], got[MAX_SAMPLES];
	int nwant = 0, refused = 0;
	struct ring r;

	snprintf(path, sizeof(path), "%s/wrap.raw", dir);
	CHECK_INT(ring_open(&r, path, 0, 1, 1000, 8, 0), 0);
	for (int64_t v = 100; v < 105; v++)
		if (ring_push(&r, v))
			want[nwant++] = v;
	drain(&r);
	for (int64_t v = 200; v < 211; v++) { /* 8 fit, the last 3 are refused */
		if (ring_push(&r, v))
			want[nwant++] = v;
		else
			refused++;
	}
	CHECK_INT(nwant, 13);
	CHECK_INT(refused, 3);
	drain(&r);
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		if (ring_push(&r, odd[i]))
			want[nwant++] = odd[i];
	drain(&r);
	drain(&r); /* an empty ring writes nothing */
	CHECK_INT(r.written, 17);
	CHECK_INT(ring_close(&r), 0);
	CHECK_INT(read_samples(path, hdr, got, MAX_SAMPLES), nwant);
	for (int i = 0; i < nwant; i++)
		CHECK_INT(got[i], want[i]);
	CHECK_INT(le32_at(hdr + 20), 1);
}

/* Capacity 1: one sample, then full. */
static void test_capacity_one(void)
{
	char path[PATH_MAX + 16];
	unsigned char hdr[RAW_HEADER_BYTES];
	int64_t got[MAX_SAMPLES];
	struct ring r;

	snprintf(path, sizeof(path), "%s/one.raw", dir);
	CHECK_INT(ring_open(&r, path, 0, 0, 1000, 1, 0), 0);
	CHECK(ring_push(&r, 7));
	CHECK(!ring_push(&r, 8));
	drain(&r);
	CHECK(ring_push(&r, 9));
	CHECK(!ring_push(&r, 10));
	drain(&r);
	CHECK_INT(ring_close(&r), 0);
	CHECK_INT(read_samples(path, hdr, got, MAX_SAMPLES), 2);
	CHECK_INT(got[0], 7);
	CHECK_INT(got[1], 9);
}

/* The measuring thread's path: a full ring costs one refused push per sample, counted
 * in raw_lost; the other statistics still see every sample. */
static void test_sampler_lost(void)
{
	char path[PATH_MAX + 16];
	unsigned char hdr[RAW_HEADER_BYTES];
	int64_t got[MAX_SAMPLES];
	struct mthread *t = aligned_alloc(_Alignof(struct mthread), sizeof(*t));
	struct ring r;

	CHECK(t != NULL);
	if (!t)
		return;
	memset(t, 0, sizeof(*t));
	t->hist = calloc(1, sizeof(*t->hist));
	CHECK(t->hist != NULL);
	CHECK_INT(series_init(&t->series, 1000000000, 4), 0);
	t->worst_floor = INT64_MIN;
	t->explain_floor = INT64_MAX;
	t->miss_floor = INT64_MAX;
	snprintf(path, sizeof(path), "%s/lost.raw", dir);
	CHECK_INT(ring_open(&r, path, 0, -1, 1000, 4, 0), 0);
	t->ring = &r;
	for (int i = 0; i < 10; i++)
		sample_record(t, 1000 + i, (uint64_t)i, t->start_ns + i);
	CHECK_INT(MT_GET(t, count), 10);
	CHECK_INT(t->raw_lost, 6);
	CHECK_INT(t->hist->total, 10);
	CHECK_INT(MT_GET(t, max_ns), 1009);
	drain(&r);
	sample_record(t, 5, 10, t->start_ns + 10);
	CHECK_INT(t->raw_lost, 6); /* room again after the drain */
	drain(&r);
	CHECK_INT(ring_close(&r), 0);
	CHECK_INT(read_samples(path, hdr, got, MAX_SAMPLES), 5);
	for (int i = 0; i < 4; i++)
		CHECK_INT(got[i], 1000 + i); /* the first four; the lost ones never appear */
	CHECK_INT(got[4], 5);
	series_free(&t->series);
	free(t->hist);
	free(t);
}

/* Several rings, one writer: each file gets its own samples. */
static void test_two_rings(void)
{
	char p0[PATH_MAX + 16], p1[PATH_MAX + 16];
	unsigned char hdr[RAW_HEADER_BYTES];
	int64_t got[MAX_SAMPLES];
	struct ring r[2];
	struct ring *rings[] = { &r[0], &r[1] };
	struct raw_writer w = { 0 };

	snprintf(p0, sizeof(p0), "%s/two.raw.0", dir);
	snprintf(p1, sizeof(p1), "%s/two.raw.1", dir);
	CHECK_INT(ring_open(&r[0], p0, 0, -1, 1000, 16, 0), 0);
	CHECK_INT(ring_open(&r[1], p1, 1, -1, 2000, 16, 0), 0);
	CHECK_INT(raw_writer_start(&w, rings, 2), 0);
	for (int i = 0; i < 10; i++) {
		CHECK(ring_push(&r[0], i));
		CHECK(ring_push(&r[1], -i));
	}
	raw_writer_stop(&w);
	raw_writer_stop(&w); /* twice is harmless */
	CHECK_INT(ring_close(&r[0]), 0);
	CHECK_INT(ring_close(&r[1]), 0);
	CHECK_INT(read_samples(p0, hdr, got, MAX_SAMPLES), 10);
	CHECK_INT(got[9], 9);
	CHECK_INT(read_samples(p1, hdr, got, MAX_SAMPLES), 10);
	CHECK_INT(got[9], -9);
	CHECK_INT(le32_at(hdr + 16), 1);
	CHECK_INT(le64_at(hdr + 24), 2000);
}

static void test_errors(void)
{
	char path[PATH_MAX + 32];
	struct ring r;

	snprintf(path, sizeof(path), "%s/no-such-dir/x.raw", dir);
	CHECK_INT(ring_open(&r, path, 0, -1, 1000, 8, 0), -ENOENT);
	CHECK(r.buf == NULL);
	CHECK_INT(ring_close(&r), 0);

	/* A full device: the write error comes back from close, as -errno. */
	if (access("/dev/full", W_OK) == 0) {
		CHECK_INT(ring_open(&r, "/dev/full", 0, -1, 1000, 1024, 0), 0);
		for (int i = 0; i < 1024; i++)
			(void)ring_push(&r, i);
		drain(&r);
		CHECK_INT(ring_close(&r), -ENOSPC);
	} else {
		printf("test_rawring: no writable /dev/full, write-error check skipped\n");
	}
}

int main(void)
{
	static const char *const files[] = { "hdr.raw",  "wrap.raw",  "one.raw",
					     "lost.raw", "two.raw.0", "two.raw.1" };
	const char *tmp = getenv("TMPDIR");
	char path[PATH_MAX + 16];

	snprintf(dir, sizeof(dir), "%s/rtlab-test-raw.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_header();
	test_order_and_wrap();
	test_capacity_one();
	test_sampler_lost();
	test_two_rings();
	test_errors();
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		CHECK_INT(unlink(path), 0);
	}
	CHECK_INT(rmdir(dir), 0); /* nothing else was left behind */
	return check_report("test_rawring");
}
