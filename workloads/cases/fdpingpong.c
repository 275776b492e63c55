// SPDX-License-Identifier: MIT
/* Ping-pong over file descriptors: the measuring side sends --size bytes (eventfd:
 * one 8-byte count), the peer receives them and sends them back; one round trip is
 * one iteration. The peer is a thread, or with --procs a forked process.
 *   eventfd      two eventfds, one per direction
 *   unix-stream  AF_UNIX SOCK_STREAM through a listening socket in the private directory
 *   unix-dgram   two bound AF_UNIX SOCK_DGRAM sockets, connected to each other
 *   socketpair   socketpair(AF_UNIX, SOCK_STREAM)
 *   tcp, udp     over loopback (TCP_NODELAY)
 *   fifo         two named pipes in the private directory
 * Socket files and FIFOs are unlinked as soon as both ends are open.
 * unix-bandwidth: unix-stream's sockets, but the measuring side sends --size bytes after
 * --size bytes and the peer only receives; one send is one iteration (metric write), so
 * --size over the mean send is the socket's bandwidth for sends of that size. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "workload.h"

#define UDP_MAX_PAYLOAD 65507   /* 65535 - IPv4 header - UDP header */

enum fd_kind { K_EVENTFD, K_UNIX_STREAM, K_UNIX_DGRAM, K_SOCKETPAIR, K_TCP, K_UDP, K_FIFO };

struct fd_state {
	const struct wl_ctx *c;       /* its injection points */
	enum fd_kind kind;
	int a_tx, a_rx, b_tx, b_rx;   /* measuring side's and peer's ends */
	int dgram;                    /* one send is one message */
	int stream;                   /* unix-bandwidth: one way only, each send timed */
	size_t size;
	char *buf_a, *buf_b;
	struct wl_peer peer;
};

static int send_msg(const struct fd_state *s, int fd, const char *buf)
{
	if (!s->dgram)
		return wl_write_full(fd, buf, s->size);
	for (;;) {
		ssize_t r = write(fd, buf, s->size);

		if (r == (ssize_t)s->size)
			return 0;
		if (r >= 0)
			return -EMSGSIZE;
		if (errno != EINTR || wl_stop)
			return -errno;
	}
}

static int recv_msg(const struct fd_state *s, int fd, char *buf)
{
	if (!s->dgram)
		return wl_read_full(fd, buf, s->size);
	for (;;) {
		ssize_t r = read(fd, buf, s->size);

		if (r == (ssize_t)s->size)
			return 0;
		if (r >= 0)
			return -EPROTO;   /* a datagram of another size */
		if (errno != EINTR || wl_stop)
			return -errno;
	}
}

static int echo_loop(struct fd_state *s)
{
	for (;;) {
		int err = recv_msg(s, s->b_rx, s->buf_b);

		if (err)
			return err == -EPIPE ? 0 : err;   /* EOF: the measuring side is done */
		if (s->stream)
			continue;
		wl_inject_peer(s->c);
		err = send_msg(s, s->b_tx, s->buf_b);
		if (err)
			return err;
	}
}

static int echo_peer(struct wl_ctx *c, void *arg)
{
	struct fd_state *s = arg;

	/* a forked peer drops its copies of the measuring side's ends, so that the
	 * measuring side's exit reads as EOF here */
	if (c->o->procs && s->kind != K_EVENTFD) {
		close(s->a_tx);
		if (s->a_rx != s->a_tx)
			close(s->a_rx);
	}
	return echo_loop(s);
}

static void close_pair(int *tx, int *rx)
{
	if (*tx >= 0)
		close(*tx);
	if (*rx >= 0 && *rx != *tx)
		close(*rx);
	*tx = *rx = -1;
}

