/* Kernel stacks of the spike explanation: the frame lines of a recorded trace
 * (x86-64, kernel 6.18, options/sym-offset), their bounds, which event a stack belongs
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

static void push(struct xring *r, int64_t t_us, const char *line_fmt)
{
	char line[400];
	int64_t ts = 1000000000 + t_us; /* µs */

	snprintf(line, sizeof(line), line_fmt, (long long)(ts / 1000000),
		 (long long)(ts % 1000000));
	CHECK_INT(xtrace_parse(line, &ev, &cpu, &mark), 0);
	xring_push(r, &ev);
}

#define T0 1000000000000LL /* 1000 s, ns */

/* A FIFO thread "hog" (pid 42) in the kernel when the measuring thread's timer
 * expires (1000 s + 100 µs): the stack at that interrupt is the spike's. */
static void test_spike_stack(void)
{
	struct xring r;
	struct xspike *x = calloc(1, sizeof(*x));
	struct xmark m = { 0, 7, T0 + 100000, 350000, 0 };

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
	CHECK(xring_attach_stack(&r, T0 + 104000, 12)); /* after the waking: still its */
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
	push(&r, 0,
	     "  probe-500 [001] d..2. %lld.%06lld: sched_switch: prev_comm=probe "
	     "prev_pid=500 prev_prio=49 prev_state=S ==> next_comm=swapper/1 next_pid=0 "
	     "next_prio=120");
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
	free(x);
}

int main(void)
{
	test_lines();
	test_store();
	test_spike_stack();
	return check_report("test_xstack");
}
