/* /proc/stat and /proc/loadavg as the kernel prints them (fs/proc/stat.c show_stat,
 * fs/proc/loadavg.c), the CPU time split between two snapshots, and hostile texts: signs,
 * overflows, short and overlong lines, absurd CPU numbers, duplicates, endless input. */
#include "check.h"
#include "lib/jsonw.h"
#include "lib/loadstat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct loadstat a, b;

static int parse(const char *text, struct loadstat *s)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int rc;

	CHECK(f != NULL);
	if (!f)
		return -ENOMEM;
	rc = loadstat_parse(f, s);
	fclose(f);
	return rc;
}

/* 6.1 on x86 with CPU1 offline: no cpu1 line. */
static const char stat_before[] = "cpu  4705 356 584 3699 23 23 0 0 0 0\n"
				  "cpu0 1393280 32966 572056 13343292 6130 0 17875 0 0 0\n"
				  "cpu2 1000 10 200 50000 30 5 40 7 0 0\n"
				  "intr 114930548 113199788 3 0 5 263 0 4 [...]\n"
				  "ctxt 1990473\n"
				  "btime 1062191376\n"
				  "processes 2915\n"
				  "procs_running 1\n"
				  "procs_blocked 0\n"
				  "softirq 183433 0 21755 12 39 1137 231 21459 2263 0\n";

static const char stat_after[] = "cpu  4805 356 684 3799 23 23 0 0 0 0\n"
				 "cpu0 1393380 32966 572056 13343392 6130 0 17875 0 0 0\n"
				 "cpu2 1050 10 230 50010 25 7 43 9 4 0\n"
				 "intr 114930648 113199788 3 0 5 263 0 4 [...]\n"
				 "ctxt 1990573\n"
				 "softirq 183533 0 21755 12 39 1137 231 21459 2263 0\n";

static void kernel_text(void)
{
	CHECK_INT(parse(stat_before, &a), 0);
	CHECK(a.ok && !a.truncated);
	CHECK_INT(a.ncpus, 2);
	CHECK_INT(a.cpu[1], 2);
	CHECK_INT(a.ticks[1][LS_USER], 1000);
	CHECK_INT(a.ticks[1][LS_NICE], 10);
	CHECK_INT(a.ticks[1][LS_SYSTEM], 200);
	CHECK_INT(a.ticks[1][LS_IDLE], 50000);
	CHECK_INT(a.ticks[1][LS_IOWAIT], 30);
	CHECK_INT(a.ticks[1][LS_IRQ], 5);
	CHECK_INT(a.ticks[1][LS_SOFTIRQ], 40);
	CHECK_INT(a.ticks[1][LS_STEAL], 7);
	CHECK_INT(a.busy[1], 1000 + 10 + 200 + 5 + 40 + 7); /* guest is inside user */
	CHECK_INT(a.total[1], a.busy[1] + 50000 + 30);
	CHECK_INT(a.ctxt, 1990473);
	CHECK_INT(a.intr, 114930548);
	CHECK_INT(a.softirq, 183433);
	CHECK_INT(parse(stat_after, &b), 0);
	CHECK_STR(loadstat_cat_name[LS_SOFTIRQ], "softirq");
	CHECK_STR(loadstat_cat_name[LS_STEAL], "steal");
}

/* The JSON of two snapshots: every category per CPU and "all", iowait going back is 0. */
static void split_json(void)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	struct jw w;

	CHECK(f != NULL);
	if (!f)
		return;
	a.load = (struct loadavg){
		.ok = true, .avg = { 0.5, 0.25, 2 }, .runnable = 1, .threads = 9
	};
	b.load.ok = false;
	jw_init(&w, f);
	loadstat_json(&w, &a, &b);
	fclose(f);
	/* cpu2: user +50 system +30 idle +10 iowait -5 irq +2 softirq +3 steal +2 (x 10 ms) */
	CHECK(strstr(out, "\"2\":{\"user\":500000000,\"nice\":0,\"system\":300000000,"
			  "\"idle\":100000000,\"iowait\":0,\"irq\":20000000,"
			  "\"softirq\":30000000,\"steal\":20000000}") != NULL);
	CHECK(strstr(out, "\"all\":{\"user\":1500000000,") != NULL);
	CHECK(strstr(out, "\"tick_ns\":10000000") != NULL);
	CHECK(strstr(out, "\"loadavg\":{\"start\":{\"avg_1min\":0.5,\"avg_5min\":0.25,"
			  "\"avg_15min\":2,\"runnable\":1,\"threads\":9},\"end\":null}") != NULL);
	free(out);
}

