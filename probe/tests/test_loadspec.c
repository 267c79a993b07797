/* Load specs (KIND:ARGS[@CPUS][,policy=P][,nice=N]) and /proc/stat snapshots. */
#include "check.h"
#include "lib/cpulist.h"
#include "lib/loadrun.h"
#include "lib/loadstat.h"
#include "lib/policy.h"
#include "probe.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static struct cpulist online;

static void ok(const char *text, const char *kind, int nprocs, int ncpus, int policy, int prio,
	       int nice)
{
	static struct load_spec s;
	char err[512] = "";

	CHECK_INT(load_spec_parse(text, &online, &s, err, sizeof(err)), 0);
	CHECK_STR(err, "");
	CHECK_STR(s.kind ? s.kind->name : "", kind);
	CHECK_INT(s.nprocs, nprocs);
	CHECK_INT(s.cpus.n, ncpus);
	CHECK_INT(s.policy.policy, policy);
	CHECK_INT(s.policy.priority, prio);
	CHECK_INT(s.policy.nice, nice);
}

static void bad(const char *text, const char *why)
{
	static struct load_spec s;
	char err[512] = "", quoted[200];

	CHECK_INT(load_spec_parse(text, &online, &s, err, sizeof(err)), -EINVAL);
	snprintf(quoted, sizeof(quoted), "\"%s\"", text);
	CHECK(strstr(err, quoted) != NULL); /* the message names the spec */
	if (!strstr(err, why))
		fprintf(stderr, "  %s -> %s (want \"%s\")\n", text, err, why);
	CHECK(strstr(err, why) != NULL);
	CHECK(!strchr(err, '\n'));
}

static void specs(void)
{
	char err[200];

	CHECK_INT(cpulist_parse("0-3", &online, err, sizeof(err)), 0);
	ok("spin:50%", "spin", 4, 4, SCHED_OTHER, 0, 0);
	ok("spin:50", "spin", 4, 4, SCHED_OTHER, 0, 0);
	ok("spin:12.5%:2ms@1-2", "spin", 2, 2, SCHED_OTHER, 0, 0);
	ok("spin:50%@1,nice=5", "spin", 1, 1, SCHED_OTHER, 0, 5);
	ok("spin:50%,nice=-3@0,2", "spin", 2, 2, SCHED_OTHER, 0, -3);
	ok("spin:50%@0,2,policy=fifo:10", "spin", 2, 2, SCHED_FIFO, 10, 0);
	ok("spin:50%,policy=batch,nice=4", "spin", 4, 4, SCHED_BATCH, 0, 4);
	ok("stride:line@3", "stride", 1, 1, SCHED_OTHER, 0, 0);
	ok("stride:page:64M", "stride", 4, 4, SCHED_OTHER, 0, 0);
	ok("stride:256:1M", "stride", 4, 4, SCHED_OTHER, 0, 0);
	ok("ipc:3:pipe:10", "ipc", 3, 4, SCHED_OTHER, 0, 0);
	ok("io:/tmp:8M", "io", 1, 4, SCHED_OTHER, 0, 0);
	ok("net", "net", 1, 4, SCHED_OTHER, 0, 0);
	ok("net:64K,policy=rr:2", "net", 1, 4, SCHED_RR, 2, 0);
	ok("timer:8:100us@1", "timer", 1, 1, SCHED_OTHER, 0, 0);
	ok("stress-ng:cpu", "stress-ng", 1, 4, SCHED_OTHER, 0, 0);
	ok("stress-ng:--cpu 2 --cpu-method matrix@0-1", "stress-ng", 1, 2, SCHED_OTHER, 0, 0);
	ok("hackbench:2:pipe", "hackbench", 1, 4, SCHED_OTHER, 0, 0);
	ok("iperf3:-P 2", "iperf3", 1, 4, SCHED_OTHER, 0, 0);
	ok("iperf3", "iperf3", 1, 4, SCHED_OTHER, 0, 0);

	bad("spin:120%", "0%..100%");
	bad("spin:50%:1ns", "100us..1s");
	bad("stride:0", "line, page or");
	bad("stride:line:1", "at least the stride");
	bad("spin:50%@9", "cpu 9 is not online");
	bad("nope:1", "unknown load kind \"nope\"");
	bad("spin:50%,nice=20", "nice must be -20..19");
	bad("spin:50%,policy=fifo:0", "priority must be 1..99");
	bad("spin:50%,policy=deadline:1ms/2ms/3ms", "not for loads");
	bad("spin:50%,policy=fifo:3,nice=1", "other or batch only");
	bad("ipc:2:smoke", "neither pipe, socket");
	bad("timer:0", "1..1000");
	bad("io:/proc/no/such", "not a writable directory");
	bad("stress-ng:all", "unknown preset");
	bad("iperf3:fast", "must be options");
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	CHECK(f != NULL);
	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

static void stat_snapshots(void)
{
	static struct loadstat a, b;
	char path[] = "/tmp/rtlab-loadstat-XXXXXX";
	int fd = mkstemp(path);

	CHECK(fd >= 0);
	close(fd);
	/* user nice system idle iowait irq softirq steal guest guest_nice */
	write_file(path, "cpu  10 0 10 80 0 0 0 0 0 0\n"
			 "cpu0 5 0 5 40 0 0 0 0 0 0\n"
			 "cpu2 5 0 5 40 0 0 0 0 7 0\n"
			 "intr 1000 1 2 3\nctxt 5000\nbtime 1\nsoftirq 300 1 2\n");
	CHECK_INT(loadstat_read(path, &a), 0);
	CHECK_INT(a.ncpus, 2);
	CHECK_INT(a.cpu[1], 2);
	CHECK_INT(a.busy[0], 10);
	CHECK_INT(a.total[0], 50);
	CHECK_INT(a.ctxt, 5000);
	CHECK_INT(a.intr, 1000);
	CHECK_INT(a.softirq, 300);
	/* cpu0: +30 busy of +40; cpu2: +10 iowait only; guest (inside user) is not added twice */
	write_file(path, "cpu  40 0 10 80 10 0 0 0 0 0\n"
			 "cpu0 25 5 5 50 0 2 3 0 0 0\n"
			 "cpu2 5 0 5 40 10 0 0 0 9 0\n"
			 "intr 3000 1 2 3\nctxt 9000\nsoftirq 700 1 2\n");
	CHECK_INT(loadstat_read(path, &b), 0);
	CHECK(fabs(loadstat_busy_pct(&a, &b, 0) - 75.0) < 1e-9);
	CHECK(fabs(loadstat_busy_pct(&a, &b, 2) - 0.0) < 1e-9);
	CHECK(loadstat_busy_pct(&a, &b, 1) < 0); /* not listed */
	unlink(path);
	CHECK_INT(loadstat_read(path, &a), -ENOENT);
	CHECK(!a.ok);
	/* the live file has a line per online CPU */
	CHECK_INT(loadstat_read(NULL, &a), 0);
	CHECK_INT(a.ncpus, (int)sysconf(_SC_NPROCESSORS_ONLN));
}

int main(void)
{
	specs();
	stat_snapshots();
	return check_report("loadspec");
}
