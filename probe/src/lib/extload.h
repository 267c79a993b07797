/*
 * External load backends (stress-ng, hackbench, iperf3): a load worker that
 * runs a trusted tool. The worker is already set up by the load runner (own
 * process group, policy, affinity); the tools it starts inherit all of it and
 * die with it. The worker also guards its group: when the probe dies, it
 * stops the tools gracefully and kills whatever of the group is left.
 */
#ifndef RTLAB_EXTLOAD_H
#define RTLAB_EXTLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define EXTLOAD_MAX_ARGS 64

/* Find TOOL on $PATH. 0, or -ENOENT with a one-line reason. */
int extload_find(const char *tool, char *err, size_t errlen);

/* Split ARGS (modified) at blanks, appending to ARGV at *ARGC; -E2BIG past MAX entries. */
int extload_split(char *args, char **argv, int *argc, int max);

/*
 * Run ARGV in the probe, output discarded, for at most TIMEOUT_NS; then kill
 * whatever is left of its process group. Its exit status, or -ETIMEDOUT, -errno.
 */
int extload_run_sync(char *const argv[], int64_t timeout_ns);

/* In a worker: SIGTERM (a stop, or the probe's death) stops the tools and ends the worker. */
void extload_guard(void);

/*
 * In a worker: a fresh directory under $TMPDIR (default /tmp) for the tool's
 * files, removed when the worker stops. NULL if it cannot be made.
 */
const char *extload_private_dir(const char *tool);

/* In a worker: start ARGV as a child that dies with the worker, output discarded. pid or -errno. */
pid_t extload_spawn(char *const argv[]);

/*
 * Wait up to TIMEOUT_NS for child PID (0: just sleep); its wait status, or
 * -ETIMEDOUT. A stop requested meanwhile ends the worker here.
 */
int extload_wait(pid_t pid, int64_t timeout_ns);

/* CPU time (ms) used so far by PID, its children alive and those it reaped. */
uint64_t extload_cpu_ms(pid_t pid);

#endif
