/*
 * sched — the threads observed: read from /proc by process, by name or by thread ID, and
 * whether a command can be started (as execvp would find it).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/opts.h"
#include "meters/sched.h"

/* /proc/PID/task/TID/comm (or /proc/TID/comm when PID is 0) into BUF: 0 or -errno. */
int sched_read_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%d/comm", tid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	(void)close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Whether TID is alive: /proc/TID/stat exists and its state is not Z (nor X). */
bool sched_alive(pid_t tid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", tid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	(void)close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')')) || p[1] != ' ')
		return false;
	return p[2] != 'Z' && p[2] != 'X';
}

void sched_assign(struct sched_trace *st, pid_t proc, pid_t tid, const char *comm)
{
	struct sched_thread *t = &st->th[st->nthreads];

	t->tid = tid;
	snprintf(t->comm, sizeof(t->comm), "%.15s", comm);
	t->act_ns = INT64_MIN;
	t->last_timer_act = INT64_MIN;
	(void)proc;
	st->nthreads++;
}

/* The threads of PROC (named COMM when given) not observed yet take the free slots. */
int sched_discover(struct sched_params *s, pid_t proc, int64_t slots)
{
	char path[64], comm[32];
	struct dirent *e;
	int found = 0, slot;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", proc);
	if (!(d = opendir(path)))
		return -errno;
	s->beyond = 0;
	while ((e = readdir(d))) {
		pid_t tid = (pid_t)atoi(e->d_name);

		if (tid <= 0 || sched_read_comm(proc, tid, comm, sizeof(comm)) ||
		    (s->comm && strcmp(comm, s->comm)))
			continue;
		found++;
		if ((slot = sched_trace_slot(s->st, tid)) >= 0) {
			/* a command's exec (chrt, taskset, a shell's exec) renames its thread */
			snprintf(s->st->th[slot].comm, sizeof(s->st->th[slot].comm), "%.15s", comm);
			continue;
		}
		if (s->st->nthreads < slots)
			sched_assign(s->st, proc, tid, comm);
		else
			s->beyond++;
	}
	(void)closedir(d);
	return found;
}

/* Every thread of the system named COMM, outside this process. */
int sched_by_comm(struct sched_params *s, int64_t slots)
{
	struct dirent *e;
	int found = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name);

		if (pid > 0 && pid != getpid()) {
			int n = sched_discover(s, pid, slots);

			found += n > 0 ? n : 0;
		}
	}
	(void)closedir(d);
	return found;
}

/* Every thread (named --comm when given) of the live processes whose name is NAME, as
 * pidof matches it: /proc/PID/comm, which the kernel cuts to 15 bytes. One process found
 * is followed (its later threads, its end); several are a fixed set. */
int sched_by_process(struct sched_params *s, int64_t slots)
{
	char comm[32], name[16];
	struct dirent *e;
	int found = 0, procs = 0;
	pid_t last = 0;
	DIR *d = opendir("/proc");

	if (!d)
		return -errno;
	snprintf(name, sizeof(name), "%.15s", s->process);
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name);
		int n;

		if (pid <= 0 || pid == getpid() || sched_read_comm(0, pid, comm, sizeof(comm)) ||
		    strcmp(comm, name) || !sched_alive(pid) ||
		    (n = sched_discover(s, pid, slots)) < 0)
			continue;
		found += n;
		procs++;
		last = pid;
	}
	(void)closedir(d);
	if (procs == 1)
		s->proc = last;
	return procs ? found : -ESRCH;
}

/* "TID[,TID...]": each an existing thread. */
int sched_by_tids(struct sched_params *s, struct opt_fault *at, char *err, size_t errlen)
{
	const char *p = s->tids;
	char comm[32];

	while (*p) {
		char *end;
		long v = strtol(p, &end, 10);

		if (end == p || v <= 0 || v > 0x3fffffff || (*end && *end != ','))
			return opts_refusef(at, "tid", s->tids, err, errlen,
					    "--tid: \"%s\" is not a list of thread IDs", s->tids);
		if (s->st->nthreads == SCHED_THREADS_MAX)
			return opts_refusef(at, "tid", s->tids, err, errlen,
					    "--tid: at most %d threads", SCHED_THREADS_MAX);
		if (!sched_alive((pid_t)v) || sched_read_comm(0, (pid_t)v, comm, sizeof(comm)))
			return opts_refusef(at, "tid", s->tids, err, errlen, "--tid: no thread %ld",
					    v);
		if (sched_trace_slot(s->st, (pid_t)v) < 0)
			sched_assign(s->st, 0, (pid_t)v, comm);
		p = *end ? end + 1 : end;
	}
	if (!s->st->nthreads)
		return opts_refusef(at, "tid", s->tids, err, errlen, "--tid: no thread ID given");
	return 0;
}

/* The command's program can be found (as execvp would). */
bool sched_runnable(const char *file)
{
	const char *path = getenv("PATH");
	char buf[4096];

	if (strchr(file, '/'))
		return !access(file, X_OK);
	for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
		size_t n = strcspn(p, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, p, file);
		if (!access(buf, X_OK))
			return true;
		p += n + (p[n] == ':');
	}
	return false;
}
