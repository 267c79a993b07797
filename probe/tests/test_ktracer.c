/* The timerlat/osnoise control on a fake tracefs tree (no root, no tracer): the lines
 * of both tracers, the refusals (absent, busy, bad usage), the osnoise/ settings written
 * and put back as found, and the samples a measuring thread records from recorded
 * trace_pipe text. A real instance's files appear when it is created; here the test
 * writes them between ktracer_instance and ktracer_configure. */
#include "check.h"
#include "faketree.h"
#include "lib/hist.h"
#include "lib/kjournal.h"
#include "lib/ktracer.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char state[220];

static void dir(const char *rel)
{
	char path[PATH_MAX + 64];

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	(void)mkdir(path, 0700);
}

static void sh(const char *fmt, const char *arg)
{
	char cmd[PATH_MAX + 128];

	snprintf(cmd, sizeof(cmd), fmt, arg);
	CHECK_INT(system(cmd), 0);
}

/* A fresh tree: the tracers available, osnoise/ as a user left it. */
static void fake_tree(const char *tracers)
{
	sh("rm -rf '%s'", root);
	(void)mkdir(root, 0700);
	put("available_tracers", tracers);
	put("current_tracer", "nop\n");
	put("tracing_thresh", "0\n");
	dir("instances");
	dir("osnoise");
	put("osnoise/cpus", "0-3\n");
	put("osnoise/timerlat_period_us", "1000\n");
	put("osnoise/period_us", "100000\n");
	put("osnoise/runtime_us", "100000\n");
	put("osnoise/stop_tracing_us", "50\n");
	put("osnoise/stop_tracing_total_us", "0"); /* already as wanted: never written */
	put("osnoise/print_stack", "0");
	put("osnoise/options", "NO_DEFAULTS NO_OSNOISE_WORKLOAD NO_PANIC_ON_STOP "
			       "OSNOISE_PREEMPT_DISABLE NO_OSNOISE_IRQ_DISABLE\n");
}

/* What the kernel puts in a new instance, with CPU's recorded stream. */
static void fake_instance(const struct ktracer *kt, int cpu, const char *stream)
{
	char rel[128];
	const char *name = strrchr(kt->inst.path, '/') + 1;

	snprintf(rel, sizeof(rel), "instances/%s/current_tracer", name);
	put(rel, "nop\n");
	snprintf(rel, sizeof(rel), "instances/%s/tracing_on", name);
	put(rel, "1\n");
	snprintf(rel, sizeof(rel), "instances/%s/trace_clock", name);
	put(rel, "[local] global mono\n");
	snprintf(rel, sizeof(rel), "instances/%s/per_cpu", name);
	dir(rel);
	snprintf(rel, sizeof(rel), "instances/%s/per_cpu/cpu%d", name, cpu);
	dir(rel);
	snprintf(rel, sizeof(rel), "instances/%s/per_cpu/cpu%d/trace_pipe", name, cpu);
	put(rel, stream);
	snprintf(rel, sizeof(rel), "instances/%s/per_cpu/cpu%d/stats", name, cpu);
	put(rel, "entries: 9\noverrun: 3\n");
}

static const char *inst_file_path(const struct ktracer *kt, const char *file)
{
	static char rel[128];

	snprintf(rel, sizeof(rel), "instances/%s/%s", strrchr(kt->inst.path, '/') + 1, file);
	return rel;
}

static const char *inst_file(const struct ktracer *kt, const char *file)
{
	return get(inst_file_path(kt, file));
}

static const char *journal_path(void)
{
	static char path[PATH_MAX];

	CHECK_INT(kjournal_path(path, sizeof(path)), 0);
	return path;
}

/* The journal on disk is this run's and names every knob written, as written. */
static void journal_has(const struct ktracer *kt)
{
	struct kjournal j;
	char err[300];

	CHECK_INT(kjournal_read(journal_path(), &j, err, sizeof(err)), 0);
	CHECK_INT(j.owner, getpid());
	CHECK_STR(j.root, root);
	CHECK_INT(j.n, kt->nknobs);
	for (int i = 0; i < j.n && i < kt->nknobs; i++) {
		CHECK_STR(j.undo[i].file, kt->knob[i].file);
		CHECK_STR(j.undo[i].value, kt->knob[i].undo);
	}
}

