/* The tracefs module on a fake tree (no root, no tracefs): sched_switch lines, the
 * instance names of dead runs, cpumask and buffer files, per-CPU trace and stats; the
 * time bound of a drain, on a pipe. */
#include "check.h"
#include "lib/tracefs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char root[200]; /* fits struct tracefs.root */

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	f = fopen(path, "w");
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void get(const char *rel, char *buf, size_t len)
{
	char path[PATH_MAX + 64];
	FILE *f;
	size_t n = 0;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	buf[0] = '\0';
	if ((f = fopen(path, "r"))) {
		n = fread(buf, 1, len - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
}

static bool exists(const char *rel)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	return access(path, F_OK) == 0;
}

static void test_parse(void)
{
	struct tracefs_switch ev;

	CHECK_INT(tracefs_parse_switch(
			  "          <idle>-0       [001] d..2.  4242.000123: sched_switch: "
			  "prev_comm=rtlab-probe prev_pid=812 prev_prio=89 prev_state=R+ ==> "
			  "next_comm=python3 next_pid=900 next_prio=19",
			  &ev),
		  0);
	CHECK_INT(ev.ts_ns, 4242000123000LL);
	CHECK_INT(ev.prev_pid, 812);
	CHECK_INT(ev.prev_prio, 89);
	CHECK(ev.prev_runnable);
	CHECK(ev.prev_preempt);
	CHECK_STR(ev.next_comm, "python3");
	CHECK_INT(ev.next_pid, 900);
	CHECK_INT(ev.next_prio, 19);

	/* comms with spaces and the task field before the timestamp */
	CHECK_INT(tracefs_parse_switch(
			  " Web Content-77 [000] ..... 1.5: sched_switch: prev_comm=Web Content "
			  "prev_pid=77 prev_prio=120 prev_state=S ==> next_comm=kworker/0:1 H "
			  "next_pid=5 next_prio=100",
			  &ev),
		  0);
	CHECK_INT(ev.ts_ns, 1500000000LL);
	CHECK(!ev.prev_runnable);
	CHECK(!ev.prev_preempt);
	CHECK_STR(ev.next_comm, "kworker/0:1 H");
	CHECK_INT(ev.next_pid, 5);
	CHECK_INT(ev.next_prio, 100);

	CHECK_INT(
		tracefs_parse_switch(
			"x-1 [000] d..2. 2.000000: sched_switch: prev_comm=x prev_pid=1 prev_prio=-1 "
			"prev_state=R ==> next_comm=y next_pid=2 next_prio=-1",
			&ev),
		0);
	CHECK(ev.prev_runnable);
	CHECK(!ev.prev_preempt); /* runnable, switched out by schedule(): on the way to user mode */
	CHECK_INT(ev.prev_prio, -1);
	CHECK_INT(tracefs_parse_switch("# tracer: nop", &ev), -EINVAL);
	CHECK_INT(tracefs_parse_switch("CPU:1 [LOST 12 EVENTS]", &ev), -EINVAL);
	CHECK_INT(tracefs_parse_switch("a-1 [000] .... 1.0: sched_wakeup: comm=a pid=1", &ev),
		  -EINVAL);
	CHECK_INT(tracefs_parse_switch("a-1 [000] .... 1.0: sched_switch: prev_comm=a prev_pid=1",
				       &ev),
		  -EINVAL);
}

static void test_names(void)
{
	CHECK_INT(tracefs_instance_pid("rtlab-1234"), 1234);
	CHECK_INT(tracefs_instance_pid("rtlab-"), -1);
	CHECK_INT(tracefs_instance_pid("rtlab-12x"), -1);
	CHECK_INT(tracefs_instance_pid("rtlab-0"), -1);
	CHECK_INT(tracefs_instance_pid("other-1234"), -1);
	CHECK_INT(tracefs_instance_pid("rtla-1234"), -1);
}

static int count_lines(const char *line, void *arg)
{
	(void)line;
	(*(int *)arg)++;
	return 0;
}

static void test_tree(void)
{
	struct tracefs fs = { 0 };
	struct tracefs_instance in = { { 0 } };
	char buf[1024], name[64];
	uint64_t lost = 0;
	int removed = -1, lines = 0;
	pid_t dead = fork();

	if (dead == 0)
		_exit(0);
	(void)waitpid(dead, NULL, 0); /* a PID with no process now */
	snprintf(fs.root, sizeof(fs.root), "%s", root);
	snprintf(name, sizeof(name), "instances/rtlab-%d", (int)dead);
	{
		char path[PATH_MAX + 64];

		snprintf(path, sizeof(path), "%s/instances", root);
		CHECK_INT(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/%s", root, name);
		CHECK_INT(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/instances/rtlab-%d", root, (int)getpid());
		CHECK_INT(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/instances/someone-else", root);
		CHECK_INT(mkdir(path, 0700), 0);
	}
	CHECK_INT(tracefs_remove_stale(&fs, &removed), 0);
	CHECK_INT(removed, 1);
	CHECK(!exists(name));
	CHECK(exists("instances/someone-else"));
	snprintf(buf, sizeof(buf), "instances/rtlab-%d", (int)getpid());
	CHECK(exists(buf));

	/* a leftover with our own PID is replaced */
	CHECK_INT(tracefs_instance_create(&fs, getpid(), &in, buf, sizeof(buf)), 0);
	CHECK(in.path[0] != '\0');

	snprintf(buf, sizeof(buf), "instances/rtlab-%d/tracing_cpumask", (int)getpid());
	put(buf, "");
	CHECK_INT(tracefs_set_cpu(&in, 0), 0);
	get(buf, name, sizeof(name));
	CHECK_STR(name, "1");
	CHECK_INT(tracefs_set_cpu(&in, 5), 0);
	get(buf, name, sizeof(name));
	CHECK_STR(name, "20");
	CHECK_INT(tracefs_set_cpu(&in, 33), 0);
	get(buf, name, sizeof(name));
	CHECK_STR(name, "2,00000000");
	CHECK_INT(tracefs_set_cpu(&in, -1), -EINVAL);
	CHECK_INT(tracefs_write(&in, "no-such-file", "1"), -ENOENT); /* never created */

	snprintf(buf, sizeof(buf), "%s/per_cpu", in.path);
	CHECK_INT(mkdir(buf, 0700), 0);
	snprintf(buf, sizeof(buf), "%s/per_cpu/cpu1", in.path);
	CHECK_INT(mkdir(buf, 0700), 0);
	snprintf(buf, sizeof(buf), "instances/rtlab-%d/per_cpu/cpu1/buffer_size_kb", (int)getpid());
	put(buf, "7");
	CHECK_INT(tracefs_set_buffer_kb(&in, 1, 2048), 0);
	get(buf, name, sizeof(name));
	CHECK_STR(name, "2048");
	snprintf(buf, sizeof(buf), "instances/rtlab-%d/per_cpu/cpu1/stats", (int)getpid());
	put(buf, "entries: 10\noverrun: 42\ncommit overrun: 0\n");
	CHECK_INT(tracefs_cpu_lost(&in, 1, &lost), 0);
	CHECK_INT(lost, 42);
	snprintf(buf, sizeof(buf), "instances/rtlab-%d/per_cpu/cpu1/trace", (int)getpid());
	put(buf, "# tracer: nop\nline one\nline two\n");
	CHECK_INT(tracefs_read_cpu_trace(&in, 1, count_lines, &lines), 0);
	CHECK_INT(lines, 3);
	CHECK(tracefs_read_cpu_trace(&in, 0, count_lines, &lines) == -ENOENT);

	/* a real instance's files vanish with it; here the test removes them first */
	snprintf(buf, sizeof(buf), "rm -r '%s/per_cpu' '%s/tracing_cpumask'", in.path, in.path);
	CHECK_INT(system(buf), 0);
	CHECK_INT(tracefs_instance_remove(&in), 0);
	CHECK(in.path[0] == '\0');
	CHECK_INT(tracefs_instance_remove(&in), 0); /* nothing left: no-op */
}

static void count_line(const char *line, void *arg)
{
	(void)line;
	++*(int *)arg;
}

/* A pipe that holds more than one read: drained whole when time allows, one buffer's worth
 * when its time is up (a trace written faster than it is read must not hold the reader). */
static void test_drain_bound(void)
{
	char buf[64];
	size_t len = 0;
	int fds[2], lines = 0;

	CHECK(pipe(fds) == 0);
	CHECK(fcntl(fds[0], F_SETFL, O_NONBLOCK) == 0);
	for (int i = 0; i < 100; i++)
		CHECK(write(fds[1], "0123456789\n", 11) == 11);
	CHECK(!tracefs_drain_lines(fds[0], buf, sizeof(buf), &len, 0, count_line, &lines));
	CHECK(lines > 0 && lines < 100);
	CHECK(tracefs_drain_lines(fds[0], buf, sizeof(buf), &len, INT64_MAX, count_line, &lines));
	CHECK_INT(lines, 100);
	CHECK_INT((int)len, 0);
	close(fds[0]);
	close(fds[1]);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char cmd[PATH_MAX + 16];
	int rc;

	snprintf(root, sizeof(root), "%s/rtlab-test-tracefs.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_parse();
	test_names();
	test_tree();
	test_drain_bound();
	rc = check_report("test_tracefs");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	(void)system(cmd);
	return rc;
}
