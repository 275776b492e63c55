// SPDX-License-Identifier: MIT
/*
 * Entry-path calibration for traced runs: the kernel's syscall entry and exit path
 * outside the sys_enter/sys_exit tracepoints cannot be traced, so the driver times
 * null system calls (getppid, which no vDSO or libc cache answers, as the bare
 * syscall instruction: wl_bare_getppid) in user space between two clock reads, the
 * same loop without the call, and the calls back to back.
 * The analysis joins each call's (t0, t1) with the traced sys_enter/sys_exit of
 * this thread: t0 -> sys_enter is the clock read's tail plus the entry path,
 * sys_exit -> t1 the exit path plus the clock read's head; the empty loop says
 * what the clock reads alone take. It runs in the measuring thread before setup,
 * after the tracer attached (the loader starts the driver only then), never inside
 * a timed loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "driver.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int entry_calibrate(struct entry_cal *cal)
{
	uint64_t empty[ENTRY_CAL_CALLS];
	const uint64_t total = ENTRY_CAL_WARMUP + ENTRY_CAL_CALLS;

	/* touch what the loops store into, so that they take no page fault */
	memset(cal, 0, sizeof(*cal));
	memset(empty, 0, sizeof(empty));
	cal->tid = gettid();
	cal->cpu = sched_getcpu();
	cal->syscall_nr = SYS_getppid;

	/* null-syscall's loop: clock, call, clock, store; the first ENTRY_CAL_WARMUP
	 * iterations are dropped as wl_record drops the warm-up */
	for (uint64_t i = 0; i < total; i++) {
		uint64_t t0 = wl_now();
		wl_bare_getppid();
		uint64_t t1 = wl_now();
		if (i >= ENTRY_CAL_WARMUP) {
			cal->calls[i - ENTRY_CAL_WARMUP][0] = t0;
			cal->calls[i - ENTRY_CAL_WARMUP][1] = t1;
		}
	}
	for (uint64_t i = 0; i < total; i++) {
		uint64_t t0 = wl_now();
		uint64_t t1 = wl_now();
		if (i >= ENTRY_CAL_WARMUP)
			empty[i - ENTRY_CAL_WARMUP] = t1 - t0;
	}
	/* The same calls back to back, no clock read between them: the gap from one call's
	 * sys_exit to the next one's sys_enter is the exit and entry paths (and the loop). */
	cal->tight[0] = wl_now();
	for (uint64_t i = 0; i < ENTRY_CAL_CALLS; i++)
		wl_bare_getppid();
	cal->tight[1] = wl_now();
	qsort(empty, ENTRY_CAL_CALLS, sizeof(empty[0]), cmp_u64);
	cal->empty_ns_min = empty[0];
	cal->empty_ns = ENTRY_CAL_CALLS % 2 ? (double)empty[ENTRY_CAL_CALLS / 2]
		: ((double)empty[ENTRY_CAL_CALLS / 2 - 1] + (double)empty[ENTRY_CAL_CALLS / 2]) / 2;
	return 0;
}

/*
 * ipctrace trace -- CMD: the tracer starts this, which calibrates the entry path (and the
 * iteration probes' cost, probecal.c) in the process that then becomes CMD (the same tid,
 * traced from its first instruction), so a program ipctrace did not write gets the entry
 * estimate a workload's run has.
 */
int drv_exec(int argc, char **argv)
{
	static struct entry_cal cal;
	struct probe_cal pcal;
	char *end;
	long fd;
	FILE *f;

	if (argc < 4 || strcmp(argv[0], "--entry-fd") || strcmp(argv[2], "--")) {
		fputs("ipcbench: usage: ipcbench exec --entry-fd N -- CMD ARGS...\n", stderr);
		return WL_FAIL_USAGE;
	}
	errno = 0;
	fd = strtol(argv[1], &end, 10);
	if (errno || *end || fd < 0 || fd > 1 << 20) {
		fprintf(stderr, "ipcbench: exec: --entry-fd %s is not a descriptor\n", argv[1]);
		return WL_FAIL_USAGE;
	}
	f = fdopen((int)fd, "w");
	if (f) {
		/* a calibration that cannot be made or written leaves the file empty: the
		 * analysis then says the entry path (the probes) is not calibrated */
		if (entry_calibrate(&cal) == 0 && probe_calibrate(&pcal) == 0) {
			fputs("{\"entry\": ", f);
			json_entry_cal(f, &cal);
			fputs(", \"probes\": ", f);
			json_probe_cal(f, &pcal);
			fputs("}", f);
		}
		fclose(f);
	}
	execvp(argv[3], argv + 3);
	fprintf(stderr, "ipcbench: cannot run %s: %s\n", argv[3], strerror(errno));
	return 127;
}
