/* alloc: the per-size statistics of the meter (alloc.c) and their document (alloc_doc.c). */
#ifndef RTLAB_METER_ALLOC_H
#define RTLAB_METER_ALLOC_H

#include <stdint.h>

#include "lib/hist.h"

struct jw;

struct call_stats {
	uint64_t count;
	int64_t min_ns, max_ns, sum_ns;
	struct hist hist;
};

struct fault_count {
	uint64_t minor, major;
};

struct size_stats {
	struct call_stats malloc_c, free_c;
	struct call_stats touch_c; /* --touch: writing every page of a fresh block */
	struct fault_count faults; /* over this size's measured cycles */
	uint64_t failed;           /* mallocs that returned NULL */
};

/* "faults": {"minor", "major"} of F. */
void alloc_faults_json(struct jw *w, const struct fault_count *f);

/* One "sizes" entry of BYTES: malloc and free together, then each, and "touch" when
 * TOUCH; BOTH is scratch for the merged histogram (NULL: its percentiles are null). */
void alloc_size_json(struct jw *w, int64_t bytes, const struct size_stats *z, bool touch,
		     struct hist *both);

#endif
