/*
 * Descriptors shared by every meter and load. A meter or load is one file
 * exporting one const descriptor; registry.c lists them.
 */
#ifndef RTLAB_PROBE_H
#define RTLAB_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit codes a CI job can act on. */
enum probe_exit {
	EXIT_OK = 0,
	EXIT_DEADLINE = 1,    /* a latency exceeded --deadline */
	EXIT_USAGE = 2,       /* bad usage or input */
	EXIT_UNSUPPORTED = 3, /* cannot be done here (permission, kernel feature) */
	EXIT_INTERNAL = 4,
	EXIT_OUTPUT = 5, /* an output could not be written (no space, I/O error, no reader) */
};

enum opt_type {
	OPT_FLAG,     /* bool, no value */
	OPT_INT,      /* int64 within [min, max] */
	OPT_DURATION, /* int64 ns within [min, max], unit mandatory */
	OPT_CPULIST,  /* struct cpulist + presence; max > 0: at most max CPUs (1: one CPU) */
	OPT_POLICY,   /* struct policy_spec */
	OPT_STRING,   /* const char * (points into argv) */
	OPT_LOAD,     /* appended to a struct load_list (repeatable) */
	OPT_CHOICE,   /* int: the index of one of the words in choices[] */
};

struct opt_desc {
	const char *name; /* long name without dashes */
	enum opt_type type;
	int64_t min, max;           /* accepted range (ns for durations) */
	const char *metavar;        /* "LIST", "DUR", ... */
	const char *help;           /* one line; mention the unit and default. NULL for an alias */
	size_t offset;              /* where the value lives in the params struct */
	size_t set_offset;          /* offset of a bool "was given" flag, or OPT_NO_SET */
	int64_t step;               /* int/duration: the value must be a multiple (ns); 0: any */
	const char *alias_of;       /* an alias: the name of its option, in the same table */
	const char *const *choices; /* choice: the words accepted, NULL-terminated */
	int choice_default;         /* choice: index of the word the option has when not given */
};

#define OPT_NO_SET ((size_t)-1)
#define OPT_END   \
	{         \
		0 \
	}

/* One option; designated, so that fields added later default to 0 without warnings. */
#define OPT_DESC(name_, type_, min_, max_, metavar_, help_, offset_, set_offset_) \
	{                                                                         \
		.name = (name_), .type = (type_), .min = (min_), .max = (max_),   \
		.metavar = (metavar_), .help = (help_), .offset = (offset_),      \
		.set_offset = (set_offset_)                                       \
	}

/* A choice among WORDS_ (NULL-terminated): the int at OFFSET_ becomes the index of the word
 * given, DEFAULT_ (an index) when none is. Parsing, the error for a word not among them and
 * its description in --help and `list --json` are opts.c's. */
#define OPT_CHOICE_DESC(name_, words_, default_, metavar_, help_, offset_, set_offset_) \
	{                                                                               \
		.name = (name_), .type = OPT_CHOICE, .choices = (words_),               \
		.choice_default = (default_), .metavar = (metavar_), .help = (help_),   \
		.offset = (offset_), .set_offset = (set_offset_)                        \
	}

/* A second name for an option of the same table: accepted, hidden from --help. */
#define OPT_ALIAS(alias_, canonical_)                      \
	{                                                  \
		.name = (alias_), .alias_of = (canonical_) \
	}

struct mthread;
struct jw;
struct run_ctl;
struct opt_fault;
struct policy_spec;
struct common_params;

/* A meter: shares setup with every other meter, differs only in its loop. */
struct meter {
	const char *name;
	const char *summary;            /* one line for the command list */
	const char *help;               /* what it measures and how */
	const struct opt_desc *options; /* meter-specific options, OPT_END terminated */
	size_t params_size;
	void (*defaults)(void *params);
	/* Optional: the --policy when none is given (NULL: fifo:99, the runner's default). */
	const struct policy_spec *policy;
	/* Cross-option checks after parsing, for a run of NTHREADS measuring threads; 0 or
	 * -EINVAL with a reason. Set AT's option (and value) when the refusal is about one
	 * option, for `--check`'s JSON. */
	int (*check)(void *params, int nthreads, struct opt_fault *at, char *err, size_t errlen);
	/* Optional, after check: the rules that need the common options (CPUs, policy,
	 * --allow-fallback). 0, -EINVAL (bad usage, exit 2) or another -errno (exit 3). */
	int (*check_common)(void *params, const struct common_params *c, struct opt_fault *at,
			    char *err, size_t errlen);
	/* Optional, after check_common: the number of measuring threads when the meter decides
	 * it (the threads it observes), or -errno with a reason (-EINVAL: bad usage). */
	int (*nthreads)(void *params, const struct common_params *c, struct opt_fault *at,
			char *err, size_t errlen);
	/* The meter takes a command after "--" (common_params.command). */
	bool takes_command;
	/* Nominal activation period of thread INDEX (ns), for the raw header and overruns. */
	int64_t (*period_ns)(const void *params, int index);
	/* The measuring loop of one thread; records through sampler.h. */
	void (*loop)(struct mthread *t, const void *params, const struct run_ctl *ctl);
	/* Meter-specific entries of "params" in the result document. */
	void (*params_json)(struct jw *w, const void *params);

