#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conditions.h"
#include "cpulist.h"
#include "irqstat.h"
#include "jsonw.h"
#include "kmsg.h"
#include "run.h"

#define STATUS_READ_MAX (64 * 1024) /* bytes of /proc/self/status read */
#define ERROR_MAX 200

struct cond_thread {
	pid_t tid;          /* the thread read back: the measured one */
	int rc;             /* 0, or -errno of the read that failed */
	const char *failed; /* the call that failed */
	struct policy_spec policy;
	char cpus[1001]; /* sched_getaffinity as a CPU list, cut at 1000 bytes */
};

struct conditions {
	int ncpus; /* followed: the threads' CPUs, at most IRQSTAT_CPUS_MAX */
	int cpu[IRQSTAT_CPUS_MAX];
	struct irq_table irq0, irq1;
	char irq_error[ERROR_MAX];
	struct kmsg_capture kmsg;
	int nthreads;
	struct cond_thread *thr;
	char applied_error[ERROR_MAX];
	int64_t vm_lck_kb, vm_rss_kb; /* -1: not read */
	bool dma_read;
	int32_t dma_us;
};

/* The CPUs the measuring threads run on: theirs when pinned, else every online CPU their
 * affinity allows (threads alive at the start barrier). */
static void measured_cpus(const struct run *r, struct conditions *c)
{
	cpu_set_t all, one;
	bool any = false;

	CPU_ZERO(&all);
	for (int i = 0; i < r->nthreads; i++) {
		if (r->th[i].cpu >= 0) {
			CPU_SET(r->th[i].cpu, &all);
			any = true;
		} else if (!sched_getaffinity(r->th[i].tid, sizeof(one), &one)) {
			CPU_OR(&all, &all, &one);
			any = true;
		}
	}
	for (int i = 0; any && i < r->online.n && c->ncpus < IRQSTAT_CPUS_MAX; i++)
		if (r->online.cpu[i] < CPU_SETSIZE && CPU_ISSET(r->online.cpu[i], &all))
			c->cpu[c->ncpus++] = r->online.cpu[i];
}

static void irq_read(struct conditions *c, struct irq_table *t)
{
	int rc;

	if (c->irq_error[0])
		return;
	rc = irqstat_read(NULL, c->cpu, c->ncpus, t);
	if (rc)
		snprintf(c->irq_error, sizeof(c->irq_error), "%s: %s", IRQSTAT_PATH,
			 rc == -EINVAL ? "no CPU header" : strerror(-rc));
}

void conditions_start(struct run *r)
{
	struct conditions *c = calloc(1, sizeof(*c));

	if (!c || !(c->thr = calloc((size_t)r->nthreads, sizeof(*c->thr)))) {
		free(c);
		return; /* no evidence, "conditions": null; the run goes on */
	}
	c->nthreads = r->nthreads;
	c->vm_lck_kb = c->vm_rss_kb = -1;
	for (int i = 0; i < c->nthreads; i++)
		c->thr[i].failed = "not read";
	measured_cpus(r, c);
	irq_read(c, &c->irq0);
	kmsg_begin(&c->kmsg, NULL);
	r->cond = c;
}

void conditions_thread_end(struct run *r, struct mthread *t)
{
	struct conditions *c = r->cond;
	struct cond_thread *ct;
	struct cpulist l;
	cpu_set_t set;

	if (!c || t->index >= c->nthreads)
		return;
	ct = &c->thr[t->index];
	ct->failed = NULL;
	/* With a kernel tracer the kernel's thread measures; this one only reads its trace. */
	ct->tid = t->measured_tid ? t->measured_tid : t->tid;
	if ((ct->rc = policy_read(t->measured_tid, &ct->policy))) {
		ct->failed = "sched_getattr";
		return;
	}
	if (sched_getaffinity(t->measured_tid, sizeof(set), &set)) {
		ct->rc = -errno;
		ct->failed = "sched_getaffinity";
		return;
	}
	cpulist_from_set(&set, &l);
	cpulist_format(&l, ct->cpus, sizeof(ct->cpus));
}

/* "KEY:   1234 kB" of /proc/self/status, or -1. */
static int64_t status_kb(const char *text, const char *key)
{
	size_t n = strlen(key);
	long long v;

	for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, n) && sscanf(p + n, " %lld kB", &v) == 1)
			return v;
	return -1;
}

static void read_memory(struct conditions *c)
{
	char *buf = malloc(STATUS_READ_MAX + 1);
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	size_t n = 0;
	ssize_t got;

	if (!buf || fd < 0) {
		snprintf(c->applied_error, sizeof(c->applied_error), "/proc/self/status: %s",
			 strerror(buf ? errno : ENOMEM));
		goto out;
	}
	while (n < STATUS_READ_MAX &&
	       ((got = read(fd, buf + n, STATUS_READ_MAX - n)) > 0 || (got < 0 && errno == EINTR)))
		n += got > 0 ? (size_t)got : 0;
	buf[n] = '\0';
	c->vm_lck_kb = status_kb(buf, "VmLck:");
	c->vm_rss_kb = status_kb(buf, "VmRSS:");
	if (c->vm_lck_kb < 0 || c->vm_rss_kb < 0)
		snprintf(c->applied_error, sizeof(c->applied_error),
			 "/proc/self/status: no VmLck or VmRSS");
out:
	if (fd >= 0)
		(void)close(fd);
	free(buf);
}

/* The effective CPU latency target (the smallest request held): the kernel's
 * cpu_latency_qos_read returns it as an s32 through the request's own fd. */
