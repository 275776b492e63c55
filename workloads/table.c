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
extern const struct workload wl_spin_tas_threads;
extern const struct workload wl_spin_tas_procs;
extern const struct workload wl_spin_ttas_threads;
extern const struct workload wl_sem_threads;
extern const struct workload wl_sem_procs;
extern const struct workload wl_sem_wakeup;
extern const struct workload wl_zmq_inproc;
extern const struct workload wl_zmq_ipc;
extern const struct workload wl_zmq_tcp;
extern const struct workload wl_zmq_tcp_netns;

const struct workload *const workloads[] = {
	&wl_pipe,
	&wl_pipe_self,
	&wl_pipe_nonblock,
	&wl_null_syscall,
	&wl_orwc,
	&wl_spin_tas_threads,
	&wl_spin_tas_procs,
	&wl_spin_ttas_threads,
	&wl_sem_threads,
	&wl_sem_procs,
	&wl_sem_wakeup,
	&wl_zmq_inproc,
	&wl_zmq_ipc,
	&wl_zmq_tcp,
	&wl_zmq_tcp_netns,
	NULL
};
