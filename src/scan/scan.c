/*
 * Passes over int64 latency samples for rtlab's exact statistics
 * (src/rtlab/analysis/_scan.py calls scan_pass() through ctypes; no Python
 * headers). One pass computes any of: count, min, max, the exact sum and sum
 * of squares, samples above a deadline and the probe's bucket histogram; and
 * sub-histograms of a few value intervals ("cells", each inside one bucket),
 * which the caller narrows until its order statistics are exact.
 *
 * The samples are cut into blocks that the threads take in turn; after a block
 * of a read-only file mapping its pages are dropped from the process
 * (MADV_DONTNEED: the data stays in the page cache), so the resident set stays
 * near threads x block whatever the file size.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lib/hist.h"

#define SCAN_NBINS (HIST_NBUCKETS + 1) /* index HIST_NBUCKETS: values >= 2^40 */
#define SCAN_MAX_THREADS 64
#define SCAN_MAX_SUBBINS (1 << 16) /* per cell */
#define SCAN_RUNS 16               /* runs of consecutive buckets with cells, at most */

/* One array of samples; the layouts below are mirrored in _scan.py. */
struct scan_seg {
	const int64_t *data;
	int64_t count;
	int64_t release; /* nonzero: a read-only file mapping, pages may be dropped */
};

struct scan_moments {
	int64_t count;
	int64_t min, max;  /* ns */
	uint64_t sum[2];   /* two's-complement 128-bit sum, low limb first */
	uint64_t sumsq[3]; /* unsigned 192-bit sum of squares, low limb first */
	int64_t above;     /* samples > deadline */
	uint64_t hist[SCAN_NBINS];
};

/* One thread's moments: two histograms, so a run of equal buckets does not wait on
 * one counter; summed at the end. */
struct scan_acc {
	struct scan_moments m;
	uint64_t hist2[SCAN_NBINS];
};

struct scan_cell {
	int64_t lo, hi;   /* inclusive bounds, ns, inside one bucket */
	int32_t bucket;   /* that bucket's index; cells come sorted by it, then lo */
	int32_t shift;    /* a sub-bin is 2^shift ns wide */
	uint64_t *counts; /* ((hi - lo) >> shift) + 1 sub-bins, added to */
};

struct scan_refine_ctx {
	const struct scan_cell *cells;
	int ncells;
	int32_t first[SCAN_NBINS]; /* per bucket: its first cell, or -1 */
	int nruns;                 /* cells' buckets: runs start..start+span */
	uint16_t run_start[SCAN_RUNS], run_span[SCAN_RUNS];
};

/*
 * The blocks of all segments, which the threads take one at a time. A segment's
 * blocks start at addresses that are multiples of SCAN_ALIGN (after a shorter
 * head block), so that releasing a block drops whole huge-page mappings and a
 * fault in the next block cannot map pages of a block already released.
 */
#define SCAN_ALIGN ((uintptr_t)2 << 20)

struct scan_work {
	const struct scan_seg *segs;
	int nsegs;
	int64_t block;     /* samples per block; pages are released after each */
	int64_t *first;    /* per segment: its first block's number; [nsegs]: all */
	int64_t *head;     /* per segment: samples before its first aligned block */
	atomic_llong next; /* the next block to take */
};

struct scan_part {
	struct scan_work *work;
	int64_t deadline;     /* ns */
	struct scan_acc *acc; /* NULL: no moments in this pass */
	const struct scan_refine_ctx *ref;
	uint64_t **counts; /* this part's sub-bins, one array per cell */
};

/*
 * The hot loops are plain C that compilers vectorize; on x86-64 GCC also builds
 * them for AVX2 and AVX-512 machines and picks one at load time (SCAN_CLONES,
 * set by meson.build when the compiler can).
 */
#ifdef SCAN_CLONES
#define SCAN_VECTOR __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SCAN_VECTOR
#endif

#define SCAN_SUB 1024        /* samples per inner block (8 KiB, stays in L1) */
#define SCAN_SMALL (1 << 26) /* |v| below: SCAN_SUB squares sum in uint64 */
_Static_assert(UINT64_MAX / SCAN_SMALL / SCAN_SMALL >= SCAN_SUB, "squares overflow");

/*
 * hist_index() of v, overflow as HIST_NBUCKETS, without branches: floor(log2 c)
 * from the exponent of c as a double, exact because c <= 2^40.
 */
