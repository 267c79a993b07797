/*
 * One line of a tracefs text trace (per_cpu/cpuN/trace_pipe) as the event the spike
 * explanation needs: the scheduler, IRQ, softirq, hrtimer, workqueue, x86 vector and
 * IPI events, rtlab's own trace_marker lines and the "[LOST n EVENTS]" notes. The
 * formats are the kernel's TP_printk strings (include/trace/events/{sched,irq,timer,
 * workqueue,ipi}.h, arch/x86/include/asm/trace/irq_vectors.h); timestamps are printed
 * in µs for the clocks that count ns (kernel/trace/trace_output.c).
 */
#ifndef RTLAB_XTRACE_H
#define RTLAB_XTRACE_H

#include <stdbool.h>
#include <stdint.h>

enum xev_type {
	XE_NONE = 0, /* an event the explanation does not use */
	XE_SWITCH,   /* sched_switch: pid, num = next prio, name = next comm */
	XE_WAKING,   /* sched_waking / sched_wakeup: pid of the woken task */
	XE_IRQ_IN,   /* irq_handler_entry: num = IRQ, name */
	XE_IRQ_OUT,  /* irq_handler_exit: num = IRQ */
	XE_SOFT_IN,  /* softirq_entry: num = vector, name = action */
	XE_SOFT_OUT, /* softirq_exit */
	XE_HRT_IN,   /* hrtimer_expire_entry: name = callback */
	XE_HRT_OUT,  /* hrtimer_expire_exit */
	XE_VEC_IN,   /* x86 irq_vectors:*_entry: num = vector, name = "local_timer" … */
	XE_VEC_OUT,  /* irq_vectors:*_exit */
	XE_IPI_IN,   /* ipi:ipi_entry (arm, arm64): name = reason */
	XE_IPI_OUT,  /* ipi:ipi_exit */
	XE_WORK_IN,  /* workqueue_execute_start: name = work function */
	XE_WORK_OUT, /* workqueue_execute_end */
	XE_MARK,     /* tracing_mark_write: the text is not kept in the event */
	XE_LOST,     /* "CPU:N [LOST n EVENTS]": num = n (saturated) */
	XE_STACK,    /* "<stack trace>": its frame lines follow (xstack.h) */
};

#define XE_NAME_LEN 32
#define XE_COMM_LEN 16

struct xev {
	int64_t ts_ns;   /* trace clock, µs resolution */
	int32_t pid;     /* XE_SWITCH: next pid; XE_WAKING: woken pid */
	int32_t num;     /* see enum xev_type */
	int32_t cur_pid; /* the task the line names (current on that CPU), -1 unknown */
	uint32_t stack;  /* the kernel stack recorded with it (xstack.h), 0: none */
	uint8_t type;    /* enum xev_type */
	char name[XE_NAME_LEN];
	char cur_comm[XE_COMM_LEN];
};

/*
 * Parse LINE (no newline) into EV; *CPU gets the line's CPU (or -1). 0, or -EINVAL
 * when the line is no event line (headers, blank lines). An event line of an event
 * the explanation ignores gives 0 and XE_NONE. For a trace_marker line, *MARK points
 * at its text (else NULL).
 */
int xtrace_parse(const char *line, struct xev *ev, int *cpu, const char **mark);

/* An rtlab spike marker, written by the measuring thread into trace_marker. */
struct xmark {
	int thread; /* index of the measuring thread */
	uint64_t cycle;
	int64_t act_ns;   /* intended activation, CLOCK_MONOTONIC */
	int64_t lat_ns;   /* latency: the wake-up was at act_ns + lat_ns */
	int64_t write_ns; /* CLOCK_MONOTONIC just before the marker was written */
	/* the timer may run this long after act_ns by design (the timer slack of a thread
	 * the sched meter observes; not in the marker text: 0 for the meters' own) */
	int64_t slack_ns;
};

#define XMARK_TAG "rtlab-spike"

/* Format M into BUF (for trace_marker); the length written. */
int xmark_format(const struct xmark *m, char *buf, int len);

/* Parse a marker's text; 0 or -EINVAL when it is not one of ours. */
int xmark_parse(const char *text, struct xmark *m);

#endif
