#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "timeutil.h"
#include "tracefs.h"
#include "xtrace.h"

/* /proc/mounts escapes space, tab, newline and backslash as \ooo. */
static void unescape_mount(const char *s, char *out, size_t len)
{
	size_t n = 0;

	while (*s && n + 1 < len) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] && s[3]) {
			out[n++] = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
			s += 4;
		} else {
			out[n++] = *s++;
		}
	}
	out[n] = '\0';
}

/* The tracefs mount point, TRACEFS_DEFAULT_ROOT preferred. 0 or -ENOENT. */
static int find_mount(char *root, size_t len)
{
	char line[1024], dev[256], dir[512], type[64];
	FILE *f = fopen("/proc/mounts", "re");
	int found = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%255s %511s %63s", dev, dir, type) != 3 ||
		    strcmp(type, "tracefs"))
			continue;
		if (found &&
		    strlen(dir) < len) { /* the first one, unless the default comes later */
			unescape_mount(dir, root, len);
			found = 0;
		}
		if (!strcmp(dir, TRACEFS_DEFAULT_ROOT)) {
			snprintf(root, len, "%s", TRACEFS_DEFAULT_ROOT);
			break;
		}
	}
	(void)fclose(f);
	return found;
}

int tracefs_open(struct tracefs *fs, bool may_mount, char *err, size_t errlen)
{
	const char *fake = getenv(TRACEFS_ROOT_ENV);

	memset(fs, 0, sizeof(*fs));
	if (fake && *fake) { /* tests: a tree standing in for tracefs, never mounted */
		if (strlen(fake) >= sizeof(fs->root) || access(fake, F_OK)) {
			snprintf(err, errlen, "%s=%.200s: no such directory", TRACEFS_ROOT_ENV,
				 fake);
			return -ENOENT;
		}
		snprintf(fs->root, sizeof(fs->root), "%s", fake);
		return 0;
	}
	if (!find_mount(fs->root, sizeof(fs->root)))
		return 0;
	if (!may_mount) {
		snprintf(err, errlen, "tracefs is not mounted");
		return -ENOENT;
	}
	if (mount("nodev", TRACEFS_DEFAULT_ROOT, "tracefs", 0, NULL)) {
		int rc = -errno;

		snprintf(err, errlen, "tracefs is not mounted and cannot be mounted at %s (%s)",
			 TRACEFS_DEFAULT_ROOT, strerror(errno));
		return rc;
	}
	snprintf(fs->root, sizeof(fs->root), "%s", TRACEFS_DEFAULT_ROOT);
	fs->mounted_here = true;
	return 0;
}

int tracefs_instance_create(const struct tracefs *fs, pid_t pid, struct tracefs_instance *in,
			    char *err, size_t errlen)
{
	char path[sizeof(in->path)];

	in->path[0] = '\0';
	snprintf(path, sizeof(path), "%s/instances/%s%d", fs->root, TRACEFS_INSTANCE_PREFIX,
		 (int)pid);
	/* EEXIST: left by a dead process that had our PID (a live one would be us). */
	if (mkdir(path, 0700) && (errno != EEXIST || rmdir(path) || mkdir(path, 0700))) {
		int rc = -errno;

		snprintf(err, errlen, "cannot create the tracefs instance %s (%s)", path,
			 strerror(errno));
		return rc;
	}
	snprintf(in->path, sizeof(in->path), "%s", path);
	return 0;
}

int tracefs_instance_remove(struct tracefs_instance *in)
{
	if (!in->path[0])
		return 0;
	if (rmdir(in->path) && errno != ENOENT)
		return -errno;
	in->path[0] = '\0';
	return 0;
}

int tracefs_write(const struct tracefs_instance *in, const char *file, const char *value)
{
	char path[sizeof(in->path) + 128];
	size_t len = strlen(value);
	ssize_t n;
	int fd, rc = 0;

	if (!in->path[0])
		return -EBADF;
	snprintf(path, sizeof(path), "%s/%s", in->path, file);
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = write(fd, value, len);
	if (n != (ssize_t)len)
		rc = n < 0 ? -errno : -EIO;
	(void)close(fd);
	return rc;
}

int tracefs_event_enable(const struct tracefs_instance *in, const char *system, const char *event)
{
	char file[128];

	snprintf(file, sizeof(file), "events/%s/%s/enable", system, event);
	return tracefs_write(in, file, "1");
}

int tracefs_set_cpu(const struct tracefs_instance *in, int cpu)
{
	char mask[1200]; /* 32-bit hex words, most significant first, comma separated */
	size_t n = 0;

	if (cpu < 0 || cpu >= 32 * 128)
		return -EINVAL;
	n += (size_t)snprintf(mask, sizeof(mask), "%x", 1u << (cpu % 32));
	for (int w = cpu / 32; w > 0 && n < sizeof(mask); w--)
		n += (size_t)snprintf(mask + n, sizeof(mask) - n, ",00000000");
	return tracefs_write(in, "tracing_cpumask", mask);
}

int tracefs_set_buffer_kb(const struct tracefs_instance *in, int cpu, uint64_t kb)
{
	char file[64], value[32];

	if (cpu < 0)
		snprintf(file, sizeof(file), "buffer_size_kb");
	else
		snprintf(file, sizeof(file), "per_cpu/cpu%d/buffer_size_kb", cpu);
	snprintf(value, sizeof(value), "%llu", (unsigned long long)kb);
	return tracefs_write(in, file, value);
}

pid_t tracefs_instance_pid(const char *name)
{
	const char *digits = name + strlen(TRACEFS_INSTANCE_PREFIX);
	long v = 0;

	if (strncmp(name, TRACEFS_INSTANCE_PREFIX, strlen(TRACEFS_INSTANCE_PREFIX)) || !*digits)
		return -1;
	for (const char *c = digits; *c; c++) {
		if (!isdigit((unsigned char)*c) || v > 100000000)
			return -1;
		v = v * 10 + (*c - '0');
	}
	return v > 0 ? (pid_t)v : -1;
}

