/*
 * pipeline — end-to-end latency through a shared-memory ring: a producer writes
 * fixed-size records, each stamped with its CLOCK_MONOTONIC write time, at a fixed
 * rate into a single-producer/single-consumer ring; the measuring thread is the
 * consumer (periodic: drains the ring every period; aperiodic: woken per record
 * through a futex) and records read time − write stamp for every record, then works
 * on it (--work: busy time per record). Its CPU time over wall time is its CPU share.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/futex.h"
#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

#include "meters/pipeline.h"

/* ---- the consumer: the runner's measuring thread ---- */

static int pipeline_thread_setup(struct mthread *t, const void *pp, char *err, size_t errlen)
{
	const struct pipeline_params *p = pp;
	struct pipe_state *st = t->mstate;
	struct policy_spec own;

	st->p = p;
	st->map_bytes = SH_BYTES + (size_t)(p->ring * p->record_size);
	st->sh = mmap(NULL, st->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		      0);
	st->copy = malloc((size_t)p->record_size);
	if (st->sh == MAP_FAILED || !st->copy) {
		st->sh = st->sh == MAP_FAILED ? NULL : st->sh;
		snprintf(err, errlen, "cannot map a ring of %lld bytes (%s)",
			 (long long)st->map_bytes, strerror(errno));
		return -ENOMEM;
	}
	memset(st->sh, 0, st->map_bytes); /* no page faults while measuring */
	memset(st->copy, 0, (size_t)p->record_size);
	(void)policy_read(0, &own);
	st->prod = (struct companion){ .name = "producer",
				       .run = producer_run,
				       .arg = st,
				       .process = p->processes,
				       .cpu = p->prod_cpu >= 0 ? p->prod_cpu : t->cpu,
				       .spec = own,
				       .may_fall_back = t->fallback };
	int rc = comp_spawn(&st->prod, &own, err, errlen);

	return rc ? rc
		  : comp_wait_ready(&st->prod, &st->sh->rep, &st->prod_seen, "producer: ", err,
				    errlen);
}

static void pipeline_thread_teardown(struct mthread *t, const void *pp)
{
	struct pipe_state *st = t->mstate;
	const struct pipeline_params *p = pp;

	if (st->sh) { /* a producer that never went goes now, and quits */
		atomic_store(&st->sh->quit, 1);
		atomic_store_explicit(&st->sh->go, 1, memory_order_release);
		(void)futex_wake(&st->sh->go, 1, p->processes);
	}
	comp_stop(&st->prod); /* a thread sees quit within one record interval */
	if (st->sh)
		(void)munmap(st->sh, st->map_bytes);
	st->sh = NULL;
	free(st->copy);
	st->copy = NULL;
}

/* Write each page once: every fork made them copy-on-write again, and the first write
 * would fault in the measuring loop. After all threads' setup, so after every fork. */
static void unshare_pages(struct mthread *t, struct pipe_state *st)
{
	comp_unshare_mthread(t);
	comp_cow_touch(st, sizeof(*st));
	comp_cow_touch(st->copy, (size_t)st->p->record_size);
}

/* The record's processing: busy on the clock for WORK_NS (no system call). */
static void busy_for(int64_t work_ns)
{
	const int64_t until = mono_now_ns() + work_ns;

	while (mono_now_ns() < until)
		;
}

/* Take every record written so far, also those written meanwhile: one sample each. */
static void drain(struct mthread *t, struct pipe_state *st)
{
	struct pipe_shared *sh = st->sh;
	const uint64_t n = (uint64_t)st->p->ring;
	const size_t rs = (size_t)st->p->record_size;
	uint64_t head;
	int64_t now;

	while ((head = atomic_load_explicit(&sh->head, memory_order_acquire)) != st->tail) {
		for (; st->tail != head; st->tail++) {
			memcpy(st->copy, RECS(sh) + (st->tail % n) * rs, rs);
			now = mono_now_ns(); /* the record is the consumer's now */
			atomic_store_explicit(&sh->tail, st->tail + 1, memory_order_release);
			sample_record(t, now - ((const struct pipe_rec *)st->copy)->stamp_ns,
				      MT_GET(t, count), now);
			if (st->p->work_ns)
				busy_for(st->p->work_ns);
		}
	}
}

/* Aperiodic: sleep until the producer rings, at most LOOK_NS. */
static void wait_bell(struct pipe_state *st)
{
	struct pipe_shared *sh = st->sh;
	uint32_t b = atomic_load(&sh->bell);

	atomic_store(&sh->waiting, 1); /* seq_cst: then the load of head sees a write, or
					* the producer sees waiting and rings */
	if (atomic_load(&sh->head) == st->tail && !atomic_load(&sh->done))
		(void)futex_wait(&sh->bell, b, LOOK_NS, st->p->processes);
	atomic_store_explicit(&sh->waiting, 0, memory_order_relaxed);
}

