/* Policy parsing/formatting; applying to a live thread and reading back (root only). */
#include "check.h"
#include "lib/policy.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define DL_HINT "root domain"

static void ok(const char *s, int policy, int prio, int nice, const char *canon)
{
	struct policy_spec p, q;
	char err[256] = "", buf[128];

	CHECK_INT(policy_parse(s, &p, err, sizeof(err)), 0);
	CHECK_STR(err, "");
	CHECK_INT(p.policy, policy);
	CHECK_INT(p.priority, prio);
	CHECK_INT(p.nice, nice);
	policy_format(&p, buf, sizeof(buf));
	CHECK_STR(buf, canon);
	/* the canonical form parses back to the same spec */
	CHECK_INT(policy_parse(buf, &q, err, sizeof(err)), 0);
	CHECK(!memcmp(&p, &q, sizeof(p)));
}

static void dl_ok(const char *s, uint64_t r, uint64_t d, uint64_t t, const char *canon)
{
	struct policy_spec p;

	ok(s, SCHED_DEADLINE, 0, 0, canon);
	policy_parse(s, &p, NULL, 0);
	CHECK_INT(p.runtime_ns, r);
	CHECK_INT(p.deadline_ns, d);
	CHECK_INT(p.period_ns, t);
}

static void bad(const char *s, const char *want_err)
{
	struct policy_spec p;
	char err[256] = "";

	CHECK_INT(policy_parse(s, &p, err, sizeof(err)), -EINVAL);
	CHECK_STR(err, want_err);
}

static void test_parse(void)
{
	ok("other", SCHED_OTHER, 0, 0, "other:0");
	ok("other:5", SCHED_OTHER, 0, 5, "other:5");
	ok("other:-20", SCHED_OTHER, 0, -20, "other:-20");
	ok("other:19", SCHED_OTHER, 0, 19, "other:19");
	ok("batch", SCHED_BATCH, 0, 0, "batch:0");
	ok("batch:3", SCHED_BATCH, 0, 3, "batch:3");
	ok("idle", SCHED_IDLE, 0, 0, "idle");
	ok("fifo:1", SCHED_FIFO, 1, 0, "fifo:1");
	ok("fifo:80", SCHED_FIFO, 80, 0, "fifo:80");
	ok("fifo:99", SCHED_FIFO, 99, 0, "fifo:99");
	ok("rr:50", SCHED_RR, 50, 0, "rr:50");
	dl_ok("deadline:200us/1ms/1ms", 200000, 1000000, 1000000, "deadline:200us/1ms/1ms");
	dl_ok("deadline:1.5ms/2ms/10ms", 1500000, 2000000, 10000000, "deadline:1500us/2ms/10ms");
	dl_ok("deadline:1024ns/1024ns/1s", 1024, 1024, 1000000000, "deadline:1024ns/1024ns/1s");
	dl_ok("deadline:1ms/1ms/1m", 1000000, 1000000, 60000000000ULL, "deadline:1ms/1ms/60s");

	bad("fifo:0", "\"fifo:0\": priority must be 1..99");
	bad("fifo:100", "\"fifo:100\": priority must be 1..99");
	bad("fifo:200", "\"fifo:200\": priority must be 1..99");
	bad("fifo", "\"fifo\": priority must be 1..99");
	bad("fifo:", "\"fifo:\": priority must be 1..99");
	bad("rr:x", "\"rr:x\": priority must be 1..99");
	bad("rr:1.5", "\"rr:1.5\": priority must be 1..99");
	bad("other:-21", "\"other:-21\": nice must be -20..19");
	bad("other:20", "\"other:20\": nice must be -20..19");
	bad("other:x", "\"other:x\": nice must be -20..19");
	bad("batch:20", "\"batch:20\": nice must be -20..19");
	bad("idle:1", "\"idle:1\": idle takes no parameter");
	bad("deadline",
	    "\"deadline\": expected deadline:RUNTIME/DEADLINE/PERIOD (e.g. deadline:200us/1ms/1ms)");
	bad("deadline:1ms/2ms",
	    "\"deadline:1ms/2ms\": expected deadline:RUNTIME/DEADLINE/PERIOD (e.g. deadline:200us/1ms/1ms)");
	bad("deadline:1ms//2ms",
	    "\"deadline:1ms//2ms\": expected deadline:RUNTIME/DEADLINE/PERIOD (e.g. deadline:200us/1ms/1ms)");
	bad("deadline:1ms/2ms/3ms/",
	    "\"deadline:1ms/2ms/3ms/\": expected deadline:RUNTIME/DEADLINE/PERIOD (e.g. deadline:200us/1ms/1ms)");
	bad("deadline:1ms/2ms/3ms/4ms",
	    "\"deadline:1ms/2ms/3ms/4ms\": expected deadline:RUNTIME/DEADLINE/PERIOD (e.g. deadline:200us/1ms/1ms)");
	bad("deadline:3ms/2ms/4ms", "\"deadline:3ms/2ms/4ms\": need runtime <= deadline <= period");
	bad("deadline:1ms/5ms/4ms", "\"deadline:1ms/5ms/4ms\": need runtime <= deadline <= period");
	bad("deadline:1000ns/1ms/1ms",
	    "\"deadline:1000ns/1ms/1ms\": runtime must be at least 1024ns");
	bad("deadline:1/2/3",
	    "\"deadline:1/2/3\": runtime \"1\": a duration needs a unit (ns, us, ms, s, m, h, d)");
	bad("deadline:1ms/2/3ms",
	    "\"deadline:1ms/2/3ms\": deadline \"2\": a duration needs a unit (ns, us, ms, s, m, h, d)");
	bad("deadline:1ms/2ms/3",
	    "\"deadline:1ms/2ms/3\": period \"3\": a duration needs a unit (ns, us, ms, s, m, h, d)");
	bad("",
	    "\"\": unknown policy (other[:NICE], batch, idle, fifo:PRIO, rr:PRIO, deadline:RUNTIME/DEADLINE/PERIOD)");
	bad("FIFO:10",
	    "\"FIFO:10\": unknown policy (other[:NICE], batch, idle, fifo:PRIO, rr:PRIO, deadline:RUNTIME/DEADLINE/PERIOD)");
	bad("fif:10",
	    "\"fif:10\": unknown policy (other[:NICE], batch, idle, fifo:PRIO, rr:PRIO, deadline:RUNTIME/DEADLINE/PERIOD)");

	CHECK_STR(policy_name(SCHED_OTHER), "other");
	CHECK_STR(policy_name(SCHED_FIFO), "fifo");
	CHECK_STR(policy_name(SCHED_RR), "rr");
	CHECK_STR(policy_name(SCHED_BATCH), "batch");
	CHECK_STR(policy_name(SCHED_IDLE), "idle");
	CHECK_STR(policy_name(SCHED_DEADLINE), "deadline");
	CHECK_STR(policy_name(42), "unknown");
}

