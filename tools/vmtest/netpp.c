// SPDX-License-Identifier: MIT
/*
 * The two-host guest's TCP ping-pong (tools/vmtest/twohost): the Python examples/netpingpong.py
 * in C, for guests without Python. Each request carries its sequence number, so the first 64
 * bytes of every message differ (what `ipctrace merge` matches by); the server spins SPIN_US
 * before each answer (the known cost the merge must recover as server_user) and prints, at the
 * end, the median of what each spin took by its own clock.
 *   netpp server PORT SPIN_US
 *   netpp client HOST PORT ITERATIONS
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SIZE 64

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int recv_exact(int fd, char *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(fd, buf + got, n - got, 0);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

#define MAX_WORK (1u << 20)
static uint64_t work[MAX_WORK];        /* each answer's spin, as timed here */
static size_t nwork;

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int server(int port, long spin_us)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = INADDR_ANY };
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0), fd;
	char m[SIZE];

	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) || listen(ls, 1)) {
		perror("netpp server");
		return 1;
	}
	fd = accept(ls, NULL, NULL);
	if (fd < 0) {
		perror("netpp accept");
		return 1;
	}
	nodelay(fd);
	while (!recv_exact(fd, m, SIZE) && memcmp(m, "bye", 3)) {
		uint64_t start = now_ns(), end = start + (uint64_t)spin_us * 1000u, t;
		while ((t = now_ns()) < end)
			;
		memcpy(m, "pong", 4);
		if (nwork < MAX_WORK)
			work[nwork++] = t - start;
		if (send(fd, m, SIZE, 0) != SIZE)
			return 1;
	}
	/* what the spin took by this host's own clock: where a virtual CPU stands still (QEMU
	 * descheduled on its host) the clock runs on, and the spin with it */
	qsort(work, nwork, sizeof(work[0]), cmp_u64);
	printf("netpp server: %zu answers, work median %llu ns\n", nwork,
	       nwork ? (unsigned long long)work[nwork / 2] : 0ull);
	return 0;
}

static int client(const char *host, int port, long n)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port) };
	char m[SIZE];
	int fd = -1;

	if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
		fprintf(stderr, "netpp: bad address %s\n", host);
		return 2;
	}
	for (int tries = 0; tries < 600; tries++) {  /* the server's guest may still be booting */
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a)))
			break;
		close(fd);
		fd = -1;
		usleep(100000);
	}
	if (fd < 0) {
		fprintf(stderr, "netpp: no server at %s:%d\n", host, port);
		return 1;
	}
	nodelay(fd);
	for (long i = 0; i < n; i++) {
		memcpy(m, "ping", 4);
		for (int k = 4; k + 8 <= SIZE; k += 8)
			memcpy(m + k, &i, 8);
		if (send(fd, m, SIZE, 0) != SIZE || recv_exact(fd, m, SIZE)) {
			fprintf(stderr, "netpp: the connection broke at round trip %ld\n", i);
			return 1;
		}
	}
	memset(m, 0, SIZE);
	memcpy(m, "bye", 3);
	send(fd, m, SIZE, 0);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]), atol(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client(argv[2], atoi(argv[3]), atol(argv[4]));
	fprintf(stderr, "usage: netpp server PORT SPIN_US | netpp client HOST PORT ITERATIONS\n");
	return 2;
}
