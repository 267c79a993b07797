/*
 * The kernel's own latency tracers as a meter's measurement: `--tracer timerlat`
 * (wakeup) and `--tracer osnoise` (noise) drive the tracer through tracefs, without
 * rtla: a private instance (instances/rtlab-<pid>) runs it, its configuration is global
 * under ROOT/osnoise/ and belongs to the user, so each file changed is read first,
 * journaled (kjournal.h: put back after a SIGKILL too) and written back as found when the
 * run ends. One measuring thread per traced CPU reads
 * that CPU's trace_pipe and records through sampler.h.
 *
 * ktracer.c: availability, the shared lifecycle, the osnoise/ settings.
 * ktracer_stream.c: the trace lines, the per-CPU reading, the per-thread JSON.
 */
#ifndef RTLAB_KTRACER_H
#define RTLAB_KTRACER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cpulist.h"
#include "nstat.h"
#include "policy.h"
#include "tracefs.h"

struct mthread;

enum ktracer_kind {
	KTRACER_TIMERLAT, /* samples: the timerlat thread's wake-up latency */
	KTRACER_OSNOISE,  /* samples: each period's largest single noise */
};

#define KTRACER_KNOBS_MAX 8
#define KTRACER_VALUE_MAX 320 /* osnoise/cpus takes at most 255 characters */

/* One file of ROOT/osnoise/ the run changed. */
struct ktracer_knob {
	char file[40];                 /* relative to the root, e.g. "osnoise/cpus" */
	char found[KTRACER_VALUE_MAX]; /* its text before the run, byte for byte */
	char set[64];                  /* what the run wrote */
	char undo[KTRACER_VALUE_MAX];  /* what puts it back: FOUND, or the opposite option */
	bool restored;
};

/* The tracer of one run, shared by its measuring threads. */
struct ktracer {
	enum ktracer_kind kind;
	struct cpulist cpus; /* traced CPUs: one measuring thread each */
	int64_t period_us;   /* timerlat_period_us, or osnoise period_us = runtime_us */
	bool allow_fallback; /* a kernel thread's policy may stay the kernel's */
	struct tracefs fs;
	struct tracefs_instance root; /* the tracefs root, to address ROOT/osnoise/ files */
	struct tracefs_instance inst; /* instances/rtlab-<pid> */
	int64_t threshold_ns;         /* osnoise: tracing_thresh, 5 us when 0; -1 unknown */
	bool mono_clock;              /* the instance's timestamps are CLOCK_MONOTONIC */
	bool tracer_set;              /* the instance's current_tracer is ours */
	struct ktracer_knob knob[KTRACER_KNOBS_MAX]; /* in the order written */
	int nknobs;
	bool restore_failed; /* some knob could not be written back */
	bool journaled;      /* this run's journal exists (kjournal.h) */

	pthread_mutex_t lock; /* the fields below */
	int users;            /* measuring threads that joined and have not left */
	bool tried;           /* the shared setup ran (rc, err) */
	bool on;              /* tracing_on = 1 in the instance */
	int rc;
	char err[300];
};

/* --tracer of a meter, a choice of two words: "user" (the meter's own loop, the default)
 * or the kernel's tracer; the words of each kind (NULL-terminated). */
enum ktracer_choice { KTRACER_USER, KTRACER_KERNEL };
extern const char *const ktracer_timerlat_words[];
extern const char *const ktracer_osnoise_words[];

/* --tracer of a meter: what was asked, and the run's tracer when one is used. */
struct ktracer_opt {
	int choice;         /* enum ktracer_choice (a choice option) */
	const char *name;   /* the word chosen, set by ktracer_opt_check */
	struct ktracer *kt; /* NULL: the user-space loop measures */
	char reason[300];   /* why the user-space loop measures although a tracer was asked */
};

/* The tracer's name: "timerlat" or "osnoise". */
const char *ktracer_name(enum ktracer_kind kind);

struct common_params;
struct opt_fault;

/*
 * The meter's --tracer (O) for a run with common options C: "user", or the tracer of
 * KIND, which needs --cpus, a policy the kernel's threads can take and no --explain.
 * PERIOD_NS: timerlat's period (whole us, 100 us .. 1 s) or osnoise's. Then, unless checking only
 * on a system without tracefs mounted, the tracer must be available and unused: 0
 * (O->kt set), -EINVAL (bad usage, AT says which option) or -errno with a reason
 * (exit 3). An absent tracer with --allow-fallback is 0 with O->kt NULL and O->reason.
 */
int ktracer_opt_check(struct ktracer_opt *o, enum ktracer_kind kind, int64_t period_ns,
		      const struct common_params *c, struct opt_fault *at, char *err,
		      size_t errlen);