static void common(struct common_params *c, const char *cpus, bool fallback)
{
	char err[128];

	memset(c, 0, sizeof(*c));
	c->cpus_set = cpulist_parse(cpus, &c->cpus, err, sizeof(err)) == 0;
	c->policy.policy = SCHED_OTHER;
	c->allow_fallback = fallback;
}

static void thread_init(struct mthread *t, int cpu, int64_t period_ns)
{
	memset(t, 0, sizeof(*t));
	t->cpu = cpu;
	t->period_ns = period_ns;
	t->worst_floor = INT64_MIN;
	t->explain_floor = INT64_MAX;
	t->hist = calloc(1, sizeof(*t->hist));
	CHECK(t->hist && !series_init(&t->series, NSEC_PER_SEC, 16));
}

static void test_parse(void)
{
	struct ktracer_line l;

	CHECK_INT(ktracer_parse_line("          <idle>-0       [000] d.h1    54.029328: #1     "
				     "context    irq timer_latency       932 ns",
				     &l),
		  0);
	CHECK_INT(l.kind, KTRACER_TIMERLAT);
	CHECK_INT(l.context, KTRACER_CTX_IRQ);
	CHECK_INT(l.seq, 1);
	CHECK_INT(l.latency_ns, 932);
	CHECK_INT(l.ts_ns, 54029328000LL);
	CHECK_INT(ktracer_parse_line("      timerlat/5-1035    [005] .......   548.771104: #402268 "
				     "context thread timer_latency     39960 ns",
				     &l),
		  0);
	CHECK_INT(l.context, KTRACER_CTX_THREAD);
	CHECK_INT(l.seq, 402268);
	CHECK_INT(l.latency_ns, 39960);
	CHECK_INT(ktracer_parse_line("rtla-9 [003] ..... 10.000001: #7     context user-ret "
				     "timer_latency      5000 ns",
				     &l),
		  0);
	CHECK_INT(l.context, KTRACER_CTX_USER_RET);
	/* without the flags column; a task name with brackets of its own */
	CHECK_INT(ktracer_parse_line("x-1 [002] 1.5: #2 context irq timer_latency 10 ns", &l), 0);
	CHECK_INT(l.ts_ns, 1500000000LL);
	CHECK_INT(ktracer_parse_line("we [1] rd-9 [001] d.h1. 2.000000: #3 context irq "
				     "timer_latency 20 ns",
				     &l),
		  0);
	CHECK_INT(l.latency_ns, 20);

	CHECK_INT(
		ktracer_parse_line("                   <...>-859     [000] ....    81.637220: "
				   "1000000        190  99.98100       9     18      0   1007     "
				   "18      1",
				   &l),
		0);
	CHECK_INT(l.kind, KTRACER_OSNOISE);
	CHECK_INT(l.runtime_ns, 1000000000LL);
	CHECK_INT(l.noise_ns, 190000);
	CHECK_INT(l.max_single_ns, 9000);
	CHECK_INT(l.hw, 18);
	CHECK_INT(l.nmi, 0);
	CHECK_INT(l.irq, 1007);
	CHECK_INT(l.softirq, 18);
	CHECK_INT(l.thread, 1);

	CHECK_INT(ktracer_parse_line("# tracer: timerlat", &l), -EINVAL);
	CHECK_INT(ktracer_parse_line("      timerlat/7-1001    [007] ....1..   200.203446: "
				     "<stack trace>",
				     &l),
		  -EINVAL);
	CHECK_INT(ktracer_parse_line(" => timerlat_irq", &l), -EINVAL);
	CHECK_INT(ktracer_parse_line("CPU:1 [LOST 12 EVENTS]", &l), -EINVAL);
	CHECK_INT(ktracer_parse_line("cc1-87882 [005] dNLh1.. 548.771082: irq_noise: "
				     "local_timer:236 start 548.771077442 duration 7597 ns",
				     &l),
		  -EINVAL);
	CHECK_INT(ktracer_parse_line("a-1 [000] .... 1.0: #1 context bogus timer_latency 5 ns", &l),
		  -EINVAL);
	CHECK_INT(ktracer_parse_line("a-1 [000] .... 1.0: 1000 10 99.00000 5 0 0 1 0 0 extra", &l),
		  -EINVAL);
}