/* After a stop: let the producer see quit, so that the counters are final. */
static void wait_done(struct pipe_state *st)
{
	struct pipe_shared *sh = st->sh;
	int64_t until = mono_now_ns() + NSEC_PER_SEC / st->p->rate_hz + END_NS;

	atomic_store(&sh->quit, 1);
	while (!atomic_load(&sh->done) && mono_now_ns() < until && !comp_gone(&st->prod))
		(void)futex_wait(&sh->bell, atomic_load(&sh->bell), 10 * NSEC_PER_MSEC,
				 st->p->processes);
}

static void pipeline_loop(struct mthread *t, const void *pp, const struct run_ctl *ctl)
{
	const struct pipeline_params *p = pp;
	struct pipe_state *st = t->mstate;
	struct pipe_shared *sh = st->sh;
	const int64_t period = p->period_ns;
	int64_t target, now, look, cpu0;
	bool end;

	if (p->processes) {
		comp_prefault_stack();
		unshare_pages(t, st);
	}
	cpu0 = thread_cpu_ns();
	t->start_ns = mono_now_ns();
	sh->start_ns = t->start_ns;
	sh->loops = ctl->loops;
	sh->duration_ns = ctl->duration_ns;
	atomic_store_explicit(&sh->go, 1, memory_order_release);
	(void)futex_wake(&sh->go, 1, p->processes);
	target = look = t->start_ns;
	for (;;) {
		end = atomic_load_explicit(&sh->done, memory_order_acquire);
		drain(t, st); /* after done: every record is in */
		if (end || atomic_load_explicit(ctl->stop, memory_order_relaxed))
			break;
		if (p->periodic) {
			target += period;
			sleep_until_ns(target);
			now = mono_now_ns();
			if (now - target >= period) /* missed whole periods: skip past now */
				target += ((now - target) / period) * period;
		} else {
			wait_bell(st);
			now = mono_now_ns();
		}
		if (now - look >= LOOK_NS) {
			look = now;
			if (comp_gone(&st->prod) &&
			    !atomic_load(&sh->done)) { /* else: drain, end */
				st->err = "the producer process ended";
				break;
			}
		}
	}
	st->cpu_ns = thread_cpu_ns() - cpu0;
	st->wall_ns = mono_now_ns() - t->start_ns;
	if (!end)
		wait_done(st);
	st->records = LD(sh, produced);
	st->unread = atomic_load(&sh->head) - st->tail;
	st->late = LD(sh, late);
	st->max_fill = LD(sh, max_fill);
	t->overruns = LD(sh, dropped);
}

/* ---- options ---- */

static void pipeline_defaults(void *pp)
{
	struct pipeline_params *p = pp;

	p->consumer_text = "periodic:1ms";
	p->ring = 256;
	p->rate_hz = 1000;
	p->record_size = 64;
	p->prod_cpu = -1;
}

/* The interval between records: one sample per record. */
static int64_t pipeline_period(const void *pp, int index)
{
	const struct pipeline_params *p = pp;

	(void)index;
	return NSEC_PER_SEC / p->rate_hz;
}

static int pipeline_check(void *pp, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	struct pipeline_params *p = pp;
	const char *s = p->consumer_text;
	char why[160];

	(void)nthreads;
	p->periodic = !strncmp(s, "periodic:", 9);
	p->period_ns = 0;
	if (p->periodic ? parse_duration_ns(s + 9, &p->period_ns, why, sizeof(why)) ||
				  p->period_ns < NSEC_PER_USEC || p->period_ns > NSEC_PER_SEC
			: strcmp(s, "aperiodic") != 0) {
		snprintf(err, errlen,
			 "--consumer: \"%s\" is not periodic:DUR (1us..1s) or aperiodic", s);
		return opts_refuse(at, "consumer", s);
	}
	if (p->ring * p->record_size > RING_BYTES_MAX) {
		snprintf(p->fault, sizeof(p->fault), "%lld", (long long)p->ring);
		snprintf(err, errlen, "--ring: %lld records of %lld bytes exceed 256 MiB",
			 (long long)p->ring, (long long)p->record_size);
		return opts_refuse(at, "ring", p->fault);
	}
	p->prod_cpu = p->prod_cpu_set ? p->prod_cpus.cpu[0] : -1;
	return 0;
}

/* ---- the document ---- */

