/* alloc — malloc/free latency per block size, with the C library's defaults or --tuned
 * (no mmap, no trim, one arena, a prefaulted locked heap); one sample per call. */
#include <errno.h>
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <gnu/libc-version.h> /* mallopt's settings are the GNU C library's */

#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/splitmix.h"
#include "lib/timeutil.h"
#include "probe.h"

#include "meters/alloc.h"

#define ALLOC_DEFAULT_SIZES "16,256,4K,64K,256K,1M,4M"
#define ALLOC_DEFAULT_BATCH 8
#define ALLOC_MAX_SIZES 16
#define ALLOC_MAX_BATCH 4096
#define ALLOC_SIZE_MAX ((int64_t)256 << 20)   /* largest block */
#define ALLOC_BLOCK_SLACK 4096                /* per block held: chunk header, page rounding */
#define ALLOC_HELD_MAX ((int64_t)1 << 30)     /* bytes one thread may hold at once */
#define ALLOC_PREFAULT_MAX ((int64_t)2 << 30) /* --tuned: heap prefaulted for all threads */
#define ALLOC_OPEN_CYCLES 1000                /* cycles per size and round of an open run */
#define ALLOC_NOMINAL_CALL_NS 1000            /* stands in for a period */
#define MIB (1024 * 1024)

enum alloc_pattern { PAT_PAIRS, PAT_BATCH, PAT_RANDOM, PAT_COUNT };

static const char *const pattern_names[PAT_COUNT + 1] = {
	[PAT_PAIRS] = "pairs",
	[PAT_BATCH] = "batch",
	[PAT_RANDOM] = "random",
	[PAT_COUNT] = NULL,
};

/* The real-time allocator settings of --tuned, in the order they are applied. */
static const struct {
	int param, value;
	const char *name;
} tuned_knobs[] = {
	{ M_MMAP_MAX, 0, "M_MMAP_MAX" },              /* every block from the heap */
	{ M_TRIM_THRESHOLD, -1, "M_TRIM_THRESHOLD" }, /* the heap never shrinks */
	{ M_ARENA_MAX, 1, "M_ARENA_MAX" }, /* every thread in the prefaulted main arena */
};
#define NKNOBS (sizeof(tuned_knobs) / sizeof(tuned_knobs[0]))

struct alloc_params {
	const char *sizes_arg; /* as given (points into argv), or the default */
	int pattern;           /* enum alloc_pattern (a choice option) */
	int64_t batch;         /* batch: blocks per batch; random: blocks held at once */
	bool batch_set;
	bool tuned;
	bool touch;   /* write every page of each fresh block, timed apart */
	int64_t seed; /* random: first state of thread 0's generator */
	bool seed_set;
	/* Resolved by check(). */
	int64_t size[ALLOC_MAX_SIZES]; /* bytes, in the order given */
	int nsizes;
	int64_t held_bytes;     /* most one thread holds at once, slack included */
	int64_t prefault_bytes; /* --tuned: heap grown, touched and kept before measuring */
};

/* Per measuring thread, at mthread.mstate. */
struct alloc_thread {
	struct size_stats *sz;     /* nsizes entries, mapped by setup; read after the run */
	void **block;              /* batch: the blocks of a batch; random: one per slot, or NULL */
	uint8_t *slot_size;        /* random: size index of each slot's block */
	uint64_t rng;              /* random: splitmix64 state */
	uint64_t seq;              /* samples recorded so far: sample_record's cycle */
	size_t page;               /* bytes; --touch writes one byte in each */
	struct fault_count faults; /* sum over the sizes */
};

/* Keep the compiler from eliding a malloc whose block is only freed, or stores to it. */
static inline void escape(void *p)
{
	__asm__ volatile("" : : "r"(p) : "memory");
}

static struct fault_count faults_now(void)
{
	struct rusage ru;

	(void)getrusage(RUSAGE_THREAD, &ru);
	return (struct fault_count){ (uint64_t)ru.ru_minflt, (uint64_t)ru.ru_majflt };
}

