#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "series.h"

int series_init(struct series *s, int64_t period_ns, uint32_t cap)
{
	memset(s, 0, sizeof(*s));
	s->period_ns = period_ns;
	s->cap = cap;
	s->slot = calloc(cap, sizeof(*s->slot));
	return s->slot ? 0 : -ENOMEM;
}

void series_free(struct series *s)
{
	free(s->slot);
	s->slot = NULL;
}