static inline uint16_t scan_bucket(int64_t v)
{
	int64_t c = v < 0 ? 0 : v;
	uint64_t bits;
	double d;
	int64_t e;

	c = c > ((int64_t)1 << HIST_MAX_EXP) ? (int64_t)1 << HIST_MAX_EXP : c;
	/* 2^52 + c as a double, minus 2^52: c converted exactly */
	bits = (uint64_t)c | 0x4330000000000000ull;
	memcpy(&d, &bits, sizeof(d));
	d -= 4503599627370496.0;
	memcpy(&bits, &d, sizeof(bits));
	/* shift = max(floor(log2 c) - 7, 0); 0 also for c = 0 */
	e = (int64_t)(bits >> 52) - (1023 + HIST_SUB_BITS - 1);
	e = e < 0 ? 0 : e;
	return (uint16_t)((c >> e) + (e << (HIST_SUB_BITS - 1)));
}

SCAN_VECTOR
static void scan_index(const int64_t *v, int n, uint16_t *out)
{
	int i;

	for (i = 0; i < n; i++)
		out[i] = scan_bucket(v[i]);
}

struct scan_sub {
	int64_t min, max, above;
	int64_t sum;    /* valid when small */
	uint64_t sumsq; /* valid when small */
	int small;      /* every |v| < SCAN_SMALL */
};

/* The bucket index of every sample into IDX and the moments of the block into OUT. */
SCAN_VECTOR
static void scan_sub_moments(const int64_t *v, int n, int64_t deadline, struct scan_sub *out,
			     uint16_t *idx)
{
	int64_t vmin = INT64_MAX, vmax = INT64_MIN, above = 0;
	uint64_t sum = 0, sumsq = 0;
	int i;

	for (i = 0; i < n; i++) {
		vmin = v[i] < vmin ? v[i] : vmin;
		vmax = v[i] > vmax ? v[i] : vmax;
		above += v[i] > deadline;
		/* modulo 2^64, so exact when every |v| < SCAN_SMALL */
		sum += (uint64_t)v[i];
		sumsq += (uint64_t)v[i] * (uint64_t)v[i];
		idx[i] = scan_bucket(v[i]);
	}
	out->min = vmin;
	out->max = vmax;
	out->above = above;
	out->small = vmin > -SCAN_SMALL && vmax < SCAN_SMALL;
	out->sum = (int64_t)sum;
	out->sumsq = sumsq;
}

/* (hi, lo) = v * v, exact for every int64 v (hi < 2^63) */
static inline uint64_t scan_square(int64_t v, uint64_t *hi)
{
	uint64_t a = v < 0 ? -(uint64_t)v : (uint64_t)v;
	uint64_t al, ah, mid, lo, c;

	if (!(a >> 32)) {
		*hi = 0;
		return a * a;
	}
	/* a = ah 2^32 + al: a^2 = ah^2 2^64 + 2 ah al 2^32 + al^2 */
	al = a & 0xffffffffu;
	ah = a >> 32;
	mid = ah * al;
	lo = al * al;
	c = mid << 33;
	lo += c;
	*hi = ah * ah + (mid >> 31) + (lo < c);
	return lo;
}

/* sum (128 bits) += v; sumsq (192 bits) += hi 2^64 + lo, with hi < 2^63 */
static inline void scan_add(struct scan_moments *m, int64_t v, uint64_t lo, uint64_t hi)
{
	uint64_t u = (uint64_t)v;

	m->sum[0] += u;
	m->sum[1] += (m->sum[0] < u) - (uint64_t)(v < 0);
	m->sumsq[0] += lo;
	hi += m->sumsq[0] < lo;
	m->sumsq[1] += hi;
	m->sumsq[2] += m->sumsq[1] < hi;
}

static void scan_sub_add(struct scan_acc *a, const int64_t *p, int k, int64_t deadline,
			 uint16_t *idx)
{
	struct scan_moments *m = &a->m;
	struct scan_sub sub;
	uint64_t lo, hi;
	int i;

	scan_sub_moments(p, k, deadline, &sub, idx);
	m->min = sub.min < m->min ? sub.min : m->min;
	m->max = sub.max > m->max ? sub.max : m->max;
	m->above += sub.above;
	m->count += k;
	if (sub.small) {
		scan_add(m, sub.sum, sub.sumsq, 0);
		return;
	}
	for (i = 0; i < k; i++) {
		lo = scan_square(p[i], &hi);
		scan_add(m, p[i], lo, hi);
	}
}

