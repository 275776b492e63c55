// SPDX-License-Identifier: MIT
/* ZeroMQ PAIR echo, the experiments of reports 000-002: the measuring side sends
 * --size bytes, the peer sends them back; one round trip is one iteration.
 *   zmq-inproc     two threads, inproc://
 *   zmq-ipc        two forked processes, ipc:// in the invocation's private directory
 *   zmq-tcp        two forked processes over loopback TCP
 *   zmq-tcp-netns  the reports' "two Docker containers": each side in a network
 *                  namespace of its own, joined by veth pairs through a bridge that
 *                  lives in a third namespace. All three are anonymous (unshare), so
 *                  they vanish with their processes, even after SIGKILL.
 * A forked peer makes its own context after fork (a context must not cross fork)
 * and binds; it reports "ok <endpoint>" or its error as one line on a pipe. */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>

#include "container.h"
#include "workload.h"

#define NETNS_SUBNET_A "10.77.0.1"   /* inside namespaces we create: no clash with the host */
#define NETNS_SUBNET_B "10.77.0.2"
#define NETNS_PORT     "5555"
#define NETNS_PEER_LINK "ipt-b"
#define LINK_CHECK_US  100000
#define PEER_WAIT_MS   10000

enum zmq_kind { Z_INPROC, Z_IPC, Z_TCP, Z_NETNS };

struct zmq_state {
	enum zmq_kind kind;
	void *ctx, *sock;
	void *peer_sock;             /* zmq-inproc: the peer thread's socket */
	char *buf;
	size_t size;
	struct wl_peer peer;         /* zmq-inproc: a thread, else forked */
	pid_t holder;                /* zmq-tcp-netns: holds the bridge namespace */
	int report[2], go[2];        /* peer -> us: one status line; us -> netns peer: go */
	int holder_pipe;             /* the holder lives until this closes */
	int home_ns;                 /* zmq-tcp-netns: our namespace before unshare */
	struct wl_container ct;      /* zmq-tcp-netns --containers: the peer's container */
	char ipc_path[256];
	char endpoint[400];
};

static int zsend(void *sock, const void *buf, size_t n)
{
	while (zmq_send(sock, buf, n, 0) < 0) {
		if (errno != EINTR || wl_stop)
			return -errno;
	}
	return 0;
}

/* Received length (may exceed n: zmq truncates), or -errno. */
static int zrecv(void *sock, void *buf, size_t n)
{
	int r;

	while ((r = zmq_recv(sock, buf, n, 0)) < 0) {
		if (errno != EINTR || wl_stop)
			return -errno;
	}
	return r;
}

/* Echo until the zero-length message that ends the invocation. */
static int echo(void *sock, char *buf, size_t n)
{
	for (;;) {
		int r = zrecv(sock, buf, n);

		if (r < 0)
			return r;
		if (r == 0)
			return 0;
		r = zsend(sock, buf, (size_t)r < n ? (size_t)r : n);
		if (r)
			return r;
	}
}

static int inproc_peer(struct wl_ctx *c, void *arg)
{
	struct zmq_state *s = arg;

	return echo(s->peer_sock, s->buf + s->size, s->size);
}

static void report_line(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void report_line(int fd, const char *fmt, ...)
{
	char line[400];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(fd, line, (size_t)n) < 0)
		return;
}

/* The echo side in a container joined to this process's network namespace; the
 * container's line reaches the driver on the same pipe. `podman run` itself runs in
 * the namespace we started in (home_ns): the runtime refuses the container's default
 * sysctls when its own namespace is the one the container joins. */
