// SPDX-License-Identifier: MIT
/*
 * marked_pingpong [N]: a parent and a child process bounce one byte over two pipes N times
 * (default 10000); each round trip is one call of round_trip(), between iteration markers.
 * Traced either way:
 *   ipctrace-loader --out DIR --usdt marked_pingpong -- marked_pingpong 1000
 *   ipctrace-loader --out DIR --uprobe marked_pingpong:round_trip -- marked_pingpong 1000
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ipctrace_marker.h"

/* The tracer reads a marker's name from the task's memory without faulting pages in: a name
 * on a page the program never touched stays unknown (marks.names), so main touches it. */
static const char metric[] = "round_trip";

/* Not static: the symbol keeps its name (no clone) for --uprobe marked_pingpong:round_trip. */
__attribute__((noinline)) int round_trip(int wfd, int rfd);
__attribute__((noinline)) int round_trip(int wfd, int rfd)
{
	char c = 'x';
	int ok;

	IPCTRACE_ITERATION_BEGIN_NAMED(metric);
	ok = write(wfd, &c, 1) == 1 && read(rfd, &c, 1) == 1;
	IPCTRACE_ITERATION_END_NAMED(metric);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 10000;
	int to_child[2], to_parent[2], status;
	pid_t pid;
	char c;

	(void)*(const volatile char *)metric;
	if (n < 1 || pipe(to_child) || pipe(to_parent))
		return fprintf(stderr, "usage: marked_pingpong [ROUND_TRIPS > 0]\n"), 2;
	pid = fork();
	if (pid < 0)
		return perror("fork"), 1;
	if (pid == 0) {         /* the echo: until the parent closes its end */
		close(to_child[1]);
		close(to_parent[0]);
		while (read(to_child[0], &c, 1) == 1 && write(to_parent[1], &c, 1) == 1)
			;
		_exit(0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	for (long i = 0; i < n; i++)
		if (round_trip(to_child[1], to_parent[0]))
			return perror("round trip"), 1;
	close(to_child[1]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
