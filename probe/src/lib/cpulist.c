/* Kernel cpu-list syntax ("0-3,5,8-15:2"), as in cpuset.cpus and sysfs. */
#include "cpulist.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool is_blank(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Parse a cpu number at *p; -1 when there are no digits, -2 when >= CPULIST_MAX. */
static int scan_cpu(const char **p)
{
	int v = 0;
	bool any = false;

	while (**p >= '0' && **p <= '9') {
		if (v < CPULIST_MAX)
			v = v * 10 + (**p - '0');
		(*p)++;
		any = true;
	}
	if (!any)
		return -1;
	return v >= CPULIST_MAX ? -2 : v;
}

/* One "a", "a-b" or "a-b:stride" entry of length LEN; marks it in SEEN. */
static int parse_entry(const char *tok, size_t len, bool *seen, char *err, size_t errlen)
{
	char buf[64];
	const char *p = buf;
	int a, b, stride = 1, cpu;

	if (len >= sizeof(buf)) {
		snprintf(err, errlen, "\"%.*s...\": entry is too long", 16, tok);
		return -EINVAL;
	}
	memcpy(buf, tok, len);
	buf[len] = '\0';

	a = scan_cpu(&p);
	if (a == -1)
		goto expected;
	if (a == -2)
		goto range;
	b = a;
	if (*p == '-') {
		p++;
		b = scan_cpu(&p);
		if (b == -1) {
			snprintf(err, errlen, "\"%s\": range needs an end", buf);
			return -EINVAL;
		}
		if (b == -2)
			goto range;
		if (b < a) {
			snprintf(err, errlen, "\"%s\": range is reversed", buf);
			return -EINVAL;
		}
		if (*p == ':') {
			p++;
			stride = scan_cpu(&p);
			if (stride == -1 || *p) {
				snprintf(err, errlen, "\"%s\": stride must be a number", buf);
				return -EINVAL;
			}
			if (stride == 0) {
				snprintf(err, errlen, "\"%s\": stride must be at least 1", buf);
				return -EINVAL;
			}
			/* a stride >= CPULIST_MAX just selects the range's first cpu */
			if (stride == -2)
				stride = CPULIST_MAX;
		}
	}
	if (*p)
		goto expected;
	for (cpu = a; cpu <= b; cpu += stride)
		seen[cpu] = true;
	return 0;

expected:
	snprintf(err, errlen, "\"%s\": expected a cpu number, a-b or a-b:stride", buf);
	return -EINVAL;
range:
	snprintf(err, errlen, "\"%s\": cpu number out of range (max %d)", buf, CPULIST_MAX - 1);
	return -EINVAL;
}

int cpulist_parse(const char *s, struct cpulist *out, char *err, size_t errlen)
{
	bool seen[CPULIST_MAX] = { false };
	const char *p = s, *end;
	int cpu, ret;

	/* sysfs files end in a newline; tolerate blanks around the list */
	while (is_blank(*p))
		p++;
	end = p + strlen(p);
	while (end > p && is_blank(end[-1]))
		end--;
	if (p == end) {
		snprintf(err, errlen, "\"%s\": empty cpu list", s);
		return -EINVAL;
	}

	while (p <= end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		const char *tok = p, *tend = comma ? comma : end;

		while (tok < tend && is_blank(*tok))
			tok++;
		while (tend > tok && is_blank(tend[-1]))
			tend--;
		if (tok == tend) {
			snprintf(err, errlen, "\"%s\": empty entry in cpu list", s);
			return -EINVAL;
		}
		ret = parse_entry(tok, (size_t)(tend - tok), seen, err, errlen);
		if (ret < 0)
			return ret;
		if (!comma)
			break;
		p = comma + 1;
	}

	out->n = 0;
	for (cpu = 0; cpu < CPULIST_MAX; cpu++)
		if (seen[cpu])
			out->cpu[out->n++] = cpu;
	return 0;
}

int cpulist_online(const char *root, struct cpulist *out)
{
	char path[4096], line[4096], err[128];
	FILE *f;
	int ret;

	snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/online", root ? root : "");
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (!fgets(line, sizeof(line), f)) {
		ret = ferror(f) ? -EIO : -EINVAL;
		fclose(f);
		return ret;
	}
	fclose(f);
	return cpulist_parse(line, out, err, sizeof(err));
}

int cpulist_check_subset(const struct cpulist *l, const struct cpulist *online, char *err,
			 size_t errlen)
{
	char avail[256];
	int i, j = 0;

	/* both lists are sorted, so one merge-like pass suffices */
	for (i = 0; i < l->n; i++) {
		while (j < online->n && online->cpu[j] < l->cpu[i])
			j++;
		if (j == online->n || online->cpu[j] != l->cpu[i]) {
			cpulist_format(online, avail, sizeof(avail));
			snprintf(err, errlen, "cpu %d is not online (online: %s)", l->cpu[i],
				 avail);
			return -EINVAL;
		}
	}
	return 0;
}

void cpulist_to_set(const struct cpulist *l, cpu_set_t *set)
{
	int i;

	CPU_ZERO(set);
	for (i = 0; i < l->n; i++)
		CPU_SET(l->cpu[i], set);
}

void cpulist_from_set(const cpu_set_t *set, struct cpulist *l)
{
	l->n = 0;
	for (int cpu = 0; cpu < CPULIST_MAX && cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, set))
			l->cpu[l->n++] = cpu;
}

void cpulist_format(const struct cpulist *l, char *buf, size_t len)
{
	size_t off = 0;
	int i = 0, n;

	if (len)
		buf[0] = '\0';
	while (i < l->n && off < len) {
		int first = l->cpu[i], last = first;

		while (i + 1 < l->n && l->cpu[i + 1] == last + 1)
			last = l->cpu[++i];
		i++;
		if (last == first)
			n = snprintf(buf + off, len - off, "%s%d", off ? "," : "", first);
		else
			n = snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", first, last);
		/* drop an entry that does not fit whole: a cut "1" of "12" would lie */
		if (n < 0 || (size_t)n >= len - off) {
			buf[off] = '\0';
			return;
		}
		off += (size_t)n;
	}
}
