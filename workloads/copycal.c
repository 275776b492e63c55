// SPDX-License-Identifier: MIT
/*
 * Copy-cost calibration for traced runs on kernels whose copy routines cannot be
 * probed: the kernel's copy_{to,from}_user on x86-64 is `rep movsb` (FSRM) or a
 * loop of the same moves, so the same instruction timed here in user space on
 * this CPU is the estimate of a copy's fixed cost and of its cost per byte.
 * It runs before setup, never inside a timed loop.
 */
#include <stdlib.h>
#include <string.h>
#include "driver.h"

#define CAL_BIG    (64u << 10)     /* a full default pipe buffer */
#define CAL_ROUNDS 101             /* odd: the median is one round */
#define CAL_BATCH  16              /* copies per clock read, so the clock's cost amortises */

static inline void copy_bytes(void *dst, const void *src, size_t n)
{
#if defined(__x86_64__)
	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
#else
	memcpy(dst, src, n);
	__asm__ volatile("" : : "r"(dst) : "memory");
#endif
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median ns of one copy of n bytes. */
static double time_copy(char *dst, const char *src, size_t n)
{
	double t[CAL_ROUNDS];

	for (int r = 0; r < CAL_ROUNDS; r++) {
		uint64_t t0 = wl_now();

		for (int i = 0; i < CAL_BATCH; i++)
			copy_bytes(dst, src, n);
		t[r] = (double)(wl_now() - t0) / CAL_BATCH;
	}
	qsort(t, CAL_ROUNDS, sizeof(t[0]), cmp_double);
	return t[CAL_ROUNDS / 2];
}

int copy_calibrate(struct copy_cal *cal)
{
	/* page-aligned, as the pipe buffer pages the kernel copies into and out of */
	char *src = aligned_alloc(4096, CAL_BIG), *dst = aligned_alloc(4096, CAL_BIG);
	double one, big;

	if (!src || !dst) {
		free(src);
		free(dst);
		return -1;
	}
	memset(src, 0x5a, CAL_BIG);
	memset(dst, 0, CAL_BIG);
	time_copy(dst, src, CAL_BIG);           /* warm caches and TLB */
	one = time_copy(dst, src, 1);
	big = time_copy(dst, src, CAL_BIG);
	cal->ns_per_call = one;
	cal->ns_per_byte = big > one ? (big - one) / (CAL_BIG - 1) : 0.0;
	free(src);
	free(dst);
	return 0;
}
