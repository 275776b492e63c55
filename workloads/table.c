// SPDX-License-Identifier: MIT
/* The case table, in `list` order: adding a workload is one file in cases/ and
 * one line in each of the two lists below. */
#include <stddef.h>

#include "driver.h"

extern const struct workload wl_pipe;
extern const struct workload wl_pipe_self;
extern const struct workload wl_pipe_nonblock;
extern const struct workload wl_null_syscall;
extern const struct workload wl_orwc;

const struct workload *const workloads[] = {
	&wl_pipe,
	&wl_pipe_self,
	&wl_pipe_nonblock,
	&wl_null_syscall,
	&wl_orwc,
	NULL
};