static int container_peer(struct wl_ctx *c, struct zmq_state *s, int home_ns)
{
	char netns[64], size[24], cpu[16];
	char *argv[] = { "/ipcbench", "peer", "zmq", "--bind", "tcp://" NETNS_SUBNET_B ":" NETNS_PORT,
			 "--size", size, "--link", NETNS_PEER_LINK, c->o->cpu[1] >= 0 ? "--cpu" : NULL, cpu, NULL };
	int err, status;
	pid_t pid;

	snprintf(netns, sizeof(netns), "/proc/%d/ns/net", (int)getpid());
	snprintf(size, sizeof(size), "%llu", (unsigned long long)s->size);
	snprintf(cpu, sizeof(cpu), "%d", c->o->cpu[1]);
	pid = fork();
	if (pid == 0) {
		/* SIGTERM, not SIGKILL, when we die: podman holds a SIGTERM back while it creates and
		 * starts the container, while a SIGKILL there leaves conmon and a `runc init` that never
		 * starts (so never sees its link go) and that `podman rm` then forgets. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		err = setns(home_ns, CLONE_NEWNET) ? -errno : ct_exec_run(&s->ct, netns, s->report[1], argv);
		report_line(s->report[1], "cannot run podman: %s", strerror(-err));
		_exit(1);
	}
	if (pid < 0)
		report_line(s->report[1], "cannot fork for podman: %s", strerror(errno));
	close(s->report[1]);
	if (pid < 0)
		return 1;
	/* this process holds the namespace until the container has joined it and ended */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* The driver's namespaces hold the far end of the peer's link: when the driver ends
 * without teardown (SIGKILL), the link goes, and so must the container. */
static void *watch_link(void *name)
{
	while (if_nametoindex(name))
		usleep(LINK_CHECK_US);
	_exit(1);
}

/* `ipcbench peer zmq --bind EP --size N --link IF [--cpu N]`, inside the container:
 * bind, say "ok <endpoint>" on stdout, echo until the driver stops the container. */
int zmq_container_peer(int argc, char **argv)
{
	const char *bind_to = NULL, *link = NULL;
	unsigned long long size = 0;
	char where[300], *buf, *end = "";
	size_t wlen = sizeof(where);
	long cpu = -1;
	pthread_t watcher;
	void *ctx, *sock;
	int err;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--bind"))
			bind_to = argv[i + 1];
		else if (!strcmp(argv[i], "--link"))
			link = argv[i + 1];
		else if (!strcmp(argv[i], "--size"))
			size = strtoull(argv[i + 1], &end, 10);
		else if (!strcmp(argv[i], "--cpu"))
			cpu = strtol(argv[i + 1], &end, 10);
		else
			end = "?";
		if (*end)
			break;
	}
	if (argc < 1 || strcmp(argv[0], "zmq") || !bind_to || !link || !size || argc % 2 == 0 || *end) {
		fprintf(stderr, "ipcbench peer: usage: peer zmq --bind ENDPOINT --size N --link IFNAME [--cpu N]\n");
		return WL_FAIL_USAGE;
	}
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET((int)cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set)) {
			printf("peer cannot pin itself to CPU %ld: %s\n", cpu, strerror(errno));
			return 1;
		}
	}
	buf = malloc(size);
	if (!buf || pthread_create(&watcher, NULL, watch_link, (void *)link)) {
		printf("peer cannot start: out of memory or threads\n");
		return 1;
	}
	ctx = zmq_ctx_new();
	sock = ctx ? zmq_socket(ctx, ZMQ_PAIR) : NULL;
	if (!sock || zmq_bind(sock, bind_to) || zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, where, &wlen)) {
		printf("peer cannot bind %s: %s\n", bind_to, zmq_strerror(zmq_errno()));
		return 1;
	}
	printf("ok %s\n", where);
	fflush(stdout);
	err = echo(sock, buf, size);
	zmq_close(sock);
	zmq_ctx_term(ctx);
	return err ? 1 : 0;
}

