#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xattr.h"

int xring_init(struct xring *r, uint32_t cap)
{
	memset(r, 0, sizeof(*r));
	r->ev = calloc(cap, sizeof(*r->ev));
	if (!r->ev)
		return -ENOMEM;
	r->cap = cap;
	r->evicted_ts = INT64_MIN;
	r->last_ts = INT64_MIN;
	return 0;
}

void xring_free(struct xring *r)
{
	free(r->ev);
	r->ev = NULL;
}

/* Copy SRC into DST of LEN bytes, truncated. */
static void scopy(char *dst, size_t len, const char *src)
{
	size_t n = strnlen(src, len - 1);

	memcpy(dst, src, n);
	dst[n] = '\0';
}

static void ctx_pop(struct xstate *s, uint8_t kind)
{
	for (int i = s->depth - 1; i >= 0; i--)
		if (s->ctx[i].kind == kind) {
			s->depth = i;
			return;
		}
}

/* Every event line names the task current on its CPU. Some switches are not traced
 * (e.g. out of the idle task on some kernels): a line naming another task than the
 * state's means the CPU switched after the previous event. */
static bool correct(struct xstate *s, int32_t pid, const char *comm)
{
	if (pid < 0 || (s->known && s->pid == pid))
		return false;
	s->known = true;
	s->pid = pid;
	s->prio = -1000;
	s->in_work = false;
	scopy(s->comm, sizeof(s->comm), comm);
	return true;
}

static void apply(struct xstate *s, const struct xev *e)
{
	static const uint8_t push_kind[] = {
		[XE_IRQ_IN] = XK_IRQ,    [XE_SOFT_IN] = XK_SOFTIRQ, [XE_HRT_IN] = XK_TIMER,
		[XE_VEC_IN] = XK_VECTOR, [XE_IPI_IN] = XK_VECTOR,
	};

	(void)correct(s, e->cur_pid, e->cur_comm);
	switch (e->type) {
	case XE_SWITCH:
		s->known = true;
		s->pid = e->pid;
		s->prio = e->num;
		scopy(s->comm, sizeof(s->comm), e->name);
		s->depth = 0; /* no task switch inside an interrupt */
		s->in_work = false;
		return;
	case XE_IRQ_IN:
	case XE_SOFT_IN:
	case XE_HRT_IN:
	case XE_VEC_IN:
	case XE_IPI_IN:
		if (s->depth < XCTX_MAX) {
			struct xctx *c = &s->ctx[s->depth++];

			c->kind = push_kind[e->type];
			c->num = e->type == XE_IPI_IN ? -1 : e->num;
			if (e->type == XE_IPI_IN) {
				memcpy(c->name, "IPI ", 4);
				scopy(c->name + 4, sizeof(c->name) - 4, e->name);
			} else {
				scopy(c->name, sizeof(c->name), e->name);
			}
		}
		break;
	case XE_IRQ_OUT:
		ctx_pop(s, XK_IRQ);
		break;
	case XE_SOFT_OUT:
		ctx_pop(s, XK_SOFTIRQ);
		break;
	case XE_HRT_OUT:
		ctx_pop(s, XK_TIMER);
		break;
	case XE_VEC_OUT:
	case XE_IPI_OUT:
		ctx_pop(s, XK_VECTOR);
		break;
	case XE_WORK_IN:
		s->in_work = true;
		scopy(s->work, sizeof(s->work), e->name);
		break;
	case XE_WORK_OUT:
		s->in_work = false;
		break;
	default:
		break;
	}
}

void xring_push(struct xring *r, const struct xev *ev)
{
	struct xev *slot = &r->ev[r->head];

	if (r->n == r->cap) {
		apply(&r->base, slot);
		r->evicted_ts = slot->ts_ns;
	} else {
		r->n++;
	}
	*slot = *ev;
	if (ev->type == XE_LOST)
		slot->ts_ns = r->last_ts == INT64_MIN ? 0 : r->last_ts;
	else
		r->last_ts = ev->ts_ns;
	r->head = (r->head + 1) % r->cap;
}

bool xring_attach_stack(struct xring *r, int64_t ts_ns, uint32_t id)
{
	for (uint32_t k = 1; k <= r->n && k <= XSTACK_BACK; k++) {
		struct xev *e = &r->ev[(r->head + r->cap - k) % r->cap];

		if (e->type != XE_HRT_IN)
			continue;
		if (e->stack || ts_ns < e->ts_ns || ts_ns - e->ts_ns > XSTACK_ASSOC_NS)
			return false;
		e->stack = id;
		return true;
	}
	return false;
}

