/* /dev/kmsg records as devkmsg_read returns them (kernel/printk/printk.c): prefix fields,
 * the caller field, continuation lines, a text cut at the limit, malformed records; an
 * unreadable path is an error, not a failure. */
#include "check.h"
#include "lib/kmsg.h"

#include <errno.h>
#include <string.h>

static int parse(const char *s, struct kmsg_record *r)
{
	return kmsg_parse(s, strlen(s), r);
}

static void test_records(void)
{
	struct kmsg_record r;

	CHECK_INT(parse("6,1234,5678901,-;usb 1-1: new high-speed USB device\n", &r), 0);
	CHECK_INT(r.level, 6);
	CHECK_INT(r.facility, 0);
	CHECK_INT(r.seq, 1234);
	CHECK_INT(r.t_us, 5678901);
	CHECK_STR(r.text, "usb 1-1: new high-speed USB device");

	/* written by user space as "<4>...": facility 1 (LOG_USER), level 4 */
	CHECK_INT(parse("12,77,100,-,caller=T4242;rtlab-test: marker 1\n", &r), 0);
	CHECK_INT(r.level, 4);
	CHECK_INT(r.facility, 1);
	CHECK_STR(r.text, "rtlab-test: marker 1");

	/* continuation lines are the record's dictionary, not its text */
	CHECK_INT(parse("3,9,12,c;e1000e 0000:00:19.0: link down\n SUBSYSTEM=pci\n "
			"DEVICE=+pci:0000:00:19.0\n",
			&r),
		  0);
	CHECK_STR(r.text, "e1000e 0000:00:19.0: link down");
	CHECK_INT(r.level, 3);

	/* the kernel escapes what is not printable: kept as it comes */
	CHECK_INT(parse("4,1,2,-;tab\\x09here\n", &r), 0);
	CHECK_STR(r.text, "tab\\x09here");

	/* a text without its newline (a record cut by the caller) and an empty text */
	CHECK_INT(parse("4,1,2,-;no newline", &r), 0);
	CHECK_STR(r.text, "no newline");
	CHECK_INT(parse("4,1,2,-;\n", &r), 0);
	CHECK_STR(r.text, "");
}

static void test_long_text(void)
{
	char buf[KMSG_RECORD_MAX];
	struct kmsg_record r;
	size_t n = (size_t)snprintf(buf, sizeof(buf), "4,1,2,-;");

	memset(buf + n, 'a', 3000);
	buf[n + 3000] = '\n';
	CHECK_INT(kmsg_parse(buf, n + 3001, &r), 0);
	CHECK_INT(strlen(r.text), KMSG_TEXT_MAX);
}

static void test_malformed(void)
{
	struct kmsg_record r;

	CHECK_INT(parse("", &r), -EINVAL);
	CHECK_INT(parse("no prefix at all\n", &r), -EINVAL);
	CHECK_INT(parse("6,1;too few fields\n", &r), -EINVAL);
	CHECK_INT(parse("x,1,2,-;not a number\n", &r), -EINVAL);
	CHECK_INT(parse("6,1,2;no flags\n", &r), -EINVAL);
	CHECK_INT(parse("99999999999999999999999,1,2,-;overflow\n", &r), -EINVAL);
	CHECK_INT(parse("8200,1,2,-;facility out of range\n", &r), -EINVAL);
}

static void test_unreadable(void)
{
	struct kmsg_capture c;

	kmsg_begin(&c, "/nonexistent/kmsg");
	CHECK_INT(c.fd, -1);
	CHECK_STR(c.error, "/nonexistent/kmsg: No such file or directory");
	kmsg_end(&c); /* nothing to read: no crash, no records */
	CHECK_INT(c.n, 0);
	kmsg_free(&c);
}

int main(void)
{
	test_records();
	test_long_text();
	test_malformed();
	test_unreadable();
	return check_report("test_kmsg");
}