/* eight bytes, the first one lowest, whatever the byte order */
static inline uint64_t scan_le64(const uint8_t *b)
{
	uint64_t w;

	memcpy(&w, b, sizeof(w));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	w = __builtin_bswap64(w);
#endif
	return w;
}

/* bit i % 64 of hit[i / 64]: idx[i] is in one of the runs (n a multiple of 64) */
SCAN_VECTOR
static void scan_mark(const struct scan_refine_ctx *r, const uint16_t *idx, int n, uint64_t *hit)
{
	uint8_t in[SCAN_SUB];
	uint64_t word;
	int i, j;

	memset(in, 0, (size_t)n);
	for (j = 0; j < r->nruns; j++) {
		uint16_t start = r->run_start[j], span = r->run_span[j];

		for (i = 0; i < n; i++)
			in[i] |= (uint16_t)(idx[i] - start) <= span;
	}
	for (i = 0; i < n / 64; i++) {
		word = 0;
		/* eight 0/1 bytes to eight bits: the multiply gathers them in the top byte */
		for (j = 0; j < 8; j++)
			word |= (scan_le64(in + 64 * i + 8 * j) * 0x0102040810204080ull) >>
				56 << (8 * j);
		hit[i] = word;
	}
}

static void scan_sub_cells(const struct scan_refine_ctx *r, uint64_t **counts, const int64_t *p,
			   uint16_t *idx, int k)
{
	uint64_t hit[SCAN_SUB / 64], w;
	int i, b, c, n = (k + 63) & ~63;

	for (i = k; i < n; i++)
		idx[i] = SCAN_NBINS; /* in no run */
	scan_mark(r, idx, n, hit);
	for (i = 0; i < n / 64; i++) {
		for (w = hit[i]; w; w &= w - 1) {
			int at = 64 * i + __builtin_ctzll(w);
			int64_t x = p[at];

			b = idx[at];
			for (c = r->first[b]; c >= 0 && c < r->ncells && r->cells[c].bucket == b;
			     c++) {
				const struct scan_cell *cell = &r->cells[c];

				if (x >= cell->lo && x <= cell->hi) {
					counts[c]
					      [((uint64_t)x - (uint64_t)cell->lo) >> cell->shift]++;
					break;
				}
			}
		}
	}
}

static void scan_block(struct scan_part *part, const int64_t *v, int64_t n)
{
	uint16_t idx[SCAN_SUB];
	int64_t off;
	int k, i;

	for (off = 0; off < n; off += k) {
		const int64_t *p = v + off;

		k = n - off < SCAN_SUB ? (int)(n - off) : SCAN_SUB;
		if (part->acc)
			scan_sub_add(part->acc, p, k, part->deadline, idx);
		else
			scan_index(p, k, idx);
		if (part->acc) {
			uint64_t *h1 = part->acc->m.hist, *h2 = part->acc->hist2;

			for (i = 0; i + 2 <= k; i += 2) {
				h1[idx[i]]++;
				h2[idx[i + 1]]++;
			}
			if (i < k)
				h1[idx[i]]++;
		}
		if (part->ref->ncells)
			scan_sub_cells(part->ref, part->counts, p, idx, k);
	}
}

static void scan_release(const int64_t *start, int64_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t begin = ((uintptr_t)start + page - 1) / page * page;
	uintptr_t end = ((uintptr_t)(start + n)) / page * page;

	if (end > begin)
		(void)madvise((void *)begin, end - begin, MADV_DONTNEED);
}

/* Take blocks until none is left: a thread slowed down by other work takes fewer. */
static void *scan_part_run(void *arg)
{
	struct scan_part *p = arg;
	struct scan_work *w = p->work;
	int64_t b, from, k;
	int s = 0;

	for (;;) {
		b = atomic_fetch_add(&w->next, 1);
		if (b >= w->first[w->nsegs])
			break;
		while (b >= w->first[s + 1])
			s++; /* blocks are taken in order: the segment only moves on */
		b -= w->first[s];
		if (w->head[s] && !b) {
			from = 0;
			k = w->head[s];
		} else {
			from = w->head[s] + (b - !!w->head[s]) * w->block;
			k = w->segs[s].count - from < w->block ? w->segs[s].count - from : w->block;
		}
		scan_block(p, w->segs[s].data + from, k);
		if (w->segs[s].release)
			scan_release(w->segs[s].data + from, k);
	}
	return NULL;
}

