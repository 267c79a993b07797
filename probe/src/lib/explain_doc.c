/* The document's "explain" and "spikes", and `rtlab-probe explain --cleanup`. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "explain.h"
#include "explain_priv.h"
#include "kjournal.h"
#include "jsonw.h"
#include "probe.h"
#include "run.h"
#include "timeutil.h"

/* "a:b,c:d" as a JSON array of strings. */
static void list_json(struct jw *w, const char *key, const char *list)
{
	char item[EVENTS_TEXT];

	jw_key(w, key);
	jw_arr_begin(w);
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, ",");

		snprintf(item, sizeof(item), "%.*s", (int)n, p);
		jw_str(w, item);
		p += n + (p[n] == ',');
	}
	jw_arr_end(w);
}

static void rel_or_null(struct jw *w, const char *key, int64_t v)
{
	jw_key(w, key);
	v >= 0 ? jw_int(w, v) : jw_null(w);
}

void explain_json(struct jw *w, const struct run *r)
{
	const struct explain *x = r->explain;
	uint64_t marked = 0, failed = 0;

	if (!x) {
		jw_null(w);
		return;
	}
	for (int i = 0; i < x->nthreads; i++) {
		marked += x->th[i].marked;
		failed += x->th[i].failed;
	}
	jw_obj_begin(w);
	jw_kstr(w, "status", x->unavailable ? "unavailable" : "ok");
	jw_key(w, "reason");
	x->unavailable ? jw_str(w, x->reason) : jw_null(w);
	jw_kint(w, "threshold_ns", x->threshold_ns);
	jw_kint(w, "max_spikes", x->max);
	jw_kint(w, "lookback_ns", NSEC_PER_MSEC);
	jw_key(w, "instance");
	x->instance[0] ? jw_str(w, x->instance) : jw_null(w);
	jw_key(w, "trace_clock");
	x->clock[0] ? jw_str(w, x->clock) : jw_null(w);
	list_json(w, "events", x->events);
	list_json(w, "missing_events", x->missing);
	jw_key(w, "cpus");
	jw_arr_begin(w);
	for (int i = 0; i < x->ncpus && !x->unavailable; i++)
		jw_int(w, x->cpus[i].cpu);
	jw_arr_end(w);
	jw_kuint(w, "marked", marked);
	jw_kuint(w, "marks_failed", failed);
	jw_kuint(w, "marks_read", x->markers_seen);
	jw_kuint(w, "lost_events", x->lost_events);
	jw_key(w, "stacks");
	jw_obj_begin(w);
	jw_kbool(w, "recorded", x->stacks_recorded);
	jw_key(w, "trigger");
	x->stacks_recorded ? jw_str(w, "timer:hrtimer_expire_entry") : jw_null(w);
	jw_key(w, "reason");
	x->stacks_recorded
		? jw_null(w)
		: jw_str(w, x->stacks_off[0] ? x->stacks_off : "--explain is unavailable");
	jw_kuint(w, "read", x->stacks_read);
	jw_obj_end(w);
	jw_obj_end(w);
}

/* Why spike S has no stack of its main cause. */
static const char *stack_why(const struct explain *x, const struct xspike *s)
{
	switch (s->stack_why) {
	case XSW_OFF:
		return x->stacks_off[0] ? x->stacks_off : "stacks were not recorded";
	case XSW_IDLE:
		return "the main cause is time while the CPU was idle: no code held it";
	case XSW_NO_EVENT:
		return "no timer interrupt stopped the main cause in the window (stacks are taken "
		       "at the timer interrupt)";
	case XSW_REMOTE:
		return "no interrupt on this CPU stopped the main cause: the measuring thread was "
		       "woken from another CPU (its timer expired there, e.g. moved off a "
		       "nohz_full CPU while kernel.timer_migration is 1, or another thread woke it)";
	case XSW_NO_STACK:
		return s->events_lost ? "the timer interrupt that stopped the main cause came "
					"without a stack (trace events were lost)"
				      : "the timer interrupt that stopped the main cause came "
					"without a stack";
	case XSW_LOST:
		return "the stack was overwritten before the spike was explained";
	default:
		return "unknown";
	}
}

static void stack_json(struct jw *w, const struct explain *x, const struct xspike *s)
{
	bool have = s->stack_why == XSW_OK && s->stack.nframes > 0;

	jw_key(w, "cause_stack");
	if (have) {
		jw_arr_begin(w);
		for (int i = 0; i < s->stack.nframes; i++)
			jw_str(w, xstack_frame_at(&s->stack, i));
		jw_arr_end(w);
	} else {
		jw_null(w);
	}
	rel_or_null(w, "cause_stack_at_ns", have ? s->stack_at_ns : -1);
	jw_kbool(w, "cause_stack_truncated", have && s->stack.truncated);
	jw_key(w, "cause_stack_unavailable");
	if (have)
		jw_null(w);
	else
		jw_str(w, s->stack_why == XSW_OK ? "the stack had no frame" : stack_why(x, s));
}

static void cause_json(struct jw *w, const struct xcause *c)
{
	jw_obj_begin(w);
	jw_kstr(w, "kind", xkind_cause_name(c->kind));
	jw_kstr(w, "name", c->name);
	jw_kint(w, "ns", c->ns);
	if (c->kind == XK_THREAD) {
		jw_kint(w, "pid", c->id);
		jw_key(w, "policy");
		c->policy[0] ? jw_str(w, c->policy) : jw_null(w);
		jw_key(w, "priority");
		c->priority_known ? jw_int(w, c->priority) : jw_null(w);
		if (c->work[0])
			jw_kstr(w, "work", c->work);
	} else if (c->kind == XK_IRQ) {
		jw_kint(w, "irq", c->id);
	} else if (c->kind == XK_VECTOR) {
		jw_kstr(w, "vector", c->name);
	}
	jw_obj_end(w);
}

