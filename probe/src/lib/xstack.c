#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xstack.h"

#define FRAME_PREFIX " => "

int xstacks_init(struct xstacks *s, uint32_t cap)
{
	memset(s, 0, sizeof(*s));
	if (!(s->slot = calloc(cap, sizeof(*s->slot))))
		return -ENOMEM;
	s->cap = cap;
	return 0;
}

void xstacks_free(struct xstacks *s)
{
	free(s->slot);
	s->slot = NULL;
}

uint32_t xstacks_begin(struct xstacks *s)
{
	struct xstack *st;

	if (++s->last_id == 0) /* wrapped: 0 means none */
		s->last_id = 1;
	st = &s->slot[s->last_id % s->cap];
	st->id = s->last_id;
	st->nframes = 0;
	st->truncated = false;
	st->len = 0;
	s->open = s->last_id;
	s->leading = true;
	return s->last_id;
}

/* The tracing code's own frames above the traced function (the trigger, the event's
 * probe): how many of them the kernel skips differs between versions. */
static bool tracing_frame(const char *f)
{
	static const char *const prefix[] = { "trace_", "__trace", "event_trigger", "perf_trace_",
					      "__bpf_trace_" };

	for (size_t i = 0; i < sizeof(prefix) / sizeof(prefix[0]); i++)
		if (!strncmp(f, prefix[i], strlen(prefix[i])))
			return true;
	return false;
}

int xstacks_frame(struct xstacks *s, const char *line)
{
	struct xstack *st;
	size_t n;

	if (strncmp(line, FRAME_PREFIX, strlen(FRAME_PREFIX))) {
		s->open = 0;
		return -EINVAL;
	}
	if (!s->open)
		return 0; /* frames of a stack begun before this reader: not kept */
	st = &s->slot[s->open % s->cap];
	if (st->id != s->open)
		return 0;
	line += strlen(FRAME_PREFIX);
	n = strcspn(line, " \t");
	if (!n)
		return 0;
	if (s->leading && tracing_frame(line))
		return 0;
	s->leading = false;
	if (n >= XSTACK_FRAME_LEN)
		n = XSTACK_FRAME_LEN - 1;
	if (st->nframes == XSTACK_FRAMES || st->len + n + 1 > XSTACK_BYTES) {
		st->truncated = true;
		return 0;
	}
	memcpy(st->text + st->len, line, n);
	st->text[st->len + n] = '\0';
	st->len += n + 1;
	st->nframes++;
	return 0;
}

const struct xstack *xstacks_get(const struct xstacks *s, uint32_t id)
{
	const struct xstack *st;

	if (!id || !s->slot)
		return NULL;
	st = &s->slot[id % s->cap];
	return st->id == id ? st : NULL;
}

const char *xstack_frame_at(const struct xstack *st, int i)
{
	const char *p = st->text;

	while (i-- > 0)
		p += strlen(p) + 1;
	return p;
}

bool xstack_trigger_per_instance(const char *release, char *why, size_t len)
{
	int major = 0, minor = 0;

	if (sscanf(release, "%d.%d", &major, &minor) != 2) {
		snprintf(why, len, "the kernel release is unknown");
		return false;
	}
	if (major > 5 || (major == 5 && minor >= 17))
		return true;
	snprintf(why, len,
		 "Linux %d.%d: its stacktrace trigger writes into the top-level trace buffer "
		 "(per instance since 5.17)",
		 major, minor);
	return false;
}
