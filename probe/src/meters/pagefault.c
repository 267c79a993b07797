/*
 * pagefault — what the first touch of each page of a memory region costs, and
 * what protection removes it: write one byte per page, read CLOCK_MONOTONIC
 * before and after each write (one sample per page), and count the thread's
 * minor and major faults over that one pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "lib/fail.h"
#include "lib/jsonw.h"
#include "lib/opts.h"
#include "lib/runner.h"
#include "lib/sampler.h"
#include "lib/timeutil.h"
#include "probe.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older C libraries lack the name */
#endif

#define PF_DEFAULT_SIZE ((int64_t)64 << 20)
#define PF_STATIC_MAX ((size_t)64 << 20)    /* the .bss array, shared by all threads */
#define PF_STATIC_SLACK ((size_t)128 << 10) /* room to page-align it (pages up to 64 KiB) */
#define PF_STACK_MARGIN ((size_t)128 << 10) /* stack: above the region, the loop's frames */
#define PF_NOMINAL_PERIOD_NS NSEC_PER_USEC  /* back to back: raw header and ring sizing */
#define PF_MINCORE_CHUNK 1024               /* pages per mincore() call */

enum pf_region { PF_STATIC, PF_STACK, PF_HEAP, PF_MMAP, PF_FILE, PF_NREGIONS };

/* --protect is a set of these two. */
#define PF_MLOCK 1
#define PF_PREFAULT 2

static const char *const region_names[PF_NREGIONS + 1] = { "static", "stack", "heap",
							   "mmap",   "file",  NULL };
/* In flag order: the index of a word is its set of PF_MLOCK and PF_PREFAULT. */
static const char *const protect_names[] = { "none", "mlock", "prefault", "mlock+prefault", NULL };

struct pagefault_params {
	int region;           /* enum pf_region (a choice option) */
	int protect;          /* PF_MLOCK | PF_PREFAULT (a choice option) */
	const char *size_arg; /* NULL: PF_DEFAULT_SIZE */
	const char *dir_arg;  /* NULL: $TMPDIR, else /tmp */
	int64_t interval_ns;  /* between touches; 0: back to back */
	/* Resolved by check(). */
	size_t size;      /* bytes per thread, whole pages */
	size_t page_size; /* bytes */
	const char *dir;  /* file: where the file is made; NULL otherwise */
};

/* Per measuring thread, at mthread.mstate (zeroed: nothing made yet). */
struct pf_thread {
	char *map; /* static, stack, mmap, file: the mapping to undo */
	size_t map_len;
	void *heap;  /* heap: the malloc'd block */
	char *base;  /* the region's lowest page */
	size_t size; /* bytes */
	size_t page_size;
	size_t pages;
	int64_t setup_ns;        /* making, locking and prefaulting the region */
	uint64_t resident;       /* region pages resident just before the loop (mincore) */
	uint64_t minflt, majflt; /* over the measured loop only */
	/* The pass: */
	struct mthread *t;
	const struct run_ctl *ctl;
	int64_t interval_ns;
	bool downward;             /* stack: from the frame down, as a stack grows */
	ucontext_t back, on_stack; /* stack: the loop runs on the region's own stack */
};

/*
 * The static region's array, the meter's image_array: every run unmaps its pages before
 * it locks memory (meters_release_image), and a static run maps its thread's slice again,
 * anonymous and private at the same addresses, as the ELF loader maps .bss. Mapped, it
 * would be populated by every meter's mlockall(MCL_CURRENT) and count against every
 * unprivileged user's RLIMIT_MEMLOCK (which counts PROT_NONE mappings too).
 */
static char pf_static[PF_STATIC_MAX + PF_STATIC_SLACK];

/* The array's page-aligned part, at most PF_STATIC_MAX; its length (bytes) in *LEN. */
static char *static_area(size_t ps, size_t *len)
{
	char *lo = meter_image_pages(pf_static, sizeof(pf_static), ps, len);

	*len = *len < PF_STATIC_MAX ? *len : PF_STATIC_MAX;
	return lo;
}

static void pagefault_defaults(void *p)
{
	struct pagefault_params *pp = p;

	memset(pp, 0, sizeof(*pp));
}

static int64_t pagefault_period(const void *p, int index)
{
	const struct pagefault_params *pp = p;

	(void)index;
	return pp->interval_ns ? pp->interval_ns : PF_NOMINAL_PERIOD_NS;
}