/* A thread that sits still while the main thread changes its policy by tid. */
static pthread_barrier_t barrier;
static pid_t worker_tid;

static void *worker(void *arg)
{
	(void)arg;
	worker_tid = gettid();
	pthread_barrier_wait(&barrier); /* tid published */
	pthread_barrier_wait(&barrier); /* main is done with us */
	return NULL;
}

/* Apply S to TID and read it back; 1 if applied, 0 if skipped for lack of privilege. */
static int apply_and_read(const char *s, pid_t tid)
{
	struct policy_spec p, got;
	char err[512] = "";
	int ret;

	CHECK_INT(policy_parse(s, &p, err, sizeof(err)), 0);
	ret = policy_apply(&p, tid, err, sizeof(err));
	if (ret == -EPERM || ret == -EACCES || ret == -EBUSY) {
		printf("skipped: %s: %s\n", s, err);
		CHECK(strstr(err, strerror(-ret)) != NULL);
		return 0;
	}
	CHECK_INT(ret, 0);
	if (ret)
		fprintf(stderr, "%s: %s\n", s, err);
	CHECK_INT(policy_read(tid, &got), 0);
	CHECK_INT(got.policy, p.policy);
	CHECK_INT(got.priority, p.priority);
	if (p.policy == SCHED_OTHER || p.policy == SCHED_BATCH)
		CHECK_INT(got.nice, p.nice);
	CHECK_INT(got.runtime_ns, p.runtime_ns);
	CHECK_INT(got.deadline_ns, p.deadline_ns);
	CHECK_INT(got.period_ns, p.period_ns);
	return 1;
}

/* Pinned to one cpu, SCHED_DEADLINE must fail with the root-domain explanation. */
static void deadline_pinned(pthread_t t, pid_t tid)
{
	struct policy_spec p;
	char err[512];
	cpu_set_t one, all;
	int ret;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 || pthread_getaffinity_np(t, sizeof(all), &all) ||
	    CPU_COUNT(&all) < 2) {
		printf("skipped: pinned deadline: needs two usable cpus\n");
		return;
	}
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (CPU_ISSET(c, &all)) {
			CPU_SET(c, &one);
			break;
		}
	}
	CHECK_INT(pthread_setaffinity_np(t, sizeof(one), &one), 0);
	policy_parse("deadline:1ms/10ms/10ms", &p, err, sizeof(err));
	ret = policy_apply(&p, tid, err, sizeof(err));
	if (ret == 0) {
		printf("skipped: pinned deadline was admitted (exclusive cpuset?)\n");
		policy_parse("other", &p, err, sizeof(err));
		CHECK_INT(policy_apply(&p, tid, err, sizeof(err)), 0);
	} else {
		CHECK(ret == -EPERM || ret == -EBUSY);
		CHECK(strstr(err, DL_HINT) != NULL);
	}
	CHECK_INT(pthread_setaffinity_np(t, sizeof(all), &all), 0);
}

