/*
 * iperf3[:ARGS] — iperf3 over loopback: the worker starts a server on a free
 * port of 127.0.0.1 and a client sending to it until stopped (-t 0); ARGS are
 * passed to the client (e.g. "-P 2" or "-u -b 1G"), split at blanks.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/extload.h"
#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/timeutil.h"
#include "probe.h"

#define IPERF3_SAMPLE_NS (250 * NSEC_PER_MSEC)

struct iperf3_cfg {
	char args[LOAD_TEXT_MAX];
};

static int iperf3_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct iperf3_cfg *cfg = (struct iperf3_cfg *)spec->cfg;
	char buf[LOAD_TEXT_MAX], *argv[EXTLOAD_MAX_ARGS];
	int argc = 0;

	snprintf(cfg->args, sizeof(cfg->args), "%s", args ? args : "");
	memcpy(buf, cfg->args, sizeof(buf)); /* both LOAD_TEXT_MAX, terminated */
	if (extload_split(buf, argv, &argc, EXTLOAD_MAX_ARGS - 12)) {
		snprintf(err, errlen, "too many client arguments");
		return -EINVAL;
	}
	if (argc && argv[0][0] != '-') {
		snprintf(err, errlen, "client arguments must be options (\"%s\")", argv[0]);
		return -EINVAL;
	}
	spec->nprocs = 1;
	return 0;
}

static int iperf3_prepare(const struct load_spec *spec, char *err, size_t errlen)
{
	(void)spec;
	return extload_find("iperf3", err, errlen);
}

/* A loopback port nobody listens on now (the kernel's choice). */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int port = -1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    !getsockname(fd, (struct sockaddr *)&a, &len))
		port = ntohs(a.sin_port);
	if (fd >= 0)
		(void)close(fd);
	return port;
}

/* Bytes the client has written to its sockets (wchar of /proc/PID/io). */
static uint64_t written_bytes(pid_t pid)
{
	char path[64], line[128];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/io", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "wchar: %llu", &v) == 1)
			break;
	(void)fclose(f);
	return v;
}

static void iperf3_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct iperf3_cfg *cfg = (const void *)spec->cfg;
	char port[16], args[LOAD_TEXT_MAX];
	char *server[] = { "iperf3", "-s", "-B", "127.0.0.1", "-p", port, NULL };
	char *client[EXTLOAD_MAX_ARGS] = { "iperf3", "-c", "127.0.0.1", "-p", port, "-t", "0" };
	int argc = 7;
	uint64_t before = 0;

	(void)index;
	extload_guard();
	memcpy(args, cfg->args, sizeof(args));
	if (extload_split(args, client, &argc, EXTLOAD_MAX_ARGS))
		_exit(1);
	for (;;) {
		int p = free_port();
		pid_t srv, cli;
		int st;

		snprintf(port, sizeof(port), "%d", p);
		srv = extload_spawn(server);
		if (p < 0 || srv < 0)
			_exit(1);
		/* The client fails while the server is not listening yet: retry a few times. */
		for (int tries = 0; tries < 50; tries++) {
			(void)extload_wait(0, 20 * NSEC_PER_MSEC);
			cli = extload_spawn(client);
			if (cli < 0)
				_exit(1);
			while ((st = extload_wait(cli, IPERF3_SAMPLE_NS)) == -ETIMEDOUT)
				*iter = before + written_bytes(cli);
			before = *iter;
			if (extload_wait(srv, 0) != -ETIMEDOUT)
				break; /* the server ended: start afresh on a new port */
		}
		(void)kill(srv, SIGTERM);
		(void)extload_wait(srv, NSEC_PER_SEC);
	}
}

static void iperf3_json(struct jw *w, const struct load_spec *spec)
{
	const struct iperf3_cfg *cfg = (const void *)spec->cfg;

	jw_kstr(w, "client_arguments", cfg->args);
	jw_kstr(w, "transport", "loopback");
}

const struct load_kind load_iperf3 = {
	.name = "iperf3",
	.syntax = "iperf3[:CLIENT-ARGS]",
	.summary = "iperf3 server and client over loopback, sending until stopped",
	.parse = iperf3_parse,
	.worker = iperf3_worker,
	.params_json = iperf3_json,
	.prepare = iperf3_prepare,
	.work_unit = "byte written by the client",
};
