#include <errno.h>
#include <signal.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jsonw.h"
#include "loadrun.h"
#include "probe.h"
#include "timeutil.h"

#define LOAD_GRACE_NS (300 * NSEC_PER_MSEC)

int load_spec_parse(const char *text, const struct cpulist *online, struct load_spec *out,
		    char *err, size_t errlen)
{
	char buf[LOAD_TEXT_MAX], kerr[200];

	memset(out, 0, sizeof(*out));
	if (strlen(text) >= sizeof(buf)) {
		snprintf(err, errlen, "\"%.40s...\": load spec too long", text);
		return -EINVAL;
	}
	strcpy(out->text, text);
	strcpy(buf, text);
	char *at = strchr(buf, '@');

	if (at) {
		*at++ = '\0';
		if (cpulist_parse(at, &out->cpus, kerr, sizeof(kerr)) ||
		    cpulist_check_subset(&out->cpus, online, kerr, sizeof(kerr))) {
			snprintf(err, errlen, "\"%s\": %s", text, kerr);
			return -EINVAL;
		}
		out->has_cpus = true;
	} else {
		out->cpus = *online;
	}
	char *args = strchr(buf, ':');

	if (args)
		*args++ = '\0';
	out->kind = find_load_kind(buf);
	if (!out->kind) {
		char known[200] = "";

		for (int i = 0; probe_load_kinds[i]; i++) {
			strncat(known, i ? ", " : "", sizeof(known) - strlen(known) - 1);
			strncat(known, probe_load_kinds[i]->name, sizeof(known) - strlen(known) - 1);
		}
		snprintf(err, errlen, "\"%s\": unknown load kind \"%s\" (known: %s)", text, buf, known);
		return -EINVAL;
	}
	if (out->kind->parse(args, out, kerr, sizeof(kerr))) {
		snprintf(err, errlen, "\"%s\": %s (syntax %s[@CPUS])", text, kerr, out->kind->syntax);
		return -EINVAL;
	}
	return 0;
}

/* In the freshly forked worker: own group, die with the probe, plain scheduling. */
static void worker_setup(pid_t pgid, pid_t probe_pid, const struct load_spec *s)
{
	struct sched_param sp = { 0 };
	sigset_t all;
	cpu_set_t set;

	char comm[16];

	(void)setpgid(0, pgid);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	snprintf(comm, sizeof(comm), "rtlab:%s", s->kind->name); /* tells loads apart in ps/top */
	(void)prctl(PR_SET_NAME, comm);
	if (getppid() != probe_pid) /* the probe died before the line above */
		_exit(0);
	(void)sigemptyset(&all);
	(void)sigprocmask(SIG_SETMASK, &all, NULL);
	(void)signal(SIGINT, SIG_DFL);
	(void)signal(SIGTERM, SIG_DFL);
	(void)sched_setscheduler(0, SCHED_OTHER, &sp);
	(void)setpriority(PRIO_PROCESS, 0, 0);
	cpulist_to_set(&s->cpus, &set); /* also undoes the probe's --main-cpus pinning */
	(void)sched_setaffinity(0, sizeof(set), &set);
}

int load_group_start(struct load_group *g, const struct load_list *l, char *err, size_t errlen)
{
	int total = 0;
	pid_t self = getpid();

	memset(g, 0, sizeof(*g));
	for (int i = 0; i < l->n; i++)
		total += l->spec[i].nprocs;
	if (total > LOAD_MAX_PROCS) {
		snprintf(err, errlen, "--load: %d load processes in all, at most %d", total,
			 LOAD_MAX_PROCS);
		return -EINVAL;
	}
	if (total == 0)
		return 0;
	g->pids = calloc(total, sizeof(*g->pids));
	g->spec_of = calloc(total, sizeof(*g->spec_of));
	g->iters = mmap(NULL, total * sizeof(uint64_t), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!g->pids || !g->spec_of || g->iters == MAP_FAILED) {
		g->iters = NULL;
		snprintf(err, errlen, "load: out of memory");
		return -ENOMEM;
	}
	g->start_ns = mono_now_ns();
	for (int i = 0; i < l->n; i++) {
		for (int k = 0; k < l->spec[i].nprocs; k++) {
			pid_t pid = fork();

			if (pid < 0) {
				int e = errno;

				snprintf(err, errlen, "load \"%s\": fork failed (%s)", l->spec[i].text,
					 strerror(e));
				load_group_stop(g);
				return -e;
			}
			if (pid == 0) {
				worker_setup(g->pgid ? g->pgid : 0, self, &l->spec[i]);
				l->spec[i].kind->worker(&l->spec[i], k, &g->iters[g->nworkers]);
				_exit(0);
			}
			if (!g->pgid)
				g->pgid = pid;
			(void)setpgid(pid, g->pgid); /* also here: no race with the child's own call */
			g->spec_of[g->nworkers] = i;
			g->pids[g->nworkers++] = pid;
		}
	}
	return 0;
}

