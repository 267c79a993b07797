/* Documents are written beside their name and renamed: never half-written. */
#ifndef RTLAB_ATOMICFILE_H
#define RTLAB_ATOMICFILE_H

#include <stdbool.h>
#include <stdio.h>

/* Writes the document to F; 0 or -errno. */
typedef int (*atomic_fill_fn)(FILE *f, const void *arg);

/*
 * Write PATH ("-": stdout) with FILL: into PATH.tmp.<pid>, flushed and fsynced,
 * then renamed over PATH; the temporary file is removed on any failure.
 * Returns 0 or -errno; *OPEN_FAILED (if given) says the file could not even be created.
 */
int atomic_write(const char *path, atomic_fill_fn fill, const void *arg, bool *open_failed);

#endif
