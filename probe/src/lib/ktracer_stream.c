/*
 * The tracers' lines, one CPU's stream per measuring thread, and what the document
 * says of them. Line formats from the kernel's kernel/trace/trace_output.c
 * (trace_timerlat_print, trace_osnoise_print), after the usual
 * "TASK-PID [CPU] FLAGS TIMESTAMP: " of each trace line:
 *   timerlat: "#%-5u context %6s timer_latency %9llu ns", context irq, thread or
 *             user-ret (ns);
 *   osnoise:  "%llu %10llu %3llu.%05llu %7llu" then " %6u" five times: runtime, noise,
 *             % of CPU available, max single noise (µs), hw, nmi, irq, softirq and
 *             thread interference counts of one period.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "jsonw.h"
#include "ktracer.h"
#include "runner.h"
#include "sampler.h"
#include "timeutil.h"

#define STREAM_BUF_BYTES (64 * 1024)
#define STREAM_IDLE_NS (20 * NSEC_PER_MSEC) /* nothing to read: look again after this */
#define STREAM_ON_CHECK_NS NSEC_PER_SEC     /* silent this long: is tracing still on? */

/* "SECS.FRAC" between S and END into ns. */
static int parse_ts(const char *s, const char *end, int64_t *ns)
{
	int64_t secs = 0, frac = 0, scale = NSEC_PER_SEC;
	const char *p = s;

	for (; p < end && isdigit((unsigned char)*p); p++)
		if ((secs = secs * 10 + (*p - '0')) > 100000000000LL)
			return -EINVAL;
	if (p == s || p + 1 >= end || *p != '.')
		return -EINVAL;
	for (p++; p < end; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		if (scale > 1) {
			scale /= 10;
			frac += (*p - '0') * scale;
		}
	}
	*ns = secs * NSEC_PER_SEC + frac;
	return 0;
}

/* What follows "[CPU] FLAGS TIMESTAMP:" in LINE (the flags may be absent), or NULL. The
 * task's name may hold anything, brackets too: the CPU field is the first "[digits] "
 * that a timestamp follows. */
static const char *after_timestamp(const char *line, int64_t *ts_ns)
{
	const char *b, *q, *p, *e;

	for (b = strchr(line, '['); b; b = strchr(b + 1, '[')) {
		for (q = b + 1; isdigit((unsigned char)*q); q++)
			;
		if (q == b + 1 || q[0] != ']' || q[1] != ' ')
			continue;
		p = q + 1;
		for (int token = 0; token < 2; token++) {
			while (*p == ' ')
				p++;
			for (e = p; *e && *e != ' '; e++)
				;
			if (e > p && e[-1] == ':' && !parse_ts(p, e - 1, ts_ns))
				return e;
			p = e;
		}
	}
	return NULL;
}

static int64_t us_to_ns(unsigned long long us)
{
	return us > (unsigned long long)(INT64_MAX / NSEC_PER_USEC) ? INT64_MAX
								    : (int64_t)us * NSEC_PER_USEC;
}

int ktracer_parse_line(const char *line, struct ktracer_line *out)
{
	static const char *const contexts[] = { "irq", "thread", "user-ret" };
	unsigned long long seq, lat, run, noise, pct, pct_dec, max, hw, nmi, irq, sirq, thr;
	const char *body = after_timestamp(line, &out->ts_ns);
	char ctx[16];
	int n = -1;

	if (!body)
		return -EINVAL;
	if (sscanf(body, " #%llu context %15s timer_latency %llu ns%n", &seq, ctx, &lat, &n) == 3 &&
	    n > 0) {
		for (int c = 0; c < 3; c++) {
			if (strcmp(ctx, contexts[c]))
				continue;
			out->kind = KTRACER_TIMERLAT;
			out->seq = seq;
			out->context = c;
			out->latency_ns = lat > INT64_MAX ? INT64_MAX : (int64_t)lat;
			return 0;
		}
		return -EINVAL;
	}
	n = -1;
	if (sscanf(body, " %llu %llu %llu.%llu %llu %llu %llu %llu %llu %llu%n", &run, &noise, &pct,
		   &pct_dec, &max, &hw, &nmi, &irq, &sirq, &thr, &n) != 10 ||
	    n < 0)
		return -EINVAL;
	while (isspace((unsigned char)body[n]))
		n++;
	if (body[n])
		return -EINVAL;
	out->kind = KTRACER_OSNOISE;
	out->runtime_ns = us_to_ns(run);
	out->noise_ns = us_to_ns(noise);
	out->max_single_ns = us_to_ns(max);
	out->hw = hw;
	out->nmi = nmi;
	out->irq = irq;
	out->softirq = sirq;
	out->thread = thr;
	return 0;
}

