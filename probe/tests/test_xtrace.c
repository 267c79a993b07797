/* The trace-line parser and the attribution of a late sample, on recorded lines
 * (x86-64, kernel 6.18; an arm64 IPI line) and on a planted timeline; the kernel stacks
 * (lines of a trace with options/sym-offset), their bounds, which event a stack belongs
 * to, and which stack a spike keeps for its main cause. */
#include "check.h"
#include "lib/xattr.h"
#include "lib/xstack.h"
#include "lib/xtrace.h"

#include <errno.h>
#include <stdlib.h>

static struct xev ev;
static int cpu;
static const char *mark;

static void test_parse(void)
{
	CHECK_INT(xtrace_parse("           sleep-32236   [001] d..2.  9044.561056: sched_switch: "
			       "prev_comm=bash prev_pid=32236 prev_prio=120 prev_state=D ==> "
			       "next_comm=swapper/1 next_pid=0 next_prio=120",
			       &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_SWITCH);
	CHECK_INT(cpu, 1);
	CHECK_INT(ev.ts_ns, 9044561056000LL);
	CHECK_INT(ev.pid, 0);
	CHECK_INT(ev.num, 120);
	CHECK_STR(ev.name, "swapper/1");
	CHECK_INT(ev.cur_pid, 32236);
	CHECK_STR(ev.cur_comm, "sleep");

	/* a comm with spaces and a dash */
	CHECK_INT(
		xtrace_parse(
			"  my task-x-77  [003] d..2.  1.000001: sched_switch: prev_comm=my task-x "
			"prev_pid=77 prev_prio=49 prev_state=R+ ==> next_comm=a b next_pid=5 "
			"next_prio=-1",
			&ev, &cpu, &mark),
		0);
	CHECK_INT(ev.type, XE_SWITCH);
	CHECK_STR(ev.name, "a b");
	CHECK_INT(ev.num, -1);
	CHECK_INT(ev.cur_pid, 77);
	CHECK_STR(ev.cur_comm, "my task-x");

	CHECK_INT(xtrace_parse("          <idle>-0       [001] d.s4.  9044.561184: sched_waking: "
			       "comm=bash pid=32236 prio=120 target_cpu=001",
			       &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_WAKING);
	CHECK_INT(ev.pid, 32236);
	CHECK_INT(ev.cur_pid, 0);

	CHECK_INT(xtrace_parse(
			  "          <idle>-0       [001] d.h1.  9044.561176: irq_handler_entry: "
			  "irq=36 name=virtio1-req.0",
			  &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_IRQ_IN);
	CHECK_INT(ev.num, 36);
	CHECK_STR(ev.name, "virtio1-req.0");
	CHECK_INT(
		xtrace_parse("          <idle>-0       [001] d.h1.  9044.561180: irq_handler_exit: "
			     "irq=36 ret=handled",
			     &ev, &cpu, &mark),
		0);
	CHECK_INT(ev.type, XE_IRQ_OUT);

	CHECK_INT(xtrace_parse("          <idle>-0       [001] ..s1.  9044.560042: softirq_entry: "
			       "vec=7 [action=SCHED]",
			       &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_SOFT_IN);
	CHECK_INT(ev.num, 7);
	CHECK_STR(ev.name, "SCHED");
	CHECK_INT(xtrace_parse("          <idle>-0       [001] d.h1.  9044.560035: softirq_raise: "
			       "vec=9 [action=RCU]",
			       &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_NONE);

	CHECK_INT(
		xtrace_parse(
			"          <idle>-0       [001] d.h1.  9044.560032: hrtimer_expire_entry: "
			"hrtimer=000000002fdcda96 function=tick_nohz_handler now=9044560031443",
			&ev, &cpu, &mark),
		0);
	CHECK_INT(ev.type, XE_HRT_IN);
	CHECK_STR(ev.name, "tick_nohz_handler");

	CHECK_INT(xtrace_parse(
			  "          <idle>-0       [001] d.h1.  9044.560030: local_timer_entry: "
			  "vector=236",
			  &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_VEC_IN);
	CHECK_INT(ev.num, 236);
	CHECK_STR(ev.name, "local_timer");
	CHECK_INT(
		xtrace_parse("          <idle>-0       [001] d.h1.  9044.560042: local_timer_exit: "
			     "vector=236",
			     &ev, &cpu, &mark),
		0);
	CHECK_INT(ev.type, XE_VEC_OUT);

	CHECK_INT(xtrace_parse("     kworker/1:1-88      [001] .....   100.000010: "
			       "workqueue_execute_start: work struct 00000000c0ffee00: function "
			       "vmstat_update",
			       &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_WORK_IN);
	CHECK_STR(ev.name, "vmstat_update");

	/* arm64: ipi_entry/ipi_exit print the reason in parentheses */
	CHECK_INT(xtrace_parse("          <idle>-0       [002] d.h1.    55.123456: ipi_entry: "
			       "(Rescheduling interrupts)",
			       &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_IPI_IN);
	CHECK_STR(ev.name, "Rescheduling interrupts");
	CHECK_INT(cpu, 2);

	CHECK_INT(xtrace_parse("CPU:3 [LOST 1234 EVENTS]", &ev, &cpu, &mark), 0);
	CHECK_INT(ev.type, XE_LOST);
	CHECK_INT(ev.num, 1234);
	CHECK_INT(cpu, 3);

	CHECK_INT(xtrace_parse("# tracer: nop", &ev, &cpu, &mark), -EINVAL);
	CHECK_INT(xtrace_parse("", &ev, &cpu, &mark), -EINVAL);
}

static void test_marker(void)
{
	struct xmark m = { 2, 12345, 1000000000123LL, 456789, 1000000500000LL, 0 }, back;
	char buf[200], line[300];

	xmark_format(&m, buf, sizeof(buf));
	snprintf(line, sizeof(line),
		 "     rtlab-probe-99      [001] .....   1000.000600: "
		 "tracing_mark_write: %s",
		 buf);
	line[strlen(line) - 1] = '\0'; /* the newline is not part of a line */
	CHECK_INT(xtrace_parse(line, &ev, &cpu, &mark), 0);
	CHECK_INT(ev.type, XE_MARK);
	CHECK(mark != NULL);
	CHECK_INT(xmark_parse(mark, &back), 0);
	CHECK_INT(back.thread, 2);
	CHECK_INT(back.cycle, 12345);
	CHECK_INT(back.act_ns, m.act_ns);
	CHECK_INT(back.lat_ns, 456789);
	CHECK_INT(back.write_ns, m.write_ns);
	CHECK_INT(xmark_parse("hello world", &back), -EINVAL);
}

/* The measuring thread (pid 500) switches to idle. */
#define TO_IDLE                                                                            \
	"  probe-500 [001] d..2. %lld.%06lld: sched_switch: prev_comm=probe prev_pid=500 " \
	"prev_prio=49 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120"

/* One event at T µs (relative to 1000 s). */
static void test_kernel_versions(void)
{
	char why[200] = "";

	CHECK(xstack_trigger_per_instance("6.1.0-56-rt-amd64", why, sizeof(why)));
	CHECK(xstack_trigger_per_instance("5.17.0", why, sizeof(why)));
	CHECK(xstack_trigger_per_instance("6.18.44-fc-v669", why, sizeof(why)));
	CHECK(!xstack_trigger_per_instance("5.16.20", why, sizeof(why)));
	CHECK(strstr(why, "Linux 5.16: its stacktrace trigger writes into the top-level") != NULL);
	CHECK(!xstack_trigger_per_instance("4.19.0-27-rt-amd64", why, sizeof(why)));
	CHECK(!xstack_trigger_per_instance("", why, sizeof(why)));
	CHECK_STR(why, "the kernel release is unknown");
}

static void push(struct xring *r, int64_t t_us, const char *line_fmt)
{
	char line[400];
	int64_t ts = 1000000000 + t_us; /* µs */

	snprintf(line, sizeof(line), line_fmt, (long long)(ts / 1000000),
		 (long long)(ts % 1000000));
	CHECK_INT(xtrace_parse(line, &ev, &cpu, &mark), 0);
	xring_push(r, &ev);
}

static int64_t cause_ns(const struct xspike *x, const char *name)
{
	for (int i = 0; i < x->ncauses; i++)
		if (!strcmp(x->causes[i].name, name))
			return x->causes[i].ns;
	return -1;
}

/*
 * Activation at 1000 s + 100 µs; the timer IRQ comes 5 µs late (5 µs unexplained),
 * runs 2 µs with 1 µs of callback, wakes the thread (pid 500), a FIFO thread "hog"
 * (pid 42) keeps the CPU 300 µs, an IRQ of 20 µs inside it, then the switch to the
 * measuring thread, which reads the clock at 350 µs.
 */
static void test_attribution(void)
{
	struct xring r;
	struct xspike *x = calloc(1, sizeof(*x));
	struct xmark m = { 0, 7, 1000000100000LL, 350000, 0, 0 };
	int64_t sum = 0;

	CHECK_INT(xring_init(&r, 64), 0);
	push(&r, 0,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=x prev_pid=9 "
	     "prev_prio=120 prev_state=S ==> next_comm=hog next_pid=42 next_prio=49");
	push(&r, 105, "  hog-42 [001] d.h1. %lld.%06lld: local_timer_entry: vector=236");
	push(&r, 106,
	     "  hog-42 [001] d.h1. %lld.%06lld: hrtimer_expire_entry: hrtimer=0000 "
	     "function=hrtimer_wakeup now=1");
	push(&r, 107,
	     "  hog-42 [001] d.h1. %lld.%06lld: sched_waking: comm=probe pid=500 prio=49 "
	     "target_cpu=001");
	push(&r, 107, "  hog-42 [001] d.h1. %lld.%06lld: hrtimer_expire_exit: hrtimer=0000");
	push(&r, 107, "  hog-42 [001] d.h1. %lld.%06lld: local_timer_exit: vector=236");
	push(&r, 200, "  hog-42 [001] d.h1. %lld.%06lld: irq_handler_entry: irq=45 name=eth0");
	push(&r, 220, "  hog-42 [001] d.h1. %lld.%06lld: irq_handler_exit: irq=45 ret=handled");
	push(&r, 440,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=hog prev_pid=42 "
	     "prev_prio=49 prev_state=S ==> next_comm=probe next_pid=500 next_prio=49");
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK_INT(x->woken_ns, 7000);
	CHECK_INT(x->switched_ns, 340000);
	CHECK_INT(cause_ns(x, "hog"), (440 - 220) * 1000 + (200 - 107) * 1000);
	CHECK_INT(cause_ns(x, "eth0"), 20000);
	CHECK_INT(cause_ns(x, "hrtimer_wakeup"), 1000);
	CHECK_INT(cause_ns(x, "local_timer"), 1000);
	CHECK_INT(x->unexplained_ns, 5000 + 10000); /* IRQ late; switch-in to the clock read */
	for (int i = 0; i < x->ncauses; i++) {
		sum += x->causes[i].ns;
		if (i)
			CHECK(x->causes[i].ns <= x->causes[i - 1].ns);
	}
	CHECK_INT(sum + x->unexplained_ns, m.lat_ns);
	CHECK(strstr(x->verdict, "thread `hog` (PID 42") != NULL);
	CHECK_INT(x->seg[0].start_ns, -100000);
	CHECK_INT(x->seg[x->nseg - 1].end_ns, m.lat_ns);
	for (int i = 1; i < x->nseg; i++)
		CHECK_INT(x->seg[i].start_ns, x->seg[i - 1].end_ns);
	CHECK(!x->truncated);
	CHECK(!x->events_lost);
	xring_free(&r);

	/* The switch out of idle is not traced: the next line names the task. */
	CHECK_INT(xring_init(&r, 64), 0);
	push(&r, 0, TO_IDLE);
	push(&r, 600, "  <idle>-0 [001] d.h1. %lld.%06lld: local_timer_entry: vector=236");
	push(&r, 601,
	     "  <idle>-0 [001] d.h1. %lld.%06lld: sched_waking: comm=probe pid=500 "
	     "prio=49 target_cpu=001");
	push(&r, 602, "  <idle>-0 [001] d.h1. %lld.%06lld: local_timer_exit: vector=236");
	push(&r, 610,
	     "  kworker/1:1-88 [001] d..2. %lld.%06lld: sched_switch: prev_comm=kworker/1:1 "
	     "prev_pid=88 prev_prio=120 prev_state=I ==> next_comm=probe next_pid=500 "
	     "next_prio=49");
	m.lat_ns = 520000; /* activation at 100 µs: the wake-up at 620 µs */
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK_INT(x->unexplained_idle_ns, 500000);
	CHECK_INT(cause_ns(x, "kworker/1:1"), 8000); /* its line: on the CPU from 602 µs */
	CHECK_INT(x->switched_ns, 510000);
	CHECK(strstr(x->verdict, "while the CPU was idle") != NULL);
	xring_free(&r);

	/* A ring too small for the window: marked truncated, still summing up. */
	CHECK_INT(xring_init(&r, 2), 0);
	push(&r, 50,
	     "  a-1 [001] d..2. %lld.%06lld: sched_switch: prev_comm=a prev_pid=1 "
	     "prev_prio=120 prev_state=S ==> next_comm=b next_pid=2 next_prio=120");
	push(&r, 60,
	     "  b-2 [001] d..2. %lld.%06lld: sched_switch: prev_comm=b prev_pid=2 "
	     "prev_prio=120 prev_state=S ==> next_comm=c next_pid=3 next_prio=120");
	push(&r, 70,
	     "  c-3 [001] d..2. %lld.%06lld: sched_switch: prev_comm=c prev_pid=3 "
	     "prev_prio=120 prev_state=S ==> next_comm=d next_pid=4 next_prio=120");
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK(x->truncated);
	sum = x->unexplained_ns;
	for (int i = 0; i < x->ncauses; i++)
		sum += x->causes[i].ns;
	CHECK_INT(sum, m.lat_ns);
	xring_free(&r);
	free(x);
}

/*
 * The sched meter's window: it ends at the switch-in itself, and a timer with slack
 * (SCHED_OTHER: 50 µs) may fire that long after the activation (1000 s + 100 µs).
 * A thread "hog" (pid 42) runs; the timer fires at its hard expiry + 2 µs, wakes pid
 * 500, and hog keeps the CPU until the switch into pid 500 at 300 µs, the end.
 */
static void test_sched_window(void)
{
	struct xring r;
	struct xspike *x = calloc(1, sizeof(*x));
	struct xmark m = { 0, 3, 1000000100000LL, 200000, 0, 50000 };

	CHECK_INT(xring_init(&r, 64), 0);
	push(&r, 0,
	     "  x-9 [001] d..2. %lld.%06lld: sched_switch: prev_comm=x prev_pid=9 "
	     "prev_prio=120 prev_state=S ==> next_comm=hog next_pid=42 next_prio=120");
	push(&r, 152, "  hog-42 [001] d.h1. %lld.%06lld: local_timer_entry: vector=236");
	push(&r, 153,
	     "  hog-42 [001] d.h1. %lld.%06lld: hrtimer_expire_entry: hrtimer=0000 "
	     "function=hrtimer_wakeup now=1");
	push(&r, 153,
	     "  hog-42 [001] d.h1. %lld.%06lld: sched_waking: comm=app pid=500 prio=120 "
	     "target_cpu=001");
	push(&r, 154, "  hog-42 [001] d.h1. %lld.%06lld: hrtimer_expire_exit: hrtimer=0000");
	push(&r, 154, "  hog-42 [001] d.h1. %lld.%06lld: local_timer_exit: vector=236");
	push(&r, 300,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=hog prev_pid=42 "
	     "prev_prio=120 prev_state=R ==> next_comm=app next_pid=500 next_prio=120");
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK_INT(cause_ns(x, "timer slack"), 50000);
	CHECK_INT(x->unexplained_ns, 2000); /* after the hard expiry, before the interrupt */
	CHECK_INT(cause_ns(x, "local_timer"), 1000);
	CHECK_INT(cause_ns(x, "hrtimer_wakeup"), 1000);
	CHECK_INT(cause_ns(x, "hog"), 146000); /* up to the switch line, which names it */
	CHECK_INT(x->woken_ns, 53000);
	CHECK_INT(x->switched_ns, 200000);
	CHECK(strstr(x->verdict, "thread `hog` (PID 42") != NULL);
	CHECK_INT(x->seg[x->nseg - 1].kind, XK_THREAD);
	CHECK_INT(x->seg[x->nseg - 1].end_ns, 200000);

	/* The slack itself is the main cause: an idle CPU, the timer at its hard expiry. */
	m.lat_ns = 52000;
	xring_free(&r);
	CHECK_INT(xring_init(&r, 64), 0);
	push(&r, 0, TO_IDLE);
	push(&r, 150,
	     "  <idle>-0 [001] d.h1. %lld.%06lld: hrtimer_expire_entry: hrtimer=0000 "
	     "function=hrtimer_wakeup now=1");
	push(&r, 150,
	     "  <idle>-0 [001] d.h1. %lld.%06lld: sched_waking: comm=app pid=500 "
	     "prio=120 target_cpu=001");
	push(&r, 151, "  <idle>-0 [001] d.h1. %lld.%06lld: hrtimer_expire_exit: hrtimer=0000");
	push(&r, 152,
	     "  <idle>-0 [001] d..2. %lld.%06lld: sched_switch: prev_comm=swapper/1 "
	     "prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=app next_pid=500 "
	     "next_prio=120");
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK_INT(cause_ns(x, "timer slack"), 50000);
	CHECK_INT(cause_ns(x, "hrtimer_wakeup"), 1000);
	CHECK_INT(x->unexplained_idle_ns, 1000);
	CHECK_INT(x->causes[0].kind, XK_SLACK);
	CHECK(!strncmp(x->verdict, "timer slack 50 µs", strlen("timer slack 50 µs")));
	xring_free(&r);
	free(x);
}

static const char *const recorded[] = {
	" => trace_event_raw_event_hrtimer_expire_entry+0x59/0xa0",
	" => __hrtimer_run_queues+0x1f5/0x250",
	" => hrtimer_interrupt+0xf8/0x240",
	" => __sysvec_apic_timer_interrupt+0x54/0x110",
	" => sysvec_apic_timer_interrupt+0x60/0x80",
	" => asm_sysvec_apic_timer_interrupt+0x16/0x20",
	" => read_zero+0x72/0xd0",
	" => vfs_read+0xbb/0x360",
	" => ksys_read+0x66/0xe0",
};

static void test_lines(void)
{
	CHECK_INT(xtrace_parse("    rtlab-kplant-26151   [001] d.h1. 25101.448613: <stack trace>",
			       &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_STACK);
	CHECK_INT(cpu, 1);
	CHECK_INT(ev.ts_ns, 25101448613000LL);
	/* with options/sym-offset a marker names its writer with an offset */
	CHECK_INT(xtrace_parse("  probe-7 [001] ..... 10.000005: tracing_mark_write+0x1a/0x60: "
			       "rtlab-spike thread=0 cycle=1 act=1 lat=2 at=3",
			       &ev, &cpu, &mark),
		  0);
	CHECK_INT(ev.type, XE_MARK);
	CHECK(mark && !strncmp(mark, "rtlab-spike", 11));
	CHECK_INT(xtrace_parse(recorded[1], &ev, &cpu, &mark), -EINVAL);
}

static void test_store(void)
{
	struct xstacks s;
	const struct xstack *st;
	uint32_t id, first;
	char line[200];

	CHECK_INT(xstacks_init(&s, 4), 0);
	CHECK_INT(xstacks_frame(&s, recorded[1]), 0); /* no stack begun: not kept */
	first = id = xstacks_begin(&s);
	CHECK(id != 0);
	for (size_t i = 0; i < sizeof(recorded) / sizeof(recorded[0]); i++)
		CHECK_INT(xstacks_frame(&s, recorded[i]), 0);
	CHECK_INT(xstacks_frame(&s, "  a-1 [001] d..2. 10.000010: sched_switch: x"), -EINVAL);
	CHECK_INT(xstacks_frame(&s, recorded[2]), 0); /* after its end: not kept */
	st = xstacks_get(&s, id);
	CHECK(st != NULL);
	CHECK_INT(st->nframes, 8); /* the tracing code's own frame left out */
	CHECK_STR(xstack_frame_at(st, 0), "__hrtimer_run_queues+0x1f5/0x250");
	CHECK_STR(xstack_frame_at(st, 5), "read_zero+0x72/0xd0");
	CHECK(!st->truncated);

	id = xstacks_begin(&s); /* bounded: XSTACK_FRAMES frames */
	for (int i = 0; i < XSTACK_FRAMES + 5; i++) {
		snprintf(line, sizeof(line), " => f%d+0x1/0x2", i);
		CHECK_INT(xstacks_frame(&s, line), 0);
	}
	st = xstacks_get(&s, id);
	CHECK_INT(st->nframes, XSTACK_FRAMES);
	CHECK(st->truncated);
	id = xstacks_begin(&s); /* bounded: XSTACK_BYTES */
	memset(line, 'g', sizeof(line));
	memcpy(line, " => ", 4);
	line[sizeof(line) - 1] = '\0';
	for (int i = 0; i < XSTACK_FRAMES; i++)
		CHECK_INT(xstacks_frame(&s, line), 0);
	st = xstacks_get(&s, id);
	CHECK(st->truncated && st->len <= XSTACK_BYTES);
	CHECK_INT((int)strlen(xstack_frame_at(st, 0)), XSTACK_FRAME_LEN - 1);
	for (int i = 0; i < 4; i++)
		(void)xstacks_begin(&s);
	CHECK(xstacks_get(&s, first) == NULL); /* overwritten */
	CHECK(xstacks_get(&s, 0) == NULL);
	xstacks_free(&s);
}

#define T0 1000000000000LL /* 1000 s, ns */

/* A FIFO thread "hog" (pid 42) in the kernel when the measuring thread's timer
 * expires (1000 s + 100 µs): the stack at that interrupt is the spike's. */
static void test_spike_stack(void)
{
	struct xring r;
	struct xspike *x = calloc(1, sizeof(*x));
	struct xmark m = { 0, 7, T0 + 100000, 350000, 0, 0 };

	CHECK_INT(xring_init(&r, 64), 0);
	push(&r, 0,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=x prev_pid=9 "
	     "prev_prio=120 prev_state=S ==> next_comm=hog next_pid=42 next_prio=49");
	push(&r, 50,
	     "  hog-42 [001] d.h1. %lld.%06lld: hrtimer_expire_entry: hrtimer=0000 "
	     "function=tick_nohz_handler now=1");
	CHECK(xring_attach_stack(&r, T0 + 53000, 11)); /* a tick before: not the spike's */
	push(&r, 50, "  hog-42 [001] d.h1. %lld.%06lld: hrtimer_expire_exit: hrtimer=0000");
	push(&r, 101, "  hog-42 [001] d.h1. %lld.%06lld: local_timer_entry: vector=236");
	push(&r, 101,
	     "  hog-42 [001] d.h1. %lld.%06lld: hrtimer_expire_entry: hrtimer=0000 "
	     "function=hrtimer_wakeup now=1");
	push(&r, 102,
	     "  hog-42 [001] d.h1. %lld.%06lld: sched_waking: comm=probe pid=500 prio=49 "
	     "target_cpu=001");
	CHECK(xring_attach_stack(&r, T0 + 104000, 12));  /* after the waking: still its */
	CHECK(!xring_attach_stack(&r, T0 + 105000, 13)); /* it has one already */
	push(&r, 103, "  hog-42 [001] d.h1. %lld.%06lld: hrtimer_expire_exit: hrtimer=0000");
	push(&r, 103, "  hog-42 [001] d.h1. %lld.%06lld: local_timer_exit: vector=236");
	push(&r, 440,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=hog prev_pid=42 "
	     "prev_prio=49 prev_state=S ==> next_comm=probe next_pid=500 next_prio=49");
	CHECK(!xring_attach_stack(&r, T0 + 441000, 14)); /* no timer event just before */
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK(strstr(x->verdict, "thread `hog`") != NULL);
	CHECK_INT(x->stack_why, XSW_OK);
	CHECK_INT(x->stack_id, 12);
	CHECK_INT(x->stack_at_ns, 1000);
	xring_free(&r);

	/* The timer interrupt stopped idle (no stack), the rest is unexplained idle time. */
	CHECK_INT(xring_init(&r, 64), 0);
	push(&r, 0, TO_IDLE);
	push(&r, 400,
	     "  <idle>-0 [001] d.h1. %lld.%06lld: hrtimer_expire_entry: hrtimer=0000 "
	     "function=hrtimer_wakeup now=1");
	push(&r, 401,
	     "  <idle>-0 [001] d.h1. %lld.%06lld: sched_waking: comm=probe pid=500 "
	     "prio=49 target_cpu=001");
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK_INT(x->stack_why, XSW_IDLE);
	CHECK_INT(x->stack_id, 0);
	xring_free(&r);

	/* Interrupts off in "hog": the late interrupt stopped it, but came without a stack. */
	CHECK_INT(xring_init(&r, 64), 0);
	push(&r, 0,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=x prev_pid=9 "
	     "prev_prio=120 prev_state=S ==> next_comm=hog next_pid=42 next_prio=120");
	push(&r, 420,
	     "  hog-42 [001] d.h1. %lld.%06lld: hrtimer_expire_entry: hrtimer=0000 "
	     "function=hrtimer_wakeup now=1");
	push(&r, 421,
	     "  hog-42 [001] d.h1. %lld.%06lld: sched_waking: comm=probe pid=500 "
	     "prio=49 target_cpu=001");
	push(&r, 430,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=hog prev_pid=42 "
	     "prev_prio=120 prev_state=R ==> next_comm=probe next_pid=500 next_prio=49");
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK(strstr(x->verdict, "while `hog` ran") != NULL);
	CHECK_INT(x->stack_why, XSW_NO_STACK);
	xring_free(&r);

	/* No interrupt here and no waking either: the timer expired on another CPU. */
	CHECK_INT(xring_init(&r, 64), 0);
	push(&r, 0,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=x prev_pid=9 "
	     "prev_prio=120 prev_state=S ==> next_comm=hog next_pid=42 next_prio=49");
	push(&r, 430,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=hog prev_pid=42 "
	     "prev_prio=49 prev_state=S ==> next_comm=probe next_pid=500 next_prio=49");
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK(strstr(x->verdict, "thread `hog`") != NULL);
	CHECK_INT(x->stack_why, XSW_REMOTE);
	xring_free(&r);

	/* Woken here by an interrupt that is not a timer's: no timer event, not remote. */
	CHECK_INT(xring_init(&r, 64), 0);
	push(&r, 0,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=x prev_pid=9 "
	     "prev_prio=120 prev_state=S ==> next_comm=hog next_pid=42 next_prio=49");
	push(&r, 120,
	     "  hog-42 [001] d.h1. %lld.%06lld: sched_waking: comm=probe pid=500 prio=49 "
	     "target_cpu=001");
	push(&r, 430,
	     "  hog-42 [001] d..2. %lld.%06lld: sched_switch: prev_comm=hog prev_pid=42 "
	     "prev_prio=49 prev_state=S ==> next_comm=probe next_pid=500 next_prio=49");
	xattr_explain(&r, &m, 1, 500, 0, 100000, x);
	CHECK_INT(x->stack_why, XSW_NO_EVENT);
	xring_free(&r);
	free(x);
}

int main(void)
{
	test_parse();
	test_marker();
	test_attribution();
	test_sched_window();
	test_lines();
	test_kernel_versions();
	test_store();
	test_spike_stack();
	return check_report("test_xtrace");
}
