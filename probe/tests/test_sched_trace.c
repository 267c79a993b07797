/* The sched meter's reading of trace lines (kernel 6.18 formats): a timer wake-up
 * measured from the soft expiry, a wake-up from another CPU from sched_waking, an
 * expiry while the thread still runs, preemptions, migrations, a CLOCK_REALTIME timer,
 * timers of other tasks ignored. With arguments FILE TID: replay a recorded trace. */
#include "check.h"
#include "lib/explain.h"
#include "lib/explain_priv.h"
#include "lib/hist.h"
#include "lib/sampler.h"
#include "lib/series.h"
#include "meters/sched.h"

#include <stdio.h>
#include <stdlib.h>

static struct sched_trace st;
static struct mthread th[2];

static void reset(pid_t tid)
{
	memset(&st, 0, sizeof(st));
	for (int c = 0; c < CPULIST_MAX; c++)
		st.cb[c].slot = -1;
	st.nthreads = 1;
	st.th[0].tid = tid;
	st.th[0].act_ns = INT64_MIN;
	st.th[0].last_timer_act = INT64_MIN;
	free(th[0].hist);
	series_free(&th[0].series);
	memset(th, 0, sizeof(th));
	th[0].hist = calloc(1, sizeof(*th[0].hist));
	th[0].worst_floor = INT64_MIN;
	th[0].explain_floor = INT64_MAX;
	th[0].miss_floor = INT64_MAX;
	(void)series_init(&th[0].series, 1000000000, 60);
}

static void feed(const char *line)
{
	sched_trace_line(&st, th, line);
}

#define SW(ts, cpu, pcomm, ppid, state, ncomm, npid)                                      \
	"  " pcomm "-" #ppid " [00" #cpu "] d..2. " ts ": sched_switch: prev_comm=" pcomm \
	" prev_pid=" #ppid " prev_prio=120 prev_state=" state " ==> next_comm=" ncomm     \
	" next_pid=" #npid " next_prio=19"

static void test_timer(void)
{
	reset(500);
	/* armed by the thread for 100.001000000, soft = hard (SCHED_FIFO: no slack) */
	feed("  rt-500 [001] d..1. 100.000010: hrtimer_start: hrtimer=00000000aa function="
	     "hrtimer_wakeup expires=100001000000 softexpires=100001000000 mode=ABS was_armed=0");
	feed(SW("100.000012", 1, "rt", 500, "S", "swapper/1", 0));
	/* another task's timer at the same time: not ours */
	feed("  x-7 [000] d..1. 100.000020: hrtimer_start: hrtimer=00000000bb function="
	     "hrtimer_wakeup expires=100001000000 softexpires=100001000000 mode=ABS was_armed=0");
	feed("  <idle>-0 [000] d.h.. 100.001002: hrtimer_expire_entry: hrtimer=00000000bb "
	     "function=hrtimer_wakeup now=100001001500");
	feed("  <idle>-0 [000] d.h2. 100.001003: sched_waking: comm=x pid=7 prio=120 "
	     "target_cpu=000");
	feed("  <idle>-0 [000] d.h.. 100.001004: hrtimer_expire_exit: hrtimer=00000000bb");
	feed("  <idle>-0 [001] d.h.. 100.001003: hrtimer_expire_entry: hrtimer=00000000aa "
	     "function=hrtimer_wakeup now=100001002000");
	feed("  <idle>-0 [001] d.h2. 100.001004: sched_waking: comm=rt pid=500 prio=19 "
	     "target_cpu=001");
	feed("  <idle>-0 [001] d.h.. 100.001005: hrtimer_expire_exit: hrtimer=00000000aa");
	feed(SW("100.001009", 1, "swapper/1", 0, "R", "rt", 500));
	CHECK_INT(th[0].count, 1);
	CHECK_INT(th[0].max_ns, 9000); /* 100.001009 - 100.001000000 */
	CHECK_INT(st.th[0].timer.count, 1);
	CHECK_INT(st.th[0].wakeup.count, 0);
	/* preempted, back, then asleep: one activation of 5 + 3 us */
	feed(SW("100.001014", 1, "rt", 500, "R+", "hog", 9));
	feed(SW("100.001020", 1, "hog", 9, "R", "rt", 500));
	feed("  hog-9 [000] d..2. 100.001021: sched_migrate_task: comm=rt pid=500 prio=19 "
	     "orig_cpu=1 dest_cpu=0");
	feed(SW("100.001023", 0, "rt", 500, "S", "swapper/0", 0));
	CHECK_INT(st.th[0].preemptions, 1);
	CHECK_INT(st.th[0].migrations, 1);
	CHECK_INT(st.th[0].runtime.count, 1);
	CHECK_INT(st.th[0].runtime.max_ns, 8000);
	CHECK_INT(st.th[0].oncpu_ns, 10000); /* and 2 us from its first line to its sleep */
	CHECK_INT(st.th[0].switch_untraced, 0);
}

