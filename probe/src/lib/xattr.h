/*
 * Attribution of one late sample to what ran on its CPU: a ring of the CPU's recent
 * trace events (and the CPU's state before the oldest one), replayed over the window
 * from the intended activation minus a look-back to the wake-up. The window becomes a
 * timeline of segments (thread, IRQ, softirq, hrtimer callback, idle …) and the
 * latency [activation, wake-up] is split into causes that sum to it exactly:
 *
 *  - IRQ, x86 vector/IPI, softirq and hrtimer-callback time: that handler;
 *  - within the timer slack of the activation (xmark.slack_ns), before the wake-up:
 *    "timer slack" (the timer may fire that late by design);
 *  - before the measuring thread was woken (sched_waking): time with no handler is
 *    "unexplained": the timer interrupt could not be taken (interrupts off,
 *    non-preemptible code, an SMI or the hypervisor), whatever task was current;
 *  - after it was woken: the task that kept the CPU; idle time stays unexplained.
 */
#ifndef RTLAB_XATTR_H
#define RTLAB_XATTR_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "xstack.h"
#include "xtrace.h"

#define XCTX_MAX 8
#define XCAUSE_MAX 24
#define XSEG_MAX 256
#define XUNEXPL_CTX 4
#define XSTACK_BACK 4
#define XSTACK_CAND 16 /* timer interrupts looked at for the main cause's stack */

/* Why a spike has no stack of its main cause. */
enum xstack_why {
	XSW_OK,       /* it has one */
	XSW_OFF,      /* stacks were not recorded in this run */
	XSW_IDLE,     /* the main cause is time while the CPU was idle */
	XSW_NO_EVENT, /* no timer interrupt stopped the cause in the window */
	XSW_REMOTE,   /* none did, and the measuring thread was woken from another CPU */
	XSW_NO_STACK, /* the interrupt that did came without a stack */
	XSW_LOST,     /* its stack was overwritten before the spike was explained */
};

enum xkind {
	XK_THREAD, /* another task */
	XK_SELF,   /* the measuring thread */
	XK_IDLE,   /* the idle task (pid 0) */
	XK_IRQ,    /* a device IRQ handler */
	XK_VECTOR, /* an x86 system vector or an IPI (no IRQ number) */
	XK_SOFTIRQ,
	XK_TIMER,   /* an hrtimer callback */
	XK_UNKNOWN, /* nothing known yet about the CPU */
	XK_SLACK,   /* timer slack: before the timer was due to fire (a cause only) */
};

struct xctx {
	uint8_t kind; /* XK_IRQ, XK_VECTOR, XK_SOFTIRQ, XK_TIMER */
	int32_t num;
	char name[XE_NAME_LEN];
};

/* What a CPU is doing at a point of its trace. */
struct xstate {
	bool known;
	int32_t pid, prio; /* current task; prio as the kernel prints it */
	char comm[XE_COMM_LEN];
	int depth;
	struct xctx ctx[XCTX_MAX]; /* interrupt contexts, innermost last */
	bool in_work;
	char work[XE_NAME_LEN]; /* the work item a kworker is running */
};

/* The recent events of one CPU. */
struct xring {
	struct xev *ev;
	uint32_t cap, head, n; /* head: next slot written */
	struct xstate base;    /* state after every event evicted */
	int64_t evicted_ts;    /* newest evicted event, INT64_MIN: none */
	int64_t last_ts;       /* newest event pushed */
};

struct xseg {
	int64_t start_ns, end_ns; /* relative to the intended activation */
	uint8_t kind;             /* enum xkind */
	int32_t id;               /* pid, IRQ or vector */
	char name[XE_NAME_LEN];
};

struct xcause {
	uint8_t kind; /* enum xkind; XK_SELF is reported as "other" */
	int32_t id;
	char name[XE_NAME_LEN];
	char work[XE_NAME_LEN]; /* threads: the work item that ran longest, or "" */
	char policy[12];        /* threads: "fifo" …, "" when unknown */
	int32_t priority;       /* threads: rt priority, or nice for the fair classes */
	bool priority_known;
	int64_t ns;
};

struct xspike {
	struct xmark m;
	int cpu;
	pid_t tid;
	int64_t lookback_ns;
	int ncauses;
	struct xcause causes[XCAUSE_MAX]; /* sorted by ns, largest first */
	int64_t unexplained_ns;
	int64_t unexplained_idle_ns; /* part of it while the CPU was idle */
	struct {
		int32_t pid;
		char comm[XE_COMM_LEN];
		int64_t ns;
	} unexpl_ctx[XUNEXPL_CTX];     /* tasks current during unexplained time */
	int64_t woken_ns, switched_ns; /* relative to activation; -1: not seen */
	bool events_lost, truncated;
	int nseg;
	bool seg_dropped; /* more segments than XSEG_MAX: the earliest dropped */
	struct xseg seg[XSEG_MAX];
	char verdict[240];
	/* the kernel stack of the main cause: at the first timer interrupt from the
	 * activation on that stopped it (xstack.h); xattr_explain() sets the id, its
	 * caller copies the stack from its store */
	uint32_t stack_id;
	int64_t stack_at_ns; /* that interrupt, relative to the activation */
	uint8_t stack_why;   /* enum xstack_why */
	struct xstack stack;
};

int xring_init(struct xring *r, uint32_t cap);
void xring_free(struct xring *r);
/* Append EV (a LOST note takes the time of the event before it). */
void xring_push(struct xring *r, const struct xev *ev);

/* A "<stack trace>" entry at TS_NS (its stack: ID) belongs to the event it follows on
 * its CPU: the newest hrtimer_expire_entry of the last XSTACK_BACK events, when it has
 * no stack yet and is at most XSTACK_ASSOC_NS older (events of a nested interrupt may
 * come between). Whether it found one. */
bool xring_attach_stack(struct xring *r, int64_t ts_ns, uint32_t id);

/*
 * Explain marker M (thread TID on CPU) from R. OFFSET_NS: trace clock minus
 * CLOCK_MONOTONIC. LOOKBACK_NS: window before the activation.
 */
void xattr_explain(const struct xring *r, const struct xmark *m, int cpu, pid_t tid,
		   int64_t offset_ns, int64_t lookback_ns, struct xspike *out);

/* X's verdict from its causes (xverdict.c). */
void xspike_verdict(struct xspike *x);
/* The task current longest during X's unexplained time (*NS of it, its *PID), or NULL. */
const char *xspike_unexpl_task(const struct xspike *x, int64_t *ns, int32_t *pid);

/* The JSON name of a cause or segment kind. */
const char *xkind_cause_name(uint8_t kind);
const char *xkind_seg_name(uint8_t kind);

#endif
