#include <errno.h>
#include <fcntl.h>
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

#define LOAD_GRACE_NS (800 * NSEC_PER_MSEC) /* external tools clean up after SIGTERM */
#define LOAD_READY_NS (5 * NSEC_PER_SEC)    /* for every worker to set itself up */

/* Strip trailing ",policy=P" / ",nice=N" from BUF into OUT. 0 or -EINVAL with a reason. */
static int strip_sched(char *buf, struct load_spec *out, bool *nice_set, int *nice, char *err,
		       size_t errlen)
{
	char *comma;

	while ((comma = strrchr(buf, ','))) {
		const char *opt = comma + 1;
		int64_t v;

		if (strchr(opt, '@'))
			return 0; /* ",nice=N@CPUS": taken after the CPUs are split off */

		if (!strncmp(opt, "nice=", 5)) {
			if (parse_int64(opt + 5, &v) || v < -20 || v > 19) {
				snprintf(err, errlen, "\"%s\": nice must be -20..19", opt);
				return -EINVAL;
			}
			*nice_set = true;
			*nice = (int)v;
		} else if (!strncmp(opt, "policy=", 7)) {
			if (policy_parse(opt + 7, &out->policy, err, errlen))
				return -EINVAL;
			if (out->policy.policy == SCHED_DEADLINE) {
				snprintf(err, errlen,
					 "\"%s\": SCHED_DEADLINE is not for loads (their "
					 "processes fork)",
					 opt);
				return -EINVAL;
			}
			out->has_policy = true;
		} else {
			return 0;
		}
		*comma = '\0';
	}
	return 0;
}

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
	bool nice_set = false;
	int nice = 0;

	/* Scheduling options may come after @CPUS (canonical) or before it. */
	if (strip_sched(buf, out, &nice_set, &nice, kerr, sizeof(kerr)))
		goto out_kerr;
	char *at = strrchr(buf, '@');

	if (at) {
		*at++ = '\0';
		if (cpulist_parse(at, &out->cpus, kerr, sizeof(kerr)) ||
		    cpulist_check_subset(&out->cpus, online, kerr, sizeof(kerr))) {
			snprintf(err, errlen, "\"%s\": %s", text, kerr);
			return -EINVAL;
		}
		out->has_cpus = true;
		if (strip_sched(buf, out, &nice_set, &nice, kerr, sizeof(kerr)))
			goto out_kerr;
	} else {
		out->cpus = *online;
	}
	if (nice_set) {
		if (out->has_policy && out->policy.policy != SCHED_OTHER &&
		    out->policy.policy != SCHED_BATCH) {
			snprintf(err, errlen, "\"%s\": nice applies to policy other or batch only",
				 text);
			return -EINVAL;
		}
		out->policy.nice = nice;
		out->has_policy = true;
	}
	char *args = strchr(buf, ':');

	if (args)
		*args++ = '\0';
	out->kind = find_load_kind(buf);
	if (!out->kind) {
		char known[200] = "";

		for (int i = 0; probe_load_kinds[i]; i++) {
			strncat(known, i ? ", " : "", sizeof(known) - strlen(known) - 1);
			strncat(known, probe_load_kinds[i]->name,
				sizeof(known) - strlen(known) - 1);
		}
		snprintf(err, errlen, "\"%s\": unknown load kind \"%s\" (known: %s)", text, buf,
			 known);
		return -EINVAL;
	}
	if (out->kind->parse(args, out, kerr, sizeof(kerr))) {
		snprintf(err, errlen, "\"%s\": %s (syntax %s[@CPUS][,policy=P][,nice=N])", text,
			 kerr, out->kind->syntax);
		return -EINVAL;
	}
	return 0;
out_kerr:
	snprintf(err, errlen, "\"%s\": %s", text, kerr);
	return -EINVAL;
}

int groups_args_parse(const char *args, int min_groups, int default_fds, int max_fds,
		      struct groups_args *out, char *err, size_t errlen)
{
	char buf[LOAD_TEXT_MAX], *save = NULL;
	int64_t v;
	int field = 0;

	if (!args || !*args) {
		snprintf(err, errlen, "missing the number of groups");
		return -EINVAL;
	}
	snprintf(buf, sizeof(buf), "%s", args);
	out->fds = default_fds;
	out->pipes = 0;
	for (char *tok = strtok_r(buf, ":", &save); tok;
	     tok = strtok_r(NULL, ":", &save), field++) {
		if (field == 0) {
			if (parse_int64(tok, &v) || v < min_groups || v > LOAD_MAX_PROCS / 2) {
				snprintf(err, errlen, "group count \"%s\" must be %d..%d", tok,
					 min_groups, LOAD_MAX_PROCS / 2);
				return -EINVAL;
			}
			out->groups = (int)v;
		} else if (!strcmp(tok, "pipe") || !strcmp(tok, "socket")) {
			out->pipes = !strcmp(tok, "pipe");
		} else if (!parse_int64(tok, &v) && v >= 1 && v <= max_fds) {
			out->fds = (int)v;
		} else {
			snprintf(err, errlen,
				 "\"%s\" is neither pipe, socket nor a sender count 1..%d", tok,
				 max_fds);
			return -EINVAL;
		}
	}
	if ((int64_t)out->groups * 2 * out->fds > LOAD_MAX_PROCS) {
		snprintf(err, errlen,
			 "%d groups of %d senders and receivers: more than %d processes",
			 out->groups, out->fds, LOAD_MAX_PROCS);
		return -EINVAL;
	}
	return 0;
}