/* Run every part, parts[1..] in threads of their own (here when one cannot start). */
static void scan_run(struct scan_part *parts, int nparts)
{
	pthread_t tid[SCAN_MAX_THREADS];
	int started[SCAN_MAX_THREADS] = { 0 };
	int i;

	for (i = 1; i < nparts; i++)
		started[i] = !pthread_create(&tid[i], NULL, scan_part_run, &parts[i]);
	(void)scan_part_run(&parts[0]);
	for (i = 1; i < nparts; i++) {
		if (started[i])
			(void)pthread_join(tid[i], NULL);
		else
			(void)scan_part_run(&parts[i]);
	}
}

/* Number the blocks of SEGS into W and clear PARTS; the number of parts or -errno. */
static int scan_split(struct scan_part *parts, struct scan_work *w, const struct scan_seg *segs,
		      int nsegs, int64_t block, int threads)
{
	int64_t rest;
	int i;

	if (nsegs < 0 || block < 1)
		return -EINVAL;
	w->first = malloc(((size_t)nsegs + 1) * sizeof(*w->first));
	w->head = malloc(((size_t)nsegs + 1) * sizeof(*w->head));
	if (!w->first || !w->head) {
		free(w->first);
		free(w->head);
		return -ENOMEM;
	}
	w->first[0] = 0;
	for (i = 0; i < nsegs; i++) {
		if (segs[i].count < 0 || (segs[i].count && !segs[i].data)) {
			free(w->first);
			free(w->head);
			return -EINVAL;
		}
		/* aligned blocks need a block of whole huge pages */
		w->head[i] = 0;
		if (!(block % (int64_t)(SCAN_ALIGN / sizeof(int64_t))))
			w->head[i] = (int64_t)((SCAN_ALIGN - (uintptr_t)segs[i].data % SCAN_ALIGN) %
					       SCAN_ALIGN / sizeof(int64_t));
		if (w->head[i] > segs[i].count)
			w->head[i] = segs[i].count;
		rest = segs[i].count - w->head[i];
		w->first[i + 1] = w->first[i] + !!w->head[i] + rest / block + !!(rest % block);
	}
	w->segs = segs;
	w->nsegs = nsegs;
	w->block = block;
	atomic_init(&w->next, 0);
	if (threads < 1)
		threads = 1;
	if (threads > SCAN_MAX_THREADS)
		threads = SCAN_MAX_THREADS;
	for (i = 0; i < threads; i++) {
		memset(&parts[i], 0, sizeof(parts[i]));
		parts[i].work = w;
	}
	return threads;
}

static void scan_moments_merge(struct scan_moments *dst, const struct scan_acc *acc)
{
	const struct scan_moments *src = &acc->m;
	uint64_t c, c2;
	int i;

	if (!src->count)
		return;
	if (!dst->count || src->min < dst->min)
		dst->min = src->min;
	if (!dst->count || src->max > dst->max)
		dst->max = src->max;
	dst->count += src->count;
	dst->sum[0] += src->sum[0];
	dst->sum[1] += src->sum[1] + (dst->sum[0] < src->sum[0]);
	dst->sumsq[0] += src->sumsq[0];
	c = dst->sumsq[0] < src->sumsq[0];
	dst->sumsq[1] += src->sumsq[1];
	c2 = dst->sumsq[1] < src->sumsq[1];
	dst->sumsq[1] += c;
	c2 += dst->sumsq[1] < c;
	dst->sumsq[2] += src->sumsq[2] + c2;
	dst->above += src->above;
	for (i = 0; i < SCAN_NBINS; i++)
		dst->hist[i] += src->hist[i] + acc->hist2[i];
}

/* Add bucket B (above every bucket so far) to the runs, joining the two closest
 * runs when there are too many: their gap then only costs a look at first[]. */
static void scan_runs_add(struct scan_refine_ctx *r, uint16_t b)
{
	int j, best = 1;

	if (r->nruns && r->run_start[r->nruns - 1] + r->run_span[r->nruns - 1] + 1 == b) {
		r->run_span[r->nruns - 1]++;
		return;
	}
	if (r->nruns == SCAN_RUNS) {
		for (j = 2; j < SCAN_RUNS; j++)
			if (r->run_start[j] - r->run_start[j - 1] <
			    r->run_start[best] - r->run_start[best - 1])
				best = j;
		r->run_span[best - 1] =
			(uint16_t)(r->run_start[best] + r->run_span[best] - r->run_start[best - 1]);
		for (j = best; j + 1 < SCAN_RUNS; j++) {
			r->run_start[j] = r->run_start[j + 1];
			r->run_span[j] = r->run_span[j + 1];
		}
		r->nruns--;
	}
	r->run_start[r->nruns] = b;
	r->run_span[r->nruns++] = 0;
}

