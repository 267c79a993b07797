/*
 * Kernel stacks of the spike explanation. The private instance puts a `stacktrace`
 * event trigger on timer:hrtimer_expire_entry (filtered to interrupted tasks other than
 * idle): the kernel then writes, right after the event on the same CPU, a
 * "<stack trace>" entry followed by one " => func+0xOFF/0xLEN" line per frame
 * (kernel/trace/trace_output.c: trace_stack_print; the offsets with options/sym-offset).
 * From a timer interrupt the unwinder goes on below the interrupt entry into the code
 * the interrupt stopped: what held the CPU when the timer expired. A store per traced
 * CPU keeps the last stacks, found again by id; an overwritten stack is gone.
 */
#ifndef RTLAB_XSTACK_H
#define RTLAB_XSTACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XSTACK_FRAMES 32  /* frames kept of one stack, innermost first */
#define XSTACK_BYTES 1024 /* their text, NUL-separated */
#define XSTACK_FRAME_LEN 128
#define XSTACK_SLOTS 256       /* stacks kept per traced CPU */
#define XSTACK_ASSOC_NS 200000 /* a stack follows its event within this (trace clock) */

struct xstack {
	uint32_t id; /* 0: empty */
	int nframes;
	bool truncated; /* more frames (or bytes) than kept */
	size_t len;
	char text[XSTACK_BYTES];
};

struct xstacks {
	struct xstack *slot;
	uint32_t cap, last_id;
	uint32_t open; /* the stack whose frames are being read, 0: none */
	bool leading;  /* still in the tracing code's own frames at the top */
};

int xstacks_init(struct xstacks *s, uint32_t cap);
void xstacks_free(struct xstacks *s);

/* A "<stack trace>" entry starts a new stack: its id (never 0). */
uint32_t xstacks_begin(struct xstacks *s);

/* LINE is one " => func+0x../0x.." frame line of the open stack: 0; -EINVAL when LINE
 * is no frame line (the open stack is then closed). */
int xstacks_frame(struct xstacks *s, const char *line);

/* The stack ID, or NULL when it was overwritten. */
const struct xstack *xstacks_get(const struct xstacks *s, uint32_t id);

/* The I-th frame of ST (I < nframes). */
const char *xstack_frame_at(const struct xstack *st, int i);

/* Whether kernel RELEASE's stacktrace trigger writes into the instance of its event:
 * since Linux 5.17 (commit ce33c845b030, "tracing: Dump stacktrace trigger to the
 * corresponding instance"); before, into the top-level buffer, which is the user's (the
 * fix went to some stable kernels too: they are treated as older). If not, WHY says so. */
bool xstack_trigger_per_instance(const char *release, char *why, size_t len);

#endif
