#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xtrace.h"

/* Copy at most LEN bytes of S (up to a NUL) into DST of SIZE bytes. */
static void copy_n(char *dst, size_t size, const char *s, size_t len)
{
	if (len >= size)
		len = size - 1;
	memcpy(dst, s, len);
	dst[len] = '\0';
}

/* Last occurrence of NEEDLE in HAY, or NULL. */
static const char *last_of(const char *hay, const char *needle)
{
	const char *last = NULL, *p = hay;

	while ((p = strstr(p, needle))) {
		last = p;
		p++;
	}
	return last;
}

/* The integer right after KEY in S (first occurrence, or the last one when LAST). */
static int int_key(const char *s, const char *key, bool last, int32_t *out)
{
	const char *p = last ? last_of(s, key) : strstr(s, key);
	char *end;
	long v;

	if (!p)
		return -EINVAL;
	p += strlen(key);
	errno = 0;
	v = strtol(p, &end, 10);
	if (errno || end == p || v < INT32_MIN || v > INT32_MAX)
		return -EINVAL;
	*out = (int32_t)v;
	return 0;
}

/* "SECS.USECS" (or a bare integer of ns) between P and END. */
static int parse_ts(const char *p, const char *end, int64_t *ns)
{
	int64_t secs = 0, frac = 0, scale = 1000000000;
	bool digits = false;

	for (; p < end && isdigit((unsigned char)*p); p++, digits = true)
		secs = secs * 10 + (*p - '0');
	if (!digits)
		return -EINVAL;
	if (p == end) {
		*ns = secs; /* a clock that does not count ns prints its raw value */
		return 0;
	}
	if (*p++ != '.')
		return -EINVAL;
	for (; p < end && isdigit((unsigned char)*p) && scale > 1; p++) {
		scale /= 10;
		frac += (*p - '0') * scale;
	}
	*ns = secs * 1000000000 + frac;
	return 0;
}

/* "CPU:N [LOST n EVENTS]" */
static int parse_lost(const char *line, struct xev *ev, int *cpu)
{
	unsigned long long n;
	int c;

	if (sscanf(line, " CPU:%d [LOST %llu EVENTS]", &c, &n) != 2)
		return -EINVAL;
	*cpu = c;
	ev->type = XE_LOST;
	ev->num = n > INT32_MAX ? INT32_MAX : (int32_t)n;
	return 0;
}

/* The "[NNN]" CPU field: its '[' or NULL. */
static const char *cpu_field(const char *line, int *cpu)
{
	for (const char *p = strchr(line, '['); p; p = strchr(p + 1, '[')) {
		const char *q = p + 1;
		int v = 0;

		if (p == line || p[-1] != ' ' || !isdigit((unsigned char)*q))
			continue;
		while (isdigit((unsigned char)*q) && v < 1000000)
			v = v * 10 + (*q++ - '0');
		if (*q == ']') {
			*cpu = v;
			return p;
		}
	}
	return NULL;
}

/* "  comm-pid  " before the CPU field: the current task of the line. */
static void parse_task(const char *line, const char *bracket, struct xev *ev)
{
	const char *b = line, *e = bracket, *dash;

	while (b < e && *b == ' ')
		b++;
	while (e > b && e[-1] == ' ')
		e--;
	if (e > b && e[-1] == ')') /* record-tgid: "comm-pid (tgid)" */
		while (e > b && *--e != '(')
			;
	while (e > b && e[-1] == ' ')
		e--;
	for (dash = e; dash > b && dash[-1] != '-'; dash--)
		;
	if (dash <= b || dash == e)
		return;
	ev->cur_pid = (int32_t)strtol(dash, NULL, 10);
	copy_n(ev->cur_comm, sizeof(ev->cur_comm), b, (size_t)(dash - 1 - b));
}

static bool ends_with(const char *s, size_t len, const char *suffix)
{
	size_t n = strlen(suffix);

	return len > n && !memcmp(s + len - n, suffix, n);
}

