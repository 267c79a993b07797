/* response's stimulus: a thread, or a process of its own with --handler-process. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <linux/gpio.h>
#include <mqueue.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/futex.h"
#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/splitmix.h"
#include "lib/timeutil.h"
#include "probe.h"

#include "meters/response.h"

/* ---- the stimulus: a thread, or a process of its own with --handler-process ---- */

static int64_t draw_interval(uint64_t *rng, int64_t lo, int64_t hi)
{
	return lo == hi ? lo : lo + (int64_t)(splitmix64(rng) % (uint64_t)(hi - lo + 1));
}

/* The event's slot before its fire; gen (release) makes seq and fire_ns visible. */
static void publish(struct resp_shared *sh, uint64_t seq, int64_t now)
{
	SH_SET(sh, fire_ns, now);
	SH_SET(sh, seq, seq);
	atomic_fetch_add_explicit(&sh->gen, 1, memory_order_release);
}

/* One phase: events on an absolute schedule; one due while the handler has not taken the
 * previous one is not fired but counted lost. Ends with SEQ_END once the last is taken. */
static void stim_phase(struct resp_chan *c, const struct transport *tp, uint32_t phase,
		       uint64_t *rng)
{
	struct resp_shared *sh = c->sh;
	const int64_t start = sh->start_ns, dur = sh->duration_ns;
	const uint64_t limit = sh->limit;
	int64_t target = start, iv, now, drawn = 0;
	uint64_t last = 0, fired = 0, lost = 0, over = 0;
	int rc;

	for (uint64_t k = 1; !limit || k <= limit; k++) {
		iv = draw_interval(rng, sh->iv_min_ns, sh->iv_max_ns);
		if (dur && target + iv - start >= dur)
			break;
		target += iv;
		sleep_until_ns(target);
		if (SH_GET(sh, phase) != phase || (c->stop && atomic_load(c->stop)))
			break;
		now = mono_now_ns();
		SH_SET(sh, drawn_ns, drawn += iv);
		if (now - target >= iv) { /* a whole interval late: move the schedule past now */
			SH_SET(sh, overruns, ++over);
			target = now;
		}
		if (atomic_load_explicit(&sh->consumed, memory_order_acquire) != last) {
			SH_SET(sh, lost, ++lost);
			continue;
		}
		publish(sh, c->seq = k, now);
		if ((rc = tp->fire(c))) {
			sh->fire_err = rc;
			break;
		}
		last = k;
		SH_SET(sh, fired, ++fired);
	}
	for (int64_t until = mono_now_ns() + DRAIN_NS;
	     atomic_load_explicit(&sh->consumed, memory_order_acquire) != last &&
	     SH_GET(sh, phase) == phase && mono_now_ns() < until;)
		sleep_for_ns(20 * NSEC_PER_USEC);
	if (SH_GET(sh, phase) != phase)
		return; /* teardown: nobody waits for the end */
	publish(sh, c->seq = SEQ_END, mono_now_ns());
	(void)tp->fire(c);
}

/* Set up as asked, say so through sh->rep, then run each phase the handler starts. */
void stim_run(void *arg)
{
	struct resp_state *st = arg;
	struct resp_chan c = st->stim_ch; /* on this stack: in a process, only sh is shared */
	struct resp_shared *sh = st->sh;
	uint64_t rng = st->rng;
	uint32_t seen = 0, ph;
	int rc;

	c.self = getpid();
	rc = comp_setup(&st->stim, &sh->rep);
	while (!rc) {
		while ((ph = atomic_load_explicit(&sh->phase, memory_order_acquire)) == seen)
			(void)futex_wait(&sh->phase, seen, 0, true);
		if (ph == PHASE_QUIT)
			break;
		seen = ph;
		c.stop = st->stop; /* published by the phase bump; NULL in a process */
		stim_phase(&c, st->tp, ph, &rng);
	}
}
