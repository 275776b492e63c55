// SPDX-License-Identifier: MIT
/* ipctrace-loader --doctor: the features found and how each probe would attach, as JSON. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <bpf/btf.h>
#include "doctor.h"
#include "json.h"
#include "probes.h"

#define UPROBE_TYPE "/sys/bus/event_source/devices/uprobe/type"
#define UPROBE_ON "/bin/true"

/* The file offset of an ELF64 executable's entry point, through its PT_LOAD segments; -1. */
static long entry_offset(const char *path)
{
	Elf64_Ehdr eh;
	long off = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (pread(fd, &eh, sizeof(eh), 0) == sizeof(eh) && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64) {
		for (int i = 0; i < eh.e_phnum && off < 0; i++) {
			Elf64_Phdr ph;

			if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + (Elf64_Off)i * eh.e_phentsize)) != sizeof(ph))
				break;
			if (ph.p_type == PT_LOAD && eh.e_entry >= ph.p_vaddr && eh.e_entry < ph.p_vaddr + ph.p_filesz)
				off = (long)(eh.e_entry - ph.p_vaddr + ph.p_offset);
		}
	}
	close(fd);
	return off;
}

/* Whether the kernel takes a uprobe (trace --iteration-func, --markers), tried for real with
 * the tracer's rights: perf_event_open of the uprobe PMU on /bin/true's entry, for this
 * process only, closed at once. */
static void uprobe_json(FILE *out)
{
	struct perf_event_attr attr = { .size = sizeof(attr) };
	char detail[256];
	unsigned int type;
	bool ok = false;
	FILE *f = fopen(UPROBE_TYPE, "re");
	long off;
	int fd;

	if (!f || fscanf(f, "%u", &type) != 1) {
		snprintf(detail, sizeof(detail), "no uprobe PMU (%s): kernel built without CONFIG_UPROBE_EVENTS", UPROBE_TYPE);
	} else if ((off = entry_offset(UPROBE_ON)) < 0) {
		snprintf(detail, sizeof(detail), "cannot read %s's entry point to try one", UPROBE_ON);
	} else {
		attr.type = type;
		attr.config1 = (uint64_t)(uintptr_t)UPROBE_ON;
		attr.config2 = (uint64_t)off;
		fd = (int)syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
		ok = fd >= 0;
		if (ok) {
			close(fd);
			snprintf(detail, sizeof(detail), "a uprobe on %s's entry opened (uprobe PMU type %u)", UPROBE_ON, type);
		} else {
			snprintf(detail, sizeof(detail), "perf_event_open of a uprobe on %s: %s", UPROBE_ON, strerror(errno));
		}
	}
	if (f)
		fclose(f);
	fprintf(out, "{\"ok\": %s, \"detail\": ", ok ? "true" : "false");
	json_str(out, detail, SIZE_MAX);
	fputc('}', out);
}

int doctor(const struct features *ft)
{
	struct probe_set ps;
	struct btf *btf = btf__load_vmlinux_btf();
	char err[256] = "";
	int rc;

	rc = probes_choose(&ps, NULL, ft, btf, NULL, err, sizeof(err));
	btf__free(btf);
	printf("{\"features\": ");
	features_json(ft, stdout);
	printf(",\n \"attach\": ");
	probes_json(&ps, stdout);
	printf(",\n \"uprobe\": ");
	uprobe_json(stdout);
	printf(",\n \"possible\": %s, \"why_impossible\": ", !ft->why_impossible[0] && !rc ? "true" : "false");
	json_str(stdout, ft->why_impossible[0] ? ft->why_impossible : err, SIZE_MAX);
	printf("}\n");
	return !ft->why_impossible[0] && !rc ? 0 : 2;
}