/* The PID of the kernel thread named COMM, 0 when there is none. */
static pid_t find_kthread(const char *comm)
{
	char path[64], name[32];
	struct dirent *e;
	pid_t pid = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return 0;
	while (!pid && (e = readdir(d))) {
		FILE *f;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%.20s/comm", e->d_name);
		if (!(f = fopen(path, "re")))
			continue;
		if (fgets(name, sizeof(name), f)) {
			name[strcspn(name, "\n")] = '\0';
			if (!strcmp(name, comm))
				pid = (pid_t)atoi(e->d_name);
		}
		(void)fclose(f);
	}
	(void)closedir(d);
	return pid;
}

/* The reader needs no CPU of the tracer and no real-time priority: the instance's
 * buffer, not this thread, holds the samples until read. */
static void move_off_traced_cpus(const struct ktracer *kt)
{
	struct sched_param other = { 0 };
	struct cpulist *online = malloc(sizeof(*online));
	cpu_set_t set;

	CPU_ZERO(&set);
	if (online && !cpulist_online(NULL, online)) {
		for (int i = 0; i < online->n; i++) {
			bool traced = false;

			for (int j = 0; j < kt->cpus.n && !traced; j++)
				traced = kt->cpus.cpu[j] == online->cpu[i];
			if (!traced && online->cpu[i] < CPU_SETSIZE)
				CPU_SET(online->cpu[i], &set);
		}
	}
	free(online);
	if (CPU_COUNT(&set))
		(void)sched_setaffinity(0, sizeof(set), &set);
	(void)sched_setscheduler(0, SCHED_OTHER, &other);
}

int ktracer_thread_open(struct ktracer *kt, const struct mthread *t, struct ktracer_thread *s)
{
	char path[sizeof(kt->inst.path) + 48];
	int fd;

	snprintf(path, sizeof(path), "%s/per_cpu/cpu%d/trace_pipe", kt->inst.path, t->cpu);
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
		return -errno;
	if (!(s->buf = malloc(STREAM_BUF_BYTES))) {
		(void)close(fd);
		return -ENOMEM;
	}
	s->fd = fd;
	s->len = 0;
	s->opened = true;
	return 0;
}

int ktracer_thread_setup(struct ktracer *kt, struct mthread *t, struct ktracer_thread *s, char *err,
			 size_t errlen)
{
	const char *name = ktracer_name(kt->kind);
	struct policy_spec mine;
	char comm[32], why[240];
	int rc;

	s->joined = true;
	if ((rc = ktracer_join(kt, err, errlen)))
		return rc;
	if ((rc = ktracer_thread_open(kt, t, s))) {
		snprintf(err, errlen,
			 "--tracer %s: cannot read per_cpu/cpu%d/trace_pipe of %s (%s)", name,
			 t->cpu, kt->inst.path, strerror(-rc));
		return rc;
	}
	snprintf(comm, sizeof(comm), "%s/%d", name, t->cpu);
	s->kthread = find_kthread(comm);
	/* the measured thread is the kernel's: it takes the policy asked for this one */
	if (!t->fallback && !policy_read(0, &mine)) {
		rc = -ESRCH;
		snprintf(why, sizeof(why), "the kernel thread %s was not found", comm);
		if (s->kthread)
			rc = policy_apply(&mine, s->kthread, why, sizeof(why));
		if (rc && !kt->allow_fallback) {
			snprintf(err, errlen, "--tracer %s: cannot set the policy of %s: %s", name,
				 comm, why);
			return rc == -EINVAL ? -EPERM : rc;
		}
		if (rc) {
			t->fallback = true;
			snprintf(t->setup_err, sizeof(t->setup_err),
				 "%s: %s keeps the kernel's policy", why, comm);
		}
	}
	s->kpolicy_known = s->kthread && !policy_read(s->kthread, &s->kpolicy);
	t->measured_tid = s->kthread; /* its policy and affinity are read back at the end */
	move_off_traced_cpus(kt);
	return 0;
}

