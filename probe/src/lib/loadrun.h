/*
 * Load specs (KIND:ARGS[@CPUS][,policy=P][,nice=N]) and the process group
 * that runs them. Every worker is SCHED_OTHER unless the spec asks otherwise,
 * in one process group the probe owns, with PR_SET_PDEATHSIG so that nothing
 * outlives the probe, even after SIGKILL.
 */
#ifndef RTLAB_LOADRUN_H
#define RTLAB_LOADRUN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpulist.h"
#include "policy.h"

#define LOAD_MAX_SPECS 16
#define LOAD_MAX_PROCS 4096
#define LOAD_TEXT_MAX 160
#define LOAD_ENDED_EARLY 2 /* load_group.ready: the worker had ended before the stop */

struct load_kind;
struct jw;

struct load_spec {
	const struct load_kind *kind;
	char text[LOAD_TEXT_MAX]; /* as given */
	int nprocs;               /* worker processes to fork */
	bool has_cpus;
	struct cpulist cpus;                               /* @CPUS, or all online CPUs */
	bool has_policy;                                   /* ",policy=P" or ",nice=N" given */
	struct policy_spec policy;                         /* of every worker (default other:0) */
	_Alignas(8) unsigned char cfg[LOAD_TEXT_MAX + 64]; /* kind-specific parsed arguments */
};

struct load_list {
	int n;
	struct load_spec spec[LOAD_MAX_SPECS];
	const char *cgroup; /* each worker first writes its PID into this file (--load-cgroup) */
};

/* Write task ID ID (0: the caller) into the cgroup file PATH: 0 or -errno. */
int cgroup_join(const char *path, long id);

/* Hackbench-style arguments shared by ipc and hackbench: GROUPS[:pipe|socket][:FDS]. */
struct groups_args {
	int groups; /* sender/receiver groups */
	int fds;    /* senders (and receivers) per group */
	int pipes;  /* 1: pipes, 0: UNIX stream sockets */
};

/* Parse ARGS with at least MIN_GROUPS groups and at most MAX_FDS senders; 0 or -EINVAL. */
int groups_args_parse(const char *args, int min_groups, int default_fds, int max_fds,
		      struct groups_args *out, char *err, size_t errlen);

/* Parse TEXT into OUT, checking @CPUS against ONLINE. 0 or -EINVAL with a reason. */
int load_spec_parse(const char *text, const struct cpulist *online, struct load_spec *out,
		    char *err, size_t errlen);

struct load_group {
	pid_t pgid; /* 0 while nothing runs */
	int nworkers;
	int nalloc;                /* workers the arrays below hold */
	pid_t *pids;               /* worker PIDs, 0 once reaped */
	int *spec_of;              /* spec index of each worker */
	volatile uint64_t *iters;  /* shared with the workers: work units done */
	volatile int32_t *ready;   /* per worker: 0 starting, 1 set up, -errno refused,
				   * LOAD_ENDED_EARLY gone before the stop */
	int64_t start_ns, stop_ns; /* CLOCK_MONOTONIC */
};

/*
 * Everything about L that can be checked without starting it: the number of
 * processes and each kind's prepare (finds its tool, lets the tool check its
 * arguments; nothing is left running). 0, or -EINVAL (bad input), -ENOENT (a
 * tool is missing) or another -errno, with a reason; *BAD is then the index
 * of the refused spec, -1 when it is about all of them.
 */
int load_list_check(const struct load_list *l, int *bad, char *err, size_t errlen);

/*
 * Fork every worker of L (checked with load_list_check). Call from the main
 * thread before any other thread exists: PR_SET_PDEATHSIG fires when the
 * forking thread ends.
 */
int load_group_start(struct load_group *g, const struct load_list *l, char *err, size_t errlen);

/*
 * In a worker: fork a child process (same group, same policy and affinity)
 * that dies with its parent. Returns as fork() does.
 */
pid_t load_fork_child(void);

/* SIGTERM, then SIGKILL after a grace period, to the whole group; reap everything. */
void load_group_stop(struct load_group *g);

/* Free the group's arrays (after load_group_stop and load_group_json). Idempotent. */
void load_group_free(struct load_group *g);

/* "loads": what ran, per spec (workers, work units, rate, workers that ended early). */
void load_group_json(struct jw *w, const struct load_group *g, const struct load_list *l);

/* Params entry for one spec. */
void load_spec_json(struct jw *w, const struct load_spec *s);

#endif
