/* CPU lists in the kernel's syntax: "0-3,5,8-15:2". */
#ifndef RTLAB_CPULIST_H
#define RTLAB_CPULIST_H

#include <sched.h>
#include <stddef.h>

#define CPULIST_MAX 1024

struct cpulist {
	int n; /* number of CPUs listed, in ascending order, no duplicates */
	int cpu[CPULIST_MAX];
};

/*
 * Parse LIST into ascending, de-duplicated CPU numbers < CPULIST_MAX.
 * Rejects empty lists, reversed ranges ("7-3"), zero strides and garbage.
 * Returns 0 or -EINVAL with a reason in err.
 */
int cpulist_parse(const char *s, struct cpulist *out, char *err, size_t errlen);

/* Read the online CPUs (sysfs under ROOT, default "/" when NULL). 0 or -errno. */
int cpulist_online(const char *root, struct cpulist *out);

/* Every CPU of L is in ONLINE; otherwise -EINVAL naming the first one missing. */
int cpulist_check_subset(const struct cpulist *l, const struct cpulist *online, char *err,
			 size_t errlen);

void cpulist_to_set(const struct cpulist *l, cpu_set_t *set);

/* The CPUs of SET below CPULIST_MAX, ascending. */
void cpulist_from_set(const cpu_set_t *set, struct cpulist *l);

/* Format as a compact list ("0-3,5"). */
void cpulist_format(const struct cpulist *l, char *buf, size_t len);

#endif