static int sun_of(struct wl_ctx *c, const char *what, struct sockaddr_un *sun)
{
	char path[sizeof(sun->sun_path) + 1];

	wl_path(c, what, path, sizeof(path));
	if (strlen(path) >= sizeof(sun->sun_path))
		return wl_fail(c, "%s: socket path %s is too long", c->w->name, path);
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	strcpy(sun->sun_path, path);
	return 0;
}

static int open_unix_stream(struct wl_ctx *c, struct fd_state *s)
{
	struct sockaddr_un sun;
	int lfd, err = sun_of(c, "stream.sock", &sun);

	if (err)
		return err;
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -errno;
	if (bind(lfd, (struct sockaddr *)&sun, sizeof(sun)) || listen(lfd, 1)) {
		err = -errno;
		goto out;
	}
	s->a_tx = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->a_tx < 0 || connect(s->a_tx, (struct sockaddr *)&sun, sizeof(sun))) {
		err = -errno;
		goto out;
	}
	s->b_tx = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (s->b_tx < 0)
		err = -errno;
	s->a_rx = s->a_tx;
	s->b_rx = s->b_tx;
out:
	unlink(sun.sun_path);
	close(lfd);
	return err;
}

static int open_unix_dgram(struct wl_ctx *c, struct fd_state *s)
{
	struct sockaddr_un sa, sb;
	int err, sndbuf = 0;
	socklen_t len = sizeof(sndbuf);

	if ((err = sun_of(c, "a.sock", &sa)) || (err = sun_of(c, "b.sock", &sb)))
		return err;
	s->a_tx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	s->b_tx = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	s->a_rx = s->a_tx;
	s->b_rx = s->b_tx;
	if (s->a_tx < 0 || s->b_tx < 0 ||
	    bind(s->a_tx, (struct sockaddr *)&sa, sizeof(sa)) || bind(s->b_tx, (struct sockaddr *)&sb, sizeof(sb)) ||
	    connect(s->a_tx, (struct sockaddr *)&sb, sizeof(sb)) || connect(s->b_tx, (struct sockaddr *)&sa, sizeof(sa)))
		err = -errno;
	unlink(sa.sun_path);
	unlink(sb.sun_path);
	if (err)
		return err;
	/* the kernel refuses a datagram larger than the send buffer minus 32 bytes */
	if (getsockopt(s->a_tx, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len))
		return -errno;
	if (s->size + 32 > (size_t)sndbuf)
		return wl_fail(c, "--size %zu: a unix datagram carries at most %d bytes here (SO_SNDBUF %d)",
			       s->size, sndbuf - 32, sndbuf);
	return 0;
}