/* Some kernels do not trace the switch out of a CPU's idle task: the thread's own next
 * line shows that it ran; its latency ends at the CPU's previous event. */
static void test_untraced_switch(void)
{
	reset(800);
	feed("  rt-800 [001] d..1. 400.000010: hrtimer_start: hrtimer=00000000ee function="
	     "hrtimer_wakeup expires=400001000000 softexpires=400001000000 mode=ABS was_armed=0");
	feed(SW("400.000012", 1, "rt", 800, "S", "swapper/1", 0));
	feed("  <idle>-0 [001] d.h.. 400.001003: hrtimer_expire_entry: hrtimer=00000000ee "
	     "function=hrtimer_wakeup now=400001002000");
	feed("  <idle>-0 [001] d.h2. 400.001004: sched_waking: comm=rt pid=800 prio=19 "
	     "target_cpu=001");
	feed("  <idle>-0 [001] dNh.. 400.001006: hrtimer_expire_exit: hrtimer=00000000ee");
	feed("  rt-800 [001] d..1. 400.001030: hrtimer_start: hrtimer=00000000ef function="
	     "hrtimer_wakeup expires=400002000000 softexpires=400002000000 mode=ABS was_armed=0");
	CHECK_INT(th[0].count, 1);
	CHECK_INT(th[0].max_ns, 6000);
	CHECK_INT(st.th[0].switch_untraced, 1);
	CHECK(st.th[0].running);
}

static void test_wakeup_and_overrun(void)
{
	reset(600);
	/* woken through a pipe from CPU 0: sched_waking to running */
	feed("  w-8 [000] d..2. 200.000100: sched_waking: comm=r pid=600 prio=120 target_cpu=001");
	feed(SW("200.000130", 1, "swapper/1", 0, "R", "r", 600));
	CHECK_INT(th[0].count, 1);
	CHECK_INT(th[0].max_ns, 30000);
	CHECK_INT(st.th[0].wakeup.count, 1);
	/* a timerfd of the thread expires while it runs: an overrun, the sample at once */
	feed("  r-600 [001] d..1. 200.000140: hrtimer_start: hrtimer=00000000cc function="
	     "timerfd_tmrproc expires=200000150000 softexpires=200000150000 mode=ABS was_armed=0");
	feed("  r-600 [001] d.h.. 200.000160: hrtimer_expire_entry: hrtimer=00000000cc "
	     "function=timerfd_tmrproc now=200000159000");
	feed("  r-600 [001] d.h.. 200.000161: hrtimer_expire_exit: hrtimer=00000000cc");
	CHECK_INT(st.th[0].overruns, 1);
	/* samples=timer: the wake-up is counted but is no sample */
	reset(600);
	st.samples = SCHED_S_TIMER;
	feed("  w-8 [000] d..2. 200.000100: sched_waking: comm=r pid=600 prio=120 target_cpu=001");
	feed(SW("200.000130", 1, "swapper/1", 0, "R", "r", 600));
	CHECK_INT(th[0].count, 0);
	CHECK_INT(st.th[0].wakeup.count, 1);
}

static void test_realtime_clock(void)
{
	reset(700);
	st.clock_off[0] = 1700000000000000000LL; /* CLOCK_REALTIME - CLOCK_MONOTONIC */
	st.clock_off[1] = 0;
	st.clock_off[2] = 1700000037000000000LL;
	feed("  p-700 [001] d..1. 300.000000: hrtimer_start: hrtimer=00000000dd function="
	     "hrtimer_wakeup expires=1700000300001000000 softexpires=1700000300001000000 "
	     "mode=ABS was_armed=0");
	feed(SW("300.000002", 1, "p", 700, "S", "swapper/1", 0));
	feed("  <idle>-0 [001] d.h.. 300.001004: hrtimer_expire_entry: hrtimer=00000000dd "
	     "function=hrtimer_wakeup now=1700000300001003000");
	feed("  <idle>-0 [001] d.h2. 300.001005: sched_waking: comm=p pid=700 prio=19 "
	     "target_cpu=001");
	feed("  <idle>-0 [001] d.h.. 300.001006: hrtimer_expire_exit: hrtimer=00000000dd");
	feed(SW("300.001010", 1, "swapper/1", 0, "R", "p", 700));
	CHECK_INT(th[0].count, 1);
	CHECK_INT(th[0].max_ns, 10000);
	CHECK(st.th[0].non_mono_clock);
}

/* --explain fed by the meter: a thread with 50 us of timer slack is due at 500.001000;
 * "hog" (pid 9) holds CPU 1, the timer fires at 500.001052 (its stack follows on the
 * merged trace_pipe, a line of CPU 0 after it), and hog keeps the CPU until 500.001400. */