static void segment_json(struct jw *w, const struct xseg *g)
{
	jw_obj_begin(w);
	jw_kint(w, "start_ns", g->start_ns);
	jw_kint(w, "end_ns", g->end_ns);
	jw_kstr(w, "kind", xkind_seg_name(g->kind));
	jw_kstr(w, "name", g->kind == XK_UNKNOWN ? "?" : g->name);
	if (g->kind == XK_THREAD || g->kind == XK_SELF)
		jw_kint(w, "pid", g->id);
	else if (g->kind == XK_IRQ)
		jw_kint(w, "irq", g->id);
	jw_obj_end(w);
}

static void spike_json(struct jw *w, const struct run *r, const struct xspike *s)
{
	const struct explain *x = r->explain;
	const struct mthread *t = &r->th[s->m.thread];

	jw_obj_begin(w);
	jw_kint(w, "thread", s->m.thread);
	jw_kint(w, "cpu", s->cpu);
	jw_kuint(w, "cycle", s->m.cycle);
	jw_kint(w, "latency_ns", s->m.lat_ns);
	jw_kint(w, "t_ns", s->m.act_ns - t->start_ns);
	jw_kint(w, "lookback_ns", s->lookback_ns);
	jw_kstr(w, "verdict", s->verdict);
	jw_key(w, "causes");
	jw_arr_begin(w);
	for (int i = 0; i < s->ncauses; i++)
		cause_json(w, &s->causes[i]);
	jw_arr_end(w);
	jw_kint(w, "unexplained_ns", s->unexplained_ns);
	jw_kint(w, "unexplained_idle_ns", s->unexplained_idle_ns);
	rel_or_null(w, "woken_ns", s->woken_ns);
	rel_or_null(w, "switched_in_ns", s->switched_ns);
	jw_kbool(w, "events_lost", s->events_lost);
	jw_kbool(w, "window_truncated", s->truncated);
	jw_kbool(w, "timeline_dropped", s->seg_dropped);
	stack_json(w, x, s);
	jw_key(w, "timeline");
	jw_arr_begin(w);
	for (int i = 0; i < s->nseg; i++)
		segment_json(w, &s->seg[i]);
	jw_arr_end(w);
	jw_obj_end(w);
}

static int by_latency(const void *a, const void *b)
{
	const struct xspike *x = a, *y = b;

	return x->m.lat_ns < y->m.lat_ns   ? 1
	       : x->m.lat_ns > y->m.lat_ns ? -1
	       : x->m.cycle > y->m.cycle   ? 1
	       : x->m.cycle < y->m.cycle   ? -1
					   : 0;
}

void explain_spikes_json(struct jw *w, const struct run *r)
{
	struct explain *x = r->explain;

	jw_arr_begin(w);
	if (x && x->nkept) {
		qsort(x->kept, (size_t)x->nkept, sizeof(x->kept[0]), by_latency);
		for (int i = 0; i < x->nkept; i++)
			spike_json(w, r, &x->kept[i]);
	}
	jw_arr_end(w);
}

static void cmd_usage(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe explain --cleanup\n\n"
		"Remove the tracefs instances (instances/rtlab-PID) that runs killed before they\n"
		"could remove their own (e.g. by SIGKILL), then put back the osnoise/ settings a\n"
		"killed --tracer run left changed (its journal, in $RTLAB_STATE or /run/rtlab).\n"
		"Instances and settings of live processes and every other instance are left\n"
		"alone. Meters take --explain THRESH to explain spikes.\n");
}

int explain_cmd(int argc, char **argv)
{
	struct tracefs fs;
	char err[300];
	int removed = 0, rc;
	pid_t owner;

	if (argc == 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
		cmd_usage(stdout);
		return EXIT_OK;
	}
	if (argc != 1 || strcmp(argv[0], "--cleanup")) {
		fprintf(stderr, "rtlab-probe explain: %s\n",
			argc ? "unknown option (only --cleanup)" : "what to do? (--cleanup)");
		return EXIT_USAGE;
	}
	if (tracefs_open(&fs, false, err, sizeof(err))) {
		printf("tracefs is not mounted: no instance to remove\n");
		return EXIT_OK;
	}
	if ((rc = tracefs_remove_stale(&fs, &removed))) {
		fprintf(stderr, "rtlab-probe explain: cannot clean %s/instances (%s)\n", fs.root,
			strerror(-rc));
		return EXIT_UNSUPPORTED;
	}
	printf("removed %d stale tracefs instance%s\n", removed, removed == 1 ? "" : "s");
	/* after the instances: a killed run's tracer stops before its settings go back */
	rc = kjournal_recover(fs.root, &removed, &owner, err, sizeof(err));
	if (rc == -EBUSY) {
		printf("osnoise/ settings left alone: %s\n", err);
	} else if (rc) {
		fprintf(stderr, "rtlab-probe explain: %s\n", err);
		return rc == -EINVAL ? EXIT_USAGE : EXIT_UNSUPPORTED;
	} else if (removed >= 0) {
		printf("put back %d osnoise/ setting%s of the killed run %d\n", removed,
		       removed == 1 ? "" : "s", (int)owner);
	}
	return EXIT_OK;
}