static int open_tcp(struct fd_state *s)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int lfd, one = 1, err = 0;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -errno;
	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sin, &len)) {
		err = -errno;
		goto out;
	}
	s->a_tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->a_tx < 0 || connect(s->a_tx, (struct sockaddr *)&sin, sizeof(sin))) {
		err = -errno;
		goto out;
	}
	s->b_tx = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (s->b_tx < 0) {
		err = -errno;
		goto out;
	}
	s->a_rx = s->a_tx;
	s->b_rx = s->b_tx;
	/* small messages must leave at once, not wait for Nagle */
	if (setsockopt(s->a_tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    setsockopt(s->b_tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		err = -errno;
out:
	close(lfd);
	return err;
}

static int open_udp(struct fd_state *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }, b = a;
	socklen_t la = sizeof(a), lb = sizeof(b);

	s->a_tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	s->b_tx = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	s->a_rx = s->a_tx;
	s->b_rx = s->b_tx;
	if (s->a_tx < 0 || s->b_tx < 0 ||
	    bind(s->a_tx, (struct sockaddr *)&a, sizeof(a)) || bind(s->b_tx, (struct sockaddr *)&b, sizeof(b)) ||
	    getsockname(s->a_tx, (struct sockaddr *)&a, &la) || getsockname(s->b_tx, (struct sockaddr *)&b, &lb) ||
	    connect(s->a_tx, (struct sockaddr *)&b, sizeof(b)) || connect(s->b_tx, (struct sockaddr *)&a, sizeof(a)))
		return -errno;
	return 0;
}

/* Open both ends of a FIFO without a second thread: the read end non-blocking
 * first (a writer's open would otherwise wait for it), then made blocking. */
static int open_fifo(struct wl_ctx *c, const char *what, int *rd, int *wr)
{
	char path[256];
	int err = 0;

	wl_path(c, what, path, sizeof(path));
	if (mkfifo(path, 0600))
		return -errno;
	*rd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (*rd >= 0)
		*wr = open(path, O_WRONLY | O_CLOEXEC);
	if (*rd < 0 || *wr < 0 || fcntl(*rd, F_SETFL, 0))
		err = -errno;
	unlink(path);
	return err;
}

static int fd_setup(struct wl_ctx *c, enum fd_kind kind)
{
	struct fd_state *s = calloc(1, sizeof(*s));
	int err = 0, sv[2];

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->c = c;
	s->kind = kind;
	s->a_tx = s->a_rx = s->b_tx = s->b_rx = -1;
	s->size = kind == K_EVENTFD ? sizeof(uint64_t) : c->o->size;
	s->dgram = kind == K_EVENTFD || kind == K_UNIX_DGRAM || kind == K_UDP;
	s->stream = strcmp(c->w->name, "unix-bandwidth") == 0;
	s->buf_a = malloc(s->size);
	s->buf_b = malloc(s->size);
	if (!s->buf_a || !s->buf_b)
		return -ENOMEM;
	memset(s->buf_a, 0, s->size);
	memset(s->buf_b, 0, s->size);
	if (kind == K_EVENTFD) {
		/* eventfd adds what is written: every message is a count of 1 */
		uint64_t one = 1;
		memcpy(s->buf_a, &one, sizeof(one));
		memcpy(s->buf_b, &one, sizeof(one));
	}

	switch (kind) {
	case K_EVENTFD:
		s->a_tx = s->b_rx = eventfd(0, EFD_CLOEXEC);
		s->b_tx = s->a_rx = eventfd(0, EFD_CLOEXEC);
		if (s->a_tx < 0 || s->b_tx < 0)
			err = -errno;
		break;
	case K_SOCKETPAIR:
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
			return -errno;
		s->a_tx = s->a_rx = sv[0];
		s->b_tx = s->b_rx = sv[1];
		break;
	case K_UNIX_STREAM:
		err = open_unix_stream(c, s);
		break;
	case K_UNIX_DGRAM:
		err = open_unix_dgram(c, s);
		break;
	case K_TCP:
		err = open_tcp(s);
		break;
	case K_UDP:
		err = open_udp(s);
		break;
	case K_FIFO:
		err = open_fifo(c, "to-peer", &s->b_rx, &s->a_tx);
		if (!err)
			err = open_fifo(c, "to-me", &s->a_rx, &s->b_tx);
		break;
	}
	if (err)
		return err;

	err = wl_peer_start(c, &s->peer, c->o->procs, echo_peer, s);
	/* eventfds are one object for both sides; everything else: a forked peer's ends
	 * are closed here so its death reads as EOF instead of a hang */
	if (!err && c->o->procs && kind != K_EVENTFD)
		close_pair(&s->b_tx, &s->b_rx);
	return err;
}

static inline int fd_round(void *arg)
{
	const struct fd_state *s = arg;
	int err = send_msg(s, s->a_tx, s->buf_a);

	if (err)
		return err;
	wl_inject_measuring(s->c);
	return recv_msg(s, s->a_rx, s->buf_a);
}

static int fd_run(struct wl_ctx *c)
{
	const struct fd_state *s = c->priv;
	uint64_t total = wl_total(c);

	if (!s->stream)
		return wl_time_rounds(c, fd_round, c->priv);
	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		int err = send_msg(s, s->a_tx, s->buf_a);
		uint64_t t1 = wl_now();

		if (err)
			return wl_stop ? 0 : err;
		wl_record(c, 0, i, t0, t1);   /* unix-bandwidth's one metric: write */
	}
	return 0;
}