static const struct xev *ring_at(const struct xring *r, uint32_t i)
{
	return &r->ev[(r->head + r->cap - r->n + i) % r->cap];
}

const char *xkind_cause_name(uint8_t kind)
{
	switch (kind) {
	case XK_THREAD:
		return "thread";
	case XK_IRQ:
	case XK_VECTOR:
		return "irq";
	case XK_SOFTIRQ:
		return "softirq";
	case XK_TIMER:
		return "timer";
	default:
		return "other";
	}
}

const char *xkind_seg_name(uint8_t kind)
{
	static const char *const names[] = {
		[XK_THREAD] = "thread", [XK_SELF] = "self",       [XK_IDLE] = "idle",
		[XK_IRQ] = "irq",       [XK_VECTOR] = "irq",      [XK_SOFTIRQ] = "softirq",
		[XK_TIMER] = "timer",   [XK_UNKNOWN] = "unknown",
	};

	return kind <= XK_UNKNOWN ? names[kind] : "unknown";
}

/* The segment STATE stands for. */
static void seg_of(const struct xstate *s, pid_t tid, struct xseg *g)
{
	g->id = -1;
	g->name[0] = '\0';
	if (s->depth > 0) {
		const struct xctx *c = &s->ctx[s->depth - 1];

		g->kind = c->kind;
		g->id = c->num;
		scopy(g->name, sizeof(g->name), c->name);
	} else if (!s->known) {
		g->kind = XK_UNKNOWN;
	} else if (s->pid == 0) {
		g->kind = XK_IDLE;
		scopy(g->name, sizeof(g->name), s->comm);
	} else {
		g->kind = s->pid == tid ? XK_SELF : XK_THREAD;
		g->id = s->pid;
		scopy(g->name, sizeof(g->name), g->kind == XK_SELF ? "measuring thread" : s->comm);
	}
}

/* Policy and priority of PID from /proc (fields 19 nice, 40 rt_priority, 41 policy). */
static void read_policy(struct xcause *c)
{
	static const char *const names[] = { "other", "fifo", "rr",      "batch",
					     "iso",   "idle", "deadline" };
	char path[40], buf[1024], *p;
	long nice = 0, rtprio = 0, policy = -1;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)c->id);
	if (!(f = fopen(path, "re")))
		return;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	(void)fclose(f);
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')))
		return;
	p++;
	for (int field = 3; field <= 41 && p; field++) {
		p += strspn(p, " ");
		if (field == 19)
			nice = strtol(p, NULL, 10);
		else if (field == 40)
			rtprio = strtol(p, NULL, 10);
		else if (field == 41)
			policy = strtol(p, NULL, 10);
		p = strchr(p, ' ');
	}
	if (policy < 0 || policy > 6)
		return;
	scopy(c->policy, sizeof(c->policy), names[policy]);
	c->priority = (int32_t)(policy == 1 || policy == 2 ? rtprio : nice);
	c->priority_known = policy != 6;
}

static struct xcause *cause_get(struct xspike *x, uint8_t kind, int32_t id, const char *name)
{
	struct xcause *c;

	for (int i = 0; i < x->ncauses; i++) {
		c = &x->causes[i];
		if (c->kind == kind && c->id == id && !strcmp(c->name, name))
			return c;
	}
	if (x->ncauses == XCAUSE_MAX) /* the smallest one gives way: rare, many small causes */
		return &x->causes[XCAUSE_MAX - 1];
	c = &x->causes[x->ncauses++];
	memset(c, 0, sizeof(*c));
	c->kind = kind;
	c->id = id;
	scopy(c->name, sizeof(c->name), name);
	if (kind == XK_THREAD)
		read_policy(c);
	return c;
}

static void unexplained(struct xspike *x, const struct xstate *s, int64_t ns)
{
	int i;

	x->unexplained_ns += ns;
	if (s->known && s->pid == 0) {
		x->unexplained_idle_ns += ns;
		return;
	}
	if (!s->known)
		return;
	for (i = 0; i < XUNEXPL_CTX && x->unexpl_ctx[i].ns; i++)
		if (x->unexpl_ctx[i].pid == s->pid)
			break;
	if (i == XUNEXPL_CTX)
		return;
	x->unexpl_ctx[i].pid = s->pid;
	scopy(x->unexpl_ctx[i].comm, sizeof(x->unexpl_ctx[i].comm), s->comm);
	x->unexpl_ctx[i].ns += ns;
}

