// SPDX-License-Identifier: MIT
/*
 * `ipcbench hog --cpu N [--nice X]` (not in the usage: the front end's tool): a CPU
 * hog of another process for known-answer runs. The front end starts it outside the
 * traced process tree, next to a run; it pins itself to CPU N, sets its nice value,
 * prints "ok cpu N" once it is pinned, and spins in user space until SIGTERM or
 * SIGINT (exit 0) or until the thread that started it dies (PR_SET_PDEATHSIG).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "driver.h"

static volatile sig_atomic_t hog_stop;

static void on_hog_signal(int sig)
{
	hog_stop = 1;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
	char *end;
	long v;

	if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int drv_parse_hog(int argc, char **argv, int *cpu, int *nice_value, char *err, size_t len)
{
	long v;

	*cpu = -1;
	*nice_value = 0;
	for (int i = 0; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(opt, "--cpu") && strcmp(opt, "--nice")) {
			snprintf(err, len, "hog: unknown argument '%s' (hog --cpu N [--nice X])", opt);
			return WL_FAIL_USAGE;
		}
		if (!val) {
			snprintf(err, len, "hog: %s needs a value", opt);
			return WL_FAIL_USAGE;
		}
		i++;
		if (!strcmp(opt, "--cpu")) {
			if (parse_int(val, 0, CPU_SETSIZE - 1, &v)) {
				snprintf(err, len, "hog: --cpu needs a CPU number, not '%s'", val);
				return WL_FAIL_USAGE;
			}
			*cpu = (int)v;
		} else {
			if (parse_int(val, -20, 19, &v)) {
				snprintf(err, len, "hog: --nice needs a whole number from -20 to 19, not '%s'", val);
				return WL_FAIL_USAGE;
			}
			*nice_value = (int)v;
		}
	}
	if (*cpu < 0) {
		snprintf(err, len, "hog needs --cpu N");
		return WL_FAIL_USAGE;
	}
	return 0;
}

static int hog_fail(const char *fmt, int a, const char *why)
{
	fputs("ipcbench: hog: ", stderr);
	fprintf(stderr, fmt, a, why);
	fputc('\n', stderr);
	return WL_FAIL_USAGE;
}

int drv_hog(int argc, char **argv)
{
	struct sigaction sa;
	cpu_set_t usable, one;
	pid_t parent = getppid();
	volatile uint64_t spins = 0;
	char err[256];
	int cpu, nice_value;

	if (drv_parse_hog(argc, argv, &cpu, &nice_value, err, sizeof(err))) {
		fprintf(stderr, "ipcbench: %s\n", err);
		return WL_FAIL_USAGE;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_hog_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* dies with the thread that started it; a parent already gone: stop at once */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != parent)
		return 0;
	if (drv_usable_cpus(&usable) || !CPU_ISSET(cpu, &usable))
		return hog_fail("CPU %d is offline, does not exist or is not allowed%s", cpu, "");
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	if (sched_setaffinity(0, sizeof(one), &one))
		return hog_fail("cannot pin to CPU %d: %s", cpu, strerror(errno));
	if (setpriority(PRIO_PROCESS, 0, nice_value))
		return hog_fail("cannot set nice %d: %s", nice_value, strerror(errno));
	printf("ok cpu %d\n", cpu);
	fflush(stdout);
	while (!hog_stop)
		spins++;
	return 0;
}
