/*
 * The kernel's timerlat and osnoise tracers: availability, the osnoise/ settings of a
 * run (each read before it is written and written back as found) and the lifecycle the
 * measuring threads share. Facts from the kernel's kernel/trace/trace_osnoise.c:
 * - both tracers allow instances (since Linux 5.16); the workload and its settings are
 *   global, shared by every instance that runs either tracer;
 * - timerlat refuses to start (-EBUSY) while osnoise runs, and osnoise while timerlat
 *   runs; two instances of the same tracer share one workload;
 * - setting current_tracer starts the per-CPU kernel threads at once, whatever
 *   tracing_on says (kernel/trace/trace.c calls the tracer's start/stop when tracing_on
 *   changes: 0 unregisters the instance, and the last one stops the threads);
 * - osnoise/timerlat_period_us takes 100 us .. 1 s, runtime_us <= period_us at every
 *   write, and osnoise/options lists each option or its NO_ form.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kjournal.h"
#include "ktracer.h"
#include "opts.h"
#include "runner.h"
#include "timeutil.h"

#define TIMERLAT_PERIOD_MIN_US 100
#define TIMERLAT_PERIOD_MAX_US 1000000
#define OSNOISE_DEFAULT_THRESHOLD_NS (5 * NSEC_PER_USEC) /* tracing_thresh 0 */
#define BUFFER_KB_IDLE 16     /* CPUs the tracer does not run on record nothing */
#define BUFFER_KB_TRACED 2048 /* ~30 s of timerlat at 100 us if the reader stalls */

const char *const ktracer_timerlat_words[] = {
	[KTRACER_USER] = "user", [KTRACER_KERNEL] = "timerlat", NULL
};
const char *const ktracer_osnoise_words[] = {
	[KTRACER_USER] = "user", [KTRACER_KERNEL] = "osnoise", NULL
};

const char *ktracer_name(enum ktracer_kind kind)
{
	return kind == KTRACER_TIMERLAT ? "timerlat" : "osnoise";
}

/* WORD is one of the whitespace-separated words of TEXT. */
static bool has_word(const char *text, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = text; (p = strstr(p, word)); p += n)
		if ((p == text || isspace((unsigned char)p[-1])) &&
		    (!p[n] || isspace((unsigned char)p[n])))
			return true;
	return false;
}

/* TEXT without its trailing newline and spaces, in BUF. */
static const char *trimmed(const char *text, char *buf, size_t len)
{
	size_t n = strnlen(text, len - 1);

	memcpy(buf, text, n);
	while (n && isspace((unsigned char)buf[n - 1]))
		n--;
	buf[n] = '\0';
	return buf;
}

/* An instance named as ours whose process is gone: the next setup removes it. */
static bool dead_run(const char *name)
{
	char proc[32];
	pid_t pid = tracefs_instance_pid(name);

	if (pid <= 0)
		return false;
	snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
	return access(proc, F_OK) && errno == ENOENT;
}

/* FILE (a current_tracer) names one of the two tracers. */
static bool runs_osnoise(const struct ktracer *kt, const char *file)
{
	char cur[64];

	return tracefs_read(&kt->root, file, cur, sizeof(cur)) > 0 &&
	       (has_word(cur, "osnoise") || has_word(cur, "timerlat"));
}

/* Another user of the tracers (top level or an instance other than ours): -EBUSY. */
static int busy_check(const struct ktracer *kt, char *err, size_t errlen)
{
	const char *ours = kt->inst.path[0] ? strrchr(kt->inst.path, '/') + 1 : "";
	char dir[sizeof(kt->fs.root) + 16], file[300];
	struct dirent *e;
	DIR *d;
	int rc = 0;

	if (runs_osnoise(kt, "current_tracer")) {
		snprintf(err, errlen,
			 "the top level of tracefs runs the osnoise or timerlat tracer, "
			 "whose osnoise/ settings are shared: stop it first (busy)");
		return -EBUSY;
	}
	snprintf(dir, sizeof(dir), "%s/instances", kt->fs.root);
	if (!(d = opendir(dir)))
		return 0; /* no instances: creating ours says why */
	while (!rc && (e = readdir(d))) {
		if (e->d_name[0] == '.' || !strcmp(e->d_name, ours) || dead_run(e->d_name))
			continue;
		snprintf(file, sizeof(file), "instances/%.255s/current_tracer", e->d_name);
		if (runs_osnoise(kt, file)) {
			snprintf(err, errlen,
				 "instances/%.60s runs the osnoise or timerlat tracer, whose "
				 "osnoise/ settings are shared: stop it first (busy)",
				 e->d_name);
			rc = -EBUSY;
		}
	}
	(void)closedir(d);
	return rc;
}

