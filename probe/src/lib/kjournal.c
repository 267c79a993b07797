#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kjournal.h"
#include "tracefs.h"

#define MAGIC "rtlab-probe osnoise journal 1"

/* The only files a journal may name: every osnoise/ file a tracer run writes. */
static const char *const journal_files[] = {
	"osnoise/cpus",
	"osnoise/period_us",
	"osnoise/runtime_us",
	"osnoise/stop_tracing_us",
	"osnoise/stop_tracing_total_us",
	"osnoise/timerlat_period_us",
	"osnoise/print_stack",
	"osnoise/options",
	NULL,
};

static bool known_file(const char *file)
{
	for (int i = 0; journal_files[i]; i++)
		if (!strcmp(file, journal_files[i]))
			return true;
	return false;
}

static const char *state_dir(void)
{
	const char *dir = getenv(KJOURNAL_STATE_ENV);

	return dir && *dir ? dir : KJOURNAL_DEFAULT_DIR;
}

int kjournal_path(char *buf, size_t len)
{
	if (snprintf(buf, len, "%s/%s", state_dir(), KJOURNAL_NAME) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

/* State letter and start time (field 22) of PID from /proc/PID/stat. 0 or -errno. */
static int proc_stat(pid_t pid, char *state, unsigned long long *start)
{
	char path[40], buf[1024];
	const char *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	(void)close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EIO;
	buf[n] = '\0';
	if (!(p = strrchr(buf, ')'))) /* the name in parentheses may hold anything */
		return -EIO;
	if (sscanf(p + 1,
		   " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d "
		   "%llu",
		   state, start) != 2)
		return -EIO;
	return 0;
}

bool kjournal_owner_alive(pid_t pid, unsigned long long start)
{
	unsigned long long now;
	char state;

	if (pid <= 0 || proc_stat(pid, &state, &now))
		return false;
	return state != 'Z' && state != 'X' && now == start;
}

/* This boot's ID, "-" when the kernel does not say. */
static void boot_id(char *buf, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	snprintf(buf, len, "-");
	if (f && fgets(buf, (int)len, f))
		buf[strcspn(buf, " \t\n")] = '\0';
	if (f)
		(void)fclose(f);
	if (!buf[0])
		snprintf(buf, len, "-");
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* HEX (lowercase, even length) into OUT of LEN bytes, NUL-terminated. 0 or -EINVAL. */
static int unhex(const char *hex, char *out, size_t len)
{
	size_t n = strlen(hex), i;

	if (n % 2 || n / 2 >= len)
		return -EINVAL;
	for (i = 0; i < n / 2; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0 || (!hi && !lo))
			return -EINVAL;
		out[i] = (char)(hi << 4 | lo);
	}
	out[i] = '\0';
	return 0;
}

static int damaged(const char *path, int line, const char *why, char *err, size_t errlen)
{
	snprintf(err, errlen, "%.200s: line %d: %s: not a journal of rtlab-probe (remove it)", path,
		 line, why);
	return -EINVAL;
}

int kjournal_read(const char *path, struct kjournal *j, char *err, size_t errlen)
{
	char buf[KJOURNAL_MAX_BYTES + 1], *line, *save = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), no = 0;
	struct stat st;
	ssize_t n;

	memset(j, 0, sizeof(*j));
	if (fd < 0) {
		if (errno == ENOENT)
			return -ENOENT;
		snprintf(err, errlen, "cannot read %.200s (%s)", path, strerror(errno));
		return -errno;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > KJOURNAL_MAX_BYTES) {
		(void)close(fd);
		return damaged(path, 0, "not a regular file of at most 16 KiB", err, errlen);
	}
	n = read(fd, buf, sizeof(buf) - 1);
	(void)close(fd);
	if (n < 0) {
		snprintf(err, errlen, "cannot read %.200s (%s)", path, strerror(errno));
		return -EIO;
	}
	buf[n] = '\0';
	if (strlen(buf) != (size_t)n || !n || buf[n - 1] != '\n')
		return damaged(path, 0, "not whole lines of text", err, errlen);
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char file[64], hex[2 * KJOURNAL_VALUE_MAX + 2];
		int pid, used = 0;

		if (++no == 1) {
			if (strcmp(line, MAGIC))
				return damaged(path, no, "no header", err, errlen);
		} else if (no == 2) {
			if (sscanf(line, "owner %d %llu %39s%n", &pid, &j->start, j->boot_id,
				   &used) != 3 ||
			    line[used] || pid <= 0)
				return damaged(path, no, "no owner", err, errlen);
			j->owner = pid;
		} else if (no == 3) {
			if (strncmp(line, "root /", 6) || strlen(line + 5) >= sizeof(j->root))
				return damaged(path, no, "no root", err, errlen);
			snprintf(j->root, sizeof(j->root), "%s", line + 5);
		} else {
			struct kjournal_undo *u = &j->undo[j->n];

			if (j->n == KJOURNAL_ENTRIES_MAX)
				return damaged(path, no, "too many lines", err, errlen);
			if (strlen(line) >= sizeof(hex) + 70 ||
			    sscanf(line, "undo %63s %641s%n", file, hex, &used) != 2 ||
			    line[used] || !known_file(file) ||
			    unhex(hex, u->value, sizeof(u->value)))
				return damaged(path, no, "not an osnoise/ file and its value", err,
					       errlen);
			snprintf(u->file, sizeof(u->file), "%.39s", file); /* known: short */
			j->n++;
		}
	}
	if (no < 3)
		return damaged(path, no, "cut short", err, errlen);
	return 0;
}

