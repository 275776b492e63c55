/* SPDX-License-Identifier: MIT */
/*
 * Iteration markers for `ipctrace trace` (ipctrace-loader --usdt BINARY): USDT probes
 * ipctrace:iteration_begin and ipctrace:iteration_end, which cost a no-op instruction
 * when nobody traces the program. Needs <sys/sdt.h> (Debian: systemtap-sdt-dev).
 *
 *   #include "ipctrace_marker.h"
 *
 *   for (;;) {
 *           IPCTRACE_ITERATION_BEGIN();            // or _NAMED("request")
 *           handle_one_request();
 *           IPCTRACE_ITERATION_END();              // or _NAMED("request")
 *   }
 *
 * then: ipctrace-loader --out DIR --usdt ./server -- ./server ...
 * (a shared library that holds the markers: --usdt /path/to/libfoo.so).
 * The _NAMED forms pass the metric's name (a string literal, or any string that lives as
 * long as the program: the tracer reads it once per address, up to 31 bytes, from the
 * task's memory without faulting pages in, so a name on a page the program never touched
 * is read at a later marker or not at all: touch it once first, as marked_pingpong.c does).
 * Each thread's begin and end pair up; the tracer records them for the traced tasks only.
 *
 * Without USDT (a binary you cannot rebuild), a function that is one iteration does too:
 * ipctrace-loader --uprobe BINARY:FUNCTION (its entry begins, its return ends an iteration).
 */
#ifndef IPCTRACE_MARKER_H
#define IPCTRACE_MARKER_H

#include <sys/sdt.h>

#if defined(__x86_64__)
/* Each marker a 5-byte no-op instead of sdt.h's 1-byte one: a kernel that optimizes uprobes
 * (x86, 6.16 on) turns a probe on it into a call, no trap, so a marker costs about what a
 * function's probes do; `ipctrace trace` calibrates what the probes leave inside a window
 * on this kind of no-op, and takes it out. (Written as bytes: sdt.h passes it through a
 * macro, no commas.) */
#undef _SDT_NOP
#define _SDT_NOP .byte 0x0f; .byte 0x1f; .byte 0x44; .byte 0x00; .byte 0x00
#endif

#define IPCTRACE_ITERATION_BEGIN()           DTRACE_PROBE(ipctrace, iteration_begin)
#define IPCTRACE_ITERATION_END()             DTRACE_PROBE(ipctrace, iteration_end)
#define IPCTRACE_ITERATION_BEGIN_NAMED(name) DTRACE_PROBE1(ipctrace, iteration_begin, (const char *)(name))
#define IPCTRACE_ITERATION_END_NAMED(name)   DTRACE_PROBE1(ipctrace, iteration_end, (const char *)(name))

#endif