static void pipeline_params_json(struct jw *w, const void *pp)
{
	const struct pipeline_params *p = pp;

	jw_kstr(w, "consumer", p->periodic ? "periodic" : "aperiodic");
	jw_key(w, "period_ns");
	p->periodic ? jw_int(w, p->period_ns) : jw_null(w);
	jw_kint(w, "ring", p->ring);
	jw_kint(w, "rate_hz", p->rate_hz);
	jw_kint(w, "record_size", p->record_size);
	jw_kbool(w, "processes", p->processes);
	jw_kint(w, "work_ns", p->work_ns);
	jw_key(w, "producer_cpu");
	p->prod_cpu >= 0 ? jw_int(w, p->prod_cpu) : jw_null(w);
	jw_kstr(w, "clock", "CLOCK_MONOTONIC");
	jw_kstr(w, "wake", p->periodic ? "clock_nanosleep TIMER_ABSTIME" : "futex");
}

static void pipeline_thread_json(struct jw *w, const struct mthread *t, const void *pp)
{
	const struct pipeline_params *p = pp;
	const struct pipe_state *st = t->mstate;

	jw_kstr(w, "consumer", p->periodic ? "periodic" : "aperiodic");
	jw_kint(w, "ring", p->ring);
	jw_kuint(w, "max_fill", st->max_fill);
	jw_kuint(w, "records", st->records);
	jw_kuint(w, "unread", st->unread);
	jw_kuint(w, "producer_late", st->late);
	jw_kint(w, "cpu_ns", st->cpu_ns);
	jw_kint(w, "wall_ns", st->wall_ns);
	jw_kdouble(w, "cpu_pct",
		   st->wall_ns > 0 ? 100.0 * (double)st->cpu_ns / (double)st->wall_ns : 0.0);
	if (st->err)
		jw_kstr(w, "producer_error", st->err);
	jw_key(w, "producer");
	jw_obj_begin(w);
	jw_kbool(w, "process", p->processes);
	comp_json(w, &st->prod, &st->prod_seen);
	jw_obj_end(w);
}

#define PP(f) offsetof(struct pipeline_params, f)

static const struct opt_desc pipeline_opts[] = {
	OPT_DESC("consumer", OPT_STRING, 0, 0, "periodic:DUR|aperiodic",
		 "periodic: drain the ring every DUR (1us..1s); aperiodic: woken per record "
		 "(default periodic:1ms)",
		 PP(consumer_text), OPT_NO_SET),
	OPT_DESC("ring", OPT_INT, 1, 1 << 20, "N", "records the ring holds (default 256)", PP(ring),
		 OPT_NO_SET),
	OPT_DESC("rate", OPT_INT, 1, 1000000, "HZ", "records produced per second (default 1000)",
		 PP(rate_hz), OPT_NO_SET),
	{ .name = "record-size",
	  .type = OPT_INT,
	  .min = 16,
	  .max = 65536,
	  .metavar = "BYTES",
	  .help = "bytes per record, a multiple of 8, 16-byte stamp included (default 64)",
	  .offset = PP(record_size),
	  .set_offset = OPT_NO_SET,
	  .step = 8 },
	OPT_DESC(
		"processes", OPT_FLAG, 0, 0, NULL,
		"producer and consumer in two processes (the producer is forked; default: threads)",
		PP(processes), OPT_NO_SET),
	OPT_DESC("producer-cpu", OPT_CPULIST, 0, 1, "CPU",
		 "pin every producer to CPU (default: the consumer's CPU, unpinned if it is)",
		 PP(prod_cpus), PP(prod_cpu_set)),
	OPT_DESC("work", OPT_DURATION, 0, NSEC_PER_SEC, "DUR",
		 "the consumer's busy time per record taken, 0..1s (default 0)", PP(work_ns),
		 OPT_NO_SET),
	OPT_END,
};

const struct meter meter_pipeline = {
	.name = "pipeline",
	.summary = "record latency through a shared-memory ring (producer to consumer)",
	.help = "A producer writes records stamped with CLOCK_MONOTONIC at --rate into a\n"
		"single-producer/single-consumer ring of --ring records; each measuring thread\n"
		"is a consumer, periodic (drains the ring every DUR) or aperiodic (woken per\n"
		"record by a futex), and records read time minus write stamp, in ns. A record\n"
		"due while the ring is full is dropped and counted in overruns. After each\n"
		"record the consumer is busy for --work; its thread CPU time over its wall time\n"
		"is cpu_pct. --loops counts records produced: count + overruns == loops.",
	.options = pipeline_opts,
	.params_size = sizeof(struct pipeline_params),
	.defaults = pipeline_defaults,
	.check = pipeline_check,
	.period_ns = pipeline_period,
	.loop = pipeline_loop,
	.params_json = pipeline_params_json,
	.thread_state_size = sizeof(struct pipe_state),
	.thread_setup = pipeline_thread_setup,
	.thread_teardown = pipeline_thread_teardown,
	.thread_json = pipeline_thread_json,
};
