/* pipeline's producer: a thread, or a process of its own with --processes. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/futex.h"
#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

#include "meters/pipeline.h"

void ring_bell(struct pipe_shared *sh, bool pshared)
{
	atomic_fetch_add(&sh->bell, 1);
	(void)futex_wake(&sh->bell, 1, pshared);
}

/* When record K (0-based) is due after the start: (K + 1) / rate s, without overflow. */
static int64_t due_ns(uint64_t k, int64_t rate)
{
	uint64_t n = k + 1, r = (uint64_t)rate;

	return (int64_t)(n / r * NSEC_PER_SEC + n % r * NSEC_PER_SEC / r);
}

/* ---- the producer: a thread, or a process of its own with --processes ---- */

/* Records on an absolute schedule; one due while the ring is full is dropped. */
static void produce(struct pipe_shared *sh, const struct pipeline_params *p)
{
	const uint64_t n = (uint64_t)p->ring, loops = sh->loops;
	const size_t rs = (size_t)p->record_size;
	const int64_t start = sh->start_ns, iv = NSEC_PER_SEC / p->rate_hz;
	uint64_t head = 0, dropped = 0, late = 0, max_fill = 0, fill;
	int64_t due, now;

	for (uint64_t k = 0; !loops || k < loops; k++) {
		due = due_ns(k, p->rate_hz);
		if (sh->duration_ns && due >= sh->duration_ns)
			break;
		sleep_until_ns(start + due);
		if (LD(sh, quit))
			break;
		now = mono_now_ns();
		if (now - (start + due) >= iv)
			ST(sh, late, ++late);
		fill = head - atomic_load_explicit(&sh->tail, memory_order_acquire);
		if (fill >= n) { /* never wait for the consumer */
			ST(sh, dropped, ++dropped);
			ST(sh, produced, k + 1);
			continue;
		}
		unsigned char *rec = RECS(sh) + (head % n) * rs;

		*(struct pipe_rec *)rec = (struct pipe_rec){ now, k };
		memset(rec + sizeof(struct pipe_rec), (int)(k & 0xff),
		       rs - sizeof(struct pipe_rec));
		/* seq_cst: ordered before the load of waiting (the consumer does the converse) */
		atomic_store(&sh->head, ++head);
		if (fill + 1 > max_fill)
			ST(sh, max_fill, max_fill = fill + 1);
		ST(sh, produced, k + 1);
		if (atomic_load(&sh->waiting))
			ring_bell(sh, p->processes);
	}
}

/* Set up as asked, say so through sh->rep, produce once the consumer says go. */
void producer_run(void *arg)
{
	struct pipe_state *st = arg;
	struct pipe_shared *sh = st->sh;

	if (comp_setup(&st->prod, &sh->rep))
		return;
	while (!atomic_load_explicit(&sh->go, memory_order_acquire))
		(void)futex_wait(&sh->go, 0, 0, st->p->processes);
	if (!LD(sh, quit))
		produce(sh, st->p);
	atomic_store(&sh->done, 1);
	ring_bell(sh, st->p->processes);
}