int ktracer_open(struct ktracer *kt, bool may_mount, char *err, size_t errlen)
{
	const char *name = ktracer_name(kt->kind);
	char list[4096], shown[200];
	int rc;

	if ((rc = tracefs_open(&kt->fs, may_mount, err, errlen)))
		return rc;
	snprintf(kt->root.path, sizeof(kt->root.path), "%s", kt->fs.root);
	if ((rc = tracefs_read(&kt->root, "available_tracers", list, sizeof(list))) < 0) {
		snprintf(err, errlen, "cannot read %s/available_tracers (%s)", kt->fs.root,
			 strerror(-rc));
		return rc == -EINVAL ? -EIO : rc;
	}
	if (!has_word(list, name)) {
		snprintf(err, errlen, "this kernel has no %s tracer (available_tracers: %s)", name,
			 trimmed(list, shown, sizeof(shown)));
		return -ENODEV;
	}
	return busy_check(kt, err, errlen);
}

int ktracer_opt_check(struct ktracer_opt *o, enum ktracer_kind kind, int64_t period_ns,
		      const struct common_params *c, struct opt_fault *at, char *err, size_t errlen)
{
	const char *name = ktracer_name(kind);
	char why[240];
	struct ktracer *kt;
	int rc;

	o->kt = NULL;
	o->reason[0] = '\0';
	o->name = o->choice == KTRACER_USER ? "user" : name;
	if (o->choice == KTRACER_USER)
		return 0;
	at->option = "tracer";
	at->value = name;
	if (!c->cpus_set) {
		snprintf(err, errlen,
			 "--tracer %s needs --cpus: the kernel traces CPUs, one "
			 "thread entry each",
			 name);
		return -EINVAL;
	}
	if (c->explain_set) {
		snprintf(err, errlen,
			 "--tracer %s and --explain exclude each other (one tracefs "
			 "instance per run)",
			 name);
		return -EINVAL;
	}
	if (c->policy.policy == SCHED_DEADLINE) {
		snprintf(err, errlen,
			 "--tracer %s: the kernel's %s threads take other, batch, idle, "
			 "fifo or rr, not deadline",
			 name, name);
		at->option = "policy";
		at->value = NULL;
		return -EINVAL;
	}
	if (kind == KTRACER_TIMERLAT &&
	    (period_ns % NSEC_PER_USEC || period_ns < TIMERLAT_PERIOD_MIN_US * NSEC_PER_USEC ||
	     period_ns > TIMERLAT_PERIOD_MAX_US * NSEC_PER_USEC)) {
		snprintf(err, errlen,
			 "--interval: timerlat's period is a whole number of us from "
			 "100us to 1s");
		at->option = "interval";
		at->value = NULL;
		return -EINVAL;
	}
	if (!(kt = calloc(1, sizeof(*kt)))) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	kt->kind = kind;
	kt->cpus = c->cpus;
	kt->period_us = period_ns / NSEC_PER_USEC;
	kt->allow_fallback = c->allow_fallback;
	kt->threshold_ns = -1;
	(void)pthread_mutex_init(&kt->lock, NULL);
	rc = ktracer_open(kt, !c->check_only, why, sizeof(why));
	if (!rc || (c->check_only && !kt->fs.root[0])) { /* not mounted: a run mounts it */
		o->kt = kt;
		return 0;
	}
	free(kt);
	if (rc == -EINVAL)
		rc = -EIO; /* the system refused: exit 3, not bad usage */
	if (rc != -EBUSY && c->allow_fallback) {
		snprintf(o->reason, sizeof(o->reason), "%s", why);
		return 0;
	}
	snprintf(err, errlen, "--tracer %s: %s%s", name, why,
		 rc == -EBUSY ? "" : "; --allow-fallback measures with the user-space loop");
	return rc;
}