static void test_apply(void)
{
	struct policy_spec p;
	pthread_t t;
	char err[512];

	if (policy_read(0, &p) == -ENOSYS) {
		printf("skipped: apply: sched_getattr is not available (emulator?)\n");
		return;
	}
	CHECK_INT(policy_read(0, &p), 0);
	CHECK(strcmp(policy_name(p.policy), "unknown") != 0);
	/* a tid above any pid_max cannot exist */
	policy_parse("other", &p, err, sizeof(err));
	CHECK_INT(policy_apply(&p, 0x7fffffff, err, sizeof(err)), -ESRCH);
	CHECK_STR(err, "thread 2147483647 does not exist (No such process)");
	CHECK_INT(policy_read(0x7fffffff, &p), -ESRCH);

	if (geteuid() != 0) {
		printf("skipped: apply to a thread: not running as root\n");
		return;
	}
	CHECK_INT(pthread_barrier_init(&barrier, NULL, 2), 0);
	CHECK_INT(pthread_create(&t, NULL, worker, NULL), 0);
	pthread_barrier_wait(&barrier);

	apply_and_read("fifo:10", worker_tid);
	apply_and_read("rr:20", worker_tid);
	apply_and_read("other:5", worker_tid);
	apply_and_read("batch:7", worker_tid);
	apply_and_read("idle", worker_tid);
	apply_and_read("other:-5", worker_tid);
	deadline_pinned(t, worker_tid);
	if (apply_and_read("deadline:1ms/10ms/10ms", worker_tid))
		apply_and_read("other:0", worker_tid);

	pthread_barrier_wait(&barrier);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&barrier);
}

struct denied {
	int ret[3];
	char err[3][256];
};

/* As an unprivileged user without rlimits, each request must fail and say why. */
static void test_denied(void)
{
	static const char *const specs[3] = { "fifo:10", "other:-5", "deadline:1ms/10ms/10ms" };
	struct rlimit zero = { 0, 0 };
	struct denied d;
	int fds[2], status;
	pid_t pid;

	if (geteuid() != 0) {
		printf("skipped: denied: needs root to become an unprivileged user\n");
		return;
	}
	CHECK_INT(pipe(fds), 0);
	pid = fork();
	if (pid == 0) {
		struct policy_spec p;

		memset(&d, 0, sizeof(d));
		close(fds[0]);
		if (setrlimit(RLIMIT_RTPRIO, &zero) || setrlimit(RLIMIT_NICE, &zero) ||
		    setgid(65534) || setuid(65534))
			_exit(2);
		for (int i = 0; i < 3; i++) {
			policy_parse(specs[i], &p, d.err[i], sizeof(d.err[i]));
			d.ret[i] = policy_apply(&p, 0, d.err[i], sizeof(d.err[i]));
		}
		_exit(write(fds[1], &d, sizeof(d)) == (ssize_t)sizeof(d) ? 0 : 3);
	}
	close(fds[1]);
	CHECK(pid > 0);
	CHECK_INT(read(fds[0], &d, sizeof(d)), sizeof(d));
	close(fds[0]);
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	CHECK_INT(d.ret[0], -EPERM);
	CHECK_STR(d.err[0],
		  "SCHED_FIFO needs CAP_SYS_NICE or an RLIMIT_RTPRIO (Operation not permitted)");
	CHECK_INT(d.ret[1], -EPERM);
	CHECK_STR(
		d.err[1],
		"other with nice -5 needs CAP_SYS_NICE or an RLIMIT_NICE (Operation not permitted)");
	CHECK_INT(d.ret[2], -EPERM);
	CHECK(strstr(d.err[2], "SCHED_DEADLINE needs CAP_SYS_NICE") == d.err[2]);
	CHECK(strstr(d.err[2], DL_HINT) != NULL);
	CHECK(strstr(d.err[2], "admission control") != NULL);
}

int main(void)
{
	test_parse();
	test_apply();
	test_denied();
	return check_report("test_policy");
}
