/*
 * The probe's one tracefs module: find (or mount) tracefs, a private instance per run
 * (instances/rtlab-<pid>) with only the events, CPUs and buffer asked for, removal of
 * the instances of dead runs, and the per-CPU trace text. Nothing here writes outside
 * an instance this process created: the user's own tracing is never touched.
 */
#ifndef RTLAB_TRACEFS_H
#define RTLAB_TRACEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TRACEFS_DEFAULT_ROOT "/sys/kernel/tracing"
#define TRACEFS_INSTANCE_PREFIX "rtlab-"
/* Hidden, for tests: a directory that stands in for the tracefs mount (never mounted). */
#define TRACEFS_ROOT_ENV "RTLAB_TRACEFS"

struct tracefs {
	char root[256];    /* mount point, e.g. /sys/kernel/tracing */
	bool mounted_here; /* this process mounted it (it stays mounted) */
};

struct tracefs_instance {
	char path[320]; /* ROOT/instances/NAME; empty when none */
};

/* One sched:sched_switch line of a trace file. */
struct tracefs_switch {
	int64_t ts_ns; /* trace clock, µs resolution in the text */
	pid_t prev_pid;
	int prev_prio; /* kernel prio: 0..99 real-time (99 - rtprio), 100..139 fair, -1 deadline */
	bool prev_runnable; /* prev_state R or R+: switched out while it could run */
	bool prev_preempt;  /* R+: by a preemption in kernel mode (__schedule(SM_PREEMPT)) */
	char next_comm[16];
	pid_t next_pid;
	int next_prio;
};

/* Find a tracefs mount (TRACEFS_DEFAULT_ROOT first) or, when MAY_MOUNT, mount it
 * there; with $RTLAB_TRACEFS set, that directory instead. 0, or -errno with a reason. */
int tracefs_open(struct tracefs *fs, bool may_mount, char *err, size_t errlen);

/* Create instances/rtlab-<PID>; a leftover of an earlier process with this PID is
 * replaced. 0, or -errno with a reason. */
int tracefs_instance_create(const struct tracefs *fs, pid_t pid, struct tracefs_instance *in,
			    char *err, size_t errlen);

/* rmdir the instance (its events and buffers go with it); no-op when none. 0 or -errno. */
int tracefs_instance_remove(struct tracefs_instance *in);

/* Write VALUE to FILE (relative to the instance). 0 or -errno. */
int tracefs_write(const struct tracefs_instance *in, const char *file, const char *value);

/* events/SYSTEM/EVENT/enable = 1 in the instance. */
int tracefs_event_enable(const struct tracefs_instance *in, const char *system, const char *event);

/* tracing_cpumask = only CPU. */
int tracefs_set_cpu(const struct tracefs_instance *in, int cpu);

/* Ring buffer of CPU (-1: every CPU) in KiB. */
int tracefs_set_buffer_kb(const struct tracefs_instance *in, int cpu, uint64_t kb);

/* Remove instances/rtlab-<pid> of processes that no longer exist; *REMOVED counts them. */
int tracefs_remove_stale(const struct tracefs *fs, int *removed);

/* The PID in an instance name "rtlab-<pid>", or -1 when NAME is not one of ours. */
pid_t tracefs_instance_pid(const char *name);

/* Call FN for every line of per_cpu/cpuCPU/trace (without the newline); stops at
 * FN's first non-zero return. 0, -errno, or FN's value. */
int tracefs_read_cpu_trace(const struct tracefs_instance *in, int cpu,
			   int (*fn)(const char *line, void *arg), void *arg);

/* Events of CPU lost because the buffer was full ("overrun" of per_cpu/cpuN/stats). */
int tracefs_cpu_lost(const struct tracefs_instance *in, int cpu, uint64_t *lost);

/* How long one tracefs_drain_lines() may read: while measuring, and after the end. */
#define TRACEFS_DRAIN_SLICE_NS 100000000LL /* the longest drain while measuring */
#define TRACEFS_DRAIN_LAST_NS 1000000000LL /* and the last one, after the end */

/* Read what the non-blocking FD (a trace_pipe) holds now into BUF of CAP bytes, *LEN of
 * them a line not yet complete, and call FN with each whole line (without its newline),
 * until it runs dry or CLOCK_MONOTONIC passes UNTIL_NS: a pipe filled faster than it is
 * read (a slow or emulated CPU) must not hold its reader forever. True when it ran dry.
 * A line longer than the buffer is dropped. */
bool tracefs_drain_lines(int fd, char *buf, size_t cap, size_t *len, int64_t until_ns,
			 void (*fn)(const char *line, void *arg), void *arg);

/* Parse one sched_switch line of a trace file: 0, or -EINVAL when it is not one. */
int tracefs_parse_switch(const char *line, struct tracefs_switch *ev);

/* The whole of FILE (relative to the instance, or to the root when IN's path is the
 * root) into BUF, NUL-terminated: its length, -EOVERFLOW when LEN is too small, or
 * -errno. */
int tracefs_read(const struct tracefs_instance *in, const char *file, char *buf, size_t len);

#endif