static void test_refusals(void)
{
	struct ktracer_opt o = { .choice = KTRACER_KERNEL };
	struct opt_fault at = { 0 };
	struct common_params c;
	char err[512];
	pid_t dead;

	fake_tree("blk function nop\n");
	common(&c, "1", false);
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  -ENODEV);
	CHECK(strstr(err, "no timerlat tracer (available_tracers: blk function nop)") != NULL);
	CHECK(strstr(err, "--allow-fallback") != NULL && !strchr(err, '\n'));
	CHECK_STR(at.option, "tracer");
	c.allow_fallback = true; /* the user-space loop measures, and the document says why */
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  0);
	CHECK(o.kt == NULL);
	CHECK(strstr(o.reason, "no timerlat tracer") != NULL);

	CHECK_STR(o.name, "timerlat"); /* what was asked, for the document */
	o.choice = KTRACER_USER;       /* a word not among the choices is refused when parsing */
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  0);
	CHECK(o.kt == NULL && !o.reason[0]);
	CHECK_STR(o.name, "user");
	CHECK_STR(ktracer_timerlat_words[o.choice], "user");
	o.choice = KTRACER_KERNEL;
	c.cpus_set = false;
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  -EINVAL);
	CHECK(strstr(err, "needs --cpus") != NULL);
	c.cpus_set = true;
	c.policy.policy = SCHED_DEADLINE;
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  -EINVAL);
	CHECK_STR(at.option, "policy");
	c.policy.policy = SCHED_FIFO;
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, 50 * NSEC_PER_USEC, &c, &at, err,
				    sizeof(err)),
		  -EINVAL);
	CHECK_STR(at.option, "interval");
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, 1500, &c, &at, err, sizeof(err)),
		  -EINVAL);
	c.explain_set = true;
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  -EINVAL);
	c.explain_set = false;

	/* busy: another instance, or the top level, runs either tracer; even with fallback */
	fake_tree("timerlat osnoise nop\n");
	dir("instances/someone");
	put("instances/someone/current_tracer", "osnoise\n");
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  -EBUSY);
	CHECK(strstr(err, "instances/someone runs the osnoise or timerlat tracer") != NULL);
	put("instances/someone/current_tracer", "function\n");
	put("current_tracer", "timerlat\n");
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  -EBUSY);
	CHECK(strstr(err, "top level") != NULL);
	put("current_tracer", "nop\n");
	/* a dead run's instance is no user: its setup removes it */
	if ((dead = fork()) == 0)
		_exit(0);
	(void)waitpid(dead, NULL, 0);
	snprintf(err, sizeof(err), "instances/rtlab-%d", (int)dead);
	dir(err);
	strcat(err, "/current_tracer");
	put(err, "timerlat\n");
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  0);
	CHECK(o.kt != NULL);
	free(o.kt);
}

static const char timerlat_stream[] =
	"          <idle>-0       [001] d.h1.    54.029328: #1     context    irq timer_latency"
	"       932 ns\n"
	"      timerlat/1-867     [001] .....    54.029339: #1     context thread timer_latency"
	"     11700 ns\n"
	"          <idle>-0       [001] d.h1.    54.029528: #2     context    irq timer_latency"
	"      1800 ns\n"
	"      timerlat/1-867     [001] .....    54.029530: #2     context thread timer_latency"
	"      3070 ns\n"
	"      timerlat/1-867     [001] ....1..  54.029531: <stack trace>\n"
	" => timerlat_irq\n"
	"          <idle>-0       [001] d.h1.    54.029728: #3     context    irq timer_latency"
	"       700 ns\n"
	"      timerlat/1-867     [001] .....    54.030330: #3     context thread timer_latency"
	"    250000 ns\n"
	"      timerlat/1-867     [001] .....    54.030331: #4     context thread timer_lat"; /* cut */

