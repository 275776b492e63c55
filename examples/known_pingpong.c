// SPDX-License-Identifier: MIT
/*
 * known_pingpong: a ping-pong with a known answer, written as any program is, without ipctrace's
 * headers: a client (the process started) and a server (its forked child) bounce one message
 * N times over the channel named, and the server spins a known time in user space before every
 * K-th answer. `ipctrace validate` traces it and checks that the breakdown closes (nothing in
 * no known state) and finds the spin as `user`; you can do the same:
 *
 *   ipctrace trace --rtt -- known_pingpong unix --cpus 0,1 --spin-ns 10000
 *   ipctrace trace --markers -- known_pingpong futex --cpus 0,0 --spin-ns 10000 --spin-every 2
 *
 * usage: known_pingpong pipe|unix|tcp|eventfd|futex [--iterations N] [--spin-ns NS]
 *                       [--spin-every K] [--gap-ns NS] [--cpus CLIENT,SERVER] [--spun FILE]
 *   pipe     two pipes, one each way
 *   unix     a UNIX stream socket pair (one descriptor each way and back)
 *   tcp      a loopback TCP connection (TCP_NODELAY)
 *   eventfd  two eventfds, one each way: a count of 1 is the message
 *   futex    two words in shared memory: FUTEX_WAKE after a store, FUTEX_WAIT until it changes
 * --iterations  round trips (default 10000)
 * --spin-ns     the server spins NS ns by CLOCK_MONOTONIC before an answer (default 0)
 * --spin-every  only before answers m with m mod K = K - 1 (m from 0; default 1: every answer),
 *               so that the spun round trips and their baseline alternate in one trace
 * --gap-ns      the client sleeps NS ns between one round trip's answer and the next request
 *               (default 0: asks again at once), as a service's clients ask at a rate
 * --cpus        pin the client to CPU CLIENT and the server to CPU SERVER (default: unpinned)
 * --spun        the server writes to FILE, when it ends, each spin as its clock timed it: one line
 *               "MESSAGE NS" per spun answer. The known answer is what ran, not --spin-ns: a
 *               deadline spin overshoots by its last clock read, and in an emulated machine (QEMU
 *               TCG) by however long its CPU thread was off the host's CPU.
 *
 * Each round trip is one call of round_trip(), between USDT markers ipctrace:iteration_begin and
 * ipctrace:iteration_end (where <sys/sdt.h> is installed: Debian's systemtap-sdt-dev), for
 * `trace --markers`; `trace --iteration-func known_pingpong:round_trip` finds the same calls.
 * It prints nothing on success; a failed call is one line on stderr and exit 1; bad usage exit 2.
 */
#ifndef _GNU_SOURCE /* the Makefile defines it; `cc known_pingpong.c` alone does not */
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#if defined(__x86_64__)
/* A 5-byte no-op under each marker instead of sdt.h's 1-byte one: a kernel that optimizes uprobes
 * (x86, 6.16 on) then enters the probe by a call, not a trap, and `ipctrace trace` knows what such
 * a probe leaves inside a window (its calibration sits on the same no-op) and takes it out.
 * (Bytes: sdt.h passes the instruction through a macro, no commas.) */
#undef _SDT_NOP
#define _SDT_NOP .byte 0x0f; .byte 0x1f; .byte 0x44; .byte 0x00; .byte 0x00
#endif
#define BEGIN() DTRACE_PROBE(ipctrace, iteration_begin)
#define END()   DTRACE_PROBE(ipctrace, iteration_end)
#else
#define BEGIN() ((void)0)
#define END()   ((void)0)
#endif

enum kind { PIPE, UNIX, TCP, EVENTFD, FUTEX };
static const char *const kinds[] = {"pipe", "unix", "tcp", "eventfd", "futex"};

/* Where each side sends and receives: descriptors (the client's to[1] and from[0], the
 * server's to[0] and from[1]; a socket is both), or for futex the two shared words. */
struct channel {
	enum kind kind;
	int to[2], from[2];
	_Atomic uint32_t *words; /* [0] counts requests, [1] answers */
};

static void die(const char *what)
{
	fprintf(stderr, "known_pingpong: %s: %s\n", what, strerror(errno));
	exit(1);
}

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void pin(int cpu)
{
	cpu_set_t s;
	if (cpu < 0)
		return;
	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s))
		die("sched_setaffinity");
}

