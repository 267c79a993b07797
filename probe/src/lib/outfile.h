/*
 * Output files that may be FIFOs, and the stop signals. SIGINT, SIGTERM and SIGHUP
 * are blocked in every thread (main.c) and taken synchronously; a thread that waits
 * for a FIFO's reader (to open it, or to take what is written) takes them too, so
 * that waiting for a reader never makes the probe deaf to them.
 */
#ifndef RTLAB_OUTFILE_H
#define RTLAB_OUTFILE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define OUTFILE_WAIT_SLICE_MS 100 /* a stop signal ends a wait within this */

/* The stop signals: SIGINT, SIGTERM, SIGHUP. */
void stopsig_set(sigset_t *s);

/* Wait up to WAIT_NS (0: only look) for a stop signal and take it: the signal, or 0. */
int stopsig_take(int64_t wait_ns);

/* "SIGINT", "SIGTERM", "SIGHUP" or "signal". */
const char *stopsig_name(int sig);

struct outfile {
	int fd;          /* -1 when not open */
	bool fifo;       /* non-blocking: a write waits for the reader in slices */
	int stop_signal; /* the stop signal that ended a wait for the reader, 0 if none */
	int err;         /* the first write error (errno; EINTR: a stop signal), 0 if none */
};

/*
 * Open PATH for writing (created or truncated; a device or FIFO written in place).
 * A FIFO without a reader is waited for (a note on stderr says so) until a stop
 * signal comes; with STOPPING nonzero (the run already stops) it is not waited for.
 * 0, -errno, or -EINTR with O->stop_signal set (STOPPING, or the signal taken).
 */
int outfile_open(struct outfile *o, const char *path, int stopping);

/*
 * Write LEN bytes of BUF: LEN, or -errno (also kept in O->err). On a FIFO whose reader
 * takes nothing it waits as outfile_open does: -EINTR with O->stop_signal after a stop
 * signal (at once if one was taken before). It takes stop signals: main thread only.
 */
ssize_t outfile_write(struct outfile *o, const void *buf, size_t len);

/* A stdio stream over O (its writes are outfile_write); closing it closes O. NULL: -errno. */
FILE *outfile_stream(struct outfile *o);

#endif
