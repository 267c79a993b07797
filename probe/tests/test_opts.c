/* Option tables: aliases, ranges and steps, choices, and the facts recorded about a refusal. */
#include "check.h"
#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/timeutil.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

struct params {
	int64_t limit_ns;
	bool limit_set;
	int64_t hold_ns;
	int64_t count;
	bool verbose;
	const char *out;
	int mode; /* a choice */
	bool mode_set;
	struct cpulist cpu; /* one CPU */
	bool cpu_set;
};

enum mode { MODE_FAST, MODE_SLOW, MODE_OFF };
static const char *const modes[] = {
	[MODE_FAST] = "fast", [MODE_SLOW] = "slow", [MODE_OFF] = "off", NULL
};

#define P(f) offsetof(struct params, f)

static const struct opt_desc table[] = {
	OPT_DESC("limit", OPT_DURATION, 1, 3600 * NSEC_PER_SEC, "DUR", "the limit", P(limit_ns),
		 P(limit_set)),
	OPT_ALIAS("old-limit", "limit"),
	{ .name = "hold",
	  .type = OPT_DURATION,
	  .min = 0,
	  .max = INT32_MAX * NSEC_PER_USEC,
	  .step = NSEC_PER_USEC,
	  .metavar = "DUR",
	  .help = "whole us",
	  .offset = P(hold_ns),
	  .set_offset = OPT_NO_SET },
	OPT_DESC("count", OPT_INT, 1, 10, "N", "a count", P(count), OPT_NO_SET),
	OPT_DESC("verbose", OPT_FLAG, 0, 0, NULL, "say more", P(verbose), OPT_NO_SET),
	OPT_DESC("out", OPT_STRING, 0, 0, "FILE", "where", P(out), OPT_NO_SET),
	OPT_ALIAS("output", "out"),
	OPT_ALIAS("dangling", "no-such-option"), /* a table bug: never accepted */
	OPT_CHOICE_DESC("mode", modes, MODE_SLOW, "M", "how", P(mode), P(mode_set)),
	OPT_ALIAS("old-mode", "mode"),
	OPT_DESC("cpu", OPT_CPULIST, 0, 1, "CPU", "one CPU", P(cpu), P(cpu_set)),
	OPT_END,
};

static struct cpulist online;
static struct params p;
static struct opt_fault at;
static char err[512];

/* Parse ARGS (NULL-terminated) into a fresh P; the return value of opts_parse. */
static int parse(const char *const *args)
{
	struct opt_table t = { table, &p };
	char *argv[16];
	const char *pos[2];
	int argc = 0, npos = 2;

	while (args[argc])
		argv[argc] = (char *)args[argc], argc++;
	memset(&p, 0, sizeof(p));
	at.option = "untouched";
	at.value = "untouched";
	err[0] = '\0';
	return opts_parse(argc, argv, &t, 1, &online, pos, &npos, &at, err, sizeof(err));
}

/* ARGS are refused: the message says WHY, AT names OPTION and VALUE (NULL: null). */
static void refused(const char *const *args, const char *why, const char *option, const char *value)
{
	CHECK_INT(parse(args), -EINVAL);
	if (!strstr(err, why))
		fprintf(stderr, "  got \"%s\", want \"%s\"\n", err, why);
	CHECK(strstr(err, why) != NULL);
	CHECK(!strchr(err, '\n'));
	CHECK_STR(at.option ? at.option : "(null)", option ? option : "(null)");
	CHECK_STR(at.value ? at.value : "(null)", value ? value : "(null)");
}

static void test_alias(void)
{
	CHECK_INT(parse((const char *[]){ "--old-limit", "5ms", NULL }), 0);
	CHECK_INT(p.limit_ns, 5 * NSEC_PER_MSEC);
	CHECK(p.limit_set);
	CHECK_INT(parse((const char *[]){ "--old-limit=2us", NULL }), 0);
	CHECK_INT(p.limit_ns, 2000);
	CHECK_INT(parse((const char *[]){ "--output", "x.json", NULL }), 0);
	CHECK_STR(p.out, "x.json");
	/* errors name the canonical option, whatever the spelling typed */
	refused((const char *[]){ "--old-limit", "0", NULL },
		"--limit: \"0\" is out of range (1ns..1h)", "limit", "0");
	refused((const char *[]){ "--old-limit", NULL }, "--limit needs a value (DUR)", "limit",
		NULL);
	refused((const char *[]){ "--dangling", "1", NULL }, "unknown option \"--dangling\"", NULL,
		"--dangling");
}