/* Charge the faults since F0 to size K and the thread; the reading taken now. */
static struct fault_count faults_charge(struct alloc_thread *s, int k, struct fault_count f0)
{
	struct fault_count f1 = faults_now();
	uint64_t minor = f1.minor - f0.minor, major = f1.major - f0.major;

	s->sz[k].faults.minor += minor;
	s->sz[k].faults.major += major;
	s->faults.minor += minor;
	s->faults.major += major;
	return f1;
}

static inline void call_add(struct call_stats *c, int64_t v)
{
	if (!c->count || v < c->min_ns)
		c->min_ns = v;
	if (!c->count || v > c->max_ns)
		c->max_ns = v;
	c->sum_ns += v;
	c->count++;
	hist_add(&c->hist, v);
}

/* The hot path: one call between two clock reads, then the sample. */
static inline void *timed_malloc(struct mthread *t, struct alloc_thread *s, int k, size_t bytes)
{
	int64_t t0 = mono_now_ns();
	void *p = malloc(bytes);
	int64_t t1 = mono_now_ns();

	escape(p);
	call_add(&s->sz[k].malloc_c, t1 - t0);
	s->sz[k].failed += !p;
	sample_record(t, t1 - t0, s->seq++, t1);
	return p;
}

/* --touch: one write per page of a fresh block (and its last byte), timed on its own;
 * not a sample (the samples are the allocator's calls), in the size's "touch". */
static inline void timed_touch(struct alloc_thread *s, int k, char *p, size_t bytes)
{
	int64_t t0;

	if (!p)
		return;
	t0 = mono_now_ns();
	for (size_t i = 0; i < bytes; i += s->page)
		p[i] = 1;
	p[bytes - 1] = 1;
	escape(p);
	call_add(&s->sz[k].touch_c, mono_now_ns() - t0);
}

static inline void timed_free(struct mthread *t, struct alloc_thread *s, int k, void *p)
{
	int64_t t0, t1;

	if (!p)
		return; /* a failed malloc: nothing to free, no sample */
	t0 = mono_now_ns();
	free(p);
	t1 = mono_now_ns();
	call_add(&s->sz[k].free_c, t1 - t0);
	sample_record(t, t1 - t0, s->seq++, t1);
}

/* One unrecorded round: N blocks of BYTES, then their frees; leaves every slot empty. */
static void warm(struct alloc_thread *s, size_t bytes, int n)
{
	for (int i = 0; i < n; i++) {
		s->block[i] = malloc(bytes);
		escape(s->block[i]);
	}
	for (int i = 0; i < n; i++) {
		free(s->block[i]);
		s->block[i] = NULL;
	}
}

/* pairs and batch: the sizes one after the other, N blocks a cycle, faults per size. */
static void measure_sizes(struct mthread *t, const struct alloc_params *ap,
			  const struct run_ctl *ctl)
{
	struct alloc_thread *s = t->mstate;
	const int n = ap->pattern == PAT_BATCH ? (int)ap->batch : 1;
	const bool open = !ctl->loops && !ctl->duration_ns;
	/* --loops per size; --duration split evenly; an open run goes round in rounds. */
	const struct run_ctl per = {
		ctl->stop,
		open ? ALLOC_OPEN_CYCLES : ctl->loops,
		ctl->duration_ns ? (ctl->duration_ns + ap->nsizes - 1) / ap->nsizes : 0,
	};

	do {
		for (int k = 0; k < ap->nsizes; k++) {
			const size_t bytes = (size_t)ap->size[k];
			struct fault_count f0;
			int64_t t0, now = 0;
			uint64_t c = 0;

			if (atomic_load_explicit(ctl->stop, memory_order_relaxed))
				return;
			warm(s, bytes, n);
			f0 = faults_now();
			t0 = mono_now_ns();
			while (!run_should_stop(&per, c, now)) {
				for (int i = 0; i < n; i++) {
					s->block[i] = timed_malloc(t, s, k, bytes);
					if (ap->touch)
						timed_touch(s, k, s->block[i], bytes);
				}
				for (int i = 0; i < n; i++)
					timed_free(t, s, k, s->block[i]);
				c++;
				if (per.duration_ns)
					now = mono_now_ns() - t0;
			}
			(void)faults_charge(s, k, f0);
		}
	} while (open && !atomic_load_explicit(ctl->stop, memory_order_relaxed));
}

