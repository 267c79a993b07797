/* cpu-list parsing, subset check, formatting and sysfs reading under a fake root. */
#include "check.h"
#include "lib/cpulist.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static struct cpulist l, online;

/* Parse S and compare with the formatted WANT ("0-3,5"), then round-trip it. */
static void ok(const char *s, int want_n, const char *want)
{
	static struct cpulist again;
	char err[256] = "", buf[256];

	CHECK_INT(cpulist_parse(s, &l, err, sizeof(err)), 0);
	CHECK_STR(err, "");
	CHECK_INT(l.n, want_n);
	cpulist_format(&l, buf, sizeof(buf));
	CHECK_STR(buf, want);
	CHECK_INT(cpulist_parse(buf, &again, err, sizeof(err)), 0);
	CHECK(again.n == l.n && !memcmp(again.cpu, l.cpu, (size_t)l.n * sizeof(l.cpu[0])));
}

static void bad(const char *s, const char *want_err)
{
	char err[256] = "";

	l.n = -7;
	CHECK_INT(cpulist_parse(s, &l, err, sizeof(err)), -EINVAL);
	CHECK_INT(l.n, -7);
	CHECK_STR(err, want_err);
}

static void test_parse(void)
{
	ok("0", 1, "0");
	CHECK_INT(l.cpu[0], 0);
	ok("0-3", 4, "0-3");
	ok("0-3,5", 5, "0-3,5");
	ok("0-15:4", 4, "0,4,8,12");
	CHECK(l.cpu[0] == 0 && l.cpu[1] == 4 && l.cpu[2] == 8 && l.cpu[3] == 12);
	ok("1,1,0", 2, "0-1");
	CHECK(l.cpu[0] == 0 && l.cpu[1] == 1);
	ok("0-3\n", 4, "0-3");
	ok("  2,0 , 1\t\n", 3, "0-2");
	ok("8-15:2,0-1", 6, "0-1,8,10,12,14");
	ok("3-3", 1, "3");
	ok("0-1023", 1024, "0-1023");
	ok("5-9:100", 1, "5");
	ok("1-2:3000", 1, "1");
	ok("1023", 1, "1023");

	bad("", "\"\": empty cpu list");
	bad(" \n", "\" \n\": empty cpu list");
	bad("7-3", "\"7-3\": range is reversed");
	bad("0,7-3", "\"7-3\": range is reversed");
	bad("3-2", "\"3-2\": range is reversed");
	bad("a", "\"a\": expected a cpu number, a-b or a-b:stride");
	bad("1-", "\"1-\": range needs an end");
	bad("0-4:0", "\"0-4:0\": stride must be at least 1");
	bad("0-4:", "\"0-4:\": stride must be a number");
	bad("0-4:x", "\"0-4:x\": stride must be a number");
	bad("2000", "\"2000\": cpu number out of range (max 1023)");
	bad("0-1024", "\"0-1024\": cpu number out of range (max 1023)");
	bad("99999999999999999999", "\"99999999999999999999\": cpu number out of range (max 1023)");
	bad("1,", "\"1,\": empty entry in cpu list");
	bad(",1", "\",1\": empty entry in cpu list");
	bad("1,,2", "\"1,,2\": empty entry in cpu list");
	bad("-1", "\"-1\": expected a cpu number, a-b or a-b:stride");
	bad("1x", "\"1x\": expected a cpu number, a-b or a-b:stride");
	bad("3:2", "\"3:2\": expected a cpu number, a-b or a-b:stride");
	bad("1 2", "\"1 2\": expected a cpu number, a-b or a-b:stride");
}

static void test_subset_format(void)
{
	char err[256] = "", buf[14];
	cpu_set_t set;

	cpulist_parse("0-3", &online, err, sizeof(err));
	cpulist_parse("1,3", &l, err, sizeof(err));
	CHECK_INT(cpulist_check_subset(&l, &online, err, sizeof(err)), 0);
	cpulist_parse("0-3", &l, err, sizeof(err));
	CHECK_INT(cpulist_check_subset(&l, &online, err, sizeof(err)), 0);
	cpulist_parse("2,5,7", &l, err, sizeof(err));
	CHECK_INT(cpulist_check_subset(&l, &online, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "cpu 5 is not online (online: 0-3)");
	cpulist_parse("0,2,4-7", &online, err, sizeof(err));
	cpulist_parse("1", &l, err, sizeof(err));
	CHECK_INT(cpulist_check_subset(&l, &online, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, "cpu 1 is not online (online: 0,2,4-7)");

	cpulist_to_set(&online, &set);
	CHECK_INT(CPU_COUNT(&set), 6);
	CHECK(CPU_ISSET(0, &set) && !CPU_ISSET(1, &set) && CPU_ISSET(7, &set) &&
	      !CPU_ISSET(8, &set));

	/* an empty list formats as ""; a short buffer keeps only whole entries */
	l.n = 0;
	cpulist_format(&l, buf, sizeof(buf));
	CHECK_STR(buf, "");
	cpulist_parse("0,2,4,6,8,10,12,14,16", &l, err, sizeof(err));
	cpulist_format(&l, buf, sizeof(buf));
	CHECK_STR(buf, "0,2,4,6,8,10"); /* not "0,2,4,6,8,10,1" */
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

static void test_online(void)
{
	char root[] = "/tmp/test_cpulist.XXXXXX", path[512];
	const char *dirs[] = { "/sys", "/sys/devices", "/sys/devices/system",
			       "/sys/devices/system/cpu" };
	size_t i;

	CHECK(mkdtemp(root) != NULL);
	CHECK_INT(cpulist_online(root, &online), -ENOENT);
	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", root, dirs[i]);
		CHECK_INT(mkdir(path, 0755), 0);
	}
	snprintf(path, sizeof(path), "%s/sys/devices/system/cpu/online", root);
	write_file(path, "0-5,8\n");
	CHECK_INT(cpulist_online(root, &online), 0);
	CHECK_INT(online.n, 7);
	CHECK_INT(online.cpu[6], 8);

	write_file(path, "");
	CHECK_INT(cpulist_online(root, &online), -EINVAL);
	write_file(path, "garbage\n");
	CHECK_INT(cpulist_online(root, &online), -EINVAL);
	unlink(path);
	for (i = sizeof(dirs) / sizeof(dirs[0]); i-- > 0;) {
		snprintf(path, sizeof(path), "%s%s", root, dirs[i]);
		rmdir(path);
	}
	CHECK_INT(rmdir(root), 0);

	/* the real machine, when sysfs is mounted: at least the cpu we run on */
	if (cpulist_online(NULL, &online) == 0) {
		CHECK(online.n >= 1);
		CHECK(sched_getcpu() < 0 || online.cpu[online.n - 1] >= sched_getcpu());
	}
}

int main(void)
{
	test_parse();
	test_subset_format();
	test_online();
	return check_report("test_cpulist");
}
