/* SPDX-License-Identifier: MIT */
/* Shared by bpf/kspin.bpf.c and workloads/cases/kspin.c. */
#ifndef IPCTRACE_KSPIN_H
#define IPCTRACE_KSPIN_H

#define KSPIN_PAIRS 32   /* lock+unlock pairs per program run */

#endif