/* random: every size at once in a pool of slots; faults charged call by call. */
static void measure_random(struct mthread *t, const struct alloc_params *ap,
			   const struct run_ctl *ctl)
{
	struct alloc_thread *s = t->mstate;
	const int slots = (int)ap->batch;
	const uint64_t n = (uint64_t)ap->nsizes; /* loops <= INT64_MAX / 2: saturate */
	const struct run_ctl all = {
		ctl->stop,
		ctl->loops > UINT64_MAX / n ? UINT64_MAX : ctl->loops * n,
		ctl->duration_ns,
	};
	struct fault_count f;
	int64_t t0, now = 0;
	uint64_t c = 0;

	for (int k = 0; k < ap->nsizes; k++)
		warm(s, (size_t)ap->size[k], slots);
	f = faults_now();
	t0 = mono_now_ns();
	while (!run_should_stop(&all, c, now)) {
		int j = (int)(splitmix64(&s->rng) % (uint64_t)slots);
		int k = (int)(splitmix64(&s->rng) % (uint64_t)ap->nsizes);

		if (s->block[j]) {
			timed_free(t, s, s->slot_size[j], s->block[j]);
			f = faults_charge(s, s->slot_size[j], f);
		}
		s->block[j] = timed_malloc(t, s, k, (size_t)ap->size[k]);
		s->slot_size[j] = (uint8_t)k;
		if (ap->touch)
			timed_touch(s, k, s->block[j], (size_t)ap->size[k]);
		f = faults_charge(s, k, f);
		c++;
		if (all.duration_ns)
			now = mono_now_ns() - t0;
	}
	for (int j = 0; j < slots; j++) { /* every malloc has its free */
		timed_free(t, s, s->slot_size[j], s->block[j]);
		f = s->block[j] ? faults_charge(s, s->slot_size[j], f) : f;
		s->block[j] = NULL;
	}
}

static void alloc_loop(struct mthread *t, const void *p, const struct run_ctl *ctl)
{
	const struct alloc_params *ap = p;

	t->start_ns = mono_now_ns();
	(ap->pattern == PAT_RANDOM ? measure_random : measure_sizes)(t, ap, ctl);
}

/* Process-wide, in thread 0's setup, before any measuring thread's first malloc (the others
 * allocate nothing before the start barrier): the heap is grown, every page touched (and,
 * under mlockall, locked) and given back to the allocator, which keeps it. */
static int tune_heap(const struct alloc_params *ap, char *err, size_t errlen)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (size_t)ap->prefault_bytes;
	char *heap;

	for (size_t i = 0; i < NKNOBS; i++) {
		if (!mallopt(tuned_knobs[i].param, tuned_knobs[i].value)) {
			snprintf(err, errlen, "--tuned: the C library refuses mallopt(%s, %d)",
				 tuned_knobs[i].name, tuned_knobs[i].value);
			return -ENOTSUP;
		}
	}
	heap = malloc(len);
	if (!heap) {
		snprintf(err, errlen,
			 "--tuned: cannot prefault a heap of %lld MiB (short of memory, "
			 "RLIMIT_AS or, under mlockall, RLIMIT_MEMLOCK)",
			 (long long)(ap->prefault_bytes / MIB));
		return -ENOMEM;
	}
	for (size_t i = 0; i < len; i += page)
		heap[i] = 1;
	heap[len - 1] = 1;
	escape(heap);
	free(heap);
	return 0;
}

