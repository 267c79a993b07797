/* Documents are written beside their name and renamed: never half-written.
 * Outputs are checked before measuring, so a bad path never costs a run. */
#ifndef RTLAB_ATOMICFILE_H
#define RTLAB_ATOMICFILE_H

#include <stdbool.h>
#include <stdio.h>

/* Writes the document to F; 0 or -errno. */
typedef int (*atomic_fill_fn)(FILE *f, const void *arg);

/*
 * Write PATH ("-": stdout) with FILL: into PATH.tmp.<pid>, flushed and fsynced,
 * then renamed over PATH; the temporary file is removed on any failure. A PATH that
 * is a device, FIFO or socket (/dev/stdout, a pipe) is written in place instead.
 * Returns 0 or -errno; *OPEN_FAILED (if given) says the file could not even be created.
 */
int atomic_write(const char *path, atomic_fill_fn fill, const void *arg, bool *open_failed);

/*
 * Could atomic_write(PATH) create its temporary file beside PATH and rename it
 * over PATH? Tried for real (an unnamed file when the file system allows it),
 * leaving nothing behind. 0 ("-" too) or -errno: -EISDIR when PATH is a directory.
 */
int atomic_check(const char *path);

/* Could PATH be opened for writing (created or truncated)? Leaves nothing behind. 0 or -errno. */
int file_check_writable(const char *path);

#endif