/* The whole number FILE (under the root) holds; 0 or -errno. */
static int read_int(const struct ktracer *kt, const char *file, int64_t *v)
{
	char text[64], shown[64];
	int n = tracefs_read(&kt->root, file, text, sizeof(text));

	return n < 0 ? n : parse_int64(trimmed(text, shown, sizeof(shown)), v);
}

/* FILE under the root reads as VALUE (both without trailing whitespace)? */
static bool same_text(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);

	while (na && isspace((unsigned char)a[na - 1]))
		na--;
	while (nb && isspace((unsigned char)b[nb - 1]))
		nb--;
	return na == nb && !memcmp(a, b, na);
}

/* SRC into DST of LEN bytes, cut to fit. */
static void copy_text(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

static struct ktracer_knob *knob_new(struct ktracer *kt, const char *file, const char *found)
{
	struct ktracer_knob *k;

	if (kt->nknobs == KTRACER_KNOBS_MAX)
		return NULL;
	k = &kt->knob[kt->nknobs];
	memset(k, 0, sizeof(*k));
	copy_text(k->file, sizeof(k->file), file);
	copy_text(k->found, sizeof(k->found), found);
	return k;
}

/* The journal names every knob written so far and K, the next one, before K is written. */
static int knob_journal(struct ktracer *kt, char *err, size_t errlen)
{
	struct kjournal_undo undo[KTRACER_KNOBS_MAX];
	int n = kt->nknobs + 1;

	for (int i = 0; i < n; i++) {
		copy_text(undo[i].file, sizeof(undo[i].file), kt->knob[i].file);
		copy_text(undo[i].value, sizeof(undo[i].value), kt->knob[i].undo);
	}
	return kjournal_update(kt->fs.root, undo, n, err, errlen);
}

static int knob_write(struct ktracer *kt, struct ktracer_knob *k, char *err, size_t errlen)
{
	int rc = knob_journal(kt, err, errlen);

	if (rc)
		return rc;
	rc = tracefs_write(&kt->root, k->file, k->set);
	if (rc) {
		snprintf(err, errlen, "cannot write %.60s to %s/%s (%s)", k->set, kt->fs.root,
			 k->file, strerror(-rc));
		return rc;
	}
	kt->nknobs++; /* written: ours to put back */
	return 0;
}

/* Set FILE (under the root) to VALUE unless it reads so already; remember what it was.
 * OPTIONAL: a file this kernel may not have. */
static int knob_set(struct ktracer *kt, const char *file, const char *value, bool optional,
		    char *err, size_t errlen)
{
	char found[KTRACER_VALUE_MAX];
	struct ktracer_knob *k;
	int n = tracefs_read(&kt->root, file, found, sizeof(found));

	if (n == -ENOENT && optional)
		return 0;
	if (n < 0) {
		snprintf(err, errlen, "cannot read %s/%s (%s)", kt->fs.root, file, strerror(-n));
		return n;
	}
	if (same_text(found, value))
		return 0;
	if (!(k = knob_new(kt, file, found)))
		return -ENOSPC;
	snprintf(k->set, sizeof(k->set), "%s", value);
	snprintf(k->undo, sizeof(k->undo), "%s", found); /* byte for byte as read */
	return knob_write(kt, k, err, errlen);
}

static int knob_set_int(struct ktracer *kt, const char *file, int64_t v, bool optional, char *err,
			size_t errlen)
{
	char value[32];

	snprintf(value, sizeof(value), "%lld\n", (long long)v);
	return knob_set(kt, file, value, optional, err, errlen);
}

/* osnoise/options: OPTION on or off, written back as its opposite. Kernels before the
 * file, or without the option, have its default behaviour: nothing to do. */
static int knob_option(struct ktracer *kt, const char *option, bool on, char *err, size_t errlen)
{
	char found[KTRACER_VALUE_MAX], yes[48], no[48];
	struct ktracer_knob *k;
	int n = tracefs_read(&kt->root, "osnoise/options", found, sizeof(found));

	if (n == -ENOENT)
		return 0;
	if (n < 0) {
		snprintf(err, errlen, "cannot read %s/osnoise/options (%s)", kt->fs.root,
			 strerror(-n));
		return n;
	}
	snprintf(yes, sizeof(yes), "%s", option);
	snprintf(no, sizeof(no), "NO_%s", option);
	if (!has_word(found, on ? no : yes))
		return 0;
	if (!(k = knob_new(kt, "osnoise/options", found)))
		return -ENOSPC;
	snprintf(k->set, sizeof(k->set), "%s", on ? yes : no);
	snprintf(k->undo, sizeof(k->undo), "%s", on ? no : yes);
	return knob_write(kt, k, err, errlen);
}

/* The osnoise/ settings of the run, in an order every intermediate state accepts. */
static int configure_knobs(struct ktracer *kt, char *err, size_t errlen)
{
	char cpus[KTRACER_VALUE_MAX];
	bool timerlat = kt->kind == KTRACER_TIMERLAT;
	int64_t old_period = 0;
	int rc;

	/* a killed run's settings go back before any is read as found (kjournal.h) */
	if ((rc = kjournal_begin(kt->fs.root, err, errlen)))
		return rc;
	kt->journaled = true;
	cpulist_format(&kt->cpus, cpus, sizeof(cpus) - 1);
	strcat(cpus, "\n"); /* the kernel's cpulist parser stops at the newline */
	if ((rc = knob_set(kt, "osnoise/cpus", cpus, false, err, errlen)))
		return rc;
	if (timerlat) {
		rc = knob_set_int(kt, "osnoise/timerlat_period_us", kt->period_us, false, err,
				  errlen);
	} else {
		/* runtime_us <= period_us at every write: raise the period first, lower it last */
		(void)read_int(kt, "osnoise/period_us", &old_period);
		if (kt->period_us > old_period)
			rc = knob_set_int(kt, "osnoise/period_us", kt->period_us, false, err,
					  errlen);
		if (!rc)
			rc = knob_set_int(kt, "osnoise/runtime_us", kt->period_us, false, err,
					  errlen);
		if (!rc && kt->period_us <= old_period)
			rc = knob_set_int(kt, "osnoise/period_us", kt->period_us, false, err,
					  errlen);
	}
	/* a run measures: nothing stops the tracer, nothing else lands in its buffer */
	if (!rc)
		rc = knob_set_int(kt, "osnoise/stop_tracing_us", 0, false, err, errlen);
	if (!rc)
		rc = knob_set_int(kt, "osnoise/stop_tracing_total_us", 0, false, err, errlen);
	if (!rc && timerlat)
		rc = knob_set_int(kt, "osnoise/print_stack", 0, true, err, errlen);
	if (!rc) /* the kernel's threads, not user-space ones (rtla -u), do the work */
		rc = knob_option(kt, "OSNOISE_WORKLOAD", true, err, errlen);
	if (!rc && !timerlat)
		rc = knob_option(kt, "OSNOISE_PREEMPT_DISABLE", false, err, errlen);
	if (!rc && !timerlat)
		rc = knob_option(kt, "OSNOISE_IRQ_DISABLE", false, err, errlen);
	return rc;
}

static const char *const line_opts[][2] = {
	{ "options/context-info", "1" }, { "options/latency-format", "0" },
	{ "options/raw", "0" },          { "options/hex", "0" },
	{ "options/bin", "0" },
};

int ktracer_instance(struct ktracer *kt, pid_t pid, char *err, size_t errlen)
{
	int removed;

	(void)tracefs_remove_stale(&kt->fs, &removed); /* dead runs' instances, ours too */
	return tracefs_instance_create(&kt->fs, pid, &kt->inst, err, errlen);
}

int ktracer_configure(struct ktracer *kt, char *err, size_t errlen)
{
	const char *name = ktracer_name(kt->kind);
	int64_t us;
	int rc;

	if ((rc = busy_check(kt, err, errlen)) || (rc = configure_knobs(kt, err, errlen)))
		return rc;
	if (kt->kind == KTRACER_OSNOISE && !read_int(kt, "tracing_thresh", &us))
		kt->threshold_ns = us > 0 ? us * NSEC_PER_USEC : OSNOISE_DEFAULT_THRESHOLD_NS;
	/* the instance's trace options shape its lines: make them the default
	 * "TASK-PID [CPU] FLAGS TIMESTAMP: ..." text that ktracer_parse_line reads */
	for (size_t i = 0; i < sizeof(line_opts) / sizeof(line_opts[0]); i++)
		(void)tracefs_write(&kt->inst, line_opts[i][0], line_opts[i][1]);
	kt->mono_clock = !tracefs_write(&kt->inst, "trace_clock", "mono");
	(void)tracefs_set_buffer_kb(&kt->inst, -1, BUFFER_KB_IDLE);
	for (int i = 0; i < kt->cpus.n; i++)
		(void)tracefs_set_buffer_kb(&kt->inst, kt->cpus.cpu[i], BUFFER_KB_TRACED);
	if ((rc = tracefs_write(&kt->inst, "tracing_on", "0"))) {
		snprintf(err, errlen, "cannot configure the tracefs instance %s (%s)",
			 kt->inst.path, strerror(-rc));
		return rc;
	}
	rc = tracefs_write(&kt->inst, "current_tracer", name);
	if (rc == -EBUSY)
		snprintf(err, errlen,
			 "the kernel refused %s: the other of osnoise and timerlat "
			 "runs (busy)",
			 name);
	else if (rc == -EINVAL)
		snprintf(err, errlen,
			 "this kernel cannot run %s in a tracefs instance (Linux 5.16 "
			 "and later can)",
			 name);
	else if (rc)
		snprintf(err, errlen, "cannot start the %s tracer (%s)", name, strerror(-rc));
	kt->tracer_set = !rc;
	return rc == -EINVAL ? -EOPNOTSUPP : rc;
}

int ktracer_begin(struct ktracer *kt)
{
	return tracefs_write(&kt->inst, "tracing_on", "1");
}

int ktracer_begin_once(struct ktracer *kt)
{
	int rc = 0;

	(void)pthread_mutex_lock(&kt->lock);
	if (!kt->on && !(rc = ktracer_begin(kt)))
		kt->on = true;
	(void)pthread_mutex_unlock(&kt->lock);
	return rc;
}

void ktracer_end(struct ktracer *kt)
{
	if (kt->inst.path[0]) {
		(void)tracefs_write(&kt->inst, "tracing_on", "0");
		if (kt->tracer_set) /* stops the kernel threads before their settings go back */
			(void)tracefs_write(&kt->inst, "current_tracer", "nop");
		kt->tracer_set = false;
		kt->on = false;
		(void)tracefs_instance_remove(&kt->inst);
	}
	kt->restore_failed = false;
	for (int i = kt->nknobs - 1; i >= 0; i--) {
		struct ktracer_knob *k = &kt->knob[i];

		if (!k->restored)
			k->restored = !tracefs_write(&kt->root, k->file, k->undo);
		kt->restore_failed |= !k->restored;
	}
	if (kt->journaled && !kt->restore_failed && !kjournal_end())
		kt->journaled = false; /* a failure leaves it for the next run to retry */
}

int ktracer_join(struct ktracer *kt, char *err, size_t errlen)
{
	int rc;

	(void)pthread_mutex_lock(&kt->lock);
	kt->users++;
	if (!kt->tried) {
		kt->tried = true;
		kt->rc = ktracer_instance(kt, getpid(), kt->err, sizeof(kt->err));
		if (!kt->rc)
			kt->rc = ktracer_configure(kt, kt->err, sizeof(kt->err));
	}
	rc = kt->rc;
	if (rc)
		snprintf(err, errlen, "--tracer %s: %s", ktracer_name(kt->kind), kt->err);
	(void)pthread_mutex_unlock(&kt->lock);
	return rc == -EINVAL ? -EIO : rc;
}

void ktracer_leave(struct ktracer *kt)
{
	(void)pthread_mutex_lock(&kt->lock);
	if (kt->users > 0 && --kt->users == 0)
		ktracer_end(kt);
	(void)pthread_mutex_unlock(&kt->lock);
}