/* LEN bytes of anonymous memory (FLAGS added), or NULL and a reason naming WHAT. */
static void *map_anon(size_t len, int flags, const char *what, char *err, size_t errlen)
{
	void *m =
		mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
	int e = errno;

	if (m != MAP_FAILED)
		return m;
	snprintf(err, errlen, "cannot map %zu KiB for %s (%s)%s", len / 1024, what, strerror(e),
		 e == EAGAIN ? ": raise RLIMIT_MEMLOCK or use --no-mlock" : ""); /* memlock */
	return NULL;
}

static int alloc_thread_setup(struct mthread *t, const void *p, char *err, size_t errlen)
{
	const struct alloc_params *ap = p;
	struct alloc_thread *s = t->mstate;
	size_t len = (size_t)ap->nsizes * sizeof(*s->sz) + (size_t)ap->batch * sizeof(void *) +
		     (size_t)ap->batch;
	void *held;

	/* Never from the allocator under test; populated so that recording takes no fault.
	 * Not unmapped: the document is written from it after the threads end. */
	if (!(s->sz = map_anon(len, MAP_POPULATE, "the per-size statistics", err, errlen)))
		return -ENOMEM;
	s->block = (void **)(s->sz + ap->nsizes);
	s->slot_size = (uint8_t *)(s->block + ap->batch);
	s->rng = (uint64_t)ap->seed + (uint64_t)t->index;
	s->page = (size_t)sysconf(_SC_PAGESIZE);
	if (ap->tuned)
		return t->index == 0 ? tune_heap(ap, err, errlen) : 0;
	/* The library's defaults: can the thread hold its blocks (locked under mlockall)? */
	if (!(held = map_anon((size_t)ap->held_bytes, 0, "the blocks held at once", err, errlen)))
		return -ENOMEM;
	(void)munmap(held, (size_t)ap->held_bytes);
	return 0;
}

static void alloc_thread_json(struct jw *w, const struct mthread *t, const void *p)
{
	const struct alloc_params *ap = p;
	const struct alloc_thread *s = t->mstate;
	struct hist *both;

	jw_kstr(w, "pattern", pattern_names[ap->pattern]);
	jw_kbool(w, "tuned", ap->tuned);
	alloc_faults_json(w, &s->faults);
	jw_key(w, "sizes");
	jw_arr_begin(w);
	if (s->sz) {
		both = malloc(sizeof(*both)); /* NULL: the merged percentiles are null */
		for (int k = 0; k < ap->nsizes; k++)
			alloc_size_json(w, ap->size[k], &s->sz[k], ap->touch, both);
		free(both);
	}
	jw_arr_end(w);
}

static void alloc_params_json(struct jw *w, const void *p)
{
	const struct alloc_params *ap = p;
	char libc[64];

	jw_key(w, "sizes");
	jw_arr_begin(w);
	for (int k = 0; k < ap->nsizes; k++)
		jw_int(w, ap->size[k]);
	jw_arr_end(w);
	jw_kstr(w, "pattern", pattern_names[ap->pattern]);
	jw_key(w, "batch");
	ap->pattern == PAT_PAIRS ? jw_null(w) : jw_int(w, ap->batch);
	jw_kbool(w, "tuned", ap->tuned);
	jw_kbool(w, "touch", ap->touch);
	jw_key(w, "seed");
	ap->pattern == PAT_RANDOM ? jw_int(w, ap->seed) : jw_null(w);
	jw_key(w, "prefault_bytes");
	ap->tuned ? jw_int(w, ap->prefault_bytes) : jw_null(w);
	jw_key(w, "mallopt");
	if (ap->tuned) {
		jw_obj_begin(w);
		for (size_t i = 0; i < NKNOBS; i++)
			jw_kint(w, tuned_knobs[i].name, tuned_knobs[i].value);
		jw_obj_end(w);
	} else {
		jw_null(w);
	}
	snprintf(libc, sizeof(libc), "glibc %s", gnu_get_libc_version());
	jw_kstr(w, "libc", libc);
	jw_kstr(w, "clock", "CLOCK_MONOTONIC");
	jw_kstr(w, "sample", "one malloc or one free call");
}