/* The forked peer: own context, bind, say where, echo. */
static int proc_peer(struct wl_ctx *c, void *arg)
{
	struct zmq_state *s = arg;
	char bind_to[300], where[300];
	size_t wlen = sizeof(where);
	void *ctx, *sock;
	char b;
	int err, home_ns;

	close(s->report[0]);
	if (s->kind == Z_NETNS) {
		close(s->go[1]);
		home_ns = c->o->containers ? open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC) : -1;
		if (unshare(CLONE_NEWNET)) {
			report_line(s->report[1], "unshare(CLONE_NEWNET): %s", strerror(errno));
			return 1;
		}
		report_line(s->report[1], "ns");
		if (read(s->go[0], &b, 1) != 1)   /* the links are configured, or we are done */
			return 1;
		if (c->o->containers)
			return container_peer(c, s, home_ns);
	}
	if (s->kind == Z_IPC)
		snprintf(bind_to, sizeof(bind_to), "ipc://%s", s->ipc_path);
	else if (s->kind == Z_TCP)
		snprintf(bind_to, sizeof(bind_to), "tcp://127.0.0.1:*");
	else
		snprintf(bind_to, sizeof(bind_to), "tcp://" NETNS_SUBNET_B ":" NETNS_PORT);
	ctx = zmq_ctx_new();
	sock = ctx ? zmq_socket(ctx, ZMQ_PAIR) : NULL;
	if (!sock || zmq_bind(sock, bind_to) ||
	    zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, where, &wlen)) {
		report_line(s->report[1], "peer cannot bind %s: %s", bind_to, zmq_strerror(zmq_errno()));
		return 1;
	}
	report_line(s->report[1], "ok %s", where);
	close(s->report[1]);
	err = echo(sock, s->buf, s->size);
	zmq_close(sock);
	zmq_ctx_term(ctx);
	return err ? 1 : 0;
}

/* One line from the peer within PEER_WAIT_MS; 0 and the line, or -errno. */
static int read_report(struct zmq_state *s, char *line, size_t len)
{
	struct pollfd p = { .fd = s->report[0], .events = POLLIN };
	size_t got = 0;

	while (got < len - 1) {
		int r = poll(&p, 1, PEER_WAIT_MS);
		ssize_t n;

		if (r < 0 && errno == EINTR && !wl_stop)
			continue;
		if (r <= 0)
			return r == 0 ? -ETIMEDOUT : -errno;
		n = read(s->report[0], line + got, 1);
		if (n <= 0)
			return n == 0 ? -EPIPE : -errno;
		if (line[got] == '\n')
			break;
		got++;
	}
	line[got] = 0;
	return 0;
}

static int peer_status(struct wl_ctx *c, struct zmq_state *s, const char *want, char *line, size_t len)
{
	int err = read_report(s, line, len);

	if (err == -EPIPE)
		return wl_fail(c, "%s: the peer exited during setup", c->w->name);
	if (err == -ETIMEDOUT)
		return wl_fail(c, "%s: the peer did not answer within %d s", c->w->name, PEER_WAIT_MS / 1000);
	if (err)
		return err;
	if (strncmp(line, want, strlen(want)) != 0)
		return wl_fail(c, "%s: %s", c->w->name, line);
	return 0;
}

