/* Scheduling policy parse/apply/read-back via the raw sched_setattr syscalls. */
#include "policy.h"
#include "jsonw.h"
#include "timeutil.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SCHED_BATCH
#define SCHED_BATCH 3
#endif
#ifndef SCHED_IDLE
#define SCHED_IDLE 5
#endif

#define DL_MIN_RUNTIME_NS 1024 /* the kernel's 1 << DL_SCALE */

/* glibc 2.36 declares neither struct sched_attr nor sched_setattr() */
struct rtlab_sched_attr {
	uint32_t size;
	uint32_t sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime;  /* ns */
	uint64_t sched_deadline; /* ns */
	uint64_t sched_period;   /* ns */
	uint32_t sched_util_min;
	uint32_t sched_util_max;
};

#define SCHED_ATTR_SIZE_VER0 48 /* the fields up to sched_period, known to every kernel */

static const struct {
	const char *name;
	int policy;
} policies[] = {
	{ "other", SCHED_OTHER }, { "batch", SCHED_BATCH }, { "idle", SCHED_IDLE },
	{ "fifo", SCHED_FIFO },   { "rr", SCHED_RR },       { "deadline", SCHED_DEADLINE },
};

const char *policy_name(int policy)
{
	size_t i;

	for (i = 0; i < sizeof(policies) / sizeof(policies[0]); i++)
		if (policies[i].policy == policy)
			return policies[i].name;
	return "unknown";
}

static int parse_deadline(const char *s, const char *arg, struct policy_spec *out, char *err,
			  size_t errlen)
{
	static const char *const what[3] = { "runtime", "deadline", "period" };
	uint64_t *dst[3] = { &out->runtime_ns, &out->deadline_ns, &out->period_ns };
	char buf[128], sub[160], *parts[3], *save = NULL, *tok;
	int n = 0, i;
	int64_t v;

	if (strlen(arg) >= sizeof(buf))
		goto usage;
	strcpy(buf, arg);
	for (tok = strtok_r(buf, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
		if (n == 3)
			goto usage;
		parts[n++] = tok;
	}
	/* strtok_r would silently skip an empty part such as "1ms//2ms" */
	if (n != 3 || strstr(arg, "//") || arg[0] == '/' || arg[strlen(arg) - 1] == '/')
		goto usage;
	for (i = 0; i < 3; i++) {
		if (parse_duration_ns(parts[i], &v, sub, sizeof(sub)) < 0) {
			snprintf(err, errlen, "\"%s\": %s %s", s, what[i], sub);
			return -EINVAL;
		}
		*dst[i] = (uint64_t)v;
	}
	if (out->runtime_ns < DL_MIN_RUNTIME_NS) {
		snprintf(err, errlen, "\"%s\": runtime must be at least %dns", s,
			 DL_MIN_RUNTIME_NS);
		return -EINVAL;
	}
	if (out->runtime_ns > out->deadline_ns || out->deadline_ns > out->period_ns) {
		snprintf(err, errlen, "\"%s\": need runtime <= deadline <= period", s);
		return -EINVAL;
	}
	out->policy = SCHED_DEADLINE;
	return 0;

usage:
	snprintf(err, errlen,
		 "\"%s\": expected deadline:RUNTIME/DEADLINE/PERIOD (e.g. deadline:200us/1ms/1ms)",
		 s);
	return -EINVAL;
}

int policy_parse(const char *s, struct policy_spec *out, char *err, size_t errlen)
{
	const char *colon = strchr(s, ':');
	const char *arg = colon ? colon + 1 : NULL;
	size_t nlen = colon ? (size_t)(colon - s) : strlen(s);
	int policy = -1;
	int64_t v;
	size_t i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		if (strlen(policies[i].name) == nlen && !strncmp(s, policies[i].name, nlen)) {
			policy = policies[i].policy;
			break;
		}
	}
	out->policy = policy;

	switch (policy) {
	case SCHED_OTHER:
	case SCHED_BATCH:
		if (!arg)
			return 0;
		if (parse_int64(arg, &v) < 0 || v < -20 || v > 19) {
			snprintf(err, errlen, "\"%s\": nice must be -20..19", s);
			return -EINVAL;
		}
		out->nice = (int)v;
		return 0;
	case SCHED_IDLE:
		if (arg) {
			snprintf(err, errlen, "\"%s\": idle takes no parameter", s);
			return -EINVAL;
		}
		return 0;
	case SCHED_FIFO:
	case SCHED_RR:
		if (!arg || parse_int64(arg, &v) < 0 || v < 1 || v > 99) {
			snprintf(err, errlen, "\"%s\": priority must be 1..99", s);
			return -EINVAL;
		}
		out->priority = (int)v;
		return 0;
	case SCHED_DEADLINE:
		if (!arg)
			arg = "";
		return parse_deadline(s, arg, out, err, errlen);
	}
	snprintf(err, errlen,
		 "\"%s\": unknown policy (other[:NICE], batch, idle, fifo:PRIO, rr:PRIO, "
		 "deadline:RUNTIME/DEADLINE/PERIOD)",
		 s);
	return -EINVAL;
}