static void alloc_defaults(void *p)
{
	struct alloc_params *ap = p;

	ap->sizes_arg = ALLOC_DEFAULT_SIZES;
	ap->batch = ALLOC_DEFAULT_BATCH;
}

/* --sizes: comma-separated sizes with optional units, each once, 1 B to 256 MiB. */
static int parse_sizes(struct alloc_params *ap, char *err, size_t errlen)
{
	const char *s = ap->sizes_arg, *bad = NULL;
	char item[32], why[200];
	int64_t v;

	for (ap->nsizes = 0;; s++) {
		size_t len = strcspn(s, ",");

		if (!len || len >= sizeof(item)) {
			snprintf(err, errlen, "--sizes: %s size in \"%s\"",
				 len ? "a too long" : "an empty", ap->sizes_arg);
			return -EINVAL;
		}
		memcpy(item, s, len);
		item[len] = '\0';
		if (parse_size_bytes(item, &v, why, sizeof(why))) {
			snprintf(err, errlen, "--sizes: %s", why);
			return -EINVAL;
		}
		for (int k = 0; k < ap->nsizes; k++)
			bad = ap->size[k] == v ? "repeats a size" : bad;
		if (v < 1 || v > ALLOC_SIZE_MAX)
			bad = "is out of range (1 to 256M bytes)";
		else if (ap->nsizes == ALLOC_MAX_SIZES)
			bad = "is one size too many (at most 16)";
		if (bad) {
			snprintf(err, errlen, "--sizes: \"%s\" %s", item, bad);
			return -EINVAL;
		}
		ap->size[ap->nsizes++] = v;
		s += len;
		if (!*s)
			return 0;
	}
}

static int alloc_check(void *p, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	struct alloc_params *ap = p;
	int64_t largest = 0, blocks;
	char why[300];

	if (parse_sizes(ap, why, sizeof(why)))
		return opts_refusef(at, "sizes", ap->sizes_arg, err, errlen, "%s", why);
	if (ap->batch_set && ap->pattern == PAT_PAIRS)
		return opts_refusef(at, "batch", NULL, err, errlen,
				    "--batch applies to --pattern batch and random only");
	if (ap->seed_set && ap->pattern != PAT_RANDOM)
		return opts_refusef(at, "seed", NULL, err, errlen,
				    "--seed applies to --pattern random only");
	for (int k = 0; k < ap->nsizes; k++)
		largest = ap->size[k] > largest ? ap->size[k] : largest;
	blocks = ap->pattern == PAT_PAIRS ? 1 : ap->batch;
	ap->held_bytes = blocks * (largest + ALLOC_BLOCK_SLACK);
	if (ap->held_bytes > ALLOC_HELD_MAX)
		return opts_refusef(
			at, "batch", NULL, err, errlen,
			"--batch: %lld blocks of %lld bytes exceed %lld MiB held at once",
			(long long)blocks, (long long)largest, (long long)(ALLOC_HELD_MAX / MIB));
	/* One spare share: threads in one arena fragment it (blocks stranded between others). */
	ap->prefault_bytes = (int64_t)(nthreads > 0 ? nthreads + 1 : 2) * ap->held_bytes;
	if (ap->tuned && ap->prefault_bytes > ALLOC_PREFAULT_MAX)
		return opts_refusef(
			at, "tuned", NULL, err, errlen,
			"--tuned: a heap of %lld MiB to prefault for %d threads exceeds "
			"%lld MiB",
			(long long)(ap->prefault_bytes / MIB), nthreads,
			(long long)(ALLOC_PREFAULT_MAX / MIB));
	if (ap->pattern == PAT_RANDOM && !ap->seed_set) {
		struct timespec ts;

		(void)clock_gettime(CLOCK_REALTIME, &ts);
		ap->seed = (ts_to_ns(&ts) ^ ((int64_t)getpid() << 32)) & INT64_MAX;
	}
	return 0;
}

