/*
 * net[:MSGSIZE] — network stack load: one sender and one receiver over TCP on
 * loopback, the sender writing MSGSIZE-byte messages (default 4K) as fast as
 * the receiver reads them. The worker is the receiver; it forks the sender.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/jsonw.h"
#include "lib/loadrun.h"
#include "lib/timeutil.h"
#include "probe.h"

#define NET_DEFAULT_MSG (4 << 10)
#define NET_MAX_MSG (16 << 20)

struct net_cfg {
	int64_t msg_bytes;
};

static int net_parse(const char *args, struct load_spec *spec, char *err, size_t errlen)
{
	struct net_cfg *cfg = (struct net_cfg *)spec->cfg;
	char serr[120];

	cfg->msg_bytes = NET_DEFAULT_MSG;
	if (args && *args &&
	    (parse_size_bytes(args, &cfg->msg_bytes, serr, sizeof(serr)) || cfg->msg_bytes < 1 ||
	     cfg->msg_bytes > NET_MAX_MSG)) {
		snprintf(err, errlen, "message size \"%s\" must be 1..16M bytes", args);
		return -EINVAL;
	}
	spec->nprocs = 1;
	return 0;
}

static void net_sender(const struct sockaddr_in *addr, size_t msg_bytes)
{
	char *msg = malloc(msg_bytes);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (!msg || fd < 0 || connect(fd, (const struct sockaddr *)addr, sizeof(*addr)))
		_exit(1);
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
			 sizeof(one)); /* one segment per message */
	memset(msg, 0x5a, msg_bytes);
	for (;;) {
		size_t done = 0;

		while (done < msg_bytes) {
			ssize_t w = send(fd, msg + done, msg_bytes - done, MSG_NOSIGNAL);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				_exit(0);
			done += (size_t)w;
		}
	}
}

static void net_worker(const struct load_spec *spec, int index, volatile uint64_t *iter)
{
	const struct net_cfg *cfg = (const void *)spec->cfg;
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t len = sizeof(addr);
	char *buf = malloc((size_t)cfg->msg_bytes);
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), fd;

	(void)index;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (!buf || lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) ||
	    listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&addr, &len))
		_exit(1);
	if (load_fork_child() == 0) {
		(void)close(lfd);
		net_sender(&addr, (size_t)cfg->msg_bytes);
	}
	while ((fd = accept(lfd, NULL, NULL)) < 0)
		if (errno != EINTR)
			_exit(1);
	(void)close(lfd);
	for (;;) {
		ssize_t r = recv(fd, buf, (size_t)cfg->msg_bytes, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			_exit(0);
		*iter += (uint64_t)r;
	}
}

static void net_json(struct jw *w, const struct load_spec *spec)
{
	const struct net_cfg *cfg = (const void *)spec->cfg;

	jw_kint(w, "message_bytes", cfg->msg_bytes);
	jw_kstr(w, "transport", "tcp-loopback");
}

const struct load_kind load_net = {
	.name = "net",
	.syntax = "net[:MSGSIZE]",
	.summary = "TCP over loopback: one sender, one receiver, MSGSIZE-byte messages (4K)",
	.parse = net_parse,
	.worker = net_worker,
	.params_json = net_json,
	.work_unit = "byte received",
};