static void hostile(void)
{
	char *big;
	size_t n;

	/* a sign, a letter, an overflow, fewer than four columns: skipped lines */
	CHECK_INT(parse("cpu0 -5 0 0 0 0 0 0 0\n"
			"cpu1 1 2 x 4\n"
			"cpu2 99999999999999999999 0 0 0\n"
			"cpu3 1 2 3\n"
			"cpu9999999 1 2 3 4\n"
			"cpu-1 1 2 3 4\n",
			&a),
		  -EINVAL);
	CHECK(!a.ok);
	/* four columns (old kernels): the rest 0; a duplicate CPU keeps the first */
	CHECK_INT(parse("cpu4 1 2 3 4\ncpu4 9 9 9 9 9 9 9 9\nctxt -3\n", &a), 0);
	CHECK_INT(a.ncpus, 1);
	CHECK_INT(a.ticks[0][LS_USER], 1);
	CHECK_INT(a.ticks[0][LS_STEAL], 0);
	CHECK_INT(a.ctxt, 0);
	/* an overlong line: its continuation is no line of its own */
	n = 3 * LOADSTAT_LINE_MAX;
	big = malloc(n + 64);
	CHECK(big != NULL);
	if (!big)
		return;
	memset(big, ' ', n);
	memcpy(big, "intr 7", 6);
	memcpy(big + LOADSTAT_LINE_MAX - 1, "cpu5 1 1 1 1", 12);
	strcpy(big + n, "\ncpu6 1 1 1 1\n");
	CHECK_INT(parse(big, &a), 0);
	CHECK_INT(a.ncpus, 1);
	CHECK_INT(a.cpu[0], 6);
	CHECK_INT(a.intr, 7);
	free(big);
	/* more than LOADSTAT_READ_MAX bytes: cut there, flagged; more CPUs than kept */
	n = LOADSTAT_READ_MAX + 4096;
	big = malloc(n + 1);
	CHECK(big != NULL);
	if (!big)
		return;
	for (size_t i = 0, cpu = 0; i + 40 < n; cpu++)
		i += (size_t)sprintf(big + i, "cpu%zu 1 2 3 4 5 6 7 8 0 0\n", cpu % 1000000);
	CHECK_INT(parse(big, &a), 0);
	CHECK(a.truncated);
	CHECK_INT(a.ncpus, LOADSTAT_MAX_CPUS);
	free(big);
}

static void loadavg(void)
{
	struct loadavg l;

	CHECK_INT(loadavg_parse("0.52 0.58 0.59 1/467 12345\n", &l), 0);
	CHECK(l.ok && l.avg[0] == 0.52 && l.avg[2] == 0.59);
	CHECK_INT(l.runnable, 1);
	CHECK_INT(l.threads, 467);
	CHECK_INT(loadavg_parse("-1.00 0.58 0.59 1/467 12345\n", &l), -EINVAL);
	CHECK(!l.ok);
	CHECK_INT(loadavg_parse("nan 0.58 0.59 1/467 1\n", &l), -EINVAL);
	CHECK_INT(loadavg_parse("1e300 0.58 0.59 1/467 1\n", &l), -EINVAL);
	CHECK_INT(loadavg_parse("0.1 0.2 0.3 1 467\n", &l), -EINVAL);
	CHECK_INT(loadavg_parse("0.1 0.2", &l), -EINVAL);
	CHECK_INT(loadavg_parse("", &l), -EINVAL);
	/* the live files */
	CHECK_INT(loadstat_read(NULL, &a), 0);
	CHECK(a.load.ok && a.load.threads > 0);
}

int main(void)
{
	kernel_text();
	split_json();
	hostile();
	loadavg();
	return check_report("loadstat");
}
