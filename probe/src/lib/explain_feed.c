/*
 * --explain for a meter that reads a trace of its own (sched): the explanation's events
 * and stack trigger go into the meter's instance, the meter hands over every line of its
 * merged trace_pipe and offers every sample; the same per-CPU rings, attribution and
 * "spikes" as with markers (explain.c), without a second instance or reader thread.
 */
#include <stdio.h>
#include <string.h>

#include "explain.h"
#include "explain_priv.h"
#include "run.h"

struct explain *explain_of(const struct mthread *t)
{
	const struct run *r = t->run;

	return r ? r->explain : NULL;
}

void explain_attach(struct explain *x, const struct tracefs_instance *inst)
{
	x->inst = *inst;
	snprintf(x->instance, sizeof(x->instance), "%s", strrchr(x->inst.path, '/') + 1);
	(void)explain_enable_events(x); /* the meter checked sched_switch itself */
}

void explain_detach(struct explain *x)
{
	explain_remove_stacks(x);
	x->inst.path[0] = '\0';
}

static struct xcpu *cpu_of(struct explain *x, int cpu)
{
	for (int i = 0; i < x->ncpus; i++)
		if (x->cpus[i].cpu == cpu)
			return &x->cpus[i];
	return NULL;
}

void explain_feed(struct explain *x, const char *line)
{
	const char *mark;
	struct xcpu *c;
	struct xev ev;
	int cpu;

	/* a stack's frame lines follow its "<stack trace>" line, without a CPU field */
	if (x->open && !xstacks_frame(&x->open->stacks, line))
		return;
	x->open = NULL;
	if (xtrace_parse(line, &ev, &cpu, &mark) || !(c = cpu_of(x, cpu)))
		return;
	explain_event(x, c, &ev, mark);
	if (ev.type == XE_STACK)
		x->open = c;
}

void explain_offer(struct explain *x, const struct explain_sample *s)
{
	struct xmark m = { s->thread,  s->cycle, s->act_ns, s->lat_ns, s->act_ns + s->lat_ns,
			   s->slack_ns };
	struct xcpu *c = cpu_of(x, s->cpu);

	if (!c || s->lat_ns <= x->threshold_ns || s->thread < 0 || s->thread >= x->nthreads)
		return;
	x->th[s->thread].marked++;
	x->markers_seen++;
	explain_one(x, c, &m, s->tid);
}
