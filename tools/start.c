// SPDX-License-Identifier: MIT
/*
 * ipctrace-start PROGRAM ARGS...: exec PROGRAM with SIGINT and SIGTERM blocked and at their
 * default action. The launcher execs this last (statically linked: no dynamic loader runs
 * before main), so that a Ctrl-C between the launcher and the front end's handlers stays
 * pending instead of being lost (ignored) or ending the process by the signal; the front
 * end (analysis/__init__.py) unblocks them once its handlers are in place.
 */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	/* Not ignored: an ignored signal is dropped even while blocked. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	if (argc < 2) {
		fputs("usage: ipctrace-start PROGRAM ARGS...\n", stderr);
		return 2;
	}
	execv(argv[1], argv + 1);
	perror(argv[1]);
	return 127;
}
