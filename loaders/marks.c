// SPDX-License-Identifier: MIT
/* Iteration markers (see marks.h): the USDT notes checked before loading, the mark
 * programs attached, their names into trace.json. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "ipctrace.h"
#include "json.h"
#include "marks.h"
#include "trace.skel.h"

#define PROVIDER "ipctrace"
#define BEGIN    "iteration_begin"
#define END      "iteration_end"

#if defined(__x86_64__)
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#else
#define MULTIARCH ""
#endif

int marks_add(struct marks *m, bool usdt, const char *arg, char *err, size_t errlen)
{
	struct mark_target *t;
	char *colon;

	if ((usdt ? m->nusdt : m->nuprobe) >= MARKS_MAX) {
		snprintf(err, errlen, "at most %d --%s", MARKS_MAX, usdt ? "usdt" : "uprobe");
		return -1;
	}
	t = usdt ? &m->usdt[m->nusdt] : &m->uprobe[m->nuprobe];
	t->arg = arg;
	t->copy = strdup(arg);
	if (!t->copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!usdt) {
		colon = strrchr(t->copy, ':');
		if (!colon || colon == t->copy || !colon[1]) {
			free(t->copy);
			snprintf(err, errlen, "--uprobe wants BINARY:FUNCTION, not '%s'", arg);
			return -1;
		}
		*colon = '\0';
		t->func = colon + 1;
	}
	if (!t->copy[0]) {
		free(t->copy);
		snprintf(err, errlen, "--usdt wants a BINARY, not ''");
		return -1;
	}
	usdt ? m->nusdt++ : m->nuprobe++;
	return 0;
}

bool marks_any(const struct marks *m)
{
	return m->nusdt || m->nuprobe;
}

static bool search(char *out, size_t len, const char *dirs, const char *name)
{
	const char *d = dirs, *end;

	while (d && *d) {
		end = strchr(d, ':');
		if (!end)
			end = d + strlen(d);
		if (end > d && snprintf(out, len, "%.*s/%s", (int)(end - d), d, name) < (int)len &&
		    access(out, R_OK) == 0)
			return true;
		d = *end ? end + 1 : end;
	}
	return false;
}

/* A path as given; a bare name of a shared library (a ".so" in it) searched where the dynamic
 * linker's default paths and LD_LIBRARY_PATH are, any other bare name in PATH. */
static int resolve(struct mark_target *t, char *err, size_t errlen)
{
	const char *name = t->copy;
	static const char libdirs[] = "/lib/" MULTIARCH ":/usr/lib/" MULTIARCH ":/lib64:/usr/lib64:/lib:/usr/lib";

	if (strchr(name, '/')) {
		if (snprintf(t->path, sizeof(t->path), "%s", name) >= (int)sizeof(t->path)) {
			snprintf(err, errlen, "%s: path too long", name);
			return -1;
		}
		if (access(t->path, R_OK)) {
			snprintf(err, errlen, "cannot read %s: %s", name, strerror(errno));
			return -1;
		}
		return 0;
	}
	if (strstr(name, ".so") ? search(t->path, sizeof(t->path), getenv("LD_LIBRARY_PATH"), name) ||
				  search(t->path, sizeof(t->path), libdirs, name)
				: search(t->path, sizeof(t->path), getenv("PATH"), name))
		return 0;
	snprintf(err, errlen, "cannot find %s (in %s; give its path)", name,
		 strstr(name, ".so") ? "LD_LIBRARY_PATH and the library directories" : "PATH");
	return -1;
}

/* Which of ipctrace:iteration_begin (bit 0) and iteration_end (bit 1) path's .note.stapsdt
 * has; -1 with errno when the file cannot be read, -2 when it is no 64-bit ELF file. */
static int usdt_notes(const char *path)
{
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const char *strtab;
	struct stat st;
	void *map;
	int fd, found = 0;
	size_t i;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return -2;
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -1;
	eh = map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shoff + (__u64)eh->e_shnum * sizeof(Elf64_Shdr) > (__u64)st.st_size ||
	    eh->e_shstrndx >= eh->e_shnum) {
		munmap(map, st.st_size);
		return -2;
	}
	sh = (const Elf64_Shdr *)((const char *)map + eh->e_shoff);
	if (sh[eh->e_shstrndx].sh_offset + sh[eh->e_shstrndx].sh_size > (__u64)st.st_size) {
		munmap(map, st.st_size);
		return -2;
	}
	strtab = (const char *)map + sh[eh->e_shstrndx].sh_offset;
	for (i = 0; i < eh->e_shnum; i++) {
		const char *p, *end;

		if (sh[i].sh_type != SHT_NOTE || sh[i].sh_name >= sh[eh->e_shstrndx].sh_size ||
		    strncmp(strtab + sh[i].sh_name, ".note.stapsdt", sh[eh->e_shstrndx].sh_size - sh[i].sh_name) ||
		    sh[i].sh_offset + sh[i].sh_size > (__u64)st.st_size)
			continue;
		p = (const char *)map + sh[i].sh_offset;
		end = p + sh[i].sh_size;
		while (p + sizeof(Elf64_Nhdr) <= end) {
			const Elf64_Nhdr *nh = (const Elf64_Nhdr *)p;
			const char *name = p + sizeof(*nh);
			const char *desc = name + ((nh->n_namesz + 3) & ~3u);
			const char *next = desc + ((nh->n_descsz + 3) & ~3u);

			if (next > end || next <= p)
				break;
			/* desc: pc, base, semaphore (3 addresses), then provider\0name\0args\0 */
			if (nh->n_type == 3 && nh->n_namesz == 8 && !memcmp(name, "stapsdt", 8) &&
			    nh->n_descsz > 24 && memchr(desc + 24, 0, nh->n_descsz - 24)) {
				const char *prov = desc + 24, *probe = prov + strlen(prov) + 1;

				if (probe < desc + nh->n_descsz && memchr(probe, 0, desc + nh->n_descsz - probe) &&
				    !strcmp(prov, PROVIDER))
					found |= !strcmp(probe, BEGIN) ? 1 : !strcmp(probe, END) ? 2 : 0;
			}
			p = next;
		}
	}
	munmap(map, st.st_size);
	return found;
}