#define LOAD_CGROUP_ERR (1 << 16) /* load_group.ready: -(this + errno) = --load-cgroup refused */

int cgroup_join(const char *path, long id)
{
	char buf[24];
	int n = snprintf(buf, sizeof(buf), "%ld", id), rc = 0;
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n)
		rc = -errno;
	(void)close(fd);
	return rc;
}

/* In the freshly forked worker: own group, die with the probe, the spec's cgroup and
 * scheduling (the cgroup first: its CPUs bound what the affinity may name). */
static void worker_setup(pid_t pgid, pid_t probe_pid, const struct load_spec *s, int index,
			 const char *cgroup, volatile int32_t *ready)
{
	sigset_t all;
	cpu_set_t set;
	char comm[16], why[200];
	int rc;

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
	if (cgroup && (rc = cgroup_join(cgroup, 0))) {
		*ready = -LOAD_CGROUP_ERR + rc;
		_exit(EXIT_UNSUPPORTED);
	}
	if (s->kind->per_cpu && s->cpus.n) {
		CPU_ZERO(&set);
		CPU_SET(s->cpus.cpu[index % s->cpus.n], &set);
	} else {
		cpulist_to_set(&s->cpus, &set); /* also undoes the probe's --main-cpus pinning */
	}
	(void)sched_setaffinity(0, sizeof(set), &set);
	rc = policy_apply(&s->policy, 0, why, sizeof(why));
	*ready = rc ? rc : 1;
	if (rc)
		_exit(EXIT_UNSUPPORTED);
}

pid_t load_fork_child(void)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid == 0) {
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent) /* the parent died before the line above */
			_exit(0);
	}
	return pid;
}

/* Wait until every worker has applied its policy; -EPERM etc. naming the first refusal. */
static int wait_ready(struct load_group *g, const struct load_list *l, char *err, size_t errlen)
{
	struct timespec nap = ns_to_ts(NSEC_PER_MSEC);
	int64_t until = mono_now_ns() + LOAD_READY_NS;

	for (;;) {
		int pending = 0;

		for (int k = 0; k < g->nworkers; k++) {
			if (g->ready[k] <= -LOAD_CGROUP_ERR) {
				snprintf(err, errlen, "load \"%s\": --load-cgroup %s refused (%s)",
					 l->spec[g->spec_of[k]].text, l->cgroup,
					 strerror(-(g->ready[k] + LOAD_CGROUP_ERR)));
				return g->ready[k] + LOAD_CGROUP_ERR;
			}
			if (g->ready[k] < 0) {
				const struct load_spec *s = &l->spec[g->spec_of[k]];
				char pol[96], why[200];

				policy_format(&s->policy, pol, sizeof(pol));
				snprintf(why, sizeof(why), "%s", strerror(-g->ready[k]));
				snprintf(err, errlen, "load \"%s\": policy %s refused (%s)",
					 s->text, pol, why);
				return g->ready[k];
			}
			pending += g->ready[k] == 0;
		}
		if (!pending || mono_now_ns() > until)
			return 0;
		(void)nanosleep(&nap, NULL);
	}
}

static int total_procs(const struct load_list *l)
{
	int total = 0;

	for (int i = 0; i < l->n; i++)
		total += l->spec[i].nprocs;
	return total;
}

int load_list_check(const struct load_list *l, int *bad, char *err, size_t errlen)
{
	char kerr[300];
	int rc;

	*bad = -1;
	if (total_procs(l) > LOAD_MAX_PROCS) {
		snprintf(err, errlen, "--load: %d load processes in all, at most %d",
			 total_procs(l), LOAD_MAX_PROCS);
		return -EINVAL;
	}
	for (int i = 0; i < l->n; i++) {
		if (l->spec[i].nprocs && l->spec[i].kind->prepare &&
		    (rc = l->spec[i].kind->prepare(&l->spec[i], kerr, sizeof(kerr)))) {
			snprintf(err, errlen, "load \"%s\": %s", l->spec[i].text, kerr);
			*bad = i;
			return rc;
		}
	}
	return 0;
}

