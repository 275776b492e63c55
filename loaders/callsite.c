// SPDX-License-Identifier: MIT
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include "callsite.h"

#define CALLER_MAX_BYTES 16384   /* longer callers are not searched past this */
/* arm64's kprobes (arm_kprobe_decode_insn) refuse, with EINVAL, an instruction up to this many
 * instructions after a load of the exclusive class (LDXR, LDAXR, and also LDAR, the
 * load-acquire of smp_load_acquire) that no store-exclusive follows: stepping out of line
 * inside an LL/SC sequence would break it. */
#define ARM64_ATOMIC_REACH 32

bool kfunc_traceable(const char *tracefs, const char *name)
{
	char path[192], *line = NULL;
	size_t cap = 0, len = strlen(name);
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/available_filter_functions", tracefs);
	f = fopen(path, "r");
	if (!f)
		return false;
	/* "name" or "name [module]" per line */
	while (!found && getline(&line, &cap, f) > 0)
		found = strncmp(line, name, len) == 0 && (line[len] == '\n' || line[len] == ' ');
	free(line);
	fclose(f);
	return found;
}

/* Addresses of caller and callee, and where caller ends: the next symbol, as
 * /proc/kallsyms lists the kernel's own symbols in address order. One pass:
 * under emulation every read of kallsyms costs seconds. */
static int kallsyms_find(const char *caller, const char *callee, unsigned long *start,
			 unsigned long *end, unsigned long *target, char *err, size_t errlen)
{
	char name[256], type, line[512];
	unsigned long addr;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f) {
		snprintf(err, errlen, "cannot read /proc/kallsyms: %s", strerror(errno));
		return -1;
	}
	*start = *target = *end = 0;
	while ((!*end || !*target) && fgets(line, sizeof(line), f)) {
		/* module symbols ("name\t[module]") come after the kernel's and are not wanted */
		if (strchr(line, '\t') || sscanf(line, "%lx %c %255s", &addr, &type, name) != 3)
			continue;
		if (*start && !*end && addr > *start)
			*end = addr;
		if ((type == 't' || type == 'T') && !*start && strcmp(name, caller) == 0)
			*start = addr;
		else if ((type == 't' || type == 'T') && !*target && strcmp(name, callee) == 0)
			*target = addr;
	}
	fclose(f);
	if (!*start || !*target || !*end) {
		snprintf(err, errlen, "%s not in /proc/kallsyms%s", !*start || !*end ? caller : callee,
			 getuid() ? " (addresses hidden: not root)" : "");
		return -1;
	}
	return 0;
}

/* Copy len bytes of kernel text at addr out of /proc/kcore (an ELF core file). */
static int kcore_read(unsigned long addr, unsigned char *buf, size_t len, char *err, size_t errlen)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph;
	int fd = open("/proc/kcore", O_RDONLY | O_CLOEXEC), i;

	if (fd < 0) {
		snprintf(err, errlen, "cannot open /proc/kcore: %s", strerror(errno));
		return -1;
	}
	if (pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64) {
		snprintf(err, errlen, "/proc/kcore is not a 64-bit ELF file");
		close(fd);
		return -1;
	}
	for (i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), eh.e_phoff + (off_t)i * eh.e_phentsize) != sizeof(ph))
			break;
		if (ph.p_type != PT_LOAD || addr < ph.p_vaddr || addr + len > ph.p_vaddr + ph.p_memsz)
			continue;
		if (pread(fd, buf, len, ph.p_offset + (addr - ph.p_vaddr)) != (ssize_t)len)
			break;
		close(fd);
		return 0;
	}
	snprintf(err, errlen, "cannot read kernel text at 0x%lx from /proc/kcore", addr);
	close(fd);
	return -1;
}

#if defined(__aarch64__)
/* The offset of the load arm64's kprobes would take as opening an exclusive sequence around
 * the instruction at text + at (the kernel's is_probed_address_atomic: back from the
 * instruction before it, at most ARM64_ATOMIC_REACH instructions and not past the function's
 * start, the first load-exclusive-class instruction met before a store-exclusive), or -1. */
static long exclusive_load_before(const unsigned char *text, size_t at)
{
	size_t n;

	for (n = 1; n <= ARM64_ATOMIC_REACH && n * 4 <= at; n++) {
		uint32_t insn;

		memcpy(&insn, text + at - n * 4, sizeof(insn));
		if ((insn & 0x3f400000u) == 0x08000000u)   /* store exclusive: the sequence closed */
			return -1;
		if ((insn & 0x3f400000u) == 0x08400000u)   /* load exclusive (LDXR, LDAXR, LDAR) */
			return (long)(at - n * 4);
	}
	return -1;
}
#endif

