/* SPDX-License-Identifier: MIT */
/*
 * Probing a function that the kernel will not let us probe, from its callers.
 *
 * All of lib/ is built without ftrace, so the copy routines (_copy_to_iter,
 * copy_page_from_iter, ...) refuse fentry (no patchable entry) and kprobes
 * ("Could not probe notrace function") on every kernel. Their callers, such as
 * pipe_write, are traceable: a kprobe on the call instruction and one on the
 * instruction after it bracket the call, with the callee's arguments in
 * registers at the first and its return value in rax (arm64: x0) at the second.
 */
#ifndef IPCTRACE_CALLSITE_H
#define IPCTRACE_CALLSITE_H

#include <stdbool.h>
#include <stddef.h>

#define CALLSITES_MAX 4
#if defined(__aarch64__)
#define CALL_INSN_LEN 4          /* arm64 bl imm26 */
#else
#define CALL_INSN_LEN 5          /* x86 call rel32 */
#endif

struct bpf_program;
struct bpf_link;

struct callsites {
	const char *caller;
	unsigned long off[CALLSITES_MAX];  /* offset of each call instruction in the caller */
	/* arm64: the offset of a load its kprobes take for the start of an exclusive (LL/SC)
	 * sequence, in reach of the call or the instruction after it; -1 where there is none */
	long held_by[CALLSITES_MAX];
	int n;
	struct bpf_link *link[2 * CALLSITES_MAX];
};

/* Whether name is in available_filter_functions of the tracing directory
 * tracefs. False when the list cannot be read. */
bool kfunc_traceable(const char *tracefs, const char *name);
/* The direct calls of callee inside caller, from kernel text read through
 * /proc/kcore and addresses from /proc/kallsyms. 0 with cs->n >= 1, or -1 and
 * why in err. x86-64 and arm64 only. */
int callsites_find(const char *caller, const char *callee, struct callsites *cs, char *err, size_t errlen);
/* entry on each call instruction, exit on the instruction after it; -1 and why
 * in err (what did attach stays attached until callsites_detach). */
int callsites_attach(struct callsites *cs, struct bpf_program *entry, struct bpf_program *exit,
		     char *err, size_t errlen);
void callsites_detach(struct callsites *cs);

#endif