int load_group_start(struct load_group *g, const struct load_list *l, char *err, size_t errlen)
{
	int total = total_procs(l), rc;
	pid_t self = getpid();

	memset(g, 0, sizeof(*g));
	if (total == 0)
		return 0;
	g->nalloc = total;
	g->pids = calloc(total, sizeof(*g->pids));
	g->spec_of = calloc(total, sizeof(*g->spec_of));
	g->iters = mmap(NULL, total * (sizeof(uint64_t) + sizeof(int32_t)), PROT_READ | PROT_WRITE,
			MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (!g->pids || !g->spec_of || g->iters == MAP_FAILED) {
		if (g->iters == MAP_FAILED)
			g->iters = NULL;
		load_group_free(g);
		snprintf(err, errlen, "load: out of memory");
		return -ENOMEM;
	}
	g->ready = (volatile int32_t *)(g->iters + total);
	g->start_ns = mono_now_ns();
	for (int i = 0; i < l->n; i++) {
		for (int k = 0; k < l->spec[i].nprocs; k++) {
			pid_t pid = fork();

			if (pid < 0) {
				int e = errno;

				snprintf(err, errlen, "load \"%s\": fork failed (%s)",
					 l->spec[i].text, strerror(e));
				load_group_stop(g);
				load_group_free(g);
				return -e;
			}
			if (pid == 0) {
				worker_setup(g->pgid ? g->pgid : 0, self, &l->spec[i], k, l->cgroup,
					     &g->ready[g->nworkers]);
				l->spec[i].kind->worker(&l->spec[i], k, &g->iters[g->nworkers]);
				_exit(0);
			}
			if (!g->pgid)
				g->pgid = pid;
			(void)setpgid(pid,
				      g->pgid); /* also here: no race with the child's own call */
			g->spec_of[g->nworkers] = i;
			g->pids[g->nworkers++] = pid;
		}
	}
	rc = wait_ready(g, l, err, errlen);
	if (rc) {
		load_group_stop(g);
		load_group_free(g);
	}
	return rc;
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
		/* A worker already gone failed (a load never ends by itself): say so in the document. */
		for (int i = 0; i < g->nworkers; i++) {
			siginfo_t si = { 0 };

			if (g->pids[i] && g->ready[i] > 0 &&
			    waitid(P_PID, (id_t)g->pids[i], &si, WEXITED | WNOHANG | WNOWAIT) ==
				    0 &&
			    si.si_pid)
				g->ready[i] = LOAD_ENDED_EARLY;
		}
		/* Workers are reaped only below, so the group ID cannot be reused yet. */
		(void)kill(-g->pgid, SIGTERM);
		while (mono_now_ns() < until) {
			int alive = 0;

			for (int i = 0; i < g->nworkers; i++) {
				siginfo_t si = { 0 };

				/* waitid: waitpid() rejects WNOWAIT; exited workers stay to be reaped below */
				if (g->pids[i] &&
				    waitid(P_PID, (id_t)g->pids[i], &si,
					   WEXITED | WNOHANG | WNOWAIT) == 0 &&
				    si.si_pid == 0)
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

void load_group_free(struct load_group *g)
{
	free(g->pids);
	free(g->spec_of);
	if (g->iters)
		(void)munmap((void *)g->iters, g->nalloc * (sizeof(uint64_t) + sizeof(int32_t)));
	g->pids = NULL;
	g->spec_of = NULL;
	g->iters = NULL;
	g->ready = NULL;
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
	if (s->has_policy) {
		char pol[96];

		policy_format(&s->policy, pol, sizeof(pol));
		jw_kstr(w, "policy", pol);
	}
	if (s->kind->work_unit)
		jw_kstr(w, "work_unit", s->kind->work_unit);
	if (s->kind->params_json)
		s->kind->params_json(w, s);
	jw_obj_end(w);
}

void load_group_json(struct jw *w, const struct load_group *g, const struct load_list *l)
{
	double secs = (double)(g->stop_ns - g->start_ns) / NSEC_PER_SEC;
	char pol[96];

	jw_arr_begin(w);
	for (int i = 0; i < l->n; i++) {
		uint64_t units = 0;
		int workers = 0, ended = 0;

		for (int k = 0; k < g->nworkers; k++) {
			if (g->spec_of[k] == i) {
				units += g->iters[k];
				workers++;
				ended += g->ready[k] == LOAD_ENDED_EARLY;
			}
		}
		jw_obj_begin(w);
		jw_kstr(w, "spec", l->spec[i].text);
		jw_kint(w, "workers", workers);
		jw_kuint(w, "work_units", units);
		jw_kdouble(w, "work_units_per_s", secs > 0 ? units / secs : 0.0);
		jw_kint(w, "ran_ns", g->stop_ns - g->start_ns);
		jw_kint(w, "workers_ended_early", ended);
		policy_format(&l->spec[i].policy, pol, sizeof(pol));
		jw_kstr(w, "policy", pol);
		if (l->spec[i].kind->work_unit)
			jw_kstr(w, "work_unit", l->spec[i].kind->work_unit);
		if (l->spec[i].kind->report_json)
			l->spec[i].kind->report_json(w, &l->spec[i], workers);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}