/* Find tracefs (mounting it when MAY_MOUNT), the tracer in available_tracers and no
 * other user of osnoise/ (-EBUSY). 0 or -errno with a reason. */
int ktracer_open(struct ktracer *kt, bool may_mount, char *err, size_t errlen);

/* The phases of a run; ktracer_join/leave drive them for the measuring threads. */
/* Remove the instances of dead runs; create instances/rtlab-PID. */
int ktracer_instance(struct ktracer *kt, pid_t pid, char *err, size_t errlen);
/* Check again that no one else uses osnoise/, write its settings (each read first),
 * set the instance's clock and buffers, then current_tracer with tracing off. */
int ktracer_configure(struct ktracer *kt, char *err, size_t errlen);
/* tracing_on = 1: samples flow into the instance. */
int ktracer_begin(struct ktracer *kt);
/* ktracer_begin once for all the measuring threads; its result for each. */
int ktracer_begin_once(struct ktracer *kt);
/* Tracing off, tracer nop, instance removed, every osnoise/ setting written back (in
 * the reverse order). Idempotent; also after a partial setup. */
void ktracer_end(struct ktracer *kt);

/* A measuring thread joins the run's tracer: the first one sets it up (instance and
 * configuration). 0 or -errno with the reason of the setup's failure. Every join,
 * failed or not, owes one ktracer_leave; the last one ends the tracer. */
int ktracer_join(struct ktracer *kt, char *err, size_t errlen);
void ktracer_leave(struct ktracer *kt);

/* ---- ktracer_stream.c ---- */

/* One line of the tracer in a trace file. */
struct ktracer_line {
	int64_t ts_ns; /* trace clock, µs resolution in the text */
	enum ktracer_kind kind;
	/* timerlat: "#SEQ context CTX timer_latency N ns" */
	uint64_t seq; /* activation ID: relates an irq line to its thread line */
	int context;  /* KTRACER_CTX_* */
	int64_t latency_ns;
	/* osnoise: "RUNTIME NOISE %AVAILABLE MAX_SINGLE HW NMI IRQ SIRQ THREAD", µs in the text */
	int64_t runtime_ns, noise_ns, max_single_ns;
	uint64_t hw, nmi, irq, softirq, thread;
};

enum { KTRACER_CTX_IRQ, KTRACER_CTX_THREAD, KTRACER_CTX_USER_RET };

/* Parse LINE of a trace or trace_pipe file: 0, or -EINVAL when it is no tracer line. */
int ktracer_parse_line(const char *line, struct ktracer_line *out);

/* A measuring thread's view of its CPU (the meter's per-thread state holds it). */
struct ktracer_thread {
	bool joined; /* ktracer_leave owed */
	bool opened; /* fd and buf are ours to close and free */
	int fd;      /* per_cpu/cpuN/trace_pipe */
	char *buf;   /* lines not yet complete */
	size_t len;
	pid_t kthread; /* timerlat/N or osnoise/N; 0 when not found */
	bool kpolicy_known;
	struct policy_spec kpolicy;                /* the kernel thread's policy, read back */
	struct nstat irq, user_ret;                /* timerlat's other contexts */
	uint64_t periods;                          /* osnoise lines */
	int64_t runtime_ns, noise_ns;              /* their sums */
	uint64_t hw, nmi, irqs, softirqs, threads; /* their interference counts */
	uint64_t other_lines;                      /* lines that are not the tracer's */
	bool ended;                                /* the stream ended: tracing was turned off */
	int read_errno;                            /* reading failed with this, 0 when not */
	bool lost_known;
	uint64_t lost; /* events the instance's buffer dropped */
};

/* Setup of a measuring thread: join the tracer, open its CPU's stream, give the
 * kernel thread the thread's policy, move this reader off the traced CPUs. */
int ktracer_thread_setup(struct ktracer *kt, struct mthread *t, struct ktracer_thread *s, char *err,
			 size_t errlen);
/* Open per_cpu/cpuN/trace_pipe (non-blocking) and the line buffer. 0 or -errno. */
int ktracer_thread_open(struct ktracer *kt, const struct mthread *t, struct ktracer_thread *s);

struct run_ctl;
/* Read the CPU's lines and record the samples until CTL says stop or the stream ends. */
void ktracer_thread_loop(struct ktracer *kt, struct mthread *t, struct ktracer_thread *s,
			 const struct run_ctl *ctl);
/* Lost events, close, leave. */
void ktracer_thread_teardown(struct ktracer *kt, const struct mthread *t, struct ktracer_thread *s);

struct jw;
/* The thread's "timerlat" or "osnoise" key. */
void ktracer_thread_json(struct jw *w, const struct ktracer *kt, const struct ktracer_thread *s);
/* The document's "tracer" key: requested, used, reason and the settings touched. */
void ktracer_doc_json(struct jw *w, const struct ktracer_opt *o);

#endif