static void test_refusals(void)
{
	refused((const char *[]){ "--limit", "7", NULL }, "--limit: \"7\": a duration needs a unit",
		"limit", "7");
	refused((const char *[]){ "--count=11", NULL }, "--count: \"11\" is out of range (1..10 N)",
		"count", "11");
	refused((const char *[]){ "--count", "x", NULL }, "--count: \"x\" is not a whole number",
		"count", "x");
	refused((const char *[]){ "--verbose=yes", NULL }, "--verbose takes no value", "verbose",
		"yes");
	refused((const char *[]){ "--out", "", NULL }, "--out: empty value", "out", "");
	refused((const char *[]){ "--nope=3", NULL }, "unknown option \"--nope\" (see --help)",
		NULL, "--nope=3");
	refused((const char *[]){ "a", "b", "c", NULL }, "unexpected argument \"c\"", NULL, "c");
}

static void test_choice(void)
{
	CHECK_INT(parse((const char *[]){ NULL }), 0);
	CHECK_INT(p.mode, MODE_SLOW); /* the table's default, whatever the struct held */
	CHECK(!p.mode_set);
	CHECK_INT(parse((const char *[]){ "--mode", "off", NULL }), 0);
	CHECK_INT(p.mode, MODE_OFF);
	CHECK(p.mode_set);
	CHECK_INT(parse((const char *[]){ "--old-mode=fast", NULL }), 0);
	CHECK_INT(p.mode, MODE_FAST);
	refused((const char *[]){ "--mode", "quick", NULL },
		"--mode: must be one of fast, slow, off; not 'quick'", "mode", "quick");
	refused((const char *[]){ "--old-mode=", NULL },
		"--mode: must be one of fast, slow, off; not ''", "mode", "");
	refused((const char *[]){ "--mode", "Fast", NULL }, "not 'Fast'", "mode",
		"Fast"); /* exact */
	refused((const char *[]){ "--mode", "fast,slow", NULL }, "not 'fast,slow'", "mode",
		"fast,slow");
	refused((const char *[]){ "--mode", NULL }, "--mode needs a value (M)", "mode", NULL);
}

static void test_one_cpu(void)
{
	CHECK_INT(parse((const char *[]){ "--cpu", "2", NULL }), 0);
	CHECK(p.cpu_set && p.cpu.n == 1 && p.cpu.cpu[0] == 2);
	refused((const char *[]){ "--cpu", "1-2", NULL }, "--cpu: \"1-2\" is not one CPU", "cpu",
		"1-2");
	refused((const char *[]){ "--cpu", "9", NULL }, "--cpu: ", "cpu", "9"); /* not online */
}

static void test_refuse(void)
{
	struct opt_fault f = { NULL, NULL };
	char e[64];

	CHECK_INT(opts_refuse(&f, "ring", "7"), -EINVAL);
	CHECK_STR(f.option, "ring");
	CHECK_STR(f.value, "7");
	CHECK_INT(opts_refuse(NULL, "ring", "7"), -EINVAL); /* no facts asked for */
	CHECK_INT(opts_refusef(&f, "seed", NULL, e, sizeof(e), "--seed: %d is odd", 3), -EINVAL);
	CHECK_STR(e, "--seed: 3 is odd");
	CHECK_STR(f.option, "seed");
	CHECK(f.value == NULL);
}

static void test_step(void)
{
	CHECK_INT(parse((const char *[]){ "--hold", "10us", NULL }), 0);
	CHECK_INT(p.hold_ns, 10 * NSEC_PER_USEC);
	CHECK_INT(parse((const char *[]){ "--hold", "0", NULL }),
		  0); /* a bare zero needs no unit */
	CHECK_INT(parse((const char *[]){ "--hold", "2ms", NULL }), 0);
	CHECK_INT(p.hold_ns, 2 * NSEC_PER_MSEC);
	CHECK_INT(parse((const char *[]){ "--hold", "2147483647us", NULL }), 0);
	refused((const char *[]){ "--hold", "1500ns", NULL },
		"--hold: \"1500ns\" is not a multiple of 1us", "hold", "1500ns");
	refused((const char *[]){ "--hold", "1.5us", NULL }, "is not a multiple of 1us", "hold",
		"1.5us");
	refused((const char *[]){ "--hold", "2147483648us", NULL },
		"--hold: \"2147483648us\" is out of range (0ns..2147483647us)", "hold",
		"2147483648us");
	refused((const char *[]){ "--hold", "10", NULL }, "a duration needs a unit", "hold", "10");
}