int tracefs_remove_stale(const struct tracefs *fs, int *removed)
{
	char dir[sizeof(fs->root) + 16], path[sizeof(dir) + 300], proc[32];
	struct dirent *e;
	DIR *d;
	int rc = 0;

	*removed = 0;
	snprintf(dir, sizeof(dir), "%s/instances", fs->root);
	if (!(d = opendir(dir)))
		return -errno;
	while ((e = readdir(d))) {
		pid_t pid = tracefs_instance_pid(e->d_name);

		if (pid <= 0)
			continue;
		snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
		if (!access(proc, F_OK) || errno != ENOENT)
			continue; /* its run is alive (or we cannot tell): not ours to remove */
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (rmdir(path) == 0)
			(*removed)++;
		else if (errno != ENOENT)
			rc = -errno;
	}
	(void)closedir(d);
	return rc;
}

int tracefs_read_cpu_trace(const struct tracefs_instance *in, int cpu,
			   int (*fn)(const char *line, void *arg), void *arg)
{
	char path[sizeof(in->path) + 64];
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	FILE *f;
	int rc = 0;

	snprintf(path, sizeof(path), "%s/per_cpu/cpu%d/trace", in->path, cpu);
	if (!(f = fopen(path, "re")))
		return -errno;
	while (!rc && (n = getline(&line, &cap, f)) >= 0) {
		if (n > 0 && line[n - 1] == '\n')
			line[n - 1] = '\0';
		rc = fn(line, arg);
	}
	if (!rc && ferror(f))
		rc = -EIO;
	free(line);
	(void)fclose(f);
	return rc;
}

int tracefs_cpu_lost(const struct tracefs_instance *in, int cpu, uint64_t *lost)
{
	char path[sizeof(in->path) + 64], line[128];
	unsigned long long v;
	FILE *f;
	int rc = -ENOENT;

	snprintf(path, sizeof(path), "%s/per_cpu/cpu%d/stats", in->path, cpu);
	if (!(f = fopen(path, "re")))
		return -errno;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "overrun: %llu", &v) == 1) {
			*lost = v;
			rc = 0;
		}
	(void)fclose(f);
	return rc;
}

/* The integer right after KEY at P (KEY included in P). */
static int int_after(const char *p, const char *key, long *out)
{
	char *end;

	if (!p)
		return -EINVAL;
	errno = 0;
	*out = strtol(p + strlen(key), &end, 10);
	return errno || end == p + strlen(key) ? -EINVAL : 0;
}

bool tracefs_drain_lines(int fd, char *buf, size_t cap, size_t *len, int64_t until_ns,
			 void (*fn)(const char *line, void *arg), void *arg)
{
	for (;;) {
		ssize_t n = read(fd, buf + *len, cap - 1 - *len);
		char *p, *nl;

		if (n <= 0)
			return true;
		*len += (size_t)n;
		buf[*len] = '\0';
		for (p = buf; (nl = memchr(p, '\n', *len - (size_t)(p - buf))); p = nl + 1) {
			*nl = '\0';
			fn(p, arg);
		}
		*len -= (size_t)(p - buf);
		memmove(buf, p, *len);
		if (*len == cap - 1)
			*len = 0; /* a line longer than the buffer: not an event we read */
		if (mono_now_ns() >= until_ns)
			return false;
	}
}

/* One sched_switch line (format of events/sched/sched_switch/format): the line, its
 * time and the next task as xtrace.c reads every event; prev_* read here by their keys. */
int tracefs_parse_switch(const char *line, struct tracefs_switch *ev)
{
	const char *mark, *p = strstr(line, ": sched_switch: prev_comm=");
	long prev_pid, prev_prio;
	struct xev x;
	int cpu;

	if (!p || xtrace_parse(line, &x, &cpu, &mark) || x.type != XE_SWITCH ||
	    !(p = strstr(p, " prev_pid=")) || int_after(p, " prev_pid=", &prev_pid) ||
	    int_after(strstr(p, " prev_prio="), " prev_prio=", &prev_prio) ||
	    !(p = strstr(p, " prev_state=")))
		return -EINVAL;
	p += strlen(" prev_state=");
	ev->prev_runnable = p[0] == 'R' && (p[1] == ' ' || (p[1] == '+' && p[2] == ' '));
	ev->prev_preempt = ev->prev_runnable && p[1] == '+';
	ev->ts_ns = x.ts_ns;
	snprintf(ev->next_comm, sizeof(ev->next_comm), "%.*s", (int)sizeof(ev->next_comm) - 1,
		 x.name);
	ev->prev_pid = (pid_t)prev_pid;
	ev->prev_prio = (int)prev_prio;
	ev->next_pid = x.pid;
	ev->next_prio = x.num;
	return 0;
}

int tracefs_read(const struct tracefs_instance *in, const char *file, char *buf, size_t len)
{
	char path[sizeof(in->path) + 128];
	size_t n = 0;
	ssize_t got;
	int fd, rc = 0;

	if (!in->path[0] || !len)
		return -EBADF;
	snprintf(path, sizeof(path), "%s/%s", in->path, file);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	/* tracefs files answer in pieces: read to the end */
	while ((got = read(fd, buf + n, len - 1 - n)) > 0 && (n += (size_t)got) < len - 1)
		;
	if (got < 0)
		rc = -errno;
	else if (n == len - 1 && read(fd, path, 1) > 0)
		rc = -EOVERFLOW;
	(void)close(fd);
	buf[n] = '\0';
	return rc ? rc : (int)n;
}
