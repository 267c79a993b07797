#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kmsg.h"

/* The unsigned decimal at *P up to STOP; advances *P past STOP. */
static int field(const char **p, const char *end, char stop, uint64_t *v)
{
	const char *q = *p;
	uint64_t x = 0;

	if (q >= end || *q < '0' || *q > '9')
		return -EINVAL;
	for (; q < end && *q >= '0' && *q <= '9'; q++) {
		if (x > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		x = x * 10 + (uint64_t)(*q - '0');
	}
	if (q >= end || *q != stop)
		return -EINVAL;
	*p = q + 1;
	*v = x;
	return 0;
}

int kmsg_parse(const char *buf, size_t len, struct kmsg_record *r)
{
	const char *p = buf, *end = buf + len, *semi = memchr(buf, ';', len), *nl;
	uint64_t prio;
	size_t n;

	if (!semi || field(&p, semi, ',', &prio) || field(&p, semi, ',', &r->seq))
		return -EINVAL;
	/* the timestamp ends at the flags' comma */
	if (field(&p, semi, ',', &r->t_us) || prio > 1023 * 8 + 7)
		return -EINVAL;
	r->level = (int)(prio & 7);
	r->facility = (int)(prio >> 3);
	p = semi + 1;
	nl = memchr(p, '\n', (size_t)(end - p));
	n = (size_t)((nl ? nl : end) - p); /* continuation lines (" KEY=VALUE") are not text */
	if (n > KMSG_TEXT_MAX)
		n = KMSG_TEXT_MAX;
	memcpy(r->text, p, n);
	r->text[n] = '\0';
	return 0;
}

void kmsg_begin(struct kmsg_capture *c, const char *path)
{
	memset(c, 0, sizeof(*c));
	path = path ? path : KMSG_PATH;
	/* needs CAP_SYSLOG when kernel.dmesg_restrict is 1 */
	c->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (c->fd < 0) {
		snprintf(c->error, sizeof(c->error), "%s: %s", path, strerror(errno));
		return;
	}
	if (lseek(c->fd, 0, SEEK_END) < 0) {
		snprintf(c->error, sizeof(c->error), "%s: cannot seek to the end: %s", path,
			 strerror(errno));
		(void)close(c->fd);
		c->fd = -1;
		return;
	}
	c->rec = calloc(KMSG_KEEP_MAX, sizeof(*c->rec));
	if (!c->rec) {
		snprintf(c->error, sizeof(c->error), "%s: out of memory", path);
		(void)close(c->fd);
		c->fd = -1;
	}
}

void kmsg_end(struct kmsg_capture *c)
{
	char buf[KMSG_RECORD_MAX];
	struct kmsg_record r;
	bool have_seq = false;
	uint64_t last_seq = 0;
	int reads;

	if (c->fd < 0)
		return;
	for (reads = 0; reads < KMSG_READ_MAX; reads++) {
		ssize_t got = read(c->fd, buf, sizeof(buf));

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && errno == EPIPE) { /* overwritten before read: the next is newer */
			if (!have_seq)
				c->lost++; /* at least one; how many is known from the next seq */
			continue;
		}
		if (got < 0) {
			if (errno != EAGAIN)
				snprintf(c->error, sizeof(c->error), "%s: %s", KMSG_PATH,
					 strerror(errno));
			break;
		}
		if (!got || kmsg_parse(buf, (size_t)got, &r))
			continue;
		if (have_seq && r.seq > last_seq + 1)
			c->lost += r.seq - last_seq - 1;
		have_seq = true;
		last_seq = r.seq;
		if (c->n < KMSG_KEEP_MAX)
			c->rec[c->n++] = r;
		else
			c->lost++;
	}
	c->read_cut = reads == KMSG_READ_MAX;
	(void)close(c->fd);
	c->fd = -1;
}

void kmsg_free(struct kmsg_capture *c)
{
	if (c->fd >= 0)
		(void)close(c->fd);
	c->fd = -1;
	free(c->rec);
	c->rec = NULL;
}
