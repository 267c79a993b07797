/* Output checks before measuring: tried for real, nothing left behind. */
#include "check.h"
#include "lib/atomicfile.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
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
	CHECK_INT(rmdir(dir), 0);
	return check_report("test_atomicfile");
}