/* "64M" or "2 threads x 64M": what --size asks for in all. */
static void size_ask(char *buf, size_t len, int nthreads, const char *arg)
{
	if (nthreads == 1)
		snprintf(buf, len, "%s", arg);
	else
		snprintf(buf, len, "%d threads x %s", nthreads, arg);
}

static int check_size(struct pagefault_params *pp, int nthreads, struct opt_fault *at, char *err,
		      size_t errlen)
{
	const char *arg = pp->size_arg ? pp->size_arg : "64M";
	long phys = sysconf(_SC_PHYS_PAGES);
	int64_t v = PF_DEFAULT_SIZE;
	size_t cap, ps = pp->page_size;
	char why[160], ask[64];

	if (pp->size_arg && parse_size_bytes(pp->size_arg, &v, why, sizeof(why)))
		return opts_refusef(at, "size", arg, err, errlen, "--size: %s", why);
	if (v < (int64_t)ps || v % (int64_t)ps)
		return opts_refusef(at, "size", arg, err, errlen,
				    "--size: \"%s\" is not a whole "
				    "number of %zu-byte pages (at least one)",
				    arg, ps);
	size_ask(ask, sizeof(ask), nthreads, arg);
	if (pp->region == PF_STATIC) {
		(void)static_area(ps, &cap);
		if ((uint64_t)v > cap / (size_t)nthreads)
			return opts_refusef(at, "size", arg, err, errlen,
					    "--size: %s exceeds the "
					    "static array (%zu MiB for all threads)",
					    ask, cap >> 20);
	}
	if (phys > 0 && (uint64_t)v > (uint64_t)phys * ps / (uint64_t)nthreads)
		return opts_refusef(at, "size", arg, err, errlen,
				    "--size: %s exceeds this machine's "
				    "memory (%llu MiB)",
				    ask, ((unsigned long long)phys * ps) >> 20);
	pp->size = (size_t)v;
	return 0;
}

static int check_dir(struct pagefault_params *pp, struct opt_fault *at, char *err, size_t errlen)
{
	const char *tmp = getenv("TMPDIR");
	struct stat st;

	if (pp->region != PF_FILE) {
		pp->dir = NULL;
		if (!pp->dir_arg)
			return 0;
		return opts_refusef(at, "dir", pp->dir_arg, err, errlen,
				    "--dir applies to --region file only");
	}
	pp->dir = pp->dir_arg ? pp->dir_arg : (tmp && *tmp ? tmp : "/tmp");
	if (stat(pp->dir, &st) || !S_ISDIR(st.st_mode) || access(pp->dir, W_OK | X_OK))
		return opts_refusef(at, "dir", pp->dir_arg, err, errlen,
				    "--dir: \"%.300s\" is not a writable directory%s", pp->dir,
				    pp->dir_arg ? "" : " (the default: $TMPDIR, else /tmp)");
	return 0;
}

static int pagefault_check(void *p, int nthreads, struct opt_fault *at, char *err, size_t errlen)
{
	struct pagefault_params *pp = p;
	int i;

	pp->page_size = (size_t)sysconf(_SC_PAGESIZE);
	if ((i = check_size(pp, nthreads > 0 ? nthreads : 1, at, err, errlen)))
		return i;
	return check_dir(pp, at, err, errlen);
}

/* An unnamed file in DIR: nothing is left there however the run ends. -1 with errno. */
static int file_open(const char *dir)
{
	char path[4096];
	int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0)
		return fd;
	/* No O_TMPFILE on this file system: a name for the few us until unlink. */
	if ((size_t)snprintf(path, sizeof(path), "%s/.rtlab-pagefault.XXXXXX", dir) >=
	    sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = mkostemp(path, O_CLOEXEC);
	if (fd >= 0)
		(void)unlink(path);
	return fd;
}