/* Attribute [A, B) (relative to the activation) spent in state S, segment G. */
static void attribute(struct xspike *x, const struct xstate *s, const struct xseg *g, int64_t a,
		      int64_t b)
{
	bool before_wake = x->woken_ns >= 0 && a < x->woken_ns;
	int64_t slack =
		x->woken_ns >= 0 && x->woken_ns < x->m.slack_ns ? x->woken_ns : x->m.slack_ns;
	struct xcause *c;

	if (before_wake && b > x->woken_ns) { /* straddles the wake-up: two parts */
		attribute(x, s, g, a, x->woken_ns);
		attribute(x, s, g, x->woken_ns, b);
		return;
	}
	if (a < slack && b > slack) { /* straddles the end of the slack */
		attribute(x, s, g, a, slack);
		attribute(x, s, g, slack, b);
		return;
	}
	switch (g->kind) {
	case XK_IRQ:
	case XK_VECTOR:
	case XK_SOFTIRQ:
	case XK_TIMER:
		cause_get(x, g->kind, g->id, g->name)->ns += b - a;
		return;
	}
	if (a < slack) { /* outside handlers, the timer was not due to fire yet */
		cause_get(x, XK_SLACK, -1, "timer slack")->ns += b - a;
		return;
	}
	switch (g->kind) {
	case XK_THREAD:
		if (before_wake)
			break;
		c = cause_get(x, XK_THREAD, g->id, g->name);
		c->ns += b - a;
		if (s->in_work && !c->work[0])
			scopy(c->work, sizeof(c->work), s->work);
		return;
	case XK_SELF: /* still running at its activation: an overrun of the previous cycle */
		if (!before_wake)
			break; /* woken and on its CPU: time without an event */
		cause_get(x, XK_SELF, -1, "measuring thread itself")->ns += b - a;
		return;
	default:
		break;
	}
	unexplained(x, s, b - a);
}

static void add_segment(struct xspike *x, const struct xseg *g)
{
	struct xseg *last = x->nseg ? &x->seg[x->nseg - 1] : NULL;

	if (g->end_ns <= g->start_ns)
		return;
	if (last && last->kind == g->kind && last->id == g->id && !strcmp(last->name, g->name)) {
		last->end_ns = g->end_ns;
		return;
	}
	if (x->nseg == XSEG_MAX) { /* keep the end, nearest the wake-up */
		memmove(&x->seg[0], &x->seg[1], (XSEG_MAX - 1) * sizeof(x->seg[0]));
		x->nseg--;
		x->seg_dropped = true;
	}
	x->seg[x->nseg++] = *g;
}