int callsites_find(const char *caller, const char *callee, struct callsites *cs, char *err, size_t errlen)
{
#if defined(__x86_64__) || defined(__aarch64__)
	unsigned long start, end, target;
	unsigned char *text;
	size_t len, i;

	cs->n = 0;
	cs->caller = caller;
	if (kallsyms_find(caller, callee, &start, &end, &target, err, errlen))
		return -1;
	len = end - start < CALLER_MAX_BYTES ? end - start : CALLER_MAX_BYTES;
	text = malloc(len);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (kcore_read(start, text, len, err, errlen)) {
		free(text);
		return -1;
	}
#if defined(__x86_64__)
	/* call rel32: e8 followed by the target relative to the next instruction. A
	 * byte pattern inside another instruction cannot hit exactly the callee in
	 * practice, and the kernel refuses a kprobe that is not on an instruction. */
	for (i = 0; i + CALL_INSN_LEN <= len && cs->n < CALLSITES_MAX; i++) {
		int32_t rel;

		if (text[i] != 0xe8)
			continue;
		memcpy(&rel, text + i + 1, sizeof(rel));
		if (start + i + CALL_INSN_LEN + (long)rel == target) {
			cs->held_by[cs->n] = -1;
			cs->off[cs->n++] = i;
		}
	}
#else
	/* BL imm26: 100101 then the target relative to this instruction, in words; every
	 * instruction is 4 bytes, aligned (arm64 kprobes simulate BL, so one may sit on it). */
	for (i = 0; i + CALL_INSN_LEN <= len && cs->n < CALLSITES_MAX; i += CALL_INSN_LEN) {
		uint32_t insn;
		int32_t imm;

		memcpy(&insn, text + i, sizeof(insn));
		if ((insn & 0xfc000000u) != 0x94000000u)
			continue;
		imm = (int32_t)(insn << 6) >> 6;   /* sign-extend imm26 */
		if (start + i + (long)imm * 4 == target) {
			/* the kprobe on the call and the one on the instruction after it */
			cs->held_by[cs->n] = exclusive_load_before(text, i);
			if (cs->held_by[cs->n] < 0)
				cs->held_by[cs->n] = exclusive_load_before(text, i + CALL_INSN_LEN);
			cs->off[cs->n++] = i;
		}
	}
#endif
	free(text);
	if (!cs->n) {
		snprintf(err, errlen, "no direct call of %s in %s", callee, caller);
		return -1;
	}
	return 0;
#else
	snprintf(err, errlen, "call sites are found on x86-64 and arm64 only");
	return -1;
#endif
}

/* Why the kprobe at caller+off (around call site i) was refused: errno, and on arm64 the load
 * the refusal comes from where there is one in reach (6.12: pipe_read's smp_load_acquire of
 * pipe->head, 30 instructions before its call of copy_page_to_iter). */
static void refused(const struct callsites *cs, int i, unsigned long off, char *err, size_t errlen)
{
	int e = errno;

	if (e == EINVAL && cs->held_by[i] >= 0)
		snprintf(err, errlen,
			 "kprobe at %s+0x%lx: %s: arm64's kprobes refuse an instruction within %d of a "
			 "load they take for the start of an exclusive (LL/SC) sequence: LDXR, LDAXR or LDAR at %s+0x%lx",
			 cs->caller, off, strerror(e), ARM64_ATOMIC_REACH, cs->caller, (unsigned long)cs->held_by[i]);
	else
		snprintf(err, errlen, "kprobe at %s+0x%lx: %s", cs->caller, off, strerror(e));
}

int callsites_attach(struct callsites *cs, struct bpf_program *entry, struct bpf_program *exit,
		     char *err, size_t errlen)
{
	int i;

	for (i = 0; i < cs->n; i++) {
		LIBBPF_OPTS(bpf_kprobe_opts, at_call, .offset = cs->off[i]);
		LIBBPF_OPTS(bpf_kprobe_opts, after_call, .offset = cs->off[i] + CALL_INSN_LEN);

		cs->link[2 * i] = bpf_program__attach_kprobe_opts(entry, cs->caller, &at_call);
		if (!cs->link[2 * i]) {
			refused(cs, i, cs->off[i], err, errlen);
			return -1;
		}
		cs->link[2 * i + 1] = bpf_program__attach_kprobe_opts(exit, cs->caller, &after_call);
		if (!cs->link[2 * i + 1]) {
			refused(cs, i, cs->off[i] + CALL_INSN_LEN, err, errlen);
			return -1;
		}
	}
	return 0;
}

void callsites_detach(struct callsites *cs)
{
	int i;

	for (i = 0; i < 2 * CALLSITES_MAX; i++) {
		bpf_link__destroy(cs->link[i]);
		cs->link[i] = NULL;
	}
}