/* A sparse file of S->size bytes in DIR, mapped MAP_SHARED; the mapping keeps it. */
static int region_file(struct pf_thread *s, const char *dir, char *err, size_t errlen)
{
	struct statvfs vfs;
	int rc, fd = file_open(dir);

	if (fd < 0)
		return fail_errno(err, errlen, "--dir: cannot create a file in \"%.300s\"", dir);
	/* A write fault that finds no space raises SIGBUS: refuse now rather than die then. */
	if (!fstatvfs(fd, &vfs) && (uint64_t)vfs.f_bavail * vfs.f_frsize < s->size) {
		snprintf(err, errlen, "--dir: \"%.300s\" has %llu bytes free, the region needs %zu",
			 dir, (unsigned long long)vfs.f_bavail * vfs.f_frsize, s->size);
		(void)close(fd);
		return -ENOSPC;
	}
	if (ftruncate(fd, (off_t)s->size)) {
		rc = fail_errno(err, errlen, "--dir: cannot size the file");
		(void)close(fd);
		return rc;
	}
	s->map = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	rc = s->map == MAP_FAILED ? fail_errno(err, errlen, "--dir: cannot map the file") : 0;
	(void)close(fd);
	if (rc) {
		s->map = NULL;
		return rc;
	}
	s->map_len = s->size;
	s->base = s->map;
	return 0;
}

static void stack_entry(void);
static _Thread_local struct pf_thread *stack_self; /* for stack_entry: makecontext passes ints */

/* A stack of its own: guard page, the region, then the margin the loop's frames use. */
static int region_stack(struct pf_thread *s, char *err, size_t errlen)
{
	size_t ps = s->page_size;

	s->map_len = ps + s->size + PF_STACK_MARGIN;
	s->map = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (s->map == MAP_FAILED) {
		s->map = NULL;
		return fail_errno(err, errlen, "cannot map the stack");
	}
	if (mprotect(s->map, ps, PROT_NONE))
		return fail_errno(err, errlen, "cannot make the stack's guard page");
	s->base = s->map + ps;
	/* The frames' pages are not the region: touched now, so that only the region's count. */
	memset(s->base + s->size, 0, PF_STACK_MARGIN);
	if (getcontext(&s->on_stack))
		return fail_errno(err, errlen, "getcontext");
	s->on_stack.uc_stack.ss_sp = s->base;
	s->on_stack.uc_stack.ss_size = s->size + PF_STACK_MARGIN;
	s->on_stack.uc_link = &s->back;
	makecontext(&s->on_stack, stack_entry, 0);
	s->downward = true;
	return 0;
}

