/* The lifecycle every meter shares: options, loads, memory locking, threads
 * with policy and affinity, signals, live status, the result document. */
#ifndef RTLAB_RUNNER_H
#define RTLAB_RUNNER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "cpulist.h"
#include "loadrun.h"
#include "policy.h"
#include "probe.h"

struct common_params {
	struct cpulist cpus; /* one measuring thread pinned per CPU */
	bool cpus_set;
	int64_t threads; /* unpinned measuring threads */
	bool threads_set;
	struct cpulist main_cpus; /* main and writer threads */
	bool main_cpus_set;
	const char *thread_cgroup; /* measuring threads write their TID here (a v1 tasks file) */
	const char *load_cgroup;   /* load processes write their PID here (a cgroup.procs) */
	struct policy_spec policy;
	bool allow_fallback;
	int64_t loops; /* cycles per thread, 0 = no limit */
	bool loops_set;
	int64_t duration_ns; /* 0 = no limit */
	bool duration_set;
	const char *json_path; /* NULL: human summary only; "-": stdout */
	const char *raw_path;
	bool quiet;
	const char *progress_path; /* JSON lines of live statistics; "-": stdout */
	bool check_only;           /* validate the options and exit */
	struct load_list loads;
	int64_t settle_ns;
	bool settle_set;
	bool no_mlock;
	bool stop_on_eof;       /* stop as on SIGHUP when stdin reaches end of file */
	int64_t dma_latency_ns; /* a whole number of us: /dev/cpu_dma_latency takes us */
	bool dma_latency_set;
	int64_t deadline_ns; /* exit 1 when a latency exceeds it */
	bool deadline_set;
	int64_t explain_ns; /* --explain: explain samples above it (explain.h) */
	bool explain_set;
	int64_t explain_max; /* spikes kept and explained */
	bool explain_max_set;
	char **command; /* after "--" (meters that take one): NULL-terminated, or NULL */
};

/* The options every meter takes (`list --json` shows them as "common_options"). */
extern const struct opt_desc run_common_opts[];

/* What a meter loop needs to know to stop. */
struct run_ctl {
	_Atomic int *stop;   /* set on a signal or an abort */
	uint64_t loops;      /* 0 = no limit */
	int64_t duration_ns; /* 0 = no limit; measured from the thread's start_ns */
};

static inline bool run_should_stop(const struct run_ctl *c, uint64_t cycle, int64_t t_rel_ns)
{
	if (atomic_load_explicit(c->stop, memory_order_relaxed))
		return true;
	if (c->loops && cycle >= c->loops)
		return true;
	return c->duration_ns && t_rel_ns >= c->duration_ns;
}

/* Run meter M with ARGV (after the meter name); returns the process exit code. */
int run_meter(const struct meter *m, int argc, char **argv, int full_argc, char **full_argv);

/* `rtlab-probe load SPEC... [--duration D]`; returns the exit code. */
int run_loads_only(int argc, char **argv);

#endif