static void test_explained(void)
{
	static struct explain x;
	static struct explain_thread xt;
	static struct xcpu cpus[2];
	const struct xspike *k;
	int64_t sum;

	memset(&x, 0, sizeof(x));
	x.threshold_ns = 100000;
	x.max = 2;
	x.clock_mono = x.fed = x.stacks_recorded = true;
	x.ncpus = 2;
	x.cpus = cpus;
	x.nthreads = 1;
	x.th = &xt;
	x.kept = calloc(2, sizeof(*x.kept));
	for (int c = 0; c < 2; c++) {
		cpus[c].cpu = c;
		CHECK_INT(xring_init(&cpus[c].ring, 256), 0);
		CHECK_INT(xstacks_init(&cpus[c].stacks, 8), 0);
	}
	reset(500);
	st.x = &x;
	feed("  rt-500 [001] d..1. 500.000010: hrtimer_start: hrtimer=00000000a1 function="
	     "hrtimer_wakeup expires=500001050000 softexpires=500001000000 mode=ABS was_armed=0");
	feed(SW("500.000012", 1, "rt", 500, "S", "swapper/1", 0));
	feed(SW("500.000900", 1, "swapper/1", 0, "R", "hog", 9));
	feed("  hog-9 [001] d.h.. 500.001052: hrtimer_expire_entry: hrtimer=00000000a1 "
	     "function=hrtimer_wakeup now=500001051000");
	feed("  hog-9 [001] d.h1. 500.001052: <stack trace>");
	feed(" => __hrtimer_run_queues+0x1f5/0x250");
	feed(" => asm_sysvec_apic_timer_interrupt+0x16/0x20");
	feed(" => clear_page_erms+0x7/0x10");
	feed("  w-8 [000] d..2. 500.001052: sched_waking: comm=x pid=77 prio=120 target_cpu=000");
	feed("  hog-9 [001] d.h2. 500.001053: sched_waking: comm=rt pid=500 prio=120 "
	     "target_cpu=001");
	feed("  hog-9 [001] dNh.. 500.001054: hrtimer_expire_exit: hrtimer=00000000a1");
	feed(SW("500.001400", 1, "hog", 9, "R", "rt", 500));
	CHECK_INT(th[0].count, 1);
	CHECK_INT(th[0].max_ns, 400000); /* from the soft expiry: the slack is latency too */
	CHECK_INT(x.nkept, 1);
	CHECK_INT(xt.marked, 1);
	k = &x.kept[0];
	CHECK_INT(k->m.lat_ns, 400000);
	CHECK_INT(k->cpu, 1);
	CHECK_INT(k->tid, 500);
	CHECK_INT(k->causes[0].kind, XK_THREAD);
	CHECK_INT(k->causes[0].id, 9);
	CHECK_INT(k->causes[0].ns, 346000);
	CHECK(strstr(k->verdict, "thread `hog` (PID 9") != NULL);
	sum = k->unexplained_ns;
	for (int i = 0; i < k->ncauses; i++) {
		sum += k->causes[i].ns;
		if (k->causes[i].kind == XK_SLACK)
			CHECK_INT(k->causes[i].ns, 50000);
	}
	CHECK_INT(sum, 400000);
	CHECK_INT(k->switched_ns, 400000);
	CHECK_INT(k->stack_why, XSW_OK);
	CHECK_INT(k->stack.nframes, 3);
	CHECK(!strcmp(xstack_frame_at(&k->stack, 2), "clear_page_erms+0x7/0x10"));
	/* a sample below the threshold is not explained */
	feed(SW("500.001500", 1, "rt", 500, "S", "hog", 9));
	feed("  hog-9 [001] d..2. 500.001600: sched_waking: comm=rt pid=500 prio=120 "
	     "target_cpu=001");
	feed(SW("500.001650", 1, "hog", 9, "R", "rt", 500));
	CHECK_INT(th[0].count, 2);
	CHECK_INT(x.nkept, 1);
	st.x = NULL;
	for (int c = 0; c < 2; c++) {
		xring_free(&cpus[c].ring);
		xstacks_free(&cpus[c].stacks);
	}
	free(x.kept);
}

static int replay(const char *path, pid_t tid)
{
	char line[4096];
	FILE *f = fopen(path, "r");

	if (!f)
		return 1;
	reset(tid);
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		feed(line);
	}
	(void)fclose(f);
	printf("samples %llu timer %llu wakeup %llu overruns %llu running-wakeups %llu\n",
	       (unsigned long long)th[0].count, (unsigned long long)st.th[0].timer.count,
	       (unsigned long long)st.th[0].wakeup.count, (unsigned long long)st.th[0].overruns,
	       (unsigned long long)st.th[0].wakeups_running);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3)
		return replay(argv[1], (pid_t)atoi(argv[2]));
	test_timer();
	test_wakeup_and_overrun();
	test_realtime_clock();
	test_untraced_switch();
	test_explained();
	return check_report("test_sched_trace");
}
