/* lib/fail: the reason of a failed call and its -errno. */
#include "check.h"
#include "lib/fail.h"

#include <errno.h>

static void test_message(void)
{
	char err[128];

	errno = ENOENT;
	CHECK_INT(fail_errno(err, sizeof(err), "--dir: cannot create a file in \"%s\"", "/x"),
		  -ENOENT);
	CHECK_STR(err, "--dir: cannot create a file in \"/x\" (No such file or directory)");
	errno = 0; /* a failure that set no errno still returns a failure */
	CHECK_INT(fail_errno(err, sizeof(err), "getcontext"), -EIO);
}

static void test_short_buffer(void)
{
	char err[8];

	err[7] = 'x';
	errno = EPERM;
	CHECK_INT(fail_errno(err, sizeof(err), "%s", "a long reason"), -EPERM);
	CHECK_STR(err, "a long ");
	errno = EPERM;
	CHECK_INT(fail_errno(err, sizeof(err), "%s", "1234567"), -EPERM); /* no room for why */
	CHECK_STR(err, "1234567");
}

int main(void)
{
	test_message();
	test_short_buffer();
	return check_report("test_fail");
}