static void read_dma(const struct run *r, struct conditions *c)
{
	if (!r->c.dma_latency_set || r->dma_fd < 0)
		return;
	if (pread(r->dma_fd, &c->dma_us, sizeof(c->dma_us), 0) == (ssize_t)sizeof(c->dma_us))
		c->dma_read = true;
	else if (!c->applied_error[0])
		snprintf(c->applied_error, sizeof(c->applied_error),
			 "/dev/cpu_dma_latency: cannot read the held value (%s)", strerror(errno));
}

void conditions_end(struct run *r)
{
	struct conditions *c = r->cond;

	if (!c)
		return;
	irq_read(c, &c->irq1);
	kmsg_end(&c->kmsg);
	read_memory(c);
	read_dma(r, c);
	for (int i = 0; i < c->nthreads && !c->applied_error[0]; i++)
		if (c->thr[i].failed)
			snprintf(c->applied_error, sizeof(c->applied_error), "thread %d: %s: %s", i,
				 c->thr[i].failed,
				 c->thr[i].rc ? strerror(-c->thr[i].rc) : "the thread never ran");
}

static void error_json(struct jw *w, const char *e)
{
	jw_key(w, "error");
	e &&e[0] ? jw_str(w, e) : jw_null(w);
}

static void cpu_json(struct jw *w, const struct conditions *c, const struct irq_cpu_delta *d)
{
	jw_obj_begin(w);
	jw_kint(w, "cpu", d->cpu);
	jw_kuint(w, "total", d->total);
	jw_key(w, "timer");
	if (d->timer_name) {
		jw_obj_begin(w);
		jw_kstr(w, "name", d->timer_name);
		jw_kuint(w, "count", d->timer);
		jw_obj_end(w);
	} else {
		jw_null(w);
	}
	jw_key(w, "irqs");
	jw_arr_begin(w);
	for (int k = 0; k < d->ntop; k++) {
		const struct irq_row *row = &c->irq1.row[d->top[k].row];

		jw_obj_begin(w);
		jw_kstr(w, "irq", row->label);
		jw_kstr(w, "name", row->name);
		jw_kbool(w, "device", irqstat_device(&c->irq1, d->top[k].row, d));
		jw_kuint(w, "count", d->top[k].count);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_obj_end(w);
}

static void interrupts_json(struct jw *w, const struct conditions *c)
{
	struct irq_cpu_delta d;
	bool ok = !c->irq_error[0];

	jw_obj_begin(w);
	error_json(w, c->irq_error);
	jw_key(w, "elapsed_ns");
	ok ? jw_int(w, c->irq1.t_ns - c->irq0.t_ns) : jw_null(w);
	jw_kbool(w, "truncated", c->irq0.truncated || c->irq1.truncated);
	jw_key(w, "per_cpu");
	jw_arr_begin(w);
	for (int i = 0; ok && i < c->ncpus; i++)
		if (irqstat_delta(&c->irq0, &c->irq1, i, &d))
			cpu_json(w, c, &d);
	jw_arr_end(w);
	jw_obj_end(w);
}

static void kmsg_json(struct jw *w, const struct kmsg_capture *k)
{
	jw_obj_begin(w);
	error_json(w, k->error);
	jw_key(w, "messages");
	jw_arr_begin(w);
	for (int i = 0; i < k->n; i++) {
		jw_obj_begin(w);
		jw_kuint(w, "t_us", k->rec[i].t_us);
		jw_kint(w, "level", k->rec[i].level);
		jw_kint(w, "facility", k->rec[i].facility);
		jw_kstr(w, "text", k->rec[i].text);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	jw_kuint(w, "lost", k->lost);
	jw_obj_end(w);
}

static void opt_kb(struct jw *w, const char *key, int64_t v)
{
	jw_key(w, key);
	v >= 0 ? jw_int(w, v) : jw_null(w);
}

static void applied_json(struct jw *w, const struct run *r, const struct conditions *c)
{
	char pol[96];

	jw_obj_begin(w);
	error_json(w, c->applied_error);
	jw_key(w, "threads");
	jw_arr_begin(w);
	for (int i = 0; i < c->nthreads; i++) {
		const struct cond_thread *ct = &c->thr[i];

		jw_obj_begin(w);
		jw_kint(w, "index", i);
		jw_kint(w, "tid", ct->tid ? ct->tid : r->th[i].tid);
		policy_format(&ct->policy, pol, sizeof(pol));
		jw_key(w, "policy");
		ct->failed ? jw_null(w) : jw_str(w, pol);
		jw_key(w, "cpus_allowed");
		ct->failed ? jw_null(w) : jw_str(w, ct->cpus);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	opt_kb(w, "vm_locked_kb", c->vm_lck_kb);
	opt_kb(w, "vm_rss_kb", c->vm_rss_kb);
	jw_key(w, "dma_latency_us");
	c->dma_read ? jw_int(w, c->dma_us) : jw_null(w);
	jw_obj_end(w);
}

void conditions_json(struct jw *w, const struct run *r)
{
	const struct conditions *c = r->cond;

	if (!c) {
		jw_null(w);
		return;
	}
	jw_obj_begin(w);
	jw_key(w, "interrupts");
	interrupts_json(w, c);
	jw_key(w, "kmsg");
	kmsg_json(w, &c->kmsg);
	jw_key(w, "applied");
	applied_json(w, r, c);
	jw_obj_end(w);
}

void conditions_free(struct run *r)
{
	struct conditions *c = r->cond;

	if (!c)
		return;
	irqstat_free(&c->irq0);
	irqstat_free(&c->irq1);
	kmsg_free(&c->kmsg);
	free(c->thr);
	free(c);
	r->cond = NULL;
}
