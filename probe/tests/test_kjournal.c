/* The journal of the osnoise/ settings on a fake tracefs tree: written before each
 * write, read back byte for byte, applied after its run died (SIGKILL, a zombie, its PID
 * taken by a later process), never while its run lives, void after a reboot, refused
 * when damaged or naming a file outside osnoise/. */
#include "check.h"
#include "faketree.h"
#include "lib/kjournal.h"
#include "lib/tracefs.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char state[220], jpath[PATH_MAX];

static bool journal_exists(void)
{
	return !access(jpath, F_OK);
}

/* osnoise/ as the user left it. */
static void user_settings(void)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s/osnoise", root);
	(void)mkdir(dir, 0700);
	put("osnoise/cpus", "0-3\n");
	put("osnoise/timerlat_period_us", "1000\n");
	put("osnoise/options", "DEFAULTS OSNOISE_WORKLOAD NO_PANIC_ON_STOP\n");
}

/* What a run does: journal, then write; the journal names the changed files. */
static int run_writes(void)
{
	struct kjournal_undo u[2] = { { "osnoise/cpus", "0-3\n" },
				      { "osnoise/timerlat_period_us", "1000\n" } };
	char err[300];
	int rc;

	if ((rc = kjournal_begin(root, err, sizeof(err))))
		return rc;
	if ((rc = kjournal_update(root, u, 1, err, sizeof(err))))
		return rc;
	put("osnoise/cpus", "1\n");
	if ((rc = kjournal_update(root, u, 2, err, sizeof(err))))
		return rc;
	put("osnoise/timerlat_period_us", "200\n");
	return 0;
}

static void settings_are_the_users(void)
{
	CHECK_STR(get("osnoise/cpus"), "0-3\n");
	CHECK_STR(get("osnoise/timerlat_period_us"), "1000\n");
}

static void settings_are_the_runs(void)
{
	CHECK_STR(get("osnoise/cpus"), "1\n");
	CHECK_STR(get("osnoise/timerlat_period_us"), "200\n");
}

static void test_own_journal(void)
{
	struct kjournal j;
	char err[300];
	int restored;
	pid_t owner;

	user_settings();
	CHECK_INT(run_writes(), 0);
	CHECK_INT(kjournal_read(jpath, &j, err, sizeof(err)), 0);
	CHECK_INT(j.owner, getpid());
	CHECK_STR(j.root, root);
	CHECK_INT(j.n, 2);
	CHECK_STR(j.undo[0].file, "osnoise/cpus");
	CHECK_STR(j.undo[0].value, "0-3\n"); /* byte for byte, newline and all */
	CHECK_STR(j.undo[1].value, "1000\n");
	/* a live run's journal: a second run is busy, a cleanup leaves it */
	CHECK_INT(kjournal_begin(root, err, sizeof(err)), -EBUSY);
	CHECK(strstr(err, "holds the osnoise/ settings") != NULL);
	CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), -EBUSY);
	settings_are_the_runs();
	CHECK(journal_exists());
	CHECK_INT(kjournal_end(), 0);
	CHECK(!journal_exists());
	CHECK_INT(kjournal_end(), 0); /* none: nothing to do */
}

/* A child runs, writes, then dies by SIGKILL; REAP: reaped before the recovery (else a
 * zombie, dead all the same). */
static void test_killed_run(bool reap)
{
	char err[300];
	int restored, status;
	pid_t child, owner;

	user_settings();
	if (!(child = fork())) {
		if (!run_writes())
			raise(SIGKILL);
		_exit(1);
	}
	if (reap) {
		CHECK_INT(waitpid(child, &status, 0), child);
	} else { /* dead, not reaped: a zombie, whose /proc/PID/stat says Z */
		siginfo_t info;

		CHECK_INT(waitid(P_PID, child, &info, WEXITED | WNOWAIT), 0);
	}
	settings_are_the_runs();
	CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), 0);
	CHECK_INT(restored, 2);
	CHECK_INT(owner, child);
	settings_are_the_users();
	CHECK(!journal_exists());
	if (!reap)
		CHECK_INT(waitpid(child, &status, 0), child);
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), 0);
	CHECK_INT(restored, -1); /* nothing left */
}

