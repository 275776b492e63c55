// SPDX-License-Identifier: MIT
/* The case table, in `list` order: adding a workload is one file in cases/ and
 * one line in each of the two lists below. */
#include <stddef.h>

#include "driver.h"

extern const struct workload wl_pipe;
extern const struct workload wl_pipe_bandwidth;
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
extern const struct workload wl_kspin;
extern const struct workload wl_futex;
extern const struct workload wl_eventfd;
extern const struct workload wl_unix_stream;
extern const struct workload wl_unix_bandwidth;
extern const struct workload wl_unix_dgram;
extern const struct workload wl_socketpair;
extern const struct workload wl_tcp;
extern const struct workload wl_udp;
extern const struct workload wl_fifo;
extern const struct workload wl_mqueue;
extern const struct workload wl_signal;
extern const struct workload wl_shm_poll;
extern const struct workload wl_sched_yield;
extern const struct workload wl_cond;

const struct workload *const workloads[] = {
	&wl_pipe,
	&wl_pipe_bandwidth,
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
	&wl_kspin,
	&wl_futex,
	&wl_eventfd,
	&wl_unix_stream,
	&wl_unix_bandwidth,
	&wl_unix_dgram,
	&wl_socketpair,
	&wl_tcp,
	&wl_udp,
	&wl_fifo,
	&wl_mqueue,
	&wl_signal,
	&wl_shm_poll,
	&wl_sched_yield,
	&wl_cond,
	NULL
};
