/* SPDX-License-Identifier: MIT */
/* The bounds of a sudo user, kept by tools/broker.c; analysis/run/privilege.py reads them
 * from here (one place for both), and the README's privilege table states them. */
#ifndef IPCTRACE_BROKER_H
#define IPCTRACE_BROKER_H

#define BROKER_FD 3                   /* the front end's request socket */
#define SUDO_MAX_RINGBUF_MB 256       /* kernel memory of one trace's ring buffers */
#define SUDO_MAX_DURATION_S 3600      /* --duration of one trace */
#define SUDO_MAX_TRACES 2             /* tracers one user runs at once */
#define SLOTS_DIR "/run/ipctrace/slots"
/* the workloads that need root (WL_NEEDS_ROOT), run by the broker for the user */
#define SUDO_ROOT_WORKLOADS "kspin", "zmq-tcp-netns"


#endif