static int reap_some(struct load_group *g)
{
	int alive = 0;

	for (int i = 0; i < g->nworkers; i++) {
		if (!g->pids[i])
			continue;
		pid_t r = waitpid(g->pids[i], NULL, WNOHANG);

		if (r == g->pids[i] || (r < 0 && errno == ECHILD))
			g->pids[i] = 0;
		else
			alive++;
	}
	return alive;
}

void load_group_stop(struct load_group *g)
{
	if (g->pgid) {
		struct timespec nap = ns_to_ts(5 * NSEC_PER_MSEC);
		int64_t until = mono_now_ns() + LOAD_GRACE_NS;

		g->stop_ns = mono_now_ns();
		/* Workers are reaped only below, so the group ID cannot be reused yet. */
		(void)kill(-g->pgid, SIGTERM);
		while (mono_now_ns() < until) {
			int alive = 0;

			for (int i = 0; i < g->nworkers; i++) {
				int st;

				if (g->pids[i] && waitpid(g->pids[i], &st, WNOHANG | WNOWAIT) == 0)
					alive++;
			}
			if (!alive)
				break;
			(void)nanosleep(&nap, NULL);
		}
		/* Grandchildren (fork-copy children) are in the same group: kill all at once. */
		(void)kill(-g->pgid, SIGKILL);
		while (reap_some(g))
			(void)nanosleep(&nap, NULL);
		/* Grandchildren reparented to us (we are a subreaper) are reaped here. */
		until = mono_now_ns() + LOAD_GRACE_NS;
		while (mono_now_ns() < until) {
			pid_t r = waitpid(-g->pgid, NULL, WNOHANG);

			if (r < 0)
				break; /* ECHILD: nothing of the group is left */
			if (r == 0)
				(void)nanosleep(&nap, NULL);
		}
		g->pgid = 0;
	}
}

void load_spec_json(struct jw *w, const struct load_spec *s)
{
	char cpus[256];

	cpulist_format(&s->cpus, cpus, sizeof(cpus));
	jw_obj_begin(w);
	jw_kstr(w, "spec", s->text);
	jw_kstr(w, "kind", s->kind->name);
	jw_kint(w, "processes", s->nprocs);
	jw_key(w, "cpus");
	if (s->has_cpus)
		jw_str(w, cpus);
	else
		jw_null(w);
	if (s->kind->params_json)
		s->kind->params_json(w, s);
	jw_obj_end(w);
}

void load_group_json(struct jw *w, const struct load_group *g, const struct load_list *l)
{
	double secs = (double)(g->stop_ns - g->start_ns) / NSEC_PER_SEC;

	jw_arr_begin(w);
	for (int i = 0; i < l->n; i++) {
		uint64_t units = 0;
		int workers = 0;

		for (int k = 0; k < g->nworkers; k++) {
			if (g->spec_of[k] == i) {
				units += g->iters[k];
				workers++;
			}
		}
		jw_obj_begin(w);
		jw_kstr(w, "spec", l->spec[i].text);
		jw_kint(w, "workers", workers);
		jw_kuint(w, "work_units", units);
		jw_kdouble(w, "work_units_per_s", secs > 0 ? units / secs : 0.0);
		jw_kint(w, "ran_ns", g->stop_ns - g->start_ns);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}