static void test_timerlat(void)
{
	struct ktracer_opt o = { .choice = KTRACER_KERNEL };
	struct ktracer_thread s = { 0 };
	struct opt_fault at = { 0 };
	_Atomic int stop = 0;
	struct run_ctl ctl = { &stop, 0, 0 };
	struct common_params c;
	struct mthread t;
	struct ktracer *kt;
	char err[512];

	fake_tree("timerlat osnoise blk function nop\n");
	common(&c, "1", true);
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, 200 * NSEC_PER_USEC, &c, &at, err,
				    sizeof(err)),
		  0);
	if (!(kt = o.kt))
		return;
	CHECK_INT(ktracer_instance(kt, getpid(), err, sizeof(err)), 0);
	fake_instance(kt, 1, timerlat_stream);
	CHECK_INT(ktracer_configure(kt, err, sizeof(err)), 0);
	/* each setting read, then written; the ones already right left alone */
	CHECK_STR(get("osnoise/cpus"), "1\n");
	CHECK_STR(get("osnoise/timerlat_period_us"), "200\n");
	CHECK_STR(get("osnoise/stop_tracing_us"), "0\n");
	CHECK_STR(get("osnoise/stop_tracing_total_us"), "0");
	CHECK_STR(get("osnoise/print_stack"), "0");
	CHECK_STR(get("osnoise/options"), "OSNOISE_WORKLOAD");
	CHECK_STR(get("osnoise/period_us"), "100000\n"); /* osnoise's own: not timerlat's */
	CHECK_INT(kt->nknobs, 4);
	journal_has(kt); /* what puts each written file back, on disk before it was written */
	CHECK_STR(inst_file(kt, "current_tracer"), "timerlat");
	CHECK_STR(inst_file(kt, "tracing_on"), "0");
	CHECK(kt->mono_clock);

	/* a measuring thread joins the tracer set up above (ktracer_join did it in a run) */
	kt->tried = true;
	thread_init(&t, 1, 200 * NSEC_PER_USEC);
	CHECK_INT(ktracer_thread_setup(kt, &t, &s, err, sizeof(err)), 0);
	CHECK(t.fallback); /* no timerlat/1 kernel thread here; --allow-fallback keeps going */
	CHECK(strstr(t.setup_err, "timerlat/1 was not found") != NULL);
	ktracer_thread_loop(kt, &t, &s, &ctl);
	CHECK_STR(inst_file(kt, "tracing_on"), "1");
	CHECK(s.ended); /* the recorded stream's end */
	CHECK_INT(MT_GET(&t, count), 3);
	CHECK_INT(MT_GET(&t, min_ns), 3070);
	CHECK_INT(MT_GET(&t, max_ns), 250000);
	CHECK_INT(t.overruns, 1); /* 250 us > the 200 us period */
	CHECK_INT(s.irq.count, 3);
	CHECK_INT(s.irq.min_ns, 700);
	CHECK_INT(s.irq.max_ns, 1800);
	CHECK_INT(s.irq.sum_ns, 932 + 1800 + 700);
	CHECK_INT(s.user_ret.count, 0);
	CHECK_INT(s.other_lines, 2);
	CHECK_INT(t.nworst, 3);
	ktracer_thread_teardown(kt, &t, &s);
	CHECK(s.lost_known);
	CHECK_INT(s.lost, 3);

	/* the last thread out ended the tracer and put every setting back as found */
	CHECK_STR(inst_file(kt, "current_tracer"), "nop");
	CHECK_STR(inst_file(kt, "tracing_on"), "0");
	CHECK_STR(get("osnoise/cpus"), "0-3\n");
	CHECK_STR(get("osnoise/timerlat_period_us"), "1000\n");
	CHECK_STR(get("osnoise/stop_tracing_us"), "50\n");
	CHECK_STR(get("osnoise/stop_tracing_total_us"), "0");
	CHECK_STR(get("osnoise/options"), "NO_OSNOISE_WORKLOAD"); /* the opposite, written */
	CHECK(!kt->restore_failed);
	for (int i = 0; i < kt->nknobs; i++)
		CHECK(kt->knob[i].restored);
	CHECK(!kt->journaled);
	CHECK_INT(access(journal_path(), F_OK) ? errno : 0, ENOENT); /* all back: removed */
	CHECK_INT(kt->users, 0);
	sh("rm -rf '%s'", kt->inst.path); /* a real instance's files vanish with it */
	free(t.hist);
	series_free(&t.series);
	free(kt);
}