static int tcp_pair(int *client, int *server)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);
	*client = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || *client < 0 || bind(l, (void *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (void *)&a, &len) || connect(*client, (void *)&a, sizeof(a)))
		return -1;
	*server = accept(l, NULL, NULL);
	close(l);
	if (*server < 0 || setsockopt(*client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    setsockopt(*server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		return -1;
	return 0;
}

static void open_channel(struct channel *c)
{
	int sv[2];

	switch (c->kind) {
	case PIPE:
		if (pipe(c->to) || pipe(c->from))
			die("pipe");
		return;
	case UNIX:
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			die("socketpair");
		c->to[1] = c->from[0] = sv[0];
		c->to[0] = c->from[1] = sv[1];
		return;
	case TCP:
		if (tcp_pair(&sv[0], &sv[1]))
			die("loopback TCP connection");
		c->to[1] = c->from[0] = sv[0];
		c->to[0] = c->from[1] = sv[1];
		return;
	case EVENTFD:
		/* semaphore mode: each read takes one count, as each read of a pipe takes one byte */
		c->to[0] = c->to[1] = eventfd(0, EFD_SEMAPHORE);
		c->from[0] = c->from[1] = eventfd(0, EFD_SEMAPHORE);
		if (c->to[0] < 0 || c->from[0] < 0)
			die("eventfd");
		return;
	case FUTEX:
		c->words = mmap(NULL, 2 * sizeof(*c->words), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (c->words == MAP_FAILED)
			die("mmap");
		return;
	}
}

/* The side's own ends only, so that the other's close is seen as end of file (pipes, sockets). */
static void keep_side(struct channel *c, int server)
{
	if (c->kind == PIPE) {
		close(server ? c->to[1] : c->to[0]);
		close(server ? c->from[0] : c->from[1]);
	} else if (c->kind == UNIX || c->kind == TCP) {
		close(server ? c->to[1] : c->to[0]);
	}
}

/* One message on word w: the count moves on and a waiter is woken. */
static int futex_post(_Atomic uint32_t *w)
{
	atomic_fetch_add(w, 1);
	return syscall(SYS_futex, w, FUTEX_WAKE, 1, NULL, NULL, 0) < 0 ? -1 : 0;
}

/* Waits until word w moves past *seen (FUTEX_WAIT while it has not). */
static int futex_take(_Atomic uint32_t *w, uint32_t *seen)
{
	uint32_t v;
	while ((v = atomic_load(w)) == *seen)
		if (syscall(SYS_futex, w, FUTEX_WAIT, v, NULL, NULL, 0) < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
	*seen = v;
	return 0;
}

static int send_one(struct channel *c, int fd, _Atomic uint32_t *w)
{
	uint64_t one = 1;
	char b = 'x';
	if (c->kind == FUTEX)
		return futex_post(w);
	if (c->kind == EVENTFD)
		return write(fd, &one, sizeof(one)) == sizeof(one) ? 0 : -1;
	return write(fd, &b, 1) == 1 ? 0 : -1;
}

/* 1 a message came, 0 the other side is gone, -1 an error */
static int receive_one(struct channel *c, int fd, _Atomic uint32_t *w, uint32_t *seen)
{
	uint64_t count;
	char b;
	if (c->kind == FUTEX)
		return futex_take(w, seen) ? -1 : 1;
	if (c->kind == EVENTFD)
		return read(fd, &count, sizeof(count)) == sizeof(count) ? 1 : -1;
	ssize_t n = read(fd, &b, 1);
	return n < 0 ? -1 : (int)n;
}

/* Not static, never inlined: the symbol keeps its name for --iteration-func known_pingpong:round_trip. */
__attribute__((noinline)) int round_trip(struct channel *c, uint32_t *seen);
__attribute__((noinline)) int round_trip(struct channel *c, uint32_t *seen)
{
	int ok;

	BEGIN();
	ok = !send_one(c, c->to[1], &c->words[0]) && receive_one(c, c->from[0], &c->words[1], seen) == 1;
	END();
	return ok ? 0 : -1;
}

/* Writes spun[m] of every spun message m below n to f ("MESSAGE NS" lines) and closes it; 0 or -1. */
static int write_spun(FILE *f, const long long *spun, long n, long every)
{
	for (long m = every - 1; m < n; m += every)
		fprintf(f, "%ld %lld\n", m, spun[m]);
	return fclose(f) ? -1 : 0;
}

/* Answers each request, spinning spin_ns first before every every-th; until end of file, or
 * for the message kinds without one (eventfd, futex) until the n-th. With spun_path, each spin
 * as the clock timed it is kept (from the read that starts it to the one that ends it) and
 * written there at the end. */
static void serve(struct channel *c, long n, long long spin_ns, long every, FILE *spun_file)
{
	uint32_t seen = 0;
	long long *spun = spun_file ? calloc((size_t)n, sizeof(*spun)) : NULL;
	long m;
	if (spun_file && !spun)
		die("calloc");
	for (m = 0; c->kind == PIPE || c->kind == UNIX || c->kind == TCP || m < n; m++) {
		int got = receive_one(c, c->to[0], &c->words[0], &seen);
		if (got < 0)
			_exit(1);
		if (!got)
			break;
		if (spin_ns > 0 && m % every == every - 1) {
			long long t = now_ns(), d;
			while ((d = now_ns() - t) < spin_ns)
				;
			if (spun && m < n)
				spun[m] = d;
		}
		if (send_one(c, c->from[1], &c->words[1]))
			_exit(1);
	}
	if (spun_file && write_spun(spun_file, spun, m < n ? m : n, every))
		die("--spun");
	_exit(0);
}

static const char USAGE[] = "known_pingpong pipe|unix|tcp|eventfd|futex [--iterations N] [--spin-ns NS] "
			    "[--spin-every K] [--gap-ns NS] [--cpus CLIENT,SERVER] [--spun FILE]";

static int usage(const char *why)
{
	fprintf(stderr, "known_pingpong: %s (usage: %s)\n", why, USAGE);
	return 2;
}

static int number(const char *s, long long lo, long long *out)
{
	char *end;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno || end == s || *end || *out < lo ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"iterations", required_argument, NULL, 'n'},
		{"spin-ns", required_argument, NULL, 's'},
		{"spin-every", required_argument, NULL, 'e'},
		{"gap-ns", required_argument, NULL, 'g'},
		{"cpus", required_argument, NULL, 'C'},
		{"spun", required_argument, NULL, 'o'},
		{0},
	};
	long long n = 10000, spin_ns = 0, every = 1, gap_ns = 0, v;
	int client_cpu = -1, server_cpu = -1, opt, status;
	struct channel c = {0};
	uint32_t seen = 0;
	char *comma, *spun_path = NULL;

	opterr = 0; /* one line of ours instead */
	while ((opt = getopt_long(argc, argv, "n:s:e:g:C:o:", opts, NULL)) != -1) {
		switch (opt) {
		case 'n':
			if (number(optarg, 1, &n))
				return usage("--iterations wants a number above 0");
			break;
		case 's':
			if (number(optarg, 0, &spin_ns))
				return usage("--spin-ns wants a number of ns, 0 or more");
			break;
		case 'e':
			if (number(optarg, 1, &every))
				return usage("--spin-every wants a number above 0");
			break;
		case 'g':
			if (number(optarg, 0, &gap_ns))
				return usage("--gap-ns wants a number of ns, 0 or more");
			break;
		case 'C':
			comma = strchr(optarg, ',');
			if (!comma || (*comma = 0, number(optarg, 0, &v)) || v >= CPU_SETSIZE)
				return usage("--cpus wants CLIENT,SERVER (two CPU numbers)");
			client_cpu = (int)v;
			if (number(comma + 1, 0, &v) || v >= CPU_SETSIZE)
				return usage("--cpus wants CLIENT,SERVER (two CPU numbers)");
			server_cpu = (int)v;
			break;
		case 'o':
			spun_path = optarg;
			break;
		default:
			fprintf(stderr, "known_pingpong: %s: unknown option or missing value (usage: %s)\n",
				argv[optind - 1], USAGE);
			return 2;
		}
	}
	if (optind != argc - 1)
		return usage("name one channel");
	c.kind = (enum kind)-1;
	for (int k = 0; k < (int)(sizeof(kinds) / sizeof(kinds[0])); k++)
		if (!strcmp(argv[optind], kinds[k]))
			c.kind = (enum kind)k;
	if ((int)c.kind < 0)
		return usage("the channel is one of pipe, unix, tcp, eventfd, futex");
	if (c.kind != FUTEX) {
		/* round_trip passes &c.words[n] for every kind: valid words it does not use */
		static _Atomic uint32_t unused[2];
		c.words = unused;
	}
	cpu_set_t allowed;
	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		die("sched_getaffinity");
	/* checked here: a server that cannot pin itself would leave an eventfd or futex client waiting */
	if ((client_cpu >= 0 && !CPU_ISSET(client_cpu, &allowed)) || (server_cpu >= 0 && !CPU_ISSET(server_cpu, &allowed)))
		return usage("--cpus names a CPU this process may not run on");
	/* opened here, so that a path that cannot be written is said before any message */
	FILE *spun_file = spun_path ? fopen(spun_path, "w") : NULL;
	if (spun_path && !spun_file) {
		fprintf(stderr, "known_pingpong: --spun %s: %s\n", spun_path, strerror(errno));
		return 2;
	}
	open_channel(&c);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		/* eventfd and futex have no end of file: a client gone (Ctrl-C, trace --duration) ends the server */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
			_exit(1);
		keep_side(&c, 1);
		pin(server_cpu);
		serve(&c, n, spin_ns, every, spun_file);
	}
	if (spun_file)
		fclose(spun_file); /* the server's to write */
	keep_side(&c, 0);
	pin(client_cpu);
	struct timespec gap = {.tv_sec = gap_ns / 1000000000, .tv_nsec = gap_ns % 1000000000};
	for (long long i = 0; i < n; i++) {
		if (round_trip(&c, &seen)) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			die("round trip");
		}
		for (struct timespec left = gap; gap_ns && clock_nanosleep(CLOCK_MONOTONIC, 0, &left, &left) == EINTR;)
			;
	}
	if (c.kind == PIPE)
		close(c.to[1]);
	else if (c.kind == UNIX || c.kind == TCP)
		shutdown(c.to[1], SHUT_WR);
	if (waitpid(pid, &status, 0) < 0)
		die("waitpid");
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		fprintf(stderr, "known_pingpong: the server failed\n");
		return 1;
	}
	return 0;
}
