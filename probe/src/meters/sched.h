/*
 * sched — latency of the threads of an unmodified program, observed from outside
 * through a private tracefs instance. sched.c: options, the threads observed, the
 * command started, the meter's lifecycle. sched_find.c: the threads found in /proc.
 * sched_trace.c: the trace events and what
 * they mean for each thread (timer and wake-up latency, run time, preemptions).
 */
#ifndef RTLAB_METER_SCHED_H
#define RTLAB_METER_SCHED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../lib/cpulist.h"

struct opt_fault;
#include "../lib/nstat.h"
#include "../lib/policy.h"
#include "../lib/tracefs.h"

#define SCHED_THREADS_MAX 64 /* threads observed in one run */
#define SCHED_TIMERS 8       /* hrtimers remembered per thread */
#define SCHED_PERIODS 64     /* activation intervals kept for the period estimate */
#define SCHED_READ_BUF (1 << 16)

enum sched_samples { SCHED_S_ANY, SCHED_S_TIMER, SCHED_S_WAKEUP };

/* An hrtimer armed by an observed thread (hrtimer_start in its context). */
struct sched_timer {
	char id[24];     /* the kernel's (hashed) address of the hrtimer */
	int64_t soft_ns; /* softexpires: what the program asked for, in the timer's clock */
	int64_t hard_ns; /* expires: soft + the thread's timer slack */
	bool armed;
	bool sleeper; /* hrtimer_wakeup: on the kernel stack of one sleep, forgotten after it */
};

/* What the trace says about one observed thread. */
struct sched_thread {
	pid_t tid;
	char comm[16];
	bool seen;         /* an event named it */
	bool policy_known; /* policy: read back while it lived */
	struct policy_spec policy;
	bool running;           /* on a CPU, as far as the trace says */
	int64_t act_ns;         /* pending activation (CLOCK_MONOTONIC), INT64_MIN: none */
	bool act_timer;         /* the pending activation is a timer expiry of its own */
	int64_t act_slack_ns;   /* its timer's slack (expires - softexpires) */
	int64_t run_start_ns;   /* last switch-in */
	int64_t run_acc_ns;     /* CPU time of the current activation so far */
	bool in_activation;     /* switched in for an activation, not yet asleep again */
	int64_t last_timer_act; /* previous timer activation, for the period; INT64_MIN */
	uint64_t activations;
	struct nstat timer, wakeup, runtime; /* latencies and run time per activation */
	int64_t oncpu_ns;                    /* total time on a CPU */
	uint64_t overruns, preemptions, migrations, wakeups_running;
	uint64_t switch_untraced; /* it ran with no sched_switch into it in the trace */
	int64_t slack_max_ns;
	bool non_mono_clock; /* one of its timers runs on another clock than CLOCK_MONOTONIC */
	int64_t interval[SCHED_PERIODS];
	int nintervals;
	struct sched_timer timers[SCHED_TIMERS];
	int next_timer; /* slot replaced when all are in use */
};

/* An hrtimer callback of an observed thread's timer, running on a CPU now. */
struct sched_cb {
	int slot;  /* the observed thread that armed it, -1: none */
	int timer; /* its index there */
	int64_t act_ns;
	int64_t slack_ns; /* expires - softexpires of that timer */
	int64_t last_ts;  /* the newest event of the CPU (ns), 0: none yet */
};

struct sched_trace {
	struct tracefs fs;
	struct tracefs_instance inst;
	char instance[64];
	int fd; /* the instance's trace_pipe */
	char buf[SCHED_READ_BUF];
	size_t len;
	int samples;          /* enum sched_samples */
	int64_t start_ns;     /* CLOCK_MONOTONIC when tracing began */
	int64_t clock_off[3]; /* REALTIME, BOOTTIME, TAI minus MONOTONIC, last read */
	int nthreads;
	struct sched_thread th[SCHED_THREADS_MAX];
	struct sched_cb cb[CPULIST_MAX];
	int64_t last_ts; /* the newest event (ns) */
	uint64_t lines, lost_events;
	int filtered;     /* threads named in the sys_exit filter */
	bool sys_exit_on; /* raw_syscalls:sys_exit of the observed threads is traced */
	char events[400];
	struct explain *x; /* --explain: fed every line, offered every sample; or NULL */
};

struct mthread;
struct explain;

/* Tracing on in a private instance: its events, clock and buffers (and those of the
 * explanation when s->x is set). 0 or -errno with a reason. */
int sched_trace_open(struct sched_trace *s, char *err, size_t errlen);
/* Trace the observed threads' returns from system calls (raw_syscalls:sys_exit filtered
 * on their TIDs): where a kernel does not trace a switch-in, the return from the call
 * that slept bounds it. Again when threads were added; without the event, nothing. */
void sched_trace_filter(struct sched_trace *s);
/* Tracing off, instance removed; idempotent. */
void sched_trace_close(struct sched_trace *s);
/* Read what the instance holds now, until CLOCK_MONOTONIC passes UNTIL_NS; samples go to
 * TH[slot] (one per observed thread). */
void sched_trace_drain(struct sched_trace *s, struct mthread *th, int64_t until_ns);
/* Handle one trace line (exposed for the unit test). */
void sched_trace_line(struct sched_trace *s, struct mthread *th, const char *line);
/* The end of the run at the newest event: the time on a CPU of threads still running. */
void sched_trace_finish(struct sched_trace *s);
/* Slot of TID, or -1. */
int sched_trace_slot(const struct sched_trace *s, pid_t tid);

/* The median of the first intervals between its timer activations (ns), 0: unknown. */
int64_t sched_thread_period(const struct sched_thread *t);

struct jw;
/* The thread's "sched" object. */
void sched_thread_json(struct jw *w, const struct sched_thread *t, const struct sched_trace *s);

/* The meter's parameters (sched.c), shared with the thread discovery (sched_find.c). */
struct sched_params {
	int64_t pid;
	bool pid_set;
	const char *comm;
	/* every thread of the processes of this name (/proc/PID/comm) */
	const char *process;
	const char *tids; /* "TID[,TID...]" */
	int samples;      /* enum sched_samples */
	char **command;   /* -- CMD ARGS, or NULL */
	int64_t slots;    /* --threads, or what the selection found */
	pid_t proc;       /* the process whose threads are followed, 0: a fixed set */
	pid_t child;      /* the command started, 0: none */
	int child_status; /* its wait status once reaped */
	bool child_reaped, child_stopped;
	int start_errno;        /* the command could not be started: why */
	uint64_t beyond;        /* threads of the process found after every slot was taken */
	_Atomic int done;       /* thread 0 ended: the others stop holding their slot */
	_Atomic int torn;       /* the other measuring threads past their end (conditions read) */
	struct sched_trace *st; /* = &trace: writable through the const params of the loop */
	struct sched_trace trace;
};

int sched_read_comm(pid_t pid, pid_t tid, char *buf, size_t len);
bool sched_alive(pid_t tid);
void sched_assign(struct sched_trace *st, pid_t proc, pid_t tid, const char *comm);
int sched_discover(struct sched_params *s, pid_t proc, int64_t slots);
int sched_by_comm(struct sched_params *s, int64_t slots);
int sched_by_process(struct sched_params *s, int64_t slots);
int sched_by_tids(struct sched_params *s, struct opt_fault *at, char *err, size_t errlen);
bool sched_runnable(const char *file);

#endif
