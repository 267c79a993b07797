/*
 * rtlab-probe sysinfo: copy the /proc and /sys files the readiness audit reads
 * into one JSON document, so a board without Python can be audited on the host
 * (rtlab audit --from FILE). The table below is the contract with the Python
 * facts reader (src/rtlab/system/); a test parses it from this file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <glob.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "lib/atomicfile.h"
#include "lib/jsonw.h"
#include "lib/kmsg.h"
#include "lib/outfile.h"
#include "probe.h"
#include "sysinfo.h"

#define SI_SCHEMA 1
#define SI_MAX_MATCHES 8192      /* files per glob pattern (e.g. processes) */
#define SI_MAX_TOTAL (64u << 20) /* bytes of file content per document */
#define SI_MAX_PIDS 64           /* processes of one --pid document */
#define SI_KMSG_MAX (4u << 20)   /* bytes of the kernel log kept */

struct si_pids {
	long pid[SI_MAX_PIDS];
	int n;
};

enum si_kind {
	SI_TEXT,   /* JSON string in "files" */
	SI_BASE64, /* binary (gzip) as base64 in "base64" */
};

struct si_entry {
	const char *pattern; /* absolute path or glob(3) pattern; %r is the kernel release */
	enum si_kind kind;
	size_t max_bytes;        /* larger files are cut and listed in "truncated" */
	const char *const *keep; /* NULL: whole file; else only lines containing one of these */
};

static const char *const keep_timer_list[] = {
	"hres_active", "event_handler",  "resolution",       "Clock Event Device",
	"cpu:",        "Per CPU device", "Broadcast device", NULL,
};
static const char *const keep_status[] = { "Name:", "Cpus_allowed_list:", NULL };
static const char *const keep_cpuinfo[] = { "flags", "model name", NULL };
static const char *const keep_stat[] = { "cpu", NULL };
static const char *const keep_meminfo[] = { "MemTotal:", "SwapTotal:", "Commit", NULL };

