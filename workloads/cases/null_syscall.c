// SPDX-License-Identifier: MIT
/* null-syscall: the cheapest kernel round trip, getppid() through syscall(2)
 * so that no vDSO or libc cache answers it; the baseline under every figure. */
#include <sys/syscall.h>
#include <unistd.h>

#include "workload.h"

static int null_syscall_setup(struct wl_ctx *c)
{
	return 0;
}

static int null_syscall_run(struct wl_ctx *c)
{
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		syscall(SYS_getppid);
		uint64_t t1 = wl_now();
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

static void null_syscall_teardown(struct wl_ctx *c)
{
}

const struct workload wl_null_syscall = {
	.name = "null-syscall",
	.summary = "getppid() via syscall(2): user->kernel->user with no work, the floor of every other figure",
	.seed = "",
	.metrics = { "syscall" },
	.flags = WL_SINGLE,
	.setup = null_syscall_setup,
	.run = null_syscall_run,
	.teardown = null_syscall_teardown,
};