static const char osnoise_stream[] =
	"# tracer: osnoise\n"
	"           osnoise/2-859     [002] .....    81.637220: 1000000        190  99.98100"
	"       9     18      0   1007     18      1\n"
	"           osnoise/2-859     [002] .....    82.637220: 1000000       5675  99.43250"
	"     202      6      0   1013     25     21\n"
	"           osnoise/2-859     [002] .....    83.637220: 1000000        125  99.98750"
	"      45      1      0   1011     23      0\n";

static void test_osnoise(void)
{
	struct ktracer_opt o = { .choice = KTRACER_KERNEL };
	struct ktracer_thread s = { 0 };
	struct opt_fault at = { 0 };
	_Atomic int stop = 0;
	struct run_ctl ctl = { &stop, 2, 0 }; /* --loops 2: two periods */
	struct common_params c;
	struct mthread t;
	struct ktracer *kt;
	char err[512];

	fake_tree("timerlat osnoise nop\n");
	put("tracing_thresh", "7\n");
	put("osnoise/options", "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP OSNOISE_PREEMPT_DISABLE "
			       "NO_OSNOISE_IRQ_DISABLE\n");
	common(&c, "2", false);
	CHECK_INT(ktracer_opt_check(&o, KTRACER_OSNOISE, NSEC_PER_SEC, &c, &at, err, sizeof(err)),
		  0);
	if (!(kt = o.kt))
		return;
	CHECK_INT(ktracer_instance(kt, getpid(), err, sizeof(err)), 0);
	fake_instance(kt, 2, osnoise_stream);
	CHECK_INT(ktracer_configure(kt, err, sizeof(err)), 0);
	CHECK_STR(get("osnoise/cpus"), "2\n");
	CHECK_STR(get("osnoise/period_us"), "1000000\n");
	CHECK_STR(get("osnoise/runtime_us"), "1000000\n");
	CHECK_STR(get("osnoise/timerlat_period_us"), "1000\n");
	CHECK_STR(get("osnoise/options"), "NO_OSNOISE_PREEMPT_DISABLE");
	CHECK_STR(inst_file(kt, "current_tracer"), "osnoise");
	CHECK_INT(kt->threshold_ns, 7000);
	/* the period grows before the runtime: runtime <= period at every write */
	CHECK_STR(kt->knob[1].file, "osnoise/period_us");
	CHECK_STR(kt->knob[2].file, "osnoise/runtime_us");
	journal_has(kt);

	thread_init(&t, 2, NSEC_PER_SEC);
	CHECK_INT(ktracer_thread_open(kt, &t, &s), 0);
	CHECK_INT(ktracer_begin_once(kt), 0);
	ktracer_thread_loop(kt, &t, &s, &ctl);
	CHECK(!s.ended); /* stopped by --loops first */
	CHECK_INT(MT_GET(&t, count), 2);
	CHECK_INT(MT_GET(&t, min_ns), 9000);
	CHECK_INT(MT_GET(&t, max_ns), 202000);
	CHECK_INT(s.periods, 2);
	CHECK_INT(s.runtime_ns, 2 * NSEC_PER_SEC);
	CHECK_INT(s.noise_ns, (190 + 5675) * NSEC_PER_USEC);
	CHECK_INT(s.hw, 24);
	CHECK_INT(s.irqs, 2020);
	CHECK_INT(s.softirqs, 43);
	CHECK_INT(s.threads, 22);
	CHECK_INT(s.other_lines, 1); /* the header */
	ktracer_thread_teardown(kt, &t, &s);

	CHECK_INT(kt->users, 0);
	ktracer_end(kt); /* no thread joined here: end it by hand */
	CHECK_STR(get("osnoise/cpus"), "0-3\n");
	CHECK_STR(get("osnoise/period_us"), "100000\n");
	CHECK_STR(get("osnoise/runtime_us"), "100000\n");
	CHECK_STR(get("osnoise/stop_tracing_us"), "50\n");
	CHECK_STR(get("osnoise/options"), "OSNOISE_PREEMPT_DISABLE");
	CHECK_STR(inst_file(kt, "current_tracer"), "nop");
	ktracer_end(kt); /* idempotent */
	CHECK(!kt->restore_failed);
	sh("rm -rf '%s'", kt->inst.path);
	free(t.hist);
	series_free(&t.series);
	free(kt);
}