static int by_ns(const void *a, const void *b)
{
	const struct xcause *x = a, *y = b;

	return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

/* Trace timestamps are µs, truncated: an event may print up to this much early. */
#define ROUNDING_NS 2000

static int64_t clamp_rel(int64_t rel, int64_t lat)
{
	return rel < 0 ? 0 : rel > lat ? lat : rel;
}

struct xcand {
	struct xseg owner; /* what the timer interrupt stopped */
	uint32_t stack;
	int64_t at_ns; /* relative to the activation */
};

/* A timer interrupt stops what ran below its interrupt entry: the state S before its
 * hrtimer_expire_entry E, without the vector or IRQ context E runs in. */
static void add_cand(struct xcand *c, int *n, const struct xstate *s, const struct xev *e,
		     pid_t tid, int64_t at_ns)
{
	struct xstate o = *s;

	if (*n == XSTACK_CAND)
		return;
	if (o.depth > 0 &&
	    (o.ctx[o.depth - 1].kind == XK_VECTOR || o.ctx[o.depth - 1].kind == XK_IRQ))
		o.depth--;
	seg_of(&o, tid, &c[*n].owner);
	c[*n].stack = e->stack;
	c[*n].at_ns = at_ns;
	(*n)++;
}

/* The first interrupt that stopped the main cause (the verdict's), with its stack. */
static void pick_stack(struct xspike *x, const struct xcand *c, int n)
{
	const struct xcause *main = x->ncauses ? &x->causes[0] : NULL;
	const char *task = NULL;
	int64_t task_ns;
	int32_t pid = -1;

	x->stack_why = XSW_NO_EVENT;
	if (!main || x->unexplained_ns > main->ns) {
		main = NULL;
		task = xspike_unexpl_task(x, &task_ns, &pid);
		if (!task || x->unexplained_idle_ns * 2 >= x->unexplained_ns) {
			x->stack_why = XSW_IDLE;
			return;
		}
	}
	for (int i = 0; i < n; i++) {
		const struct xseg *g = &c[i].owner;
		bool match = main ? g->kind == main->kind &&
					     (g->kind == XK_SELF ||
					      (g->id == main->id && !strcmp(g->name, main->name)))
				  : (g->kind == XK_THREAD || g->kind == XK_SELF) && g->id == pid;

		if (!match)
			continue;
		if (!c[i].stack) {
			x->stack_why = XSW_NO_STACK;
			continue;
		}
		x->stack_why = XSW_OK;
		x->stack_id = c[i].stack;
		x->stack_at_ns = c[i].at_ns;
		return;
	}
}

void xattr_explain(const struct xring *r, const struct xmark *m, int cpu, pid_t tid,
		   int64_t offset_ns, int64_t lookback_ns, struct xspike *x)
{
	const int64_t act = m->act_ns + offset_ns; /* trace clock */
	const int64_t lo = act - lookback_ns, wake = act + m->lat_ns;
	struct xstate s = r->base;
	struct xcand cand[XSTACK_CAND];
	struct xseg g;
	int64_t cur = lo, self_since;
	uint32_t i = 0;
	int ncand = 0;

	memset(x, 0, sizeof(*x));
	x->m = *m;
	x->cpu = cpu;
	x->tid = tid;
	x->lookback_ns = lookback_ns;
	x->woken_ns = x->switched_ns = -1;
	x->truncated = r->evicted_ts >= lo;
	for (uint32_t k = 0; k < r->n; k++) { /* the wake-up of this activation */
		const struct xev *e = ring_at(r, k);
		int64_t rel = clamp_rel(e->ts_ns - act, m->lat_ns);

		if (e->ts_ns < lo || e->ts_ns > wake)
			continue;
		if (e->type == XE_LOST)
			x->events_lost = true;
		else if (e->ts_ns < act - ROUNDING_NS)
			continue; /* an earlier activation's */
		else if (e->type == XE_WAKING && e->pid == tid)
			x->woken_ns = rel;
	}
	for (; i < r->n && ring_at(r, i)->ts_ns < lo; i++)
		apply(&s, ring_at(r, i));
	self_since = s.known && s.pid == tid ? lo : INT64_MIN;
	for (;; i++) {
		const struct xev *e = i < r->n ? ring_at(r, i) : NULL;
		bool at_event = e && e->ts_ns <= wake;
		int64_t end = at_event ? e->ts_ns : wake;
		int64_t a, b;

		/* at the wake-up the measuring thread runs: its own line comes later; an event
		 * at the wake-up itself (the switch into it) names what ran until then */
		if (correct(&s, at_event ? e->cur_pid : tid, at_event ? e->cur_comm : ""))
			self_since = s.pid == tid ? cur : INT64_MIN;
		seg_of(&s, tid, &g);
		g.start_ns = cur - act;
		g.end_ns = end - act;
		add_segment(x, &g);
		a = g.start_ns > 0 ? g.start_ns : 0;
		b = g.end_ns;
		if (b > a)
			attribute(x, &s, &g, a, b);
		cur = end;
		if (end == wake) {
			if (at_event && e->type == XE_SWITCH && e->pid == tid)
				self_since = wake; /* switched in at the end of the window */
			break;
		}
		if (e->type == XE_HRT_IN && e->ts_ns >= act - ROUNDING_NS)
			add_cand(cand, &ncand, &s, e, tid, clamp_rel(e->ts_ns - act, m->lat_ns));
		apply(&s, e);
		if (e->type == XE_SWITCH)
			self_since = e->pid == tid ? e->ts_ns : INT64_MIN;
	}
	if (self_since != INT64_MIN)
		x->switched_ns = clamp_rel(self_since - act, m->lat_ns);
	qsort(x->causes, (size_t)x->ncauses, sizeof(x->causes[0]), by_ns);
	xspike_verdict(x);
	pick_stack(x, cand, ncand);
	/* no waking here: its timer expired (or its waker ran) on another CPU */
	if (x->stack_why == XSW_NO_EVENT && x->woken_ns < 0 && !x->events_lost && !x->truncated)
		x->stack_why = XSW_REMOTE;
}
