/* Documents are written beside their name and renamed: never half-written.
 * Outputs are checked before measuring, so a bad path never costs a run. */
#ifndef RTLAB_ATOMICFILE_H
#define RTLAB_ATOMICFILE_H

#include <stdbool.h>
#include <stdio.h>

/* Writes the document to F; 0 or -errno of its own (write errors of F are found after it). */
typedef int (*atomic_fill_fn)(FILE *f, const void *arg);

/*
 * Write PATH ("-": stdout) with FILL: into PATH.tmp.<pid> (PATH's name shortened if the
 * file system needs it), flushed and fsynced, then renamed over PATH; the temporary file
 * is removed on any failure. A PATH that is a device or FIFO (/dev/stdout, a pipe) is
 * written in place instead; a FIFO's reader is waited for (outfile.h). Returns 0 or
 * -errno (ENOSPC, EIO, EPIPE ...); -EINTR with *STOP_SIG (if given) set when a stop
 * signal ended a wait for the reader.
 */
int atomic_write(const char *path, atomic_fill_fn fill, const void *arg, int *stop_sig);

/*
 * Could atomic_write(PATH) create its temporary file beside PATH and rename it
 * over PATH? Tried for real (an unnamed file when the file system allows it),
 * leaving nothing behind. 0 ("-" too) or -errno: -EISDIR when PATH is a directory,
 * -ENAMETOOLONG when its name is longer than its file system takes, -ENXIO for a socket.
 */
int atomic_check(const char *path);

/* Could PATH be opened for writing (created or truncated)? Leaves nothing behind. 0 or -errno. */
int file_check_writable(const char *path);

#endif
