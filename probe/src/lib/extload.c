#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "extload.h"
#include "loadrun.h"
#include "timeutil.h"

#define EXTLOAD_GRACE_NS (500 * NSEC_PER_MSEC) /* for the tools to clean up after SIGTERM */

int extload_find(const char *tool, char *err, size_t errlen)
{
	const char *path = getenv("PATH");
	char dir[4096], full[4200];

	if (!path || !*path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");

		snprintf(dir, sizeof(dir), "%.*s", (int)n, path);
		snprintf(full, sizeof(full), "%s/%s", n ? dir : ".", tool);
		if (!access(full, X_OK))
			return 0;
		path += n + (path[n] == ':');
	}
	snprintf(err, errlen, "%s is not installed (not found on $PATH)", tool);
	return -ENOENT;
}

int extload_split(char *args, char **argv, int *argc, int max)
{
	char *save = NULL;

	for (char *tok = strtok_r(args, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		if (*argc >= max - 1)
			return -E2BIG;
		argv[(*argc)++] = tok;
	}
	argv[*argc] = NULL;
	return 0;
}

/* In a fresh child: output to /dev/null, default signal handling, then exec. */
static void exec_tool(char *const argv[])
{
	sigset_t none;
	int null = open("/dev/null", O_RDWR);

	if (null >= 0) {
		(void)dup2(null, STDIN_FILENO);
		(void)dup2(null, STDOUT_FILENO);
		(void)dup2(null, STDERR_FILENO);
		if (null > STDERR_FILENO)
			(void)close(null);
	}
	(void)signal(SIGPIPE, SIG_DFL); /* the probe ignores it; exec would keep that */
	(void)signal(SIGTERM, SIG_DFL);
	(void)sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	execvp(argv[0], argv);
	_exit(127);
}

int extload_run_sync(char *const argv[], int64_t timeout_ns)
{
	struct timespec nap = ns_to_ts(NSEC_PER_MSEC);
	int64_t until = mono_now_ns() + timeout_ns;
	int st, rc;
	pid_t pid = fork(), r;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		(void)setpgid(0, 0); /* its own group: whatever it forks is killed with it */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		exec_tool(argv);
	}
	(void)setpgid(pid, pid); /* also here: no race with the child's own call */
	while ((r = waitpid(pid, &st, WNOHANG)) == 0 && mono_now_ns() < until)
		(void)nanosleep(&nap, NULL);
	if (r == pid)
		rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	else
		rc = r < 0 ? -errno : -ETIMEDOUT;
	(void)kill(-pid, SIGKILL); /* nothing of a check may outlive it */
	while ((r = waitpid(-pid, NULL, 0)) > 0 || (r < 0 && errno == EINTR))
		; /* the tool itself when it timed out, and what it forked (we are a subreaper) */
	return rc;
}

static pid_t guard_parent;                   /* the probe */
static volatile sig_atomic_t guard_stopping; /* SIGTERM received */
static char guard_dir[4096];                 /* private temporary directory, or "" */

static void guard_signal(int sig)
{
	(void)sig;
	guard_stopping = 1; /* acted on by extload_wait, outside the handler */
}

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	(void)(type == FTW_DP ? rmdir(path) : unlink(path));
	return 0;
}

/* Stop the tools (SIGTERM to the group), give them a grace period, clean up, end. */
static void guard_finish(void)
{
	struct timespec nap = ns_to_ts(5 * NSEC_PER_MSEC);
	int64_t until = mono_now_ns() + EXTLOAD_GRACE_NS;

	(void)signal(SIGTERM, SIG_IGN);
	(void)kill(0, SIGTERM); /* the whole load group: the tools' own children too */
	while (mono_now_ns() < until && waitpid(-1, NULL, WNOHANG) >= 0)
		(void)nanosleep(&nap, NULL);
	if (guard_dir[0])
		(void)nftw(guard_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	/* The probe is gone: nobody else will kill what is left of the group. */
	if (getppid() != guard_parent)
		(void)kill(0, SIGKILL);
	_exit(0);
}

void extload_guard(void)
{
	struct sigaction sa = { .sa_handler = guard_signal };

	guard_parent = getppid();
	(void)sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGTERM, &sa, NULL);
	/* The probe's death now stops the tools gracefully instead of orphaning them. */
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() != guard_parent)
		guard_finish();
}

const char *extload_private_dir(const char *tool)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(guard_dir, sizeof(guard_dir), "%s/rtlab-%s.XXXXXX", tmp && *tmp ? tmp : "/tmp",
		 tool);
	if (!mkdtemp(guard_dir))
		guard_dir[0] = '\0';
	return guard_dir[0] ? guard_dir : NULL;
}

pid_t extload_spawn(char *const argv[])
{
	pid_t pid = load_fork_child();

	if (pid < 0)
		return -errno;
	if (pid == 0)
		exec_tool(argv);
	return pid;
}

int extload_wait(pid_t pid, int64_t timeout_ns)
{
	struct timespec nap = ns_to_ts(20 * NSEC_PER_MSEC);
	int64_t until = mono_now_ns() + timeout_ns;
	int st;

	for (;;) {
		pid_t r = pid > 0 ? waitpid(pid, &st, WNOHANG) : 0;

		/* A stop, even when it is what ended the tool: clean up, never restart. */
		if (guard_stopping)
			guard_finish();
		if (r == pid)
			return st;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (mono_now_ns() >= until)
			return -ETIMEDOUT;
		(void)nanosleep(&nap, NULL);
	}
}

/* utime+stime (+ cutime+cstime when CHILDREN) of /proc/PID/stat in ticks; PPID out. */
static uint64_t stat_ticks(const char *pid, bool children, long *ppid)
{
	char path[64], buf[1024];
	unsigned long long ut, st, cut, cst;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);

	(void)fclose(f);
	buf[n] = '\0';
	char *p = strrchr(buf, ')'); /* comm may contain anything */

	if (!p || sscanf(p + 2, "%*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
			 ppid, &ut, &st, &cut, &cst) != 5)
		return 0;
	return ut + st + (children ? cut + cst : 0);
}

uint64_t extload_cpu_ms(pid_t pid)
{
	char self[32];
	long ppid, hz = sysconf(_SC_CLK_TCK);
	uint64_t ticks;
	DIR *d = opendir("/proc");
	struct dirent *e;

	snprintf(self, sizeof(self), "%d", (int)pid);
	ticks = stat_ticks(self, true, &ppid);
	while (d && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		uint64_t t = stat_ticks(e->d_name, true, &ppid);

		if (ppid == pid)
			ticks += t;
	}
	if (d)
		(void)closedir(d);
	return hz > 0 ? ticks * 1000 / (uint64_t)hz : 0;
}