#define K 1024
/* sysinfo-table-begin */
static const struct si_entry si_table[] = {
	{ "/proc/sys/kernel/osrelease", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/version", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/hostname", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/arch", SI_TEXT, 4 * K, NULL },
	{ "/proc/cmdline", SI_TEXT, 64 * K, NULL },
	{ "/proc/config.gz", SI_BASE64, 4096 * K, NULL },
	{ "/boot/config-%r", SI_TEXT, 4096 * K, NULL },
	{ "/sys/kernel/realtime", SI_TEXT, 4 * K, NULL },
	{ "/sys/kernel/debug/sched/preempt", SI_TEXT, 4 * K, NULL },
	{ "/proc/timer_list", SI_TEXT, 1024 * K, keep_timer_list },
	{ "/sys/devices/system/clocksource/clocksource0/current_clocksource", SI_TEXT, 4 * K,
	  NULL },
	{ "/sys/devices/system/clocksource/clocksource0/available_clocksource", SI_TEXT, 4 * K,
	  NULL },
	{ "/sys/devices/system/cpu/online", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/possible", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/isolated", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/nohz_full", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/smt/active", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/smt/control", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/cpu[0-9]*/topology/thread_siblings_list", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_driver", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/name", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/latency", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/sched_rt_runtime_us", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/sched_rt_period_us", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/timer_migration", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/numa_balancing", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/watchdog", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/nmi_watchdog", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/kernel/watchdog_cpumask", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/vm/stat_interval", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/vm/dirty_writeback_centisecs", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/vm/overcommit_memory", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/vm/overcommit_ratio", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/vm/overcommit_kbytes", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/vm/oom_kill_allocating_task", SI_TEXT, 4 * K, NULL },
	{ "/proc/sys/vm/panic_on_oom", SI_TEXT, 4 * K, NULL },
	{ "/proc/meminfo", SI_TEXT, 16 * K, keep_meminfo },
	{ "/sys/kernel/mm/transparent_hugepage/enabled", SI_TEXT, 4 * K, NULL },
	{ "/sys/kernel/mm/transparent_hugepage/defrag", SI_TEXT, 4 * K, NULL },
	{ "/sys/kernel/mm/ksm/run", SI_TEXT, 4 * K, NULL },
	{ "/proc/swaps", SI_TEXT, 64 * K, NULL },
	{ "/proc/interrupts", SI_TEXT, 1024 * K, NULL },
	{ "/proc/irq/default_smp_affinity", SI_TEXT, 4 * K, NULL },
	{ "/proc/irq/[0-9]*/smp_affinity_list", SI_TEXT, 4 * K, NULL },
	{ "/proc/irq/[0-9]*/effective_affinity_list", SI_TEXT, 4 * K, NULL },
	{ "/proc/[0-9]*/stat", SI_TEXT, 4 * K, NULL },
	{ "/proc/[0-9]*/status", SI_TEXT, 16 * K, keep_status },
	{ "/proc/[0-9]*/oom_score_adj", SI_TEXT, 4 * K, NULL },
	{ "/proc/[0-9]*/task/[0-9]*/stat", SI_TEXT, 4 * K, NULL },
	{ "/proc/[0-9]*/task/[0-9]*/status", SI_TEXT, 16 * K, keep_status },
	{ "/sys/devices/virtual/workqueue/cpumask", SI_TEXT, 4 * K, NULL },
	{ "/sys/bus/workqueue/devices/writeback/cpumask", SI_TEXT, 4 * K, NULL },
	{ "/sys/devices/system/machinecheck/machinecheck0/check_interval", SI_TEXT, 4 * K, NULL },
	{ "/sys/kernel/tracing/available_tracers", SI_TEXT, 4 * K, NULL },
	{ "/sys/kernel/tracing/current_tracer", SI_TEXT, 4 * K, NULL },
	{ "/sys/kernel/debug/tracing/available_tracers", SI_TEXT, 4 * K, NULL },
	{ "/sys/kernel/debug/tracing/current_tracer", SI_TEXT, 4 * K, NULL },
	{ "/proc/cpuinfo", SI_TEXT, 1024 * K, keep_cpuinfo },
	{ "/proc/stat", SI_TEXT, 1024 * K, keep_stat },
	{ "/sys/hypervisor/type", SI_TEXT, 4 * K, NULL },
	{ "/sys/class/dmi/id/sys_vendor", SI_TEXT, 4 * K, NULL },
	{ "/sys/class/dmi/id/product_name", SI_TEXT, 4 * K, NULL },
	{ "/sys/class/dmi/id/board_vendor", SI_TEXT, 4 * K, NULL },
	{ "/sys/class/dmi/id/board_name", SI_TEXT, 4 * K, NULL },
	{ "/proc/device-tree/model", SI_TEXT, 4 * K, NULL },
	{ "/sys/firmware/devicetree/base/model", SI_TEXT, 4 * K, NULL },
	{ "/etc/machine-id", SI_TEXT, 4 * K, NULL },
	{ "/sys/firmware/devicetree/base/compatible", SI_TEXT, 4 * K, NULL },
	{ "/sys/fs/cgroup/*/cpuset.cpus.partition", SI_TEXT, 4 * K, NULL },
	{ "/sys/fs/cgroup/*/cpuset.cpus.effective", SI_TEXT, 4 * K, NULL },
	{ "/sys/fs/cgroup/*/*/cpuset.cpus.partition", SI_TEXT, 4 * K, NULL },
	{ "/sys/fs/cgroup/*/*/cpuset.cpus.effective", SI_TEXT, 4 * K, NULL },
	{ "/sys/fs/cgroup/cpuset/cpuset.sched_load_balance", SI_TEXT, 4 * K, NULL },
	{ "/sys/fs/cgroup/cpuset/*/cpuset.cpu_exclusive", SI_TEXT, 4 * K, NULL },
	{ "/sys/fs/cgroup/cpuset/*/cpuset.sched_load_balance", SI_TEXT, 4 * K, NULL },
	{ "/sys/fs/cgroup/cpuset/*/cpuset.effective_cpus", SI_TEXT, 4 * K, NULL },
	{ NULL, 0, 0, NULL },
};
/* sysinfo-table-end */

/* With --pid: only these files of each process (%p), for the application audit. */
static const struct si_entry si_process_table[] = {
	{ "/proc/%p/stat", SI_TEXT, 4 * K, NULL },
	{ "/proc/%p/status", SI_TEXT, 16 * K, NULL },
	{ "/proc/%p/limits", SI_TEXT, 16 * K, NULL },
	{ "/proc/%p/task/[0-9]*/stat", SI_TEXT, 4 * K, NULL },
	{ "/proc/%p/task/[0-9]*/status", SI_TEXT, 16 * K, NULL },
	{ "/proc/%p/task/[0-9]*/sched", SI_TEXT, 16 * K, NULL },
	{ NULL, 0, 0, NULL },
};

/* Growing byte buffer for one file's content. */
struct sbuf {
	char *p;
	size_t len, cap;
};

static int sbuf_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

/*
 * Read at most MAX bytes of PATH into B (NUL bytes become spaces so the text
 * survives as a C string). *CUT is set when the file was longer.
 */
static int read_file(const char *path, size_t max, struct sbuf *b, bool *cut)
{
	char chunk[8192];
	int fd, ret = 0;

	b->len = 0;
	*cut = false;
	if (sbuf_add(b, "", 0))
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			break;
		}
		if (n == 0)
			break;
		if (b->len + (size_t)n > max) {
			n = (ssize_t)(max - b->len);
			*cut = true;
		}
		ret = sbuf_add(b, chunk, (size_t)n);
		if (ret || *cut)
			break;
	}
	(void)close(fd);
	return ret;
}