static void record(const struct ktracer *kt, struct mthread *t, struct ktracer_thread *s,
		   const struct ktracer_line *l)
{
	/* series slots count from the thread's start: never before it */
	int64_t now = kt->mono_clock ? l->ts_ns : mono_now_ns();

	if (now < t->start_ns)
		now = t->start_ns;
	if (l->kind == KTRACER_OSNOISE && kt->kind == KTRACER_OSNOISE) {
		sample_record(t, l->max_single_ns, MT_GET(t, count), now);
		s->periods++;
		s->runtime_ns += l->runtime_ns;
		s->noise_ns += l->noise_ns;
		s->hw += l->hw;
		s->nmi += l->nmi;
		s->irqs += l->irq;
		s->softirqs += l->softirq;
		s->threads += l->thread;
	} else if (l->kind == KTRACER_TIMERLAT && kt->kind == KTRACER_TIMERLAT) {
		if (l->context == KTRACER_CTX_THREAD) {
			sample_record(t, l->latency_ns, MT_GET(t, count), now);
			if (l->latency_ns >= t->period_ns)
				t->overruns++; /* as the wakeup meter counts them */
		} else {
			nstat_add(l->context == KTRACER_CTX_IRQ ? &s->irq : &s->user_ret,
				  l->latency_ns);
		}
	} else {
		s->other_lines++;
	}
}

/* Record the complete lines in the buffer; true when --loops is reached. */
static bool consume(const struct ktracer *kt, struct mthread *t, struct ktracer_thread *s,
		    const struct run_ctl *ctl)
{
	struct ktracer_line l;
	char *p = s->buf, *nl;
	bool done = false;

	s->buf[s->len] = '\0';
	while (!done && (nl = memchr(p, '\n', s->len - (size_t)(p - s->buf)))) {
		*nl = '\0';
		if (!ktracer_parse_line(p, &l))
			record(kt, t, s, &l);
		else if (*p)
			s->other_lines++;
		p = nl + 1;
		done = ctl->loops && MT_GET(t, count) >= ctl->loops;
	}
	s->len -= (size_t)(p - s->buf);
	memmove(s->buf, p, s->len);
	if (s->len == STREAM_BUF_BYTES - 1) { /* no line is this long: not the tracer's */
		s->other_lines++;
		s->len = 0;
	}
	return done;
}

/* A non-blocking trace_pipe never ends: tracing turned off (by someone else, or a stop
 * condition) shows as tracing_on 0. */
static bool tracing_off(const struct ktracer *kt)
{
	char on[16];

	return tracefs_read(&kt->inst, "tracing_on", on, sizeof(on)) > 0 && on[0] == '0';
}

void ktracer_thread_loop(struct ktracer *kt, struct mthread *t, struct ktracer_thread *s,
			 const struct run_ctl *ctl)
{
	const struct timespec idle = ns_to_ts(STREAM_IDLE_NS);
	int64_t heard_ns;
	ssize_t got;

	if ((s->read_errno = -ktracer_begin_once(kt)))
		return;
	heard_ns = t->start_ns = mono_now_ns();
	if (s->kpolicy_known)
		t->policy = s->kpolicy; /* the measured thread is the kernel's */
	while (!run_should_stop(ctl, MT_GET(t, count), mono_now_ns() - t->start_ns)) {
		got = read(s->fd, s->buf + s->len, STREAM_BUF_BYTES - 1 - s->len);
		if (got > 0) {
			s->len += (size_t)got;
			heard_ns = mono_now_ns();
			if (consume(kt, t, s, ctl))
				break;
		} else if (got == 0) { /* a recorded file ended (a real pipe says EAGAIN) */
			s->ended = true;
			break;
		} else if (errno == EAGAIN) {
			if (mono_now_ns() - heard_ns >= STREAM_ON_CHECK_NS) {
				if ((s->ended = tracing_off(kt)))
					break;
				heard_ns = mono_now_ns();
			}
			(void)clock_nanosleep(CLOCK_MONOTONIC, 0, &idle, NULL);
		} else if (errno != EINTR) {
			s->read_errno = errno;
			break;
		}
	}
}

