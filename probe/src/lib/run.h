/* State of one meter run, shared by runner.c, report.c and status.c. */
#ifndef RTLAB_RUN_H
#define RTLAB_RUN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "loadstat.h"
#include "outfile.h"
#include "rawring.h"
#include "runner.h"
#include "sampler.h"

struct run {
	const struct meter *m;
	void *mparams;
	struct common_params c;
	struct cpulist online;
	int argc;
	char **argv;

	int nthreads;
	struct mthread *th;
	struct load_group loads;
	struct ring *rings;
	struct ring **ring_ptrs;
	struct raw_writer writer;
	pthread_barrier_t ready, go;
	_Atomic int stop;    /* measuring threads end their loop */
	_Atomic int abort;   /* setup failed: threads return without measuring */
	_Atomic int running; /* measuring threads still in their loop */

	bool mlocked;
	char mlock_err[160];
	int dma_fd;
	char start_utc[40], end_utc[40];
	int64_t t0_ns, t1_ns;                /* CLOCK_MONOTONIC around the measurement */
	struct loadstat act0, act1;          /* /proc/stat at the start and end of measuring */
	struct loadstat prog_prev, prog_now; /* /proc/stat at the last two --progress lines */
	int stop_signal;                     /* the signal that stopped the run, 0 if none */
	bool status_drawn;
	FILE *progress;              /* --progress stream, or NULL (also once it failed) */
	struct outfile progress_out; /* what the stream writes to */
	int progress_err; /* why the stream ended early (errno; EINTR: a stop signal), or 0 */
	struct explain *explain; /* --explain state, or NULL */
	struct conditions *cond; /* evidence of the real conditions (conditions.h), or NULL */
};

/* Write the result document to F. */
void report_json(const struct run *r, FILE *f);

/* Write the document atomically to PATH (temp file + rename), or stdout for "-". 0 or -errno. */
int report_save(const struct run *r, const char *path, char *err, size_t errlen);

/* One line per thread on stdout: count, min, p50, p99, max, overruns. */
void report_summary(const struct run *r, FILE *f);

/* Redraw the live status lines on stderr (only when it is a terminal). */
void status_draw(struct run *r);

/* One JSON line on the --progress stream: phase, elapsed time, per-thread statistics.
 * A stop signal taken while waiting for the stream's reader stops the run. */
void progress_write(struct run *r, const char *phase);

/* The stream failed with errno ERR (EINTR: a stop signal ended a wait for its reader):
 * say so on stderr, close it, write no more. */
void progress_fail(struct run *r, int err);

/* The last ("done") line and the end of the stream, checked. */
void progress_end(struct run *r);

/* One line on F per output that lacks something (a raw file, the progress stream):
 * true when there is one, and the run must exit EXIT_OUTPUT. */
bool report_lost_outputs(const struct run *r, FILE *f);

/* --deadline exceeded by any thread? */
bool report_deadline_exceeded(const struct run *r);

/*
 * Parse ARGV (after the meter name) into R, which names its meter, and make every
 * check that needs no measuring (runopts.c). The exit code to return now, or -1 to run.
 */
int run_parse(struct run *r, int argc, char **argv);

/* The raw-sample file of thread INDEX: --raw FILE, or FILE.INDEX when there are several. */
void run_raw_path(const struct run *r, int index, char *buf, size_t len);

#endif