int marks_check(struct marks *m, char *err, size_t errlen)
{
	int i, n;

	for (i = 0; i < m->nusdt; i++) {
		if (resolve(&m->usdt[i], err, errlen))
			return -1;
		n = usdt_notes(m->usdt[i].path);
		if (n == -1) {
			snprintf(err, errlen, "cannot read %s: %s", m->usdt[i].arg, strerror(errno));
			return -1;
		}
		if (n != 3) {
			snprintf(err, errlen, "%s has no ipctrace markers (USDT " PROVIDER ":" BEGIN "/" END ")",
				 m->usdt[i].arg);
			return -1;
		}
	}
	for (i = 0; i < m->nuprobe; i++)
		if (resolve(&m->uprobe[i], err, errlen))
			return -1;
	return 0;
}

void marks_choose(const struct marks *m, struct trace_bpf *skel)
{
	bpf_program__set_autoload(skel->progs.mark_begin_usdt, m->nusdt > 0);
	bpf_program__set_autoload(skel->progs.mark_end_usdt, m->nusdt > 0);
	bpf_program__set_autoload(skel->progs.mark_begin_uprobe, m->nuprobe > 0);
	bpf_program__set_autoload(skel->progs.mark_end_uretprobe, m->nuprobe > 0);
}

static int add_link(struct marks *m, struct bpf_link *l, const char *fmt, const char *a, const char *b)
{
	char desc[PATH_MAX + 128];

	snprintf(desc, sizeof(desc), fmt, a, b);
	m->links[m->nlinks++] = l;
	m->probes[m->nprobes] = strdup(desc);
	if (!m->probes[m->nprobes])
		return -1;
	m->nprobes++;
	return 0;
}

int marks_attach(struct marks *m, struct trace_bpf *skel, char *err, size_t errlen)
{
	struct bpf_link *l;
	int i, j;

	for (i = 0; i < m->nusdt; i++) {
		for (j = 0; j < 2; j++) {
			const char *name = j ? END : BEGIN;

			l = bpf_program__attach_usdt(j ? skel->progs.mark_end_usdt : skel->progs.mark_begin_usdt, -1,
						     m->usdt[i].path, PROVIDER, name, NULL);
			if (!l) {
				snprintf(err, errlen, "failed to attach USDT " PROVIDER ":%s in %s: %s", name,
					 m->usdt[i].arg, strerror(errno));
				return -1;
			}
			if (add_link(m, l, "usdt %s " PROVIDER ":%s", m->usdt[i].arg, name))
				goto oom;
		}
	}
	for (i = 0; i < m->nuprobe; i++) {
		for (j = 0; j < 2; j++) {
			LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = m->uprobe[i].func, .retprobe = j == 1);

			l = bpf_program__attach_uprobe_opts(j ? skel->progs.mark_end_uretprobe
							      : skel->progs.mark_begin_uprobe,
							    -1, m->uprobe[i].path, 0, &opts);
			if (!l && errno == ENOENT) {
				snprintf(err, errlen, "%s not found in %s", m->uprobe[i].func, m->uprobe[i].copy);
				return -1;
			}
			if (!l) {
				snprintf(err, errlen, "failed to attach a uprobe to %s in %s: %s", m->uprobe[i].func,
					 m->uprobe[i].copy, strerror(errno));
				return -1;
			}
			if (add_link(m, l, j ? "uretprobe %s:%s" : "uprobe %s:%s", m->uprobe[i].copy, m->uprobe[i].func))
				goto oom;
		}
	}
	return 0;
oom:
	snprintf(err, errlen, "out of memory");
	return -1;
}

void marks_detach(struct marks *m)
{
	while (m->nlinks > 0)
		bpf_link__destroy(m->links[--m->nlinks]);
}

void marks_json(const struct marks *m, const struct trace_bpf *skel, __u64 count, FILE *f)
{
	int fd = bpf_map__fd(skel->maps.mark_names), i, n = 0;
	char name[MARK_NAME_LEN];
	__u64 key, next;
	bool started = false;

	if (!marks_any(m)) {
		fputs("null", f);
		return;
	}
	fputs("{\"names\": {", f);
	while (fd >= 0 && n < MARK_NAMES_MAX && !bpf_map_get_next_key(fd, started ? &key : NULL, &next)) {
		started = true;
		key = next;
		if (bpf_map_lookup_elem(fd, &key, name))
			continue;
		fprintf(f, "%s\"%llu\": ", n++ ? ", " : "", (unsigned long long)key);
		json_str(f, name, sizeof(name));
	}
	fputs("}, \"probes\": [", f);
	for (i = 0; i < m->nprobes; i++) {
		fputs(i ? ", " : "", f);
		json_str(f, m->probes[i], strlen(m->probes[i]));
	}
	fprintf(f, "], \"count\": %llu}", (unsigned long long)count);
}

void marks_free(struct marks *m)
{
	int i;

	for (i = 0; i < m->nprobes; i++)
		free(m->probes[i]);
	for (i = 0; i < m->nusdt; i++)
		free(m->usdt[i].copy);
	for (i = 0; i < m->nuprobe; i++)
		free(m->uprobe[i].copy);
	m->nprobes = m->nusdt = m->nuprobe = 0;
}