/* The fields of event NAME (LEN bytes) into EV. */
static void parse_fields(const char *name, size_t len, const char *f, struct xev *ev)
{
#define IS(s) (len == strlen(s) && !memcmp(name, (s), len))
	const char *p, *q;

	if (IS("sched_switch")) {
		p = strstr(f, " ==> next_comm=");
		q = last_of(f, " next_pid=");
		if (p && q && q > p && !int_key(q, " next_pid=", false, &ev->pid) &&
		    !int_key(q, " next_prio=", true, &ev->num)) {
			p += strlen(" ==> next_comm=");
			copy_n(ev->name, sizeof(ev->name), p, (size_t)(q - p));
			ev->type = XE_SWITCH;
		}
	} else if (IS("sched_waking") || IS("sched_wakeup")) {
		if (!int_key(f, " pid=", true, &ev->pid))
			ev->type = XE_WAKING;
	} else if (IS("irq_handler_entry") || IS("irq_handler_exit")) {
		if (int_key(f, "irq=", false, &ev->num))
			return;
		ev->type = IS("irq_handler_entry") ? XE_IRQ_IN : XE_IRQ_OUT;
		if ((p = strstr(f, " name=")))
			copy_n(ev->name, sizeof(ev->name), p + 6, strlen(p + 6));
	} else if (IS("softirq_entry") || IS("softirq_exit")) {
		if (int_key(f, "vec=", false, &ev->num))
			return;
		ev->type = IS("softirq_entry") ? XE_SOFT_IN : XE_SOFT_OUT;
		if ((p = strstr(f, "[action=")) && (q = strchr(p, ']')))
			copy_n(ev->name, sizeof(ev->name), p + 8, (size_t)(q - p - 8));
	} else if (IS("hrtimer_expire_entry")) {
		ev->type = XE_HRT_IN;
		if ((p = strstr(f, " function=")))
			copy_n(ev->name, sizeof(ev->name), p + 10, strcspn(p + 10, " "));
	} else if (IS("hrtimer_expire_exit")) {
		ev->type = XE_HRT_OUT;
	} else if (IS("workqueue_execute_start") || IS("workqueue_execute_end")) {
		ev->type = IS("workqueue_execute_start") ? XE_WORK_IN : XE_WORK_OUT;
		if ((p = strstr(f, ": function ")))
			copy_n(ev->name, sizeof(ev->name), p + 11, strcspn(p + 11, " "));
	} else if (IS("ipi_entry") || IS("ipi_exit")) {
		ev->type = IS("ipi_entry") ? XE_IPI_IN : XE_IPI_OUT;
		p = f + (*f == '(');
		copy_n(ev->name, sizeof(ev->name), p, strcspn(p, ")"));
	} else if (!strncmp(f, "vector=", 7) &&
		   (ends_with(name, len, "_entry") || ends_with(name, len, "_exit"))) {
		bool in = ends_with(name, len, "_entry");

		if (int_key(f, "vector=", false, &ev->num))
			return;
		ev->type = in ? XE_VEC_IN : XE_VEC_OUT;
		copy_n(ev->name, sizeof(ev->name), name, len - (in ? 6 : 5));
	}
#undef IS
}

int xtrace_parse(const char *line, struct xev *ev, int *cpu, const char **mark)
{
	const char *bracket, *colon, *ts, *name, *name_end;

	memset(ev, 0, sizeof(*ev));
	ev->cur_pid = -1;
	*cpu = -1;
	*mark = NULL;
	if (!strncmp(line + strspn(line, " "), "CPU:", 4))
		return parse_lost(line, ev, cpu);
	if (!(bracket = cpu_field(line, cpu)) || !(colon = strstr(bracket, ": ")))
		return -EINVAL;
	for (ts = colon; ts > bracket && ts[-1] != ' '; ts--)
		;
	if (parse_ts(ts, colon, &ev->ts_ns))
		return -EINVAL;
	parse_task(line, bracket, ev);
	name = colon + 2;
	if (!(name_end = strstr(name, ": ")))
		name_end = name + strlen(name);
	/* a trace_marker line names its writer: "+0x../0x.." follows with options/sym-offset */
	if (name_end - name >= 18 && !memcmp(name, "tracing_mark_write", 18) &&
	    (name_end - name == 18 || name[18] == '+')) {
		ev->type = XE_MARK;
		*mark = *name_end ? name_end + 2 : name_end;
		return 0;
	}
	if (!strncmp(name, "<stack trace>", 13)) {
		ev->type = XE_STACK;
		return 0;
	}
	parse_fields(name, (size_t)(name_end - name), *name_end ? name_end + 2 : name_end, ev);
	return 0;
}

int xmark_format(const struct xmark *m, char *buf, int len)
{
	int n = snprintf(buf, (size_t)len,
			 XMARK_TAG " thread=%d cycle=%" PRIu64 " act=%" PRId64 " lat=%" PRId64
				   " at=%" PRId64 "\n",
			 m->thread, m->cycle, m->act_ns, m->lat_ns, m->write_ns);

	return n < len ? n : len - 1;
}

int xmark_parse(const char *text, struct xmark *m)
{
	int used = 0;

	if (sscanf(text,
		   XMARK_TAG " thread=%d cycle=%" SCNu64 " act=%" SCNd64 " lat=%" SCNd64
			     " at=%" SCNd64 "%n",
		   &m->thread, &m->cycle, &m->act_ns, &m->lat_ns, &m->write_ns, &used) != 5 ||
	    !used)
		return -EINVAL;
	return m->thread >= 0 && m->lat_ns >= 0 ? 0 : -EINVAL;
}