	/* Optional hooks (NULL: nothing to do). */
	/* Bytes of per-thread meter state at mthread.mstate, zeroed, allocated before
	 * measuring. */
	size_t thread_state_size;
	/* In the measuring thread after its affinity and policy are set, before the start
	 * barrier: timers, file descriptors, helper threads. 0, or -errno with a reason
	 * (the run then exits 3: the system refused). May change the thread's policy. */
	int (*thread_setup)(struct mthread *t, const void *params, char *err, size_t errlen);
	/* In the measuring thread after its loop, also when the loop never ran (a setup
	 * failed, this one's perhaps half-way): undo what thread_setup did. */
	void (*thread_teardown)(struct mthread *t, const void *params);
	/* Meter-specific keys of one "threads[i]" object. */
	void (*thread_json)(struct jw *w, const struct mthread *t, const void *params);
	/* Optional: free what the meter allocated inside its thread state (after the
	 * document is written; also when the run never measured). */
	void (*thread_free)(struct mthread *t);
	/* Meter-specific top-level keys of the result document. */
	void (*doc_json)(struct jw *w, const void *params, const struct mthread *threads, int n);
	/* Samples are wake-ups of the measuring thread that --explain can explain. */
	bool explainable;
	/* --explain without an instance and markers of its own: the meter reads a trace of
	 * its own, has explain_attach() add the events to it, feeds each line and offers each
	 * sample (explain.h). */
	bool explain_fed;
	/* Optional: an array of the program image (.bss) that only this meter touches. Every
	 * run unmaps its whole pages before it locks memory (meters_release_image), so that no
	 * run locks it or counts it against RLIMIT_MEMLOCK; the meter maps what it uses again. */
	char *image_array;
	size_t image_array_bytes;
};

struct load_spec;

/* A load generator: KIND:ARGS[@CPUS]; the generic runner forks nprocs workers. */
struct load_kind {
	const char *name;
	const char *syntax; /* "forkcopy:N[:SIZE]" */
	const char *summary;
	/* Parse ARGS (text after "KIND:", may be NULL) into spec->cfg and spec->nprocs. */
	int (*parse)(const char *args, struct load_spec *spec, char *err, size_t errlen);
	/* Body of worker INDEX; never returns. ITER counts units of work done. */
	void (*worker)(const struct load_spec *spec, int index, volatile uint64_t *iter);
	/* Kind-specific entries of the load's JSON object. */
	void (*params_json)(struct jw *w, const struct load_spec *spec);
	/* Optional: kind-specific entries of what ran ("loads"), for its WORKERS workers. */
	void (*report_json)(struct jw *w, const struct load_spec *spec, int workers);
	/* Optional, in the probe before measuring (also with --check): -ENOENT when an
	 * external tool is missing (exit 3), -EINVAL when it refuses the arguments
	 * (exit 2). Must be cheap and leave no process or file behind. */
	int (*prepare)(const struct load_spec *spec, char *err, size_t errlen);
	const char *work_unit; /* what one unit of "work_units" is, e.g. "message" */
	int per_cpu;           /* one worker per CPU of @CPUS, worker k pinned to the k-th */
};

extern const struct meter *const probe_meters[];
extern const struct load_kind *const probe_load_kinds[];

const struct meter *find_meter(const char *name);

/* The whole pages of an array of BYTES at A, for pages of PAGE bytes: the first of them,
 * and their length (bytes, 0: none) in *LEN. */
char *meter_image_pages(char *a, size_t bytes, size_t page, size_t *len);

/* Unmap the whole pages of every meter's image_array: once per run, before memory is
 * locked, whichever meter runs. */
void meters_release_image(void);
const struct load_kind *find_load_kind(const char *name);

#endif
