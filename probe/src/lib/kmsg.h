/*
 * The kernel log records written while a run measures, from /dev/kmsg: opened and moved
 * to the end before, read without blocking after. A record is
 * "PRIO,SEQ,TS_US,FLAGS[,...];TEXT\n" with PRIO = facility * 8 + level, then optional
 * continuation lines (" KEY=VALUE\n"); the kernel escapes TEXT's non-printable bytes as
 * \xNN (kernel/printk/printk.c devkmsg_read). User space writing to /dev/kmsg without a
 * facility gets facility 1 (LOG_USER).
 */
#ifndef RTLAB_KMSG_H
#define RTLAB_KMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KMSG_PATH "/dev/kmsg"
#define KMSG_KEEP_MAX 256    /* records kept; more are counted as lost */
#define KMSG_TEXT_MAX 1000   /* bytes of a record's text kept */
#define KMSG_RECORD_MAX 8192 /* one read: the kernel's CONSOLE_EXT_LOG_MAX */
#define KMSG_READ_MAX 65536  /* records read after measuring, at most (a flooded log) */

struct kmsg_record {
	uint64_t seq;
	uint64_t t_us; /* the kernel's timestamp: us since boot (local_clock) */
	int level;     /* 0 (emerg) .. 7 (debug) */
	int facility;  /* 0 kernel, 1 user, ... */
	char text[KMSG_TEXT_MAX + 1];
};

struct kmsg_capture {
	int fd;          /* -1 when not open */
	char error[160]; /* why nothing was read, or "" */
	int n;
	struct kmsg_record *rec; /* KMSG_KEEP_MAX, oldest first */
	uint64_t lost;           /* overwritten before they were read, or beyond the cap */
	bool read_cut;           /* stopped at KMSG_READ_MAX records */
};

/* Parse one record BUF (LEN bytes, as one read returns it) into R. 0 or -EINVAL. */
int kmsg_parse(const char *buf, size_t len, struct kmsg_record *r);

/* Open PATH (KMSG_PATH when NULL) at its end. Failures are kept in C->error. */
void kmsg_begin(struct kmsg_capture *c, const char *path);

/* Read every record written since kmsg_begin, then close. */
void kmsg_end(struct kmsg_capture *c);

void kmsg_free(struct kmsg_capture *c);

#endif
