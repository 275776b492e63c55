// SPDX-License-Identifier: MIT
/*
 * Probe calibration for `ipctrace trace --markers` and `--iteration BINARY:FUNCTION`: part
 * of what an iteration's probes cost lands inside the window they delimit (the begin's
 * program reads the clock, then records and returns to the program; the end's is entered
 * before it reads the clock). `ipcbench exec` runs, before it becomes the traced command,
 * empty windows of both kinds, to which the tracer attaches the same programs it attaches
 * to the command's (ipctrace-loader --calibrate): USDT probes ipctrace_cal:begin/end made
 * like examples/ipctrace_marker.h's, and an empty function whose entry is a frame-pointer
 * prologue (push %rbp, what a function's uprobe usually sits on). The analysis takes the
 * median empty window as the probes' in-window cost (analysis/model/marks.py), and the
 * same windows with one clock read inside for where that cost splits between the begin's
 * tail and the end's head. Without the tracer the probes are no-ops and nothing is recorded.
 */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../examples/ipctrace_marker.h"
#include "driver.h"

/* The empty function, written out: a compiler drops the frame of an empty function and the
 * probe would sit on a `ret`, which the kernel single-steps (ten times slower than a push). */
#if defined(__x86_64__)
__asm__(".text\n"
	".globl ipcbench_probe_cal_fn\n"
	".type ipcbench_probe_cal_fn, @function\n"
	"ipcbench_probe_cal_fn:\n"
	"\tpush %rbp\n"
	"\tmov %rsp, %rbp\n"
	"\tpop %rbp\n"
	"\tret\n"
	".size ipcbench_probe_cal_fn, .-ipcbench_probe_cal_fn\n");
void ipcbench_probe_cal_fn(void);
#else
__attribute__((noinline, used)) void ipcbench_probe_cal_fn(void);
__attribute__((noinline, used)) void ipcbench_probe_cal_fn(void)
{
	__asm__ volatile("" ::: "memory");
}
#endif

/* The same with a clock read inside (its prologue is a push %rbp too: it calls). */
__attribute__((noinline, used)) void ipcbench_probe_cal_fn_clock(uint64_t *t);
__attribute__((noinline, used)) void ipcbench_probe_cal_fn_clock(uint64_t *t)
{
	*t = wl_now();
}

static __attribute__((noinline)) void usdt_empty(void)
{
	DTRACE_PROBE(ipctrace_cal, begin);
	DTRACE_PROBE(ipctrace_cal, end);
}

static __attribute__((noinline)) void usdt_clock(uint64_t *t)
{
	DTRACE_PROBE(ipctrace_cal, begin);
	*t = wl_now();
	DTRACE_PROBE(ipctrace_cal, end);
}

int probe_calibrate(struct probe_cal *cal)
{
	const int total = PROBE_CAL_WARMUP + PROBE_CAL_WINDOWS;
	uint64_t t;

	/* touch what the loops store into, so that they take no page fault */
	memset(cal, 0, sizeof(*cal));
	cal->tid = gettid();
	cal->cpu = sched_getcpu();
	cal->span[0] = wl_now();
	/* The phases' bounds tell the analysis which windows are which; the warm-up (the first
	 * hits of a probe the kernel has yet to optimize, cold caches) lies before each phase. */
	for (int i = 0; i < total; i++) {
		if (i == PROBE_CAL_WARMUP)
			cal->phase[0][0] = wl_now();
		usdt_empty();
	}
	cal->phase[0][1] = wl_now();
	for (int i = 0; i < total; i++) {
		if (i == PROBE_CAL_WARMUP)
			cal->phase[1][0] = wl_now();
		usdt_clock(&t);
		if (i >= PROBE_CAL_WARMUP)
			cal->mid[0][i - PROBE_CAL_WARMUP] = t;
	}
	cal->phase[1][1] = wl_now();
	for (int i = 0; i < total; i++) {
		if (i == PROBE_CAL_WARMUP)
			cal->phase[2][0] = wl_now();
		ipcbench_probe_cal_fn();
	}
	cal->phase[2][1] = wl_now();
	for (int i = 0; i < total; i++) {
		if (i == PROBE_CAL_WARMUP)
			cal->phase[3][0] = wl_now();
		ipcbench_probe_cal_fn_clock(&t);
		if (i >= PROBE_CAL_WARMUP)
			cal->mid[1][i - PROBE_CAL_WARMUP] = t;
	}
	cal->phase[3][1] = cal->span[1] = wl_now();
	return 0;
}

void json_probe_cal(FILE *f, const struct probe_cal *c)
{
	fprintf(f, "{\"tid\": %d, \"cpu\": %d, \"windows\": %d, \"usdt\": \"ipctrace_cal:begin/end\", "
		"\"function\": \"ipcbench_probe_cal_fn\", \"function_clock\": \"ipcbench_probe_cal_fn_clock\", "
		"\"span\": [%llu, %llu], \"phases\": [",
		(int)c->tid, c->cpu, PROBE_CAL_WINDOWS, (unsigned long long)c->span[0], (unsigned long long)c->span[1]);
	for (int k = 0; k < 4; k++)
		fprintf(f, "%s[%llu, %llu]", k ? ", " : "", (unsigned long long)c->phase[k][0],
			(unsigned long long)c->phase[k][1]);
	fputs("]", f);
	for (int k = 0; k < 2; k++) {
		fprintf(f, ", \"%s\": [", k ? "mid_function" : "mid_usdt");
		for (int i = 0; i < PROBE_CAL_WINDOWS; i++)
			fprintf(f, "%s%llu", i ? (i % 8 ? ", " : ",\n   ") : "", (unsigned long long)c->mid[k][i]);
		fputs("]", f);
	}
	fputs("}", f);
}
