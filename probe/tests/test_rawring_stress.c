/*
 * Two threads on one raw ring, as in a run: a producer pushes 0, 1, 2, ... and never
 * waits on the ring (refused: it sleeps a little, as a measuring thread would until its
 * next period, and goes on); the writer thread drains to the file concurrently. The
 * file must hold exactly the accepted values, each once, in order; accepted + refused
 * = pushed. Built with -fsanitize=thread (make sanitize) it also checks the ring's
 * memory order.
 */
#include "check.h"
#include "lib/rawring.h"

#include <endian.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CAPACITY 1024           /* small: the indices wrap many times */
#define TARGET (32 * CAPACITY)  /* accepted values to reach */
#define MAX_PUSHES (1 << 22)    /* bound of the run (and of the refused map) */
#define MAX_RUN_NS 5000000000LL /* bound of the run if the writer is slow (TSan) */
#define PAUSE_NS 200000         /* after a refused push */

struct producer {
	struct ring *ring;
	unsigned char *refused; /* per value: 1 if ring_push said full */
	int64_t pushed;
	uint64_t accepted, lost;
};

static int64_t now_ns(void)
{
	struct timespec ts;

	(void)clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *produce(void *arg)
{
	struct producer *p = arg;
	struct timespec pause = { 0, PAUSE_NS };
	int64_t end = now_ns() + MAX_RUN_NS;

	for (int64_t v = 0; v < MAX_PUSHES && p->accepted < TARGET; v++) {
		p->pushed++;
		if (ring_push(p->ring, v)) {
			p->accepted++;
			continue;
		}
		p->lost++;
		p->refused[v] = 1;
		if (now_ns() > end)
			break;
		(void)nanosleep(&pause, NULL);
	}
	return NULL;
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX], path[PATH_MAX + 16];
	struct producer p = { 0 };
	struct raw_writer w = { 0 };
	struct ring r, *rings[] = { &r };
	pthread_t th;
	int64_t next = 0, bad_order = 0, bad_value = 0;
	uint64_t in_file = 0;
	unsigned char b[8];
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/rtlab-test-rawstress.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/stress.raw", dir);
	p.refused = calloc(MAX_PUSHES, 1);
	CHECK(p.refused != NULL);
	if (!p.refused)
		return check_report("test_rawring_stress");
	CHECK_INT(ring_open(&r, path, 0, -1, 1000, CAPACITY, 0), 0);
	p.ring = &r;
	CHECK_INT(raw_writer_start(&w, rings, 1), 0);
	CHECK_INT(pthread_create(&th, NULL, produce, &p), 0);
	CHECK_INT(pthread_join(th, NULL), 0);
	raw_writer_stop(&w);
	CHECK_INT(ring_close(&r), 0);

	CHECK_INT(p.accepted + p.lost, p.pushed);
	CHECK(p.accepted >= CAPACITY); /* at least a ring's worth always fits */
	f = fopen(path, "rb");
	CHECK(f != NULL);
	if (f) {
		CHECK(fseek(f, RAW_HEADER_BYTES, SEEK_SET) == 0);
		while (fread(b, 1, sizeof(b), f) == sizeof(b)) {
			uint64_t le;
			int64_t v;

			memcpy(&le, b, sizeof(le));
			v = (int64_t)le64toh(le);
			in_file++;
			if (v < next || v >= p.pushed) { /* out of order, repeated or made up */
				bad_order++;
				continue;
			}
			while (next < v) /* values skipped must be exactly the refused ones */
				bad_value += !p.refused[next++];
			bad_value += p.refused[v];
			next = v + 1;
		}
		while (next < p.pushed)
			bad_value += !p.refused[next++];
		fclose(f);
	}
	CHECK_INT(bad_order, 0);
	CHECK_INT(bad_value, 0);
	CHECK_INT(in_file, p.accepted);
	CHECK_INT(r.written, p.accepted);
	printf("test_rawring_stress: %llu of %lld pushed values accepted, %llu refused (ring full)\n",
	       (unsigned long long)p.accepted, (long long)p.pushed, (unsigned long long)p.lost);
	CHECK_INT(unlink(path), 0);
	CHECK_INT(rmdir(dir), 0);
	free(p.refused);
	return check_report("test_rawring_stress");
}