/* The state directory fsynced, so that a rename or unlink in it lasts. */
static void sync_dir(void)
{
	int fd = open(state_dir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)fsync(fd);
		(void)close(fd);
	}
}

int kjournal_recover(const char *root, int *restored, pid_t *owner, char *err, size_t errlen)
{
	struct tracefs_instance top;
	char path[512], here[40];
	struct kjournal j;
	int rc, failed = 0;

	*restored = -1;
	*owner = 0;
	if ((rc = kjournal_path(path, sizeof(path)))) {
		snprintf(err, errlen, "$%s is too long", KJOURNAL_STATE_ENV);
		return rc;
	}
	if ((rc = kjournal_read(path, &j, err, errlen)))
		return rc == -ENOENT ? 0 : rc;
	*owner = j.owner;
	boot_id(here, sizeof(here));
	if (strcmp(j.boot_id, here) && strcmp(here, "-")) { /* an earlier boot's: void */
		*restored = 0;
		rc = unlink(path) ? -errno : 0;
		sync_dir();
		return rc;
	}
	if (kjournal_owner_alive(j.owner, j.start)) {
		snprintf(err, errlen,
			 "rtlab-probe %d runs a tracer and holds the osnoise/ settings "
			 "(journal %.200s) (busy)",
			 (int)j.owner, path);
		return -EBUSY;
	}
	if (strcmp(j.root, root)) {
		snprintf(
			err, errlen,
			"%.200s holds the osnoise/ settings of the tracefs at %.200s, not of %.200s "
			"(busy)",
			path, j.root, root);
		return -EBUSY;
	}
	snprintf(top.path, sizeof(top.path), "%s", root);
	for (int i = j.n - 1; i >= 0; i--) {
		if ((rc = tracefs_write(&top, j.undo[i].file, j.undo[i].value))) {
			if (!failed++)
				snprintf(err, errlen,
					 "cannot write back %s/%s from %.200s (%s); the journal "
					 "stays",
					 root, j.undo[i].file, path, strerror(-rc));
		}
	}
	if (failed)
		return -EIO;
	*restored = j.n;
	rc = unlink(path) ? -errno : 0;
	sync_dir();
	if (rc)
		snprintf(err, errlen, "cannot remove %.200s (%s)", path, strerror(-rc));
	return rc;
}

/* This process's journal with UNDO[0..N) into a temporary file beside PATH (fsynced),
 * then linked (EXCLUSIVE: -EEXIST when there is one) or renamed to PATH. */
static int put_journal(const char *path, const char *root, const struct kjournal_undo *undo, int n,
		       bool exclusive)
{
	char tmp[600], id[40];
	unsigned long long start = 0;
	char state;
	FILE *f;
	int rc = 0;

	boot_id(id, sizeof(id));
	(void)proc_stat(getpid(), &state, &start);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	(void)unlink(tmp); /* left by a killed process that had our PID */
	if (!(f = fopen(tmp, "wex")))
		return -errno;
	fprintf(f, "%s\nowner %d %llu %s\nroot %s\n", MAGIC, (int)getpid(), start, id, root);
	for (int i = 0; i < n; i++) {
		fprintf(f, "undo %s ", undo[i].file);
		for (const unsigned char *c = (const unsigned char *)undo[i].value; *c; c++)
			fprintf(f, "%02x", *c);
		fputc('\n', f);
	}
	if (fflush(f) || fsync(fileno(f)))
		rc = -errno;
	if (fclose(f) && !rc)
		rc = -errno;
	if (!rc && exclusive && link(tmp, path))
		rc = -errno;
	if (!rc && !exclusive && rename(tmp, path))
		rc = -errno;
	if (exclusive || rc)
		(void)unlink(tmp);
	if (!rc)
		sync_dir();
	return rc;
}

int kjournal_begin(const char *root, char *err, size_t errlen)
{
	char path[512];
	int rc, restored;
	pid_t owner;

	if ((rc = kjournal_recover(root, &restored, &owner, err, errlen)))
		return rc;
	(void)kjournal_path(path, sizeof(path));
	if (mkdir(state_dir(), 0700) && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "cannot make the state directory %.200s (%s)", state_dir(),
			 strerror(errno));
		return rc;
	}
	rc = put_journal(path, root, NULL, 0, true);
	if (rc == -EEXIST)
		snprintf(err, errlen,
			 "another rtlab-probe began a tracer run at the same time (journal "
			 "%.200s) (busy)",
			 path);
	else if (rc)
		snprintf(err, errlen, "cannot write the journal %.200s (%s)", path, strerror(-rc));
	return rc == -EEXIST ? -EBUSY : rc;
}

int kjournal_update(const char *root, const struct kjournal_undo *undo, int n, char *err,
		    size_t errlen)
{
	char path[512];
	int rc;

	(void)kjournal_path(path, sizeof(path));
	if ((rc = put_journal(path, root, undo, n, false)))
		snprintf(err, errlen, "cannot write the journal %.200s (%s)", path, strerror(-rc));
	return rc;
}

int kjournal_end(void)
{
	char path[512], err[300];
	struct kjournal j;
	int rc;

	(void)kjournal_path(path, sizeof(path));
	if ((rc = kjournal_read(path, &j, err, sizeof(err))))
		return rc == -ENOENT ? 0 : rc;
	if (j.owner != getpid())
		return -EPERM; /* not ours: another run's, after ours was recovered */
	rc = unlink(path) && errno != ENOENT ? -errno : 0;
	sync_dir();
	return rc;
}