static int scan_cells_check(const struct scan_cell *cells, int ncells, struct scan_refine_ctx *r)
{
	int i;

	if (ncells < 0 || (ncells && !cells))
		return -EINVAL;
	for (i = 0; i < SCAN_NBINS; i++)
		r->first[i] = -1;
	r->nruns = 0;
	r->cells = cells;
	r->ncells = ncells;
	for (i = 0; i < ncells; i++) {
		const struct scan_cell *c = &cells[i];

		if (c->bucket < 0 || c->bucket >= SCAN_NBINS || c->lo > c->hi || c->shift < 0 ||
		    c->shift > 63 || !c->counts ||
		    (((uint64_t)c->hi - (uint64_t)c->lo) >> c->shift) >= SCAN_MAX_SUBBINS)
			return -EINVAL;
		if (i && (c->bucket < cells[i - 1].bucket ||
			  (c->bucket == cells[i - 1].bucket && c->lo <= cells[i - 1].hi)))
			return -EINVAL; /* sorted, disjoint */
		if (r->first[c->bucket] >= 0)
			continue;
		r->first[c->bucket] = i;
		scan_runs_add(r, (uint16_t)c->bucket);
	}
	return 0;
}

static size_t scan_cell_bins(const struct scan_cell *c)
{
	return (size_t)((((uint64_t)c->hi - (uint64_t)c->lo) >> c->shift) + 1);
}

/*
 * One pass over every sample. With MOM: the moments, the samples > DEADLINE
 * (ns) and the bucket histogram into MOM (zeroed here). With NCELLS cells,
 * sorted by bucket then lo and disjoint: the samples of each counted into its
 * sub-bins (added to). 0 or -errno.
 */
int scan_pass(const struct scan_seg *segs, int nsegs, int64_t block, int threads, int64_t deadline,
	      struct scan_moments *mom, const struct scan_cell *cells, int ncells)
{
	struct scan_part parts[SCAN_MAX_THREADS];
	struct scan_work work;
	struct scan_refine_ctx *ref;
	struct scan_acc *acc = NULL;
	uint64_t **counts = NULL, *pool = NULL;
	size_t bins = 0, off = 0, j;
	int n, i, c, err;

	n = scan_split(parts, &work, segs, nsegs, block, threads);
	if (n < 0)
		return n;
	err = -ENOMEM;
	ref = malloc(sizeof(*ref));
	if (!ref)
		goto out_work;
	err = scan_cells_check(cells, ncells, ref);
	if (err)
		goto out_ref;
	for (c = 0; c < ncells; c++)
		bins += scan_cell_bins(&cells[c]);
	err = -ENOMEM;
	if (mom) {
		acc = calloc((size_t)n, sizeof(*acc));
		if (!acc)
			goto out_ref;
	}
	/* part 0 counts straight into the caller's arrays, the others privately */
	counts = calloc((size_t)n * (size_t)ncells + 1, sizeof(*counts));
	pool = calloc((size_t)(n - 1) * bins + 1, sizeof(*pool));
	if (!counts || !pool)
		goto out_free;
	for (i = 0; i < n; i++) {
		for (c = 0; c < ncells; c++) {
			counts[(size_t)i * ncells + c] = i ? pool + off : cells[c].counts;
			off += i ? scan_cell_bins(&cells[c]) : 0;
		}
		parts[i].ref = ref;
		parts[i].counts = counts + (size_t)i * ncells;
		parts[i].deadline = deadline;
		if (acc) {
			acc[i].m.min = INT64_MAX;
			acc[i].m.max = INT64_MIN;
			parts[i].acc = &acc[i];
		}
	}
	scan_run(parts, n);
	for (i = 1; i < n; i++)
		for (c = 0; c < ncells; c++)
			for (j = 0; j < scan_cell_bins(&cells[c]); j++)
				cells[c].counts[j] += counts[(size_t)i * ncells + c][j];
	if (mom) {
		memset(mom, 0, sizeof(*mom));
		for (i = 0; i < n; i++)
			scan_moments_merge(mom, &acc[i]);
	}
	err = 0;
out_free:
	free(pool);
	free(counts);
	free(acc);
out_ref:
	free(ref);
out_work:
	free(work.first);
	free(work.head);
	return err;
}
