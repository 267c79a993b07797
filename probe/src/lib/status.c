/* Live status: one line per measuring thread on stderr, redrawn in place. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hist.h"
#include "jsonw.h"
#include "run.h"
#include "timeutil.h"

void status_draw(struct run *r)
{
	if (r->status_drawn)
		fprintf(stderr, "\033[%dA", r->nthreads); /* back to the first line */
	for (int i = 0; i < r->nthreads; i++) {
		const struct mthread *t = &r->th[i];
		uint64_t n = MT_GET(t, count);
		char cur[24] = "-", mn[24] = "-", avg[24] = "-", mx[24] = "-", cpu[16] = "any";

		if (n) {
			format_duration(MT_GET(t, last_ns), cur, sizeof(cur));
			format_duration(MT_GET(t, min_ns), mn, sizeof(mn));
			format_duration(MT_GET(t, sum_ns) / (int64_t)n, avg, sizeof(avg));
			format_duration(MT_GET(t, max_ns), mx, sizeof(mx));
		}
		if (t->cpu >= 0)
			snprintf(cpu, sizeof(cpu), "%d", t->cpu);
		fprintf(stderr,
			"\033[KT%-2d cpu %-3s %11llu cycles  cur %9s  min %9s  avg %9s  max %9s\n",
			t->index, cpu, (unsigned long long)n, cur, mn, avg, mx);
	}
	r->status_drawn = true;
}

/* Busy % of each CPU since the previous line ("measure"), or over the whole run ("done"). */
static void progress_busy(struct run *r, struct jw *w, bool done)
{
	const struct loadstat *from = &r->act0, *to = &r->act1;

	if (!done) {
		if (loadstat_read(NULL, &r->prog_now))
			return;
		from = r->prog_prev.ok ? &r->prog_prev : &r->act0;
		to = &r->prog_now;
	}
	if (from->ok && to->ok)
		loadstat_busy_keys(w, from, to);
	if (!done)
		r->prog_prev = r->prog_now;
}

void progress_write(struct run *r, const char *phase)
{
	struct jw jw, *w = &jw;
	bool done = !strcmp(phase, "done");
	bool measuring = done || !strcmp(phase, "measure");

	if (!r->progress)
		return; /* none, or it failed */

	jw_init(w, r->progress);
	jw_obj_begin(w);
	jw_kstr(w, "phase", phase);
	jw_kint(w, "elapsed_ns", r->t0_ns ? mono_now_ns() - r->t0_ns : 0);
	jw_key(w, "threads");
	jw_arr_begin(w);
	for (int i = 0; r->th && i < r->nthreads; i++) {
		const struct mthread *t = &r->th[i];
		/* misses first: a sample counts before it can be a miss, so misses <= count */
		uint64_t misses = MT_GET(t, misses), n = MT_GET(t, count);

		jw_obj_begin(w);
		jw_key(w, "cpu");
		t->cpu >= 0 ? jw_int(w, t->cpu) : jw_null(w);
		jw_kuint(w, "count", n);
		if (n) {
			int64_t mn = MT_GET(t, min_ns), mx = MT_GET(t, max_ns);

			jw_kint(w, "last_ns", MT_GET(t, last_ns));
			jw_kint(w, "min_ns", mn);
			jw_kint(w, "mean_ns", MT_GET(t, sum_ns) / (int64_t)n);
			jw_kint(w, "max_ns", mx);
			if (done) /* the threads have ended: their histograms are final */
				jw_kint(w, "p99_ns", hist_quantile(t->hist, 0.99, mn, mx));
		}
		if (r->c.deadline_set)
			jw_kuint(w, "misses", misses < n ? misses : n);
		jw_obj_end(w);
	}
	jw_arr_end(w);
	if (measuring && r->t0_ns)
		progress_busy(r, w, done);
	jw_obj_end(w);
	fputc('\n', r->progress);
	if (fflush(r->progress) || ferror(r->progress))
		progress_fail(r, r->progress_out.err ? r->progress_out.err : EIO);
}

void progress_fail(struct run *r, int err)
{
	const char *path = r->c.progress_path;
	int sig = r->progress_out.stop_signal;

	if (err == EINTR)
		fprintf(stderr,
			"rtlab-probe %s: --progress: stopped by %s while waiting for a reader "
			"of \"%.300s\": %s\n",
			r->m->name, stopsig_name(sig), path,
			r->progress ? "the stream ends here" : "nothing written");
	else
		fprintf(stderr,
			"rtlab-probe %s: --progress: cannot write \"%.300s\" (%s): the stream "
			"ends here\n",
			r->m->name, path, strerror(err));
	if (sig && !r->stop_signal)
		r->stop_signal = sig;
	if (r->stop_signal)
		atomic_store(&r->stop, 1); /* a signal is a signal, even when an output took it */
	if (r->progress)
		(void)fclose(r->progress);
	r->progress = NULL;
	r->progress_err = err;
}

void progress_end(struct run *r)
{
	if (!r->progress)
		return;
	progress_write(r, "done");
	if (r->progress) {
		FILE *f = r->progress;

		r->progress = NULL;
		if (fclose(f))
			progress_fail(r, r->progress_out.err ? r->progress_out.err : EIO);
	}
}