/* A run still alive (stopped here) keeps its journal; once killed, it is applied. */
static void test_live_run(void)
{
	char err[300];
	int restored, status, fds[2];
	pid_t child, owner;
	char c;

	user_settings();
	CHECK_INT(pipe(fds), 0);
	if (!(child = fork())) {
		(void)close(fds[0]);
		if (!run_writes())
			(void)!write(fds[1], "x", 1);
		pause();
		_exit(1);
	}
	(void)close(fds[1]);
	CHECK_INT(read(fds[0], &c, 1), 1);
	(void)close(fds[0]);
	CHECK_INT(kjournal_begin(root, err, sizeof(err)), -EBUSY);
	CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), -EBUSY);
	settings_are_the_runs();
	kill(child, SIGKILL);
	CHECK_INT(waitpid(child, &status, 0), child);
	CHECK_INT(kjournal_begin(root, err, sizeof(err)), 0); /* recovers, then takes over */
	settings_are_the_users();
	CHECK_INT(kjournal_end(), 0);
}

static void boot_id(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

	snprintf(buf, len, "-");
	if (f && fgets(buf, (int)len, f))
		buf[strcspn(buf, "\n")] = '\0';
	if (f)
		fclose(f);
}

/* A journal written by hand: OWNER_LINE, then a cpus undo of "0-3\n". */
static void journal_by_hand(const char *owner_line, const char *root_line, const char *undo)
{
	FILE *f = fopen(jpath, "w");

	if (!f)
		return;
	fprintf(f, "rtlab-probe osnoise journal 1\n%s\n%s\n%s", owner_line, root_line, undo);
	fclose(f);
}

static void test_by_hand(void)
{
	char err[300], id[64], line[160], rootline[260];
	int restored;
	pid_t owner;

	boot_id(id, sizeof(id));
	snprintf(rootline, sizeof(rootline), "root %s", root);
	/* PID 1 lives, but started at another time: a later process that got the PID */
	user_settings();
	put("osnoise/cpus", "1\n");
	snprintf(line, sizeof(line), "owner 1 999999999999 %s", id);
	journal_by_hand(line, rootline, "undo osnoise/cpus 302d330a\n");
	CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), 0);
	CHECK_INT(restored, 1);
	CHECK_STR(get("osnoise/cpus"), "0-3\n");

	/* another boot's journal is void: removed, nothing written */
	put("osnoise/cpus", "1\n");
	journal_by_hand("owner 1 5 00000000-0000-0000-0000-000000000000", rootline,
			"undo osnoise/cpus 302d330a\n");
	CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), 0);
	CHECK_INT(restored, 0);
	CHECK_STR(get("osnoise/cpus"), "1\n");
	CHECK(!journal_exists());

	/* another tree's journal is not applied here */
	journal_by_hand(line, "root /elsewhere", "undo osnoise/cpus 302d330a\n");
	CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), -EBUSY);
	CHECK(strstr(err, "of the tracefs at /elsewhere") != NULL);
	CHECK_STR(get("osnoise/cpus"), "1\n");

	/* damaged: refused with the reason, nothing written, left for the user */
	static const char *const bad[] = {
		"undo osnoise/../../etc/passwd 30\n", /* only osnoise/ files */
		"undo current_tracer 6e6f70\n",
		"undo osnoise/cpus 3g\n",   /* not hex */
		"undo osnoise/cpus 303\n",  /* odd */
		"undo osnoise/cpus 0030\n", /* a NUL byte */
		"undo osnoise/cpus\n",
		"undo osnoise/cpus 30 extra\n",
		"undo osnoise/cpus 30", /* no newline: cut */
		"junk\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		journal_by_hand(line, rootline, bad[i]);
		CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), -EINVAL);
		CHECK(strstr(err, "not a journal of rtlab-probe") != NULL);
		CHECK_STR(get("osnoise/cpus"), "1\n");
		CHECK(journal_exists());
	}
	journal_by_hand("owner x", rootline, "");
	CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), -EINVAL);
	(void)unlink(jpath);

	/* a write back that fails keeps the journal, to be retried */
	journal_by_hand(line, rootline, "undo osnoise/print_stack 300a\n"); /* no such file */
	CHECK_INT(kjournal_recover(root, &restored, &owner, err, sizeof(err)), -EIO);
	CHECK(strstr(err, "the journal stays") != NULL);
	CHECK(journal_exists());
	(void)unlink(jpath);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char cmd[PATH_MAX];
	int rc;

	snprintf(root, sizeof(root), "%s/rtlab-test-kjournal.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(state, sizeof(state), "%s/state", root);
	setenv(KJOURNAL_STATE_ENV, state, 1);
	CHECK_INT(kjournal_path(jpath, sizeof(jpath)), 0);
	(void)mkdir(state, 0700);
	test_own_journal();
	test_killed_run(true);
	test_killed_run(false);
	test_live_run();
	test_by_hand();
	rc = check_report("test_kjournal");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	CHECK_INT(system(cmd), 0);
	return rc;
}
