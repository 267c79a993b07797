/*
 * The journal of the osnoise/ settings a tracer run changes (ktracer.h). Those files are
 * global and the user's: before the first of them is written, a journal naming the run
 * (PID, start time, boot) is created exclusively in the state directory, and before each
 * write it is rewritten (fsynced, renamed into place) with what puts every changed file
 * back. The run's own exit writes them back and removes it; a run killed by SIGKILL
 * leaves it, and the next tracer run (or `rtlab-probe restore`) writes them back and
 * removes it. A journal whose run is alive (not a zombie) is never applied: that run
 * still measures, and a second one is refused as busy. A journal of an earlier boot is
 * void (the kernel started with its own settings) and only removed.
 *
 * The file, one line each, values in hex (byte for byte):
 *     rtlab-probe osnoise journal 1
 *     owner PID STARTTIME BOOT_ID
 *     root TRACEFS_ROOT
 *     undo osnoise/FILE HEX            (zero or more, in the order written)
 */
#ifndef RTLAB_KJOURNAL_H
#define RTLAB_KJOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define KJOURNAL_STATE_ENV "RTLAB_STATE"  /* the state directory, as the host's journals */
#define KJOURNAL_DEFAULT_DIR "/run/rtlab" /* tracefs settings do not outlive a boot either */
#define KJOURNAL_NAME "osnoise-journal"
#define KJOURNAL_MAX_BYTES 16384 /* a journal is read only up to this size */
#define KJOURNAL_ENTRIES_MAX 8
#define KJOURNAL_VALUE_MAX 320

/* One osnoise/ file and the bytes that put it back. */
struct kjournal_undo {
	char file[40];                  /* relative to the tracefs root, e.g. "osnoise/cpus" */
	char value[KJOURNAL_VALUE_MAX]; /* written back as is */
};

/* A journal as read back. */
struct kjournal {
	pid_t owner;
	unsigned long long start; /* the owner's start time, clock ticks after boot */
	char boot_id[40];
	char root[256];
	struct kjournal_undo undo[KJOURNAL_ENTRIES_MAX];
	int n;
};

/* The journal's path, in the state directory ($RTLAB_STATE, else /run/rtlab). 0 or
 * -ENAMETOOLONG. */
int kjournal_path(char *buf, size_t len);

/* Read the journal at PATH: 0, -ENOENT when there is none, -EINVAL (with a reason)
 * when it is damaged. */
int kjournal_read(const char *path, struct kjournal *j, char *err, size_t errlen);

/* PID is alive and started at START (clock ticks after boot): not gone, not a zombie,
 * not a later process that got its PID. */
bool kjournal_owner_alive(pid_t pid, unsigned long long start);

/* Put back the settings of a dead run's journal under ROOT (the tracefs root), newest
 * first, and remove the journal. 0 with *RESTORED (files written, -1 when there was no
 * journal), -EBUSY when its run is alive or it is another tree's, or -errno, each with a
 * reason. The journal stays when a file could not be written back. */
int kjournal_recover(const char *root, int *restored, pid_t *owner, char *err, size_t errlen);

/* Recover a dead run's journal, then create this process's own (no undo yet), exclusive:
 * -EBUSY when another run holds one. 0 or -errno with a reason. */
int kjournal_begin(const char *root, char *err, size_t errlen);

/* Rewrite this process's journal with UNDO[0..N). 0 or -errno with a reason. */
int kjournal_update(const char *root, const struct kjournal_undo *undo, int n, char *err,
		    size_t errlen);

/* Remove this process's journal: every setting is back. 0 or -errno. */
int kjournal_end(void);

#endif