/* Run `ip -batch -` with cmds on stdin, in the network namespace nsfd (-1: ours). */
static int run_ip(struct wl_ctx *c, int nsfd, const char *cmds)
{
	int in[2], errp[2], status;
	char msg[200] = "";
	ssize_t n;
	pid_t pid;

	if (pipe2(in, O_CLOEXEC))
		return -errno;
	if (pipe2(errp, O_CLOEXEC)) {
		close(in[0]);
		close(in[1]);
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		close(in[0]); close(in[1]); close(errp[0]); close(errp[1]);
		return -errno;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (nsfd >= 0 && setns(nsfd, CLONE_NEWNET))
			_exit(126);
		dup2(in[0], 0);
		dup2(errp[1], 1);
		dup2(errp[1], 2);
		execlp("ip", "ip", "-batch", "-", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(errp[1]);
	/* if ip exited early, its status and message say why, not this write */
	(void)!wl_write_full(in[1], cmds, strlen(cmds));
	close(in[1]);
	n = read(errp[0], msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = 0;
	msg[strcspn(msg, "\n")] = 0;
	close(errp[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return wl_fail(c, "%s needs the `ip` command (iproute2)", c->w->name);
	return wl_fail(c, "%s: network setup failed: ip: %s", c->w->name, msg[0] ? msg : "exited with an error");
}

static int open_ns(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	return open(path, O_RDONLY | O_CLOEXEC);
}

/* Three anonymous namespaces: ours (after unshare), the peer's, and the bridge's,
 * held by a child that only waits. Each side gets a veth pair whose other end is a
 * port of the bridge. */
static int netns_links(struct wl_ctx *c, struct zmq_state *s)
{
	int hp[2], ready[2], br_ns = -1, peer_ns = -1, err;
	char cmds[1024], b;

	if (pipe2(hp, O_CLOEXEC) || pipe2(ready, O_CLOEXEC))
		return -errno;
	s->holder = fork();
	if (s->holder < 0)
		return -errno;
	if (s->holder == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		close(hp[1]);
		close(ready[0]);
		if (unshare(CLONE_NEWNET))
			_exit(1);
		if (write(ready[1], "r", 1) != 1)
			_exit(1);
		while (read(hp[0], &b, 1) < 0 && errno == EINTR)
			;   /* EOF: the driver is done with the bridge */
		_exit(0);
	}
	close(hp[0]);
	close(ready[1]);
	s->holder_pipe = hp[1];
	err = read(ready[0], &b, 1) == 1 ? 0 : -ECHILD;
	close(ready[0]);
	if (err)
		return wl_fail(c, "%s: cannot create a network namespace for the bridge", c->w->name);

	br_ns = open_ns(s->holder);
	peer_ns = open_ns(s->peer.pid);
	if (br_ns < 0 || peer_ns < 0) {
		err = -errno;
		goto out;
	}
	snprintf(cmds, sizeof(cmds),
		 "link set lo up\n"
		 "link add ipt-a type veth peer name ipt-a-br netns /proc/%d/ns/net\n"
		 "addr add " NETNS_SUBNET_A "/24 dev ipt-a\n"
		 "link set ipt-a up\n", (int)s->holder);
	err = run_ip(c, -1, cmds);
	if (err)
		goto out;
	snprintf(cmds, sizeof(cmds),
		 "link set lo up\n"
		 "link add ipt-b type veth peer name ipt-b-br netns /proc/%d/ns/net\n"
		 "addr add " NETNS_SUBNET_B "/24 dev ipt-b\n"
		 "link set ipt-b up\n", (int)s->holder);
	err = run_ip(c, peer_ns, cmds);
	if (err)
		goto out;
	err = run_ip(c, br_ns,
		     "link add ipt-br type bridge\n"
		     "link set ipt-a-br master ipt-br up\n"
		     "link set ipt-b-br master ipt-br up\n"
		     "link set ipt-br up\n");
out:
	if (br_ns >= 0)
		close(br_ns);
	if (peer_ns >= 0)
		close(peer_ns);
	return err;
}

static int zmq_common_setup(struct wl_ctx *c, enum zmq_kind kind)
{
	struct zmq_state *s = calloc(1, sizeof(*s));
	char line[400];
	int err, zero = 0, hs_ms = PEER_WAIT_MS, forever = -1;

	if (!s)
		return -ENOMEM;
	c->priv = s;
	s->kind = kind;
	s->size = c->o->size;
	s->report[0] = s->report[1] = s->go[0] = s->go[1] = -1;
	s->holder_pipe = s->home_ns = -1;
	if (kind == Z_NETNS) {
		if (geteuid() != 0)
			return wl_fail(c, "%s needs root: it creates network namespaces, veth pairs and a bridge",
				       c->w->name);
		if (c->o->containers) {
			err = ct_check_engine(c);
			if (!err)
				err = ct_prepare(c, &s->ct);
			if (!err && (err = ct_guard(&s->ct)))
				err = wl_fail(c, "--containers: cannot start the container's reaper: %s", strerror(-err));
			if (err)
				return err;
			s->ct.created = 1;   /* from here on teardown removes it, whatever happens */
		}
	}
	s->buf = malloc(2 * s->size);   /* second half: the inproc peer's */
	if (!s->buf)
		return -ENOMEM;
	memset(s->buf, 'z', 2 * s->size);

	if (kind == Z_INPROC) {
		snprintf(s->endpoint, sizeof(s->endpoint), "inproc://ipctrace-%s", c->o->tag);
		s->ctx = zmq_ctx_new();
		s->sock = s->ctx ? zmq_socket(s->ctx, ZMQ_PAIR) : NULL;
		s->peer_sock = s->ctx ? zmq_socket(s->ctx, ZMQ_PAIR) : NULL;
		if (!s->sock || !s->peer_sock || zmq_bind(s->sock, s->endpoint) ||
		    zmq_connect(s->peer_sock, s->endpoint))
			return wl_fail(c, "%s: %s", c->w->name, zmq_strerror(zmq_errno()));
		zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof(zero));
		zmq_setsockopt(s->peer_sock, ZMQ_LINGER, &zero, sizeof(zero));
		return wl_peer_start(c, &s->peer, 0, inproc_peer, s);
	}

	if (kind == Z_IPC)
		wl_path(c, "zmq.ipc", s->ipc_path, sizeof(s->ipc_path));
	if (pipe2(s->report, O_CLOEXEC) || (kind == Z_NETNS && pipe2(s->go, O_CLOEXEC)))
		return -errno;
	err = wl_peer_start(c, &s->peer, 1, proc_peer, s);
	if (err)
		return err;
	close(s->report[1]);
	s->report[1] = -1;
	if (kind == Z_NETNS) {
		close(s->go[0]);
		s->go[0] = -1;
		err = peer_status(c, s, "ns", line, sizeof(line));
		if (err)
			return err;
		s->home_ns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
		if (s->home_ns < 0)
			return -errno;
		if (unshare(CLONE_NEWNET))
			return wl_fail(c, "%s: unshare(CLONE_NEWNET): %s", c->w->name, strerror(errno));
		err = netns_links(c, s);
		if (err)
			return err;
		if (write(s->go[1], "g", 1) != 1)
			return -errno;
	}
	err = peer_status(c, s, "ok ", line, sizeof(line));
	if (err)
		return err;
	snprintf(s->endpoint, sizeof(s->endpoint), "%s", line + 3);
	if (kind == Z_IPC)
		snprintf(s->endpoint, sizeof(s->endpoint), "ipc://%s", s->ipc_path);

	/* our context only now: after every fork, and inside our namespace */
	s->ctx = zmq_ctx_new();
	s->sock = s->ctx ? zmq_socket(s->ctx, ZMQ_PAIR) : NULL;
	if (!s->sock)
		return wl_fail(c, "%s: %s", c->w->name, zmq_strerror(zmq_errno()));
	zmq_setsockopt(s->sock, ZMQ_LINGER, &zero, sizeof(zero));
	zmq_setsockopt(s->sock, ZMQ_SNDTIMEO, &hs_ms, sizeof(hs_ms));
	zmq_setsockopt(s->sock, ZMQ_RCVTIMEO, &hs_ms, sizeof(hs_ms));
	if (zmq_connect(s->sock, s->endpoint))
		return wl_fail(c, "%s: connect %s: %s", c->w->name, s->endpoint, zmq_strerror(zmq_errno()));
	/* one round trip proves the path works before anything is timed */
	err = zsend(s->sock, s->buf, s->size);
	if (!err) {
		int r = zrecv(s->sock, s->buf, s->size);
		err = r < 0 ? r : 0;
	}
	if (err == -EAGAIN)
		return wl_fail(c, "%s: no answer from the peer at %s within %d s", c->w->name,
			       s->endpoint, PEER_WAIT_MS / 1000);
	if (err)
		return err;
	zmq_setsockopt(s->sock, ZMQ_SNDTIMEO, &forever, sizeof(forever));
	zmq_setsockopt(s->sock, ZMQ_RCVTIMEO, &forever, sizeof(forever));
	if (kind == Z_IPC)
		unlink(s->ipc_path);   /* connected: the socket file is no longer needed */
	if (kind == Z_NETNS)
		snprintf(c->extra_json, sizeof(c->extra_json),
			 "\"measuring_addr\": \"" NETNS_SUBNET_A "\", \"peer_addr\": \"" NETNS_SUBNET_B "\", "
			 "\"link\": \"veth pairs through a bridge, three anonymous network namespaces\"");
	if (kind == Z_NETNS && c->o->containers) {
		size_t used = strlen(c->extra_json);

		snprintf(c->extra_json + used, sizeof(c->extra_json) - used,
			 ", \"container\": {\"engine\": \"podman\", \"image\": \"%s\", \"image_built\": %s, "
			 "\"name\": \"%s\", \"peer_traced\": false}",
			 s->ct.image, s->ct.image_built ? "true" : "false", s->ct.name);
		snprintf(c->warning, sizeof(c->warning),
			 "the peer runs in a podman container (its own pid namespace, a child of conmon): "
			 "the tracer does not follow it");
	}
	return 0;
}

static int zmq_run(struct wl_ctx *c)
{
	struct zmq_state *s = c->priv;
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		int err = zsend(s->sock, s->buf, s->size);
		int r = err ? err : zrecv(s->sock, s->buf, s->size);
		uint64_t t1 = wl_now();
		if (r < 0)
			return r == -EINTR ? 0 : r;
		if ((size_t)r != s->size)
			return -EPROTO;
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

static void zmq_teardown(struct wl_ctx *c)
{
	struct zmq_state *s = c->priv;

	if (!s)
		return;
	if (s->peer.thread_started)
		zmq_send(s->sock, "", 0, ZMQ_DONTWAIT);   /* the peer's stop message */
	if (ct_remove(&s->ct))
		snprintf(c->warning, sizeof(c->warning), "podman could not remove the peer's container %s", s->ct.name);
	wl_peer_stop(&s->peer);
	wl_reap(s->holder);
	if (s->sock)
		zmq_close(s->sock);
	if (s->peer_sock)
		zmq_close(s->peer_sock);
	if (s->ctx)
		zmq_ctx_term(s->ctx);
	if (s->home_ns >= 0) {
		/* back home: the namespace with our veth end has no user left and goes */
		setns(s->home_ns, CLONE_NEWNET);
		close(s->home_ns);
	}
	wl_close_fds(s->report, 2);
	wl_close_fds(s->go, 2);
	if (s->holder_pipe >= 0)
		close(s->holder_pipe);
	if (s->ipc_path[0])
		unlink(s->ipc_path);
	free(s->buf);
	free(s);
	c->priv = NULL;
}

static int inproc_setup(struct wl_ctx *c) { return zmq_common_setup(c, Z_INPROC); }
static int ipc_setup(struct wl_ctx *c) { return zmq_common_setup(c, Z_IPC); }
static int tcp_setup(struct wl_ctx *c) { return zmq_common_setup(c, Z_TCP); }
static int netns_setup(struct wl_ctx *c) { return zmq_common_setup(c, Z_NETNS); }

const struct workload wl_zmq_inproc = {
	.name = "zmq-inproc",
	.summary = "ZeroMQ PAIR echo of --size bytes between two threads over inproc://",
	.seed = "000_6716c315987b0d95.txt: 22.5-24 us (macOS); 001_58aa7d8e1e25a57e.txt: 28.0 us (WSL); "
		"002_460f2a7bc619b165.txt: 8.9 us (one way = rtt/2, macOS)",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_SIZE,
	.setup = inproc_setup,
	.run = zmq_run,
	.teardown = zmq_teardown,
};

const struct workload wl_zmq_ipc = {
	.name = "zmq-ipc",
	.summary = "ZeroMQ PAIR echo of --size bytes between two forked processes over ipc://",
	.seed = "000_6716c315987b0d95.txt: 49.4 us (macOS); 001_58aa7d8e1e25a57e.txt: 97.8 us (WSL); "
		"002_460f2a7bc619b165.txt: 28.2 us (one way = rtt/2, macOS)",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_SIZE,
	.setup = ipc_setup,
	.run = zmq_run,
	.teardown = zmq_teardown,
};

const struct workload wl_zmq_tcp = {
	.name = "zmq-tcp",
	.summary = "ZeroMQ PAIR echo of --size bytes between two forked processes over loopback TCP",
	.seed = "",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_SIZE,
	.setup = tcp_setup,
	.run = zmq_run,
	.teardown = zmq_teardown,
};

const struct workload wl_zmq_tcp_netns = {
	.name = "zmq-tcp-netns",
	.summary = "ZeroMQ PAIR echo over TCP between two network namespaces joined by veth pairs and a bridge",
	.seed = "000_6716c315987b0d95.txt: 114 us (Docker, macOS); 001_58aa7d8e1e25a57e.txt: 187 us (Docker, WSL); "
		"002_460f2a7bc619b165.txt: 17.8 us (Docker, one way = rtt/2, macOS)",
	.metrics = { "rtt" },
	.derived = "one_way=rtt/2",
	.flags = WL_SIZE | WL_NEEDS_ROOT | WL_CONTAINERS,
	.setup = netns_setup,
	.run = zmq_run,
	.teardown = zmq_teardown,
};
