/* Outputs: checked before measuring (tried for real, nothing left behind), written
 * whole or not at all, write failures and FIFOs without a reader reported. */
#include "check.h"
#include "lib/atomicfile.h"
#include "lib/outfile.h"
#include "lib/rawring.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d)))
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static int fill(FILE *f, const void *arg)
{
	(void)arg;
	fputs("{}\n", f);
	return 0;
}

/* Names at and beyond the file system's limit: refused before, never after measuring. */
static void check_names(const char *dir)
{
	char path[PATH_MAX + 300], name[300];
	long max = pathconf(dir, _PC_NAME_MAX);

	if (max <= 0 || max >= (long)sizeof(name) - 1)
		return;
	memset(name, 'n', (size_t)max + 1);
	name[max + 1] = '\0';
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CHECK_INT(atomic_check(path), -ENAMETOOLONG);
	CHECK_INT(file_check_writable(path), -ENAMETOOLONG);
	name[max] = '\0'; /* the longest name: its temporary name is shortened, not refused */
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	CHECK_INT(atomic_check(path), 0);
	CHECK_INT(atomic_write(path, fill, NULL, NULL), 0);
	CHECK_INT(access(path, F_OK), 0);
	CHECK_INT(entries(dir), 1); /* no temporary file left */
	(void)unlink(path);
}

/* Special files: a socket refused, /dev/full's ENOSPC, a FIFO without a reader. */
static void check_special(const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[PATH_MAX + 32];
	struct outfile o;
	int fd, sig = 0;

	fd = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", dir) < (int)sizeof(sa.sun_path)
		     ? socket(AF_UNIX, SOCK_STREAM, 0)
		     : -1; /* a socket path is short */
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		CHECK_INT(atomic_check(sa.sun_path), -ENXIO);
		CHECK_INT(file_check_writable(sa.sun_path), -ENXIO);
		(void)unlink(sa.sun_path);
	}
	if (fd >= 0)
		(void)close(fd);
	if (!access("/dev/full", W_OK)) {
		CHECK_INT(atomic_check("/dev/full"), 0);
		CHECK_INT(atomic_write("/dev/full", fill, NULL, &sig), -ENOSPC);
	}
	snprintf(path, sizeof(path), "%s/fifo", dir);
	CHECK_INT(mkfifo(path, 0600), 0);
	CHECK_INT(atomic_check(path), 0);                   /* checked without opening: no wait */
	CHECK_INT(outfile_open(&o, path, SIGTERM), -EINTR); /* stopping: not waited for */
	CHECK_INT(o.stop_signal, SIGTERM);
	(void)unlink(path);
}

/* Raw samples that cannot be written are counted, not lost silently. */
static void check_ring_on_full(void)
{
	struct ring r, *rings[1] = { &r };
	struct raw_writer w = { 0 };
	char why[80];

	if (access("/dev/full", W_OK))
		return;
	CHECK_INT(ring_open(&r, "/dev/full", 0, -1, 1000, 16, 0), 0);
	for (int i = 0; i < 5; i++)
		CHECK(ring_push(&r, i));
	CHECK_INT(raw_writer_start(&w, rings, 1), 0);
	CHECK_INT(raw_writer_stop(&w), 0);
	CHECK_INT(r.written, 0);
	CHECK_INT(r.lost, 5);
	CHECK_INT(ring_close(&r), -ENOSPC);
	CHECK_STR(ring_error(&r, why, sizeof(why)), strerror(ENOSPC));
}

/* A FIFO whose reader takes nothing: a pending stop signal ends the wait (document, raw). */
static void check_stalled_fifo(const char *dir)
{
	struct ring r, *rings[1] = { &r };
	struct raw_writer w = { 0 };
	char path[PATH_MAX + 32], why[80], chunk[512] = { 0 };
	struct outfile o;
	sigset_t s;
	int rd;

	stopsig_set(&s);
	(void)sigprocmask(SIG_BLOCK, &s, NULL); /* as main.c does */
	snprintf(path, sizeof(path), "%s/stalled", dir);
	CHECK_INT(mkfifo(path, 0600), 0);
	rd = open(path, O_RDONLY | O_NONBLOCK); /* a reader that never reads */
	CHECK(rd >= 0);
	(void)fcntl(rd, F_SETPIPE_SZ, 4096);
	CHECK_INT(outfile_open(&o, path, 0), 0);
	CHECK(o.fifo);
	while (write(o.fd, chunk, sizeof(chunk)) > 0)
		;                      /* full */
	(void)kill(getpid(), SIGTERM); /* pending: taken by the wait */
	CHECK_INT(outfile_write(&o, chunk, sizeof(chunk)), -EINTR);
	CHECK_INT(o.stop_signal, SIGTERM);
	CHECK_INT(o.err, EINTR);
	(void)close(o.fd);

	CHECK_INT(ring_open(&r, path, 0, -1, 1000, 1024, 0), 0);
	for (int i = 0; i < 1000; i++) /* 8000 bytes: more than the FIFO takes */
		CHECK(ring_push(&r, i));
	CHECK_INT(raw_writer_start(&w, rings, 1), 0);
	(void)kill(getpid(), SIGINT);
	CHECK_INT(raw_writer_stop(&w), SIGINT);
	CHECK(r.written < 1000 && r.lost > 0);
	CHECK_INT(r.written + r.lost, 1000);
	CHECK_INT(ring_close(&r), -EINTR);
	CHECK_STR(ring_error(&r, why, sizeof(why)), "stopped by SIGINT while waiting for a reader");
	(void)close(rd);
	(void)unlink(path);
}

int main(void)
{
	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX], path[PATH_MAX + 32], missing[PATH_MAX + 32];

	snprintf(dir, sizeof(dir), "%s/rtlab-test-atomic.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(path, sizeof(path), "%s/doc.json", dir);
	snprintf(missing, sizeof(missing), "%s/no-such-dir/doc.json", dir);

	CHECK_INT(atomic_check("-"), 0);
	CHECK_INT(atomic_check(path), 0);
	CHECK_INT(file_check_writable(path), 0);
	CHECK_INT(entries(dir), 0); /* a check leaves nothing behind */
	CHECK_INT(atomic_check(dir), -EISDIR);
	CHECK_INT(file_check_writable(dir), -EISDIR);
	CHECK_INT(atomic_check(missing), -ENOENT);
	CHECK_INT(file_check_writable(missing), -ENOENT);
	CHECK(atomic_check("/proc/rtlab-test-x") < 0);
	CHECK(file_check_writable("/proc/rtlab-test-x") < 0);

	CHECK_INT(atomic_write(path, fill, NULL, NULL), 0);
	CHECK_INT(atomic_check(path), 0); /* an existing document is replaced */
	CHECK_INT(file_check_writable(path), 0);
	CHECK_INT(entries(dir), 1);
	(void)unlink(path);
	check_names(dir);
	check_special(dir);
	check_ring_on_full();
	check_stalled_fifo(dir);
	CHECK_INT(entries(dir), 0);
	CHECK_INT(rmdir(dir), 0);
	return check_report("test_atomicfile");
}
