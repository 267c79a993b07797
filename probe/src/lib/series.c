#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "series.h"

int series_init(struct series *s, int64_t period_ns, uint32_t cap)
{
	memset(s, 0, sizeof(*s));
	s->period_ns = period_ns;
	s->cap = cap;
	s->min = calloc(cap, sizeof(*s->min));
	s->max = calloc(cap, sizeof(*s->max));
	s->sum = calloc(cap, sizeof(*s->sum));
	s->count = calloc(cap, sizeof(*s->count));
	if (!s->min || !s->max || !s->sum || !s->count) {
		series_free(s);
		return -ENOMEM;
	}
	return 0;
}

void series_free(struct series *s)
{
	free(s->min);
	free(s->max);
	free(s->sum);
	free(s->count);
	s->min = s->max = s->sum = NULL;
	s->count = NULL;
}