/* Keep only the lines of B that contain one of KEEP (in place). */
static void keep_lines(struct sbuf *b, const char *const *keep)
{
	char *src = b->p, *dst = b->p;

	while (*src) {
		char *nl = strchr(src, '\n');
		size_t len = nl ? (size_t)(nl - src) + 1 : strlen(src);
		bool wanted = false;
		char save = src[len];

		src[len] = '\0';
		for (int i = 0; keep[i] && !wanted; i++)
			wanted = strstr(src, keep[i]) != NULL;
		src[len] = save;
		if (wanted) {
			memmove(dst, src, len);
			dst += len;
		}
		src += len;
	}
	*dst = '\0';
	b->len = (size_t)(dst - b->p);
}

static char *base64(const unsigned char *in, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16;

		if (i + 1 < n)
			v |= (unsigned)in[i + 1] << 8;
		if (i + 2 < n)
			v |= in[i + 2];
		*o++ = tab[(v >> 18) & 63];
		*o++ = tab[(v >> 12) & 63];
		*o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? tab[v & 63] : '=';
	}
	*o = '\0';
	return out;
}

/* Binary-safe read for base64 entries (gzip data holds NUL bytes). */
static int read_raw(const char *path, size_t max, struct sbuf *b, bool *cut)
{
	unsigned char chunk[8192];
	int fd, ret = 0;

	b->len = 0;
	*cut = false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			break;
		}
		if (n == 0)
			break;
		if (b->len + (size_t)n > max) {
			n = (ssize_t)(max - b->len);
			*cut = true;
		}
		ret = sbuf_add(b, (const char *)chunk, (size_t)n);
		if (ret || *cut)
			break;
	}
	(void)close(fd);
	return ret;
}

struct si_state {
	struct sbuf buf;
	size_t total;        /* bytes of content written so far */
	char *truncated[64]; /* paths cut at their size limit (first 64) */
	int ntruncated;
};

static void note_cut(struct si_state *st, const char *path)
{
	if (st->ntruncated < 64 && (st->truncated[st->ntruncated] = strdup(path)))
		st->ntruncated++;
}

/* Write the content of every file matched by PATTERN (from E) into the open object. */
static int emit_entry(struct jw *w, struct si_state *st, const struct si_entry *e,
		      const char *pattern)
{
	glob_t g;
	int ret;

	ret = glob(pattern, 0, NULL, &g);
	if (ret == GLOB_NOMATCH)
		return 0;
	if (ret)
		return ret == GLOB_NOSPACE ? -ENOMEM : 0;
	for (size_t i = 0; i < g.gl_pathc && i < SI_MAX_MATCHES; i++) {
		const char *path = g.gl_pathv[i];
		bool cut;

		if (st->total >= SI_MAX_TOTAL) {
			note_cut(st, path);
			continue;
		}
		if (e->kind == SI_BASE64) {
			char *enc;

			if (read_raw(path, e->max_bytes, &st->buf, &cut))
				continue;
			enc = base64((const unsigned char *)st->buf.p, st->buf.len);
			if (!enc) {
				globfree(&g);
				return -ENOMEM;
			}
			jw_kstr(w, path, enc);
			free(enc);
		} else {
			if (read_file(path, e->max_bytes, &st->buf, &cut))
				continue; /* unreadable (permission, vanished process): absent */
			for (size_t j = 0; j < st->buf.len; j++)
				if (st->buf.p[j] == '\0')
					st->buf.p[j] = ' ';
			if (e->keep)
				keep_lines(&st->buf, e->keep);
			jw_kstr(w, path, st->buf.p);
		}
		st->total += st->buf.len;
		if (cut)
			note_cut(st, path);
	}
	if (g.gl_pathc > SI_MAX_MATCHES)
		note_cut(st, pattern);
	globfree(&g);
	return 0;
}