static char *mem;
static size_t memlen;

static void test_help_and_json(void)
{
	struct opt_table t = { table, &p };
	struct opt_fault f = { "interval", NULL };
	struct jw w;
	FILE *s;

	s = open_memstream(&mem, &memlen);
	opts_help(s, &t, 1);
	fclose(s);
	CHECK(strstr(mem, "--limit DUR") != NULL);
	CHECK(strstr(mem, "--mode M") != NULL);
	CHECK(strstr(mem, " how (fast, slow, off; default slow)\n") != NULL);
	CHECK(strstr(mem, "old-limit") == NULL); /* aliases are hidden */
	CHECK(strstr(mem, "output") == NULL);
	free(mem);

	s = open_memstream(&mem, &memlen);
	jw_init(&w, s);
	opts_json(&w, table);
	fclose(s);
	CHECK(strstr(mem,
		     "{\"name\":\"limit\",\"type\":\"duration\",\"metavar\":\"DUR\",\"min_ns\":1,"
		     "\"max_ns\":3600000000000,\"help\":\"the limit\",\"aliases\":[\"old-limit\"]}") !=
	      NULL);
	CHECK(strstr(mem, "\"step_ns\":1000") != NULL);
	CHECK(strstr(mem,
		     "{\"name\":\"count\",\"type\":\"int\",\"metavar\":\"N\",\"min\":1,\"max\":10,") !=
	      NULL);
	CHECK(strstr(mem,
		     "{\"name\":\"verbose\",\"type\":\"flag\",\"metavar\":null,\"help\":\"say more\","
		     "\"aliases\":[]}") != NULL);
	CHECK(strstr(mem, "\"aliases\":[\"output\"]") != NULL);
	CHECK(strstr(mem, "\"name\":\"old-limit\"") == NULL); /* listed under their option only */
	CHECK(strstr(mem, "{\"name\":\"mode\",\"type\":\"choice\",\"metavar\":\"M\","
			  "\"choices\":[\"fast\",\"slow\",\"off\"],\"default\":\"slow\","
			  "\"help\":\"how\",\"aliases\":[\"old-mode\"]}") != NULL);
	CHECK(strstr(mem, "{\"name\":\"cpu\",\"type\":\"cpulist\",\"metavar\":\"CPU\","
			  "\"help\":\"one CPU\"") != NULL);
	free(mem);

	s = open_memstream(&mem, &memlen);
	opts_fault_json(s, "--interval needs a value (\"DUR\")", &f);
	opts_fault_json(s, "two \"options\"", NULL);
	fclose(s);
	CHECK_STR(mem,
		  "{\"error\":\"--interval needs a value (\\\"DUR\\\")\",\"option\":\"interval\","
		  "\"value\":null}\n"
		  "{\"error\":\"two \\\"options\\\"\",\"option\":null,\"value\":null}\n");
	free(mem);
}

/* Every alias of the real tables names an option of its own table. */
static void test_real_tables(void)
{
	int aliases = 0;

	for (const struct opt_desc *o = run_common_opts; o->name; o++) {
		bool found = false;

		if (!o->alias_of) {
			CHECK(o->help != NULL);
			continue;
		}
		aliases++;
		CHECK(o->help == NULL);
		for (const struct opt_desc *c = run_common_opts; c->name; c++)
			found |= !c->alias_of && !strcmp(c->name, o->alias_of);
		CHECK(found);
	}
	CHECK(aliases >= 1); /* --threshold */
}

static void test_given(void)
{
	char *argv[] = { "--interval", "1ms", "--check", NULL };

	CHECK(opts_given(3, argv, "--check"));
	CHECK(!opts_given(2, argv, "--check"));
	CHECK(!opts_given(3, argv, "--chec"));
}

int main(void)
{
	char e[200];

	CHECK_INT(cpulist_parse("0-3", &online, e, sizeof(e)), 0);
	test_alias();
	test_refusals();
	test_step();
	test_choice();
	test_one_cpu();
	test_refuse();
	test_help_and_json();
	test_real_tables();
	test_given();
	return check_report("test_opts");
}
