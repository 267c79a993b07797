/*
 * A thread woken through a pipe, for the sched meter's wake-up latency: the main thread
 * sleeps PERIOD_US, takes the time and writes it into a pipe; the thread "reader" blocks
 * in read and writes "SENT_NS WOKE_NS" (CLOCK_MONOTONIC) per message to OUT.
 * usage: pipewake PERIOD_US COUNT OUT
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static long count;
static FILE *out;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *reader(void *arg)
{
	int64_t sent;

	(void)arg;
	prctl(PR_SET_NAME, "reader");
	for (long i = 0; i < count; i++) {
		if (read(fds[0], &sent, sizeof(sent)) != sizeof(sent))
			break;
		fprintf(out, "%lld %lld\n", (long long)sent, (long long)now_ns());
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct timespec d;
	pthread_t t;

	if (argc < 4 || pipe(fds) || !(out = fopen(argv[3], "w")))
		return 2;
	d.tv_sec = 0;
	d.tv_nsec = atol(argv[1]) * 1000;
	count = atol(argv[2]);
	if (pthread_create(&t, NULL, reader, NULL))
		return 3;
	usleep(200000); /* the observer finds the reader before the first message */
	for (long i = 0; i < count; i++) {
		int64_t sent;

		nanosleep(&d, NULL);
		sent = now_ns();
		if (write(fds[1], &sent, sizeof(sent)) != sizeof(sent))
			return 3;
	}
	pthread_join(t, NULL);
	return fclose(out) ? 3 : 0;
}