static void fd_teardown(struct wl_ctx *c)
{
	struct fd_state *s = c->priv;

	if (!s)
		return;
	/* the peer blocks in read or write, both cancellation points */
	wl_peer_cancel(&s->peer);
	if (s->kind == K_EVENTFD) {
		close_pair(&s->a_tx, &s->b_rx);
		close_pair(&s->b_tx, &s->a_rx);
	} else {
		close_pair(&s->a_tx, &s->a_rx);
		close_pair(&s->b_tx, &s->b_rx);
	}
	free(s->buf_a);
	free(s->buf_b);
	free(s);
	c->priv = NULL;
}

static int eventfd_setup(struct wl_ctx *c) { return fd_setup(c, K_EVENTFD); }
static int unix_stream_setup(struct wl_ctx *c) { return fd_setup(c, K_UNIX_STREAM); }
static int unix_dgram_setup(struct wl_ctx *c) { return fd_setup(c, K_UNIX_DGRAM); }
static int socketpair_setup(struct wl_ctx *c) { return fd_setup(c, K_SOCKETPAIR); }
static int tcp_setup(struct wl_ctx *c) { return fd_setup(c, K_TCP); }
static int udp_setup(struct wl_ctx *c) { return fd_setup(c, K_UDP); }
static int fifo_setup(struct wl_ctx *c) { return fd_setup(c, K_FIFO); }

#define FD_WORKLOAD(id, nm, what, fl, max, setupfn)              \
	const struct workload wl_##id = {                        \
		.name = nm,                                      \
		.summary = what,                                 \
		.seed = "",                                      \
		.metrics = { "rtt" },                            \
		.derived = "one_way=rtt/2",                      \
		.flags = (fl) | WL_PROCS | WL_INJECT,            \
		.max_size = max,                                 \
		.setup = setupfn,                                \
		.run = fd_run,                                   \
		.teardown = fd_teardown,                         \
	}

FD_WORKLOAD(eventfd, "eventfd", "round trip of one count over two eventfds (thread, or --procs)",
	    0, 0, eventfd_setup);
FD_WORKLOAD(unix_stream, "unix-stream", "round trip of --size bytes over a connected AF_UNIX stream socket",
	    WL_SIZE, 0, unix_stream_setup);

const struct workload wl_unix_bandwidth = {
	.name = "unix-bandwidth",
	.summary = "--size bytes sent after --size bytes over a connected AF_UNIX stream socket to a peer that only "
		   "receives, each send timed: --size / the mean send is the bandwidth",
	.seed = "",
	.metrics = { "write" },
	.flags = WL_SIZE | WL_PROCS,
	.setup = unix_stream_setup,
	.run = fd_run,
	.teardown = fd_teardown,
};
FD_WORKLOAD(unix_dgram, "unix-dgram", "round trip of one --size datagram over two connected AF_UNIX datagram sockets",
	    WL_SIZE, 0, unix_dgram_setup);
FD_WORKLOAD(socketpair, "socketpair", "round trip of --size bytes over socketpair(AF_UNIX, SOCK_STREAM)",
	    WL_SIZE, 0, socketpair_setup);
FD_WORKLOAD(tcp, "tcp", "round trip of --size bytes over loopback TCP (TCP_NODELAY)",
	    WL_SIZE, 0, tcp_setup);
FD_WORKLOAD(udp, "udp", "round trip of one --size datagram over loopback UDP",
	    WL_SIZE, UDP_MAX_PAYLOAD, udp_setup);
FD_WORKLOAD(fifo, "fifo", "round trip of --size bytes over two named pipes (mkfifo)",
	    WL_SIZE, 0, fifo_setup);