/* No period: a nominal call of 1 us stands in, which gives the raw ring its largest size
 * (calls come far faster than periods) and --loops runs a series of loops x 2 us + 10 s. */
static int64_t alloc_period(const void *p, int index)
{
	(void)p;
	(void)index;
	return ALLOC_NOMINAL_CALL_NS;
}

static const struct opt_desc alloc_opts[] = {
	OPT_DESC("sizes", OPT_STRING, 0, 0, "LIST",
		 "block sizes, comma-separated, bytes or K/M units, 1 to 256M, at most 16 "
		 "(default " ALLOC_DEFAULT_SIZES ")",
		 offsetof(struct alloc_params, sizes_arg), OPT_NO_SET),
	OPT_CHOICE_DESC("pattern", pattern_names, PAT_PAIRS, "P", "the calls of a cycle, see above",
			offsetof(struct alloc_params, pattern), OPT_NO_SET),
	OPT_DESC("batch", OPT_INT, 1, ALLOC_MAX_BATCH, "N",
		 "batch: blocks per batch; random: blocks held at once (default 8)",
		 offsetof(struct alloc_params, batch), offsetof(struct alloc_params, batch_set)),
	OPT_DESC("tuned", OPT_FLAG, 0, 0, NULL,
		 "real-time allocator: mallopt M_MMAP_MAX=0, M_TRIM_THRESHOLD=-1, M_ARENA_MAX=1, "
		 "prefaulted heap (default: the C library's defaults)",
		 offsetof(struct alloc_params, tuned), OPT_NO_SET),
	OPT_DESC("touch", OPT_FLAG, 0, 0, NULL,
		 "write every page of each block after its malloc, timed apart as \"touch\" "
		 "(default: no)",
		 offsetof(struct alloc_params, touch), OPT_NO_SET),
	OPT_DESC("seed", OPT_INT, 0, INT64_MAX, "N",
		 "random: seed of the slot and size sequence (default: from the clock, recorded)",
		 offsetof(struct alloc_params, seed), offsetof(struct alloc_params, seed_set)),
	OPT_END,
};

const struct meter meter_alloc = {
	.name = "alloc",
	.summary = "malloc/free latency per block size, C library defaults or tuned",
	.help = "Latency of the C library's malloc and free. Each measuring thread measures\n"
		"the --sizes one after the other (after one unrecorded round each); a cycle is:\n"
		"  pairs   malloc one block, free it\n"
		"  batch   malloc --batch blocks, then free them in the same order\n"
		"  random  every size at once: a pool of --batch slots; a cycle picks a slot and a\n"
		"          size (--seed): frees the slot's block, mallocs the new one\n"
		"Every malloc and every free is one sample (the call between two CLOCK_MONOTONIC\n"
		"reads, ns). --loops N: cycles per size (random: N x sizes in all); --duration:\n"
		"split over the sizes; neither: rounds of 1000 cycles a size until a signal.\n"
		"Page faults (getrusage RUSAGE_THREAD) per size, over its measured cycles only.\n"
		"--touch: after each malloc, one write per page of the block, timed on its own\n"
		"(per size \"touch\"; not a sample: samples stay the allocator's calls).\n"
		"--tuned: mallopt M_MMAP_MAX=0, M_TRIM_THRESHOLD=-1, M_ARENA_MAX=1 and a heap\n"
		"prefaulted for (threads + 1) x the blocks one thread holds, locked by mlockall.",
	.options = alloc_opts,
	.params_size = sizeof(struct alloc_params),
	.defaults = alloc_defaults,
	.check = alloc_check,
	.period_ns = alloc_period,
	.loop = alloc_loop,
	.params_json = alloc_params_json,
	.thread_state_size = sizeof(struct alloc_thread),
	.thread_setup = alloc_thread_setup,
	.thread_json = alloc_thread_json,
};
