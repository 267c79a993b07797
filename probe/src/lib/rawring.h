/*
 * Raw sample capture: a lock-free single-producer/single-consumer ring per
 * measuring thread, drained to a file by one non-real-time writer thread.
 * File layout (little-endian): a 64-byte header, then int64 samples in ns.
 */
#ifndef RTLAB_RAWRING_H
#define RTLAB_RAWRING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <pthread.h>

#include "outfile.h"

#define RAW_MAGIC "RTLABRAW"
#define RAW_VERSION 1
#define RAW_HEADER_BYTES 64

struct ring {
	_Atomic uint64_t head; /* written by the measuring thread only */
	char pad0[56];         /* keep producer and consumer indices on separate cache lines */
	_Atomic uint64_t tail; /* written by the writer thread only */
	char pad1[56];
	uint64_t mask; /* capacity - 1, capacity a power of two */
	int64_t *buf;
	struct outfile out; /* fd -1 when it could not be opened */
	unsigned char hdr[RAW_HEADER_BYTES];
	uint32_t hdr_left; /* header bytes not written yet (a FIFO that was full) */
	uint32_t part;     /* bytes of the sample at tail already written */
	uint64_t swapped;  /* big-endian hosts: samples before this are little-endian */
	uint64_t written;  /* samples written to the file */
	uint64_t lost;     /* samples taken from the ring but not written (see err) */
	int err;           /* first write error (errno), EINTR: a stop signal ended the wait
				* for a FIFO's reader (stop_signal); 0 if none */
	int stop_signal;
};

/* Producer side: never blocks; false when the ring is full (count it as lost). */
static inline bool ring_push(struct ring *r, int64_t v)
{
	uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
	uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);

	if (h - t > r->mask)
		return false;
	r->buf[h & r->mask] = v;
	atomic_store_explicit(&r->head, h + 1, memory_order_release);
	return true;
}

/*
 * Create PATH (outfile_open: a FIFO's reader is waited for unless STOPPING) and a
 * ring of CAPACITY samples (power of two); the header is the first thing written.
 * 0 or -errno; -EINTR leaves a usable ring whose samples all count as lost (err EINTR).
 */
int ring_open(struct ring *r, const char *path, int thread_index, int cpu, int64_t interval_ns,
	      uint64_t capacity, int stopping);

/* Close and free (a regular file cut to its whole samples after a failed write);
 * returns the first write error as -errno, or 0. */
int ring_close(struct ring *r);

/* Why the file lacks samples, into BUF: NULL when nothing failed. */
const char *ring_error(const struct ring *r, char *buf, size_t len);

struct raw_writer {
	struct ring **rings;
	int n;
	pthread_t thread;
	_Atomic int stop;
	_Atomic int give_up; /* the stop signal that ends waiting for FIFO readers, 0 if none */
	_Atomic int done;
	bool running;
};

/* Start the writer thread draining RINGS every few ms. 0 or -errno. */
int raw_writer_start(struct raw_writer *w, struct ring **rings, int n);

/* Drain what is left and join. A FIFO whose reader takes nothing is waited for until a
 * stop signal (taken here: main thread) gives it up; returns that signal, or 0. */
int raw_writer_stop(struct raw_writer *w);

#endif