/* PATTERN with %r replaced by the kernel release, or %p by the process ID. */
static void expand(const char *pattern, const char *value, char *out, size_t len)
{
	const char *r = strstr(pattern, "%r");

	if (!r)
		r = strstr(pattern, "%p");
	if (!r)
		snprintf(out, len, "%s", pattern);
	else
		snprintf(out, len, "%.*s%s%s", (int)(r - pattern), pattern, value, r + 2);
}

static int emit_kind(struct jw *w, struct si_state *st, const struct si_entry *table,
		     const char *value, enum si_kind kind)
{
	char pattern[512];
	int ret;

	for (const struct si_entry *e = table; e->pattern; e++) {
		if (e->kind != kind)
			continue;
		expand(e->pattern, value, pattern, sizeof(pattern));
		ret = emit_entry(w, st, e, pattern);
		if (ret)
			return ret;
	}
	return 0;
}

/* The kernel log as "/dev/kmsg": every record still in the buffer, one per line as
 * read (PRIO,SEQ,TS_US,FLAGS;TEXT), up to SI_KMSG_MAX bytes (then listed as cut). */
static int emit_kmsg(struct jw *w, struct si_state *st)
{
	char rec[KMSG_RECORD_MAX + 1];
	bool cut = false;
	int fd, ret = 0;

	st->buf.len = 0;
	if (sbuf_add(&st->buf, "", 0))
		return -ENOMEM;
	fd = open(KMSG_PATH, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0; /* absent or not permitted: absent */
	for (int i = 0; i < KMSG_READ_MAX; i++) {
		ssize_t n = read(fd, rec, KMSG_RECORD_MAX);

		if (n < 0 && (errno == EINTR || errno == EPIPE))
			continue; /* EPIPE: overwritten while read, go on with the next */
		if (n <= 0)
			break; /* EAGAIN: the end */
		if (st->buf.len + (size_t)n > SI_KMSG_MAX) {
			cut = true;
			break;
		}
		for (ssize_t j = 0; j < n; j++)
			if (rec[j] == '\0')
				rec[j] = ' ';
		ret = sbuf_add(&st->buf, rec, (size_t)n);
		if (ret)
			break;
	}
	(void)close(fd);
	if (ret)
		return ret;
	jw_kstr(w, KMSG_PATH, st->buf.p);
	st->total += st->buf.len;
	if (cut)
		note_cut(st, KMSG_PATH);
	return 0;
}

/* The files of each process of PIDS, then the kernel log. */
static int emit_processes(struct jw *w, struct si_state *st, const struct si_pids *pids)
{
	char pid[24];
	int ret = 0;

	for (int i = 0; i < pids->n && !ret; i++) {
		snprintf(pid, sizeof(pid), "%ld", pids->pid[i]);
		ret = emit_kind(w, st, si_process_table, pid, SI_TEXT);
	}
	return ret ? ret : emit_kmsg(w, st);
}

static int sysinfo_write(FILE *f, const struct si_pids *pids)
{
	struct si_state *st = calloc(1, sizeof(*st));
	struct utsname u;
	struct jw w;
	int ret;

	if (!st)
		return -ENOMEM;
	if (uname(&u))
		memset(&u, 0, sizeof(u));
	jw_init(&w, f);
	jw_obj_begin(&w);
	jw_kint(&w, "schema", SI_SCHEMA);
	jw_kstr(&w, "tool", "rtlab-probe");
	jw_kstr(&w, "kind", "sysinfo");
	jw_kstr(&w, "version", RTLAB_PROBE_VERSION);
	jw_key(&w, "uname");
	jw_obj_begin(&w);
	jw_kstr(&w, "sysname", u.sysname);
	jw_kstr(&w, "nodename", u.nodename);
	jw_kstr(&w, "release", u.release);
	jw_kstr(&w, "version", u.version);
	jw_kstr(&w, "machine", u.machine);
	jw_obj_end(&w);
	if (pids->n) {
		jw_key(&w, "pids");
		jw_arr_begin(&w);
		for (int i = 0; i < pids->n; i++)
			jw_int(&w, pids->pid[i]);
		jw_arr_end(&w);
	}
	jw_key(&w, "files");
	jw_obj_begin(&w);
	if (pids->n)
		ret = emit_processes(&w, st, pids);
	else
		ret = emit_kind(&w, st, si_table, u.release, SI_TEXT);
	jw_obj_end(&w);
	jw_key(&w, "base64");
	jw_obj_begin(&w);
	if (!ret && !pids->n)
		ret = emit_kind(&w, st, si_table, u.release, SI_BASE64);
	jw_obj_end(&w);
	jw_key(&w, "truncated");
	jw_arr_begin(&w);
	for (int i = 0; i < st->ntruncated; i++) {
		jw_str(&w, st->truncated[i]);
		free(st->truncated[i]);
	}
	jw_arr_end(&w);
	jw_obj_end(&w);
	fputc('\n', f);
	free(st->buf.p);
	free(st);
	return ret;
}

static void sysinfo_usage(FILE *f)
{
	fprintf(f,
		"usage: rtlab-probe sysinfo --json FILE [--pid PID]...\n\n"
		"Copy the /proc and /sys files the readiness audit reads into one JSON\n"
		"document (FILE, or - for standard output); audit it on a host with\n"
		"`rtlab audit --from FILE`. Nothing is changed on the system.\n\n"
		"  --pid PID   instead, the /proc files of process PID (stat, status, limits,\n"
		"              and stat, status, sched of each thread) and the kernel log\n"
		"              (/dev/kmsg), for the application audit; repeatable, up to %d\n",
		SI_MAX_PIDS);
}

static int sysinfo_fill(FILE *f, const void *arg)
{
	return sysinfo_write(f, arg);
}

/* "--pid" VALUE: a process ID, once each, at most SI_MAX_PIDS. */
static int add_pid(struct si_pids *pids, const char *value)
{
	char *end;
	long pid;

	errno = 0;
	pid = strtol(value, &end, 10);
	if (errno || end == value || *end || pid <= 0 || pid > INT32_MAX) {
		fprintf(stderr, "rtlab-probe sysinfo: --pid \"%.40s\": not a process ID\n", value);
		return -EINVAL;
	}
	for (int i = 0; i < pids->n; i++)
		if (pids->pid[i] == pid)
			return 0;
	if (pids->n == SI_MAX_PIDS) {
		fprintf(stderr, "rtlab-probe sysinfo: --pid: at most %d processes\n", SI_MAX_PIDS);
		return -E2BIG;
	}
	pids->pid[pids->n++] = pid;
	return 0;
}

int sysinfo_main(int argc, char **argv)
{
	struct si_pids pids = { 0 };
	const char *out = NULL;
	int ret, sig = 0;

	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			sysinfo_usage(stdout);
			return EXIT_OK;
		}
		if (!strcmp(argv[i], "--json") && i + 1 < argc && !out) {
			out = argv[++i];
			continue;
		}
		if (!strcmp(argv[i], "--pid") && i + 1 < argc) {
			if (add_pid(&pids, argv[++i]))
				return EXIT_USAGE;
			continue;
		}
		fprintf(stderr, "rtlab-probe sysinfo: unexpected argument \"%s\"\n", argv[i]);
		return EXIT_USAGE;
	}
	if (!out || !*out) {
		fprintf(stderr, "rtlab-probe sysinfo: --json FILE is required\n");
		return EXIT_USAGE;
	}
	if ((ret = atomic_check(out))) {
		fprintf(stderr, "rtlab-probe sysinfo: --json: cannot write \"%.300s\" (%s)\n", out,
			strerror(-ret));
		return EXIT_USAGE;
	}
	ret = atomic_write(out, sysinfo_fill, &pids, &sig);
	if (ret == -EINTR && sig) {
		fprintf(stderr,
			"rtlab-probe sysinfo: --json: stopped by %s while waiting for a reader "
			"of \"%.300s\": nothing written\n",
			stopsig_name(sig), out);
		return EXIT_OUTPUT;
	}
	if (ret) {
		fprintf(stderr,
			"rtlab-probe sysinfo: --json: cannot write \"%.300s\" (%s): no "
			"document written\n",
			out, strerror(-ret));
		return ret == -ENOMEM ? EXIT_INTERNAL : EXIT_OUTPUT;
	}
	return EXIT_OK;
}