/* Explain a failed sched_setattr/setpriority in terms of what the user can change. */
static void explain(const struct policy_spec *p, pid_t tid, int e, char *err, size_t errlen)
{
	const char *why = strerror(e);

	if (e == ESRCH) {
		snprintf(err, errlen, "thread %d does not exist (%s)", (int)tid, why);
	} else if (e == ENOSYS) {
		snprintf(err, errlen, "sched_setattr is not available on this kernel (%s)", why);
	} else if (p->policy == SCHED_DEADLINE && (e == EPERM || e == EBUSY)) {
		snprintf(
			err, errlen,
			"SCHED_DEADLINE needs CAP_SYS_NICE, an affinity spanning the thread's "
			"whole root domain (no pinning to one cpu without an exclusive cpuset) and room "
			"under rt bandwidth admission control (%s)",
			why);
	} else if ((p->policy == SCHED_FIFO || p->policy == SCHED_RR) && e == EPERM) {
		snprintf(err, errlen, "SCHED_%s needs CAP_SYS_NICE or an RLIMIT_RTPRIO (%s)",
			 p->policy == SCHED_FIFO ? "FIFO" : "RR", why);
	} else if (e == EPERM || e == EACCES) {
		snprintf(err, errlen, "%s with nice %d needs CAP_SYS_NICE or an RLIMIT_NICE (%s)",
			 policy_name(p->policy), p->nice, why);
	} else {
		char spec[96];

		policy_format(p, spec, sizeof(spec));
		snprintf(err, errlen, "%s rejected by the kernel (%s)", spec, why);
	}
}

int policy_apply(const struct policy_spec *p, pid_t tid, char *err, size_t errlen)
{
	struct rtlab_sched_attr a;
	bool fair = p->policy == SCHED_OTHER || p->policy == SCHED_BATCH;

	memset(&a, 0, sizeof(a));
	a.size = SCHED_ATTR_SIZE_VER0;
	a.sched_policy = (uint32_t)p->policy;
	a.sched_nice = fair ? p->nice : 0;
	a.sched_priority = (uint32_t)p->priority;
	if (p->policy == SCHED_DEADLINE) {
		a.sched_runtime = p->runtime_ns;
		a.sched_deadline = p->deadline_ns;
		a.sched_period = p->period_ns;
	}
	if (syscall(SYS_sched_setattr, tid, &a, 0u) < 0) {
		int e = errno;

		explain(p, tid, e, err, errlen);
		return -e;
	}
	/* on Linux PRIO_PROCESS with a tid sets that one thread's nice */
	if (fair && setpriority(PRIO_PROCESS, (id_t)tid, p->nice) < 0) {
		int e = errno;

		explain(p, tid, e, err, errlen);
		return -e;
	}
	return 0;
}

int policy_read(pid_t tid, struct policy_spec *out)
{
	struct rtlab_sched_attr a;

	memset(&a, 0, sizeof(a));
	if (syscall(SYS_sched_getattr, tid, &a, (unsigned int)sizeof(a), 0u) < 0)
		return -errno;
	memset(out, 0, sizeof(*out));
	out->policy = (int)a.sched_policy;
	out->priority = (int)a.sched_priority;
	out->nice = a.sched_nice;
	if (out->policy == SCHED_DEADLINE) {
		out->runtime_ns = a.sched_runtime;
		out->deadline_ns = a.sched_deadline;
		out->period_ns = a.sched_period;
	}
	return 0;
}

/* Exact, parseable duration: the largest of s/ms/us/ns that divides NS. */
static void exact_duration(uint64_t ns, char *buf, size_t len)
{
	static const struct {
		const char *u;
		uint64_t mult;
	} units[] = {
		{ "s", NSEC_PER_SEC },
		{ "ms", NSEC_PER_MSEC },
		{ "us", NSEC_PER_USEC },
		{ "ns", 1 },
	};
	size_t i;

	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns && ns % units[i].mult == 0) {
			snprintf(buf, len, "%" PRIu64 "%s", ns / units[i].mult, units[i].u);
			return;
		}
	}
	snprintf(buf, len, "0");
}

void policy_format(const struct policy_spec *p, char *buf, size_t len)
{
	char r[32], d[32], t[32];

	switch (p->policy) {
	case SCHED_OTHER:
	case SCHED_BATCH:
		snprintf(buf, len, "%s:%d", policy_name(p->policy), p->nice);
		break;
	case SCHED_FIFO:
	case SCHED_RR:
		snprintf(buf, len, "%s:%d", policy_name(p->policy), p->priority);
		break;
	case SCHED_DEADLINE:
		exact_duration(p->runtime_ns, r, sizeof(r));
		exact_duration(p->deadline_ns, d, sizeof(d));
		exact_duration(p->period_ns, t, sizeof(t));
		snprintf(buf, len, "deadline:%s/%s/%s", r, d, t);
		break;
	default:
		snprintf(buf, len, "%s", policy_name(p->policy));
	}
}

void policy_json(struct jw *w, const struct policy_spec *p)
{
	jw_obj_begin(w);
	jw_kstr(w, "name", policy_name(p->policy));
	jw_kint(w, "priority", p->priority);
	jw_kint(w, "nice", p->nice);
	if (p->policy == SCHED_DEADLINE) {
		jw_kuint(w, "runtime_ns", p->runtime_ns);
		jw_kuint(w, "deadline_ns", p->deadline_ns);
		jw_kuint(w, "period_ns", p->period_ns);
	}
	jw_obj_end(w);
}
