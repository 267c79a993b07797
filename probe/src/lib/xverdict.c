/* The verdict of an explained spike: its main cause in words (xattr.h). */
#include <stdio.h>
#include <string.h>

#include "xattr.h"

/* "412 µs", "1.80 ms" */
static void fmt_ns(int64_t ns, char *buf, size_t len)
{
	if (ns < 10000)
		snprintf(buf, len, "%.1f µs", (double)ns / 1e3);
	else if (ns < 1000000)
		snprintf(buf, len, "%.0f µs", (double)ns / 1e3);
	else
		snprintf(buf, len, "%.2f ms", (double)ns / 1e6);
}

const char *xspike_unexpl_task(const struct xspike *x, int64_t *ns, int32_t *pid)
{
	int best = -1;

	for (int i = 0; i < XUNEXPL_CTX; i++)
		if (x->unexpl_ctx[i].ns &&
		    (best < 0 || x->unexpl_ctx[i].ns > x->unexpl_ctx[best].ns))
			best = i;
	*ns = best < 0 ? 0 : x->unexpl_ctx[best].ns;
	*pid = best < 0 ? -1 : x->unexpl_ctx[best].pid;
	return best < 0 ? NULL : x->unexpl_ctx[best].comm;
}

void xspike_verdict(struct xspike *x)
{
	const struct xcause *c = x->ncauses ? &x->causes[0] : NULL;
	char d[32], pol[40] = "";
	const char *task;
	int64_t task_ns;
	int32_t task_pid;
	int n;

	if (!c || x->unexplained_ns > c->ns) {
		fmt_ns(x->unexplained_ns, d, sizeof(d));
		task = xspike_unexpl_task(x, &task_ns, &task_pid);
		if (x->unexplained_idle_ns * 2 >= x->unexplained_ns)
			n = snprintf(
				x->verdict, sizeof(x->verdict),
				"no event for %s while the CPU was idle: CPU not available to the "
				"kernel (hypervisor or SMI) or a slow idle-state exit",
				d);
		else if (task && task_pid == x->tid)
			n = snprintf(
				x->verdict, sizeof(x->verdict),
				"no event for %s while the measuring thread was switched in: CPU "
				"not available to the kernel (hypervisor or SMI) or interrupts off",
				d);
		else if (task)
			n = snprintf(
				x->verdict, sizeof(x->verdict),
				"no event for %s while `%s` ran: interrupts off or non-preemptible "
				"kernel code, an SMI or the hypervisor",
				d, task);
		else
			n = snprintf(
				x->verdict, sizeof(x->verdict),
				"no event for %s: CPU not available to the kernel (hypervisor or "
				"SMI) or interrupts off",
				d);
	} else {
		fmt_ns(c->ns, d, sizeof(d));
		switch (c->kind) {
		case XK_THREAD:
			if (c->policy[0] && c->priority_known)
				snprintf(pol, sizeof(pol), ", %s %s%d", c->policy,
					 strcmp(c->policy, "fifo") && strcmp(c->policy, "rr")
						 ? "nice "
						 : "",
					 (int)c->priority);
			else if (c->policy[0])
				snprintf(pol, sizeof(pol), ", %s", c->policy);
			n = snprintf(x->verdict, sizeof(x->verdict),
				     "thread `%s` (PID %d%s) ran %s%s%s", c->name, (int)c->id, pol,
				     d, c->work[0] ? " running work " : "", c->work);
			break;
		case XK_IRQ:
			n = snprintf(x->verdict, sizeof(x->verdict), "IRQ %d %s handler %s",
				     (int)c->id, c->name, d);
			break;
		case XK_VECTOR:
			n = snprintf(x->verdict, sizeof(x->verdict), "%s interrupt %s", c->name, d);
			break;
		case XK_SOFTIRQ:
			n = snprintf(x->verdict, sizeof(x->verdict), "softirq %s %s", c->name, d);
			break;
		case XK_TIMER:
			n = snprintf(x->verdict, sizeof(x->verdict), "hrtimer callback %s %s",
				     c->name, d);
			break;
		case XK_SLACK:
			n = snprintf(x->verdict, sizeof(x->verdict),
				     "timer slack %s: the kernel may run the timer that long after "
				     "the time asked for (the thread's timer_slack_ns; none for "
				     "real-time policies)",
				     d);
			break;
		default:
			n = snprintf(x->verdict, sizeof(x->verdict), "%s %s", c->name, d);
			break;
		}
	}
	if (x->events_lost && n > 0 && (size_t)n < sizeof(x->verdict))
		snprintf(x->verdict + n, sizeof(x->verdict) - (size_t)n,
			 " (trace events were lost in this window)");
}