static int region_make(struct pf_thread *s, const struct pagefault_params *pp, int index, char *err,
		       size_t errlen)
{
	size_t ps = pp->page_size, cap;
	int rc = 0;

	s->size = pp->size;
	s->page_size = ps;
	s->pages = pp->size / ps;
	switch (pp->region) {
	case PF_STATIC:
		s->base = static_area(ps, &cap) + (size_t)index * pp->size;
		s->map = mmap(s->base, s->size, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (s->map == MAP_FAILED) {
			s->map = NULL;
			return fail_errno(err, errlen, "cannot map the static array's slice");
		}
		s->map_len = s->size;
		if (s->map != s->base) { /* a kernel before 4.17 took the address as a hint */
			snprintf(err, errlen, "cannot map the static array's slice at its address");
			return -EEXIST;
		}
		break;
	case PF_STACK:
		rc = region_stack(s, err, errlen);
		break;
	case PF_HEAP:
		/* One page more: the region is the block's whole pages, the header's page is not. */
		if (!(s->heap = malloc(s->size + ps))) {
			snprintf(err, errlen, "malloc of %zu bytes failed", s->size + ps);
			return -ENOMEM;
		}
		s->base = (char *)(((uintptr_t)s->heap + ps - 1) & ~(uintptr_t)(ps - 1));
		break;
	case PF_MMAP:
		s->map = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (s->map == MAP_FAILED) {
			s->map = NULL;
			return fail_errno(err, errlen, "cannot map the region");
		}
		s->map_len = s->size;
		s->base = s->map;
		break;
	case PF_FILE:
		rc = region_file(s, pp->dir, err, errlen);
		break;
	case PF_NREGIONS:
		return -EINVAL;
	}
	/* One fault per base page: no transparent huge page may serve 512 of them at once. */
	if (!rc)
		(void)madvise(s->base, s->size, MADV_NOHUGEPAGE);
	return rc;
}

static void region_prefault(const struct pf_thread *s)
{
	for (size_t i = 0; i < s->pages; i++)
		*(volatile char *)(s->base + i * s->page_size) = 0;
}

static uint64_t region_resident(const struct pf_thread *s)
{
	unsigned char vec[PF_MINCORE_CHUNK];
	uint64_t n = 0;

	for (size_t i = 0; i < s->pages; i += PF_MINCORE_CHUNK) {
		size_t k = s->pages - i < PF_MINCORE_CHUNK ? s->pages - i : PF_MINCORE_CHUNK;

		if (mincore(s->base + i * s->page_size, k * s->page_size, vec))
			return 0;
		for (size_t j = 0; j < k; j++)
			n += vec[j] & 1;
	}
	return n;
}

static int pagefault_thread_setup(struct mthread *t, const void *p, char *err, size_t errlen)
{
	const struct pagefault_params *pp = p;
	struct pf_thread *s = t->mstate;
	int64_t t0 = mono_now_ns();
	int rc;

	s->t = t;
	s->interval_ns = pp->interval_ns;
	/* --protect decides: the runner's mlockall(MCL_FUTURE) would lock and populate the
	 * region as it is made. What the runner touched stays resident. */
	if (munlockall())
		return fail_errno(err, errlen, "munlockall failed");
	if ((rc = region_make(s, pp, t->index, err, errlen)))
		return rc;
	if ((pp->protect & PF_MLOCK) && mlockall(MCL_CURRENT | MCL_FUTURE))
		return fail_errno(err, errlen,
				  "--protect: mlockall(MCL_CURRENT|MCL_FUTURE) failed");
	if (pp->protect & PF_PREFAULT)
		region_prefault(s);
	s->setup_ns = mono_now_ns() - t0;
	s->resident = region_resident(s);
	return 0;
}

static void pagefault_thread_teardown(struct mthread *t, const void *p)
{
	struct pf_thread *s = t->mstate;

	(void)p;
	/* file: the last reference, the file goes; static: unmapped again, as at start */
	if (s->map)
		(void)munmap(s->map, s->map_len);
	s->map = NULL;
	free(s->heap);
	s->heap = NULL;
}

/* The measured pass: one byte written per page, the clock read around each write. */
static void touch_pass(struct pf_thread *s)
{
	struct mthread *t = s->t;
	const struct run_ctl *ctl = s->ctl;
	const int64_t interval = s->interval_ns;
	const ptrdiff_t step = s->downward ? -(ptrdiff_t)s->page_size : (ptrdiff_t)s->page_size;
	volatile char *page = s->downward ? s->base + s->size - s->page_size : s->base;
	struct rusage ru0, ru1;
	int64_t target, t0, t1;

	(void)getrusage(RUSAGE_THREAD, &ru0);
	t->start_ns = target = mono_now_ns();
	for (uint64_t i = 0; i < s->pages; i++) {
		if (interval && i) {
			target += interval;
			sleep_until_ns(target);
		}
		t0 = mono_now_ns();
		*page = (char)i;
		t1 = mono_now_ns();
		sample_record(t, t1 - t0, i, t1);
		page += step;
		if (interval && t0 - target >= interval) {
			/* Woke a whole interval late: count it, the next touch is due after now. */
			t->overruns++;
			target += ((t0 - target) / interval) * interval;
		}
		if (run_should_stop(ctl, i + 1, t1 - t->start_ns))
			break;
	}
	(void)getrusage(RUSAGE_THREAD, &ru1);
	s->minflt = (uint64_t)(ru1.ru_minflt - ru0.ru_minflt);
	s->majflt = (uint64_t)(ru1.ru_majflt - ru0.ru_majflt);
}

static void stack_entry(void)
{
	touch_pass(stack_self);
}

static void pagefault_loop(struct mthread *t, const void *p, const struct run_ctl *ctl)
{
	struct pf_thread *s = t->mstate;

	(void)p;
	s->ctl = ctl;
	if (!s->downward) {
		touch_pass(s);
		return;
	}
	stack_self = s;
	(void)swapcontext(&s->back, &s->on_stack); /* back here when touch_pass returns */
}

static void pagefault_thread_json(struct jw *w, const struct mthread *t, const void *p)
{
	const struct pagefault_params *pp = p;
	const struct pf_thread *s = t->mstate;

	jw_kstr(w, "region", region_names[pp->region]);
	jw_kstr(w, "protect", protect_names[pp->protect]);
	jw_kuint(w, "pages", s->pages);
	jw_kuint(w, "page_size", pp->page_size);
	jw_key(w, "faults");
	jw_obj_begin(w);
	jw_kuint(w, "minor", s->minflt);
	jw_kuint(w, "major", s->majflt);
	jw_obj_end(w);
	jw_kuint(w, "resident_pages", s->resident);
	jw_kint(w, "setup_ns", s->setup_ns);
}

static void pagefault_params_json(struct jw *w, const void *p)
{
	const struct pagefault_params *pp = p;

	jw_kstr(w, "region", region_names[pp->region]);
	jw_kstr(w, "protect", protect_names[pp->protect]);
	jw_kuint(w, "size_bytes", pp->size);
	jw_key(w, "dir");
	pp->dir ? jw_str(w, pp->dir) : jw_null(w);
	jw_kuint(w, "page_size", pp->page_size);
	jw_kint(w, "interval_ns", pp->interval_ns);
	jw_kstr(w, "clock", "CLOCK_MONOTONIC");
	jw_kstr(w, "touch", "one byte written per page");
	jw_kstr(w, "huge_pages", "off (MADV_NOHUGEPAGE)");
}

static const struct opt_desc pagefault_opts[] = {
	OPT_CHOICE_DESC("region", region_names, PF_MMAP, "R", "the memory touched",
			offsetof(struct pagefault_params, region), OPT_NO_SET),
	OPT_CHOICE_DESC("protect", protect_names, 0, "P", "applied before measuring",
			offsetof(struct pagefault_params, protect), OPT_NO_SET),
	OPT_DESC("size", OPT_STRING, 0, 0, "SIZE",
		 "bytes per thread, whole pages, e.g. 4M, 1G (default 64M; static: 64M in all)",
		 offsetof(struct pagefault_params, size_arg), OPT_NO_SET),
	OPT_DESC("dir", OPT_STRING, 0, 0, "DIR",
		 "file only: where the file is made (default $TMPDIR, else /tmp)",
		 offsetof(struct pagefault_params, dir_arg), OPT_NO_SET),
	OPT_DESC("interval", OPT_DURATION, 0, 10 * NSEC_PER_SEC, "DUR",
		 "one touch every DUR, e.g. 1ms, as a periodic task (default 0: back to back)",
		 offsetof(struct pagefault_params, interval_ns), OPT_NO_SET),
	OPT_END,
};

const struct meter meter_pagefault = {
	.name = "pagefault",
	.summary = "first-touch latency of each page of a region, per memory protection",
	.help = "Makes a region of --size bytes per measuring thread, applies --protect, then\n"
		"writes one byte to each of its pages once, reading CLOCK_MONOTONIC before and\n"
		"after each write: one sample per page, in ns (clock reads included). Over that\n"
		"pass only, getrusage(RUSAGE_THREAD) counts the thread's minor and major faults.\n"
		"--loops N touches the first N pages; without it every page is touched once.\n"
		"Transparent huge pages are off on the region (MADV_NOHUGEPAGE).\n"
		"\n"
		"regions:\n"
		"  static  a slice of a 64 MiB array in the probe's .bss (unmapped at start-up,\n"
		"          mapped again for the run as the loader maps .bss: anonymous, private)\n"
		"  stack   the loop runs on a stack of its own (makecontext) and touches the\n"
		"          pages below its frame, downward (not the runner's 256 KiB stacks)\n"
		"  heap    malloc (large blocks: glibc maps them)\n"
		"  mmap    an anonymous private mapping\n"
		"  file    a MAP_SHARED mapping of a sparse, unnamed file made in --dir\n"
		"protections (process-wide, the meter's own: the runner's mlockall is undone\n"
		"by munlockall before the region is made):\n"
		"  none            nothing: every page faults on its first touch\n"
		"  mlock           mlockall(MCL_CURRENT|MCL_FUTURE) after making the region\n"
		"  prefault        write one byte per page before measuring\n"
		"  mlock+prefault  both: the measured pass must take no fault",
	.options = pagefault_opts,
	.params_size = sizeof(struct pagefault_params),
	.defaults = pagefault_defaults,
	.check = pagefault_check,
	.period_ns = pagefault_period,
	.loop = pagefault_loop,
	.params_json = pagefault_params_json,
	.thread_state_size = sizeof(struct pf_thread),
	.thread_setup = pagefault_thread_setup,
	.thread_teardown = pagefault_thread_teardown,
	.thread_json = pagefault_thread_json,
	.image_array = pf_static,
	.image_array_bytes = sizeof(pf_static),
};