/* A real trace_pipe opened non-blocking never ends: a silent stream ends the loop by
 * --duration, or when the instance's tracing was turned off. A FIFO plays the pipe. */
static void test_silent_stream(void)
{
	struct ktracer_opt o = { .choice = KTRACER_KERNEL };
	struct ktracer_thread s = { 0 };
	struct opt_fault at = { 0 };
	_Atomic int stop = 0;
	struct run_ctl ctl = { &stop, 0, 100 * NSEC_PER_MSEC };
	struct common_params c;
	struct mthread t;
	struct ktracer *kt;
	char err[512], path[PATH_MAX];
	const char line[] = "timerlat/3-9 [003] ..... 5.000001: #1 context thread timer_latency "
			    "4200 ns\n";
	int wfd;

	fake_tree("timerlat osnoise nop\n");
	common(&c, "3", false);
	CHECK_INT(ktracer_opt_check(&o, KTRACER_TIMERLAT, NSEC_PER_MSEC, &c, &at, err, sizeof(err)),
		  0);
	if (!(kt = o.kt))
		return;
	CHECK_INT(ktracer_instance(kt, getpid(), err, sizeof(err)), 0);
	fake_instance(kt, 3, "");
	snprintf(path, sizeof(path), "%s/per_cpu/cpu3/trace_pipe", kt->inst.path);
	CHECK_INT(unlink(path), 0);
	CHECK_INT(mkfifo(path, 0600), 0);
	CHECK((wfd = open(path, O_RDWR)) >= 0); /* a writer: the reader sees EAGAIN, not EOF */
	CHECK_INT(write(wfd, line, sizeof(line) - 1), (int)sizeof(line) - 1);
	CHECK_INT(ktracer_configure(kt, err, sizeof(err)), 0);
	thread_init(&t, 3, NSEC_PER_MSEC);
	CHECK_INT(ktracer_thread_open(kt, &t, &s), 0);

	ktracer_thread_loop(kt, &t, &s, &ctl); /* --duration 100ms */
	CHECK(!s.ended && !s.read_errno);
	CHECK_INT(MT_GET(&t, count), 1);
	CHECK_INT(MT_GET(&t, max_ns), 4200);

	put(inst_file_path(kt, "tracing_on"), "0\n"); /* someone turned tracing off */
	ctl.duration_ns = 0;
	ktracer_thread_loop(kt, &t, &s, &ctl); /* ends on its own, after a silent second */
	CHECK(s.ended);
	CHECK_INT(MT_GET(&t, count), 1);

	(void)close(wfd);
	ktracer_thread_teardown(kt, &t, &s);
	ktracer_end(kt);
	CHECK_STR(get("osnoise/cpus"), "0-3\n");
	sh("rm -rf '%s'", kt->inst.path);
	free(t.hist);
	series_free(&t.series);
	free(kt);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	int rc;

	snprintf(root, sizeof(root), "%s/rtlab-test-ktracer.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	setenv(TRACEFS_ROOT_ENV, root, 1);
	snprintf(state, sizeof(state), "%s.state", root);
	setenv(KJOURNAL_STATE_ENV, state, 1);
	test_parse();
	test_refusals();
	test_timerlat();
	test_osnoise();
	test_silent_stream();
	rc = check_report("test_ktracer");
	sh("rm -rf '%s'", root);
	sh("rm -rf '%s'", state);
	return rc;
}