void ktracer_thread_teardown(struct ktracer *kt, const struct mthread *t, struct ktracer_thread *s)
{
	if (s->opened) {
		(void)close(s->fd);
		free(s->buf);
		s->buf = NULL;
		s->opened = false;
	}
	if (!s->joined)
		return;
	/* before leaving: the last one to leave removes the instance */
	s->lost_known = kt->inst.path[0] && !tracefs_cpu_lost(&kt->inst, t->cpu, &s->lost);
	s->joined = false;
	ktracer_leave(kt);
}

void ktracer_thread_json(struct jw *w, const struct ktracer *kt, const struct ktracer_thread *s)
{
	jw_key(w, ktracer_name(kt->kind));
	jw_obj_begin(w);
	jw_kstr(w, "source", "kernel tracer");
	jw_key(w, "kthread_pid");
	s->kthread ? jw_int(w, s->kthread) : jw_null(w);
	if (kt->kind == KTRACER_TIMERLAT) {
		nstat_json(w, "irq", &s->irq, false);
		nstat_json(w, "user_ret", &s->user_ret, true);
	} else {
		jw_kuint(w, "periods", s->periods);
		jw_kint(w, "runtime_ns", s->runtime_ns);
		jw_kint(w, "noise_ns", s->noise_ns);
		jw_key(w, "interference");
		jw_obj_begin(w);
		jw_kuint(w, "hw", s->hw);
		jw_kuint(w, "nmi", s->nmi);
		jw_kuint(w, "irq", s->irqs);
		jw_kuint(w, "softirq", s->softirqs);
		jw_kuint(w, "thread", s->threads);
		jw_obj_end(w);
	}
	jw_key(w, "events_lost");
	s->lost_known ? jw_uint(w, s->lost) : jw_null(w);
	jw_kuint(w, "other_lines", s->other_lines);
	jw_kbool(w, "stream_ended", s->ended);
	jw_key(w, "read_error");
	s->read_errno ? jw_str(w, strerror(s->read_errno)) : jw_null(w);
	jw_obj_end(w);
}

/* TEXT without trailing whitespace, written as a JSON string. */
static void text_json(struct jw *w, const char *key, const char *text)
{
	char buf[KTRACER_VALUE_MAX];
	size_t n = strlen(text);

	while (n && isspace((unsigned char)text[n - 1]))
		n--;
	snprintf(buf, sizeof(buf), "%.*s", (int)n, text);
	jw_kstr(w, key, buf);
}

void ktracer_doc_json(struct jw *w, const struct ktracer_opt *o)
{
	const struct ktracer *kt = o->kt;

	jw_key(w, "tracer");
	jw_obj_begin(w);
	jw_kstr(w, "requested", o->name);
	jw_kstr(w, "used", kt ? ktracer_name(kt->kind) : "user");
	jw_key(w, "reason");
	o->reason[0] ? jw_str(w, o->reason) : jw_null(w);
	if (kt) {
		jw_kint(w, kt->kind == KTRACER_TIMERLAT ? "timerlat_period_us" : "period_us",
			kt->period_us);
		if (kt->kind == KTRACER_OSNOISE) {
			jw_key(w, "threshold_ns");
			kt->threshold_ns >= 0 ? jw_int(w, kt->threshold_ns) : jw_null(w);
		}
		jw_kbool(w, "trace_clock_mono", kt->mono_clock);
		jw_key(w, "settings"); /* the osnoise/ files the run changed, in that order */
		jw_arr_begin(w);
		for (int i = 0; i < kt->nknobs; i++) {
			jw_obj_begin(w);
			jw_kstr(w, "file", kt->knob[i].file);
			text_json(w, "found", kt->knob[i].found);
			text_json(w, "set", kt->knob[i].set);
			jw_kbool(w, "restored", kt->knob[i].restored);
			jw_obj_end(w);
		}
		jw_arr_end(w);
	}
	jw_obj_end(w);
}
