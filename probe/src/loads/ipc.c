/*
 * ipc:GROUPS[:pipe|socket][:FDS] — hackbench-style kernel-heavy load: each
 * group is FDS receivers (default 20) and FDS senders; every sender writes
 * 100-byte messages to every receiver in turn, forever, over UNIX stream
 * sockets (default) or pipes. One worker per group creates the channels and
 * forks the senders and receivers into the load's process group.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/timeutil.h"
#include "probe.h"

#define IPC_MSG_BYTES 100 /* as hackbench */
#define IPC_DEFAULT_FDS 20
#define IPC_MAX_FDS 256
#define IPC_FLUSH 64 /* messages counted locally before the shared counter */

static int ipc_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct groups_args *cfg = (struct groups_args *)spec->cfg;

	if (groups_args_parse(args, 0, IPC_DEFAULT_FDS, IPC_MAX_FDS, cfg, err, errlen))
		return -EINVAL;
	spec->nprocs = cfg->groups;
	return 0;
}

static void ipc_receiver(int fd, volatile uint64_t *iter)
{
	char msg[IPC_MSG_BYTES];
	size_t got = 0;
	uint64_t n = 0;

	for (;;) {
		ssize_t r = read(fd, msg + got, sizeof(msg) - got);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			_exit(0); /* every sender is gone */
		}
		got += (size_t)r;
		if (got < sizeof(msg))
			continue;
		got = 0;
		if (++n == IPC_FLUSH) {
			__atomic_fetch_add(iter, n, __ATOMIC_RELAXED);
			n = 0;
		}
	}
}

static void ipc_sender(const int *out, int fds)
{
	char msg[IPC_MSG_BYTES];

	memset(msg, 0x5a, sizeof(msg));
	for (;;) {
		for (int i = 0; i < fds; i++) {
			size_t done = 0;

			while (done < sizeof(msg)) {
				ssize_t w = write(out[i], msg + done, sizeof(msg) - done);

				if (w < 0 && errno == EINTR)
					continue;
				if (w <= 0)
					_exit(0); /* a receiver is gone */
				done += (size_t)w;
			}
		}
	}
}

static void ipc_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct groups_args *cfg = (const void *)spec->cfg;
	int in[IPC_MAX_FDS], out[IPC_MAX_FDS];

	(void)index;
	for (int i = 0; i < cfg->fds; i++) {
		int fd[2];
		int rc = cfg->pipes ? pipe(fd) : socketpair(AF_UNIX, SOCK_STREAM, 0, fd);

		if (rc)
			_exit(1);
		in[i] = fd[0];
		out[i] = fd[1];
	}
	for (int i = 0; i < cfg->fds; i++) {
		if (load_fork_child() == 0) {
			for (int k = 0; k < cfg->fds; k++) {
				(void)close(out[k]);
				if (k != i)
					(void)close(in[k]);
			}
			ipc_receiver(in[i], iter);
		}
	}
	for (int i = 0; i < cfg->fds; i++) {
		if (load_fork_child() == 0) {
			for (int k = 0; k < cfg->fds; k++)
				(void)close(in[k]);
			ipc_sender(out, cfg->fds);
		}
	}
	for (int i = 0; i < cfg->fds; i++) {
		(void)close(in[i]);
		(void)close(out[i]);
	}
	/* The group's processes run until the load stops; reap them as they end. */
	while (wait(NULL) > 0 || errno == EINTR)
		;
	_exit(0);
}

static void ipc_json(struct jw *w, const struct load_spec *spec)
{
	const struct groups_args *cfg = (const void *)spec->cfg;

	jw_kint(w, "groups", cfg->groups);
	jw_kint(w, "senders_per_group", cfg->fds);
	jw_kint(w, "receivers_per_group", cfg->fds);
	jw_kstr(w, "channel", cfg->pipes ? "pipe" : "unix-socket");
	jw_kint(w, "message_bytes", IPC_MSG_BYTES);
}

const struct load_kind load_ipc = {
	.name = "ipc",
	.syntax = "ipc:GROUPS[:pipe|socket][:FDS]",
	.summary = "hackbench-style groups of FDS (20) senders and receivers, 100-byte messages",
	.parse = ipc_parse,
	.worker = ipc_worker,
	.params_json = ipc_json,
	.work_unit = "message received",
};
