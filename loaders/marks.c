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

struct elf_map {
	void *map;
	size_t size;
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	const char *shstr;
	__u64 shstrsz;
};

/* path mapped, its section headers checked: 0, -1 with errno when the file cannot be read,
 * -2 when it is no 64-bit ELF file. */
static int elf_open(const char *path, struct elf_map *e)
{
	struct stat st;
	int fd, err;

	memset(e, 0, sizeof(*e));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st)) {
		err = errno;
		close(fd);
		errno = err;
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
		close(fd);
		return -2;
	}
	e->map = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (e->map == MAP_FAILED)
		return -1;
	e->size = st.st_size;
	e->eh = e->map;
	if (memcmp(e->eh->e_ident, ELFMAG, SELFMAG) || e->eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    e->eh->e_shoff + (__u64)e->eh->e_shnum * sizeof(Elf64_Shdr) > e->size ||
	    e->eh->e_shstrndx >= e->eh->e_shnum)
		goto bad;
	e->sh = (const Elf64_Shdr *)((const char *)e->map + e->eh->e_shoff);
	if (e->sh[e->eh->e_shstrndx].sh_offset + e->sh[e->eh->e_shstrndx].sh_size > e->size)
		goto bad;
	e->shstr = (const char *)e->map + e->sh[e->eh->e_shstrndx].sh_offset;
	e->shstrsz = e->sh[e->eh->e_shstrndx].sh_size;
	return 0;
bad:
	munmap(e->map, e->size);
	e->map = NULL;
	return -2;
}

static void elf_close(struct elf_map *e)
{
	if (e->map)
		munmap(e->map, e->size);
	e->map = NULL;
}

static bool section_is(const struct elf_map *e, int i, const char *name)
{
	return e->sh[i].sh_name < e->shstrsz &&
	       !strncmp(e->shstr + e->sh[i].sh_name, name, e->shstrsz - e->sh[i].sh_name) &&
	       e->sh[i].sh_offset + (e->sh[i].sh_type == SHT_NOBITS ? 0 : e->sh[i].sh_size) <= e->size;
}

/* The bytes at virtual address addr (from the section that holds them, up to its end) into
 * t's sites. */
static void add_site(const struct elf_map *e, __u64 addr, struct mark_target *t)
{
	char *hex;
	__u64 n;
	int i, k;

	if (t->nsites >= SITES_MAX)
		return;
	hex = t->sites[t->nsites++];
	hex[0] = '\0';
	for (i = 0; i < e->eh->e_shnum; i++) {
		const Elf64_Shdr *h = &e->sh[i];

		if (h->sh_type != SHT_PROGBITS || !(h->sh_flags & SHF_ALLOC) || addr < h->sh_addr ||
		    addr >= h->sh_addr + h->sh_size || h->sh_offset + h->sh_size > e->size)
			continue;
		n = h->sh_addr + h->sh_size - addr;
		for (k = 0; k < SITE_BYTES && k < (int)n; k++)
			sprintf(hex + 2 * k, "%02x", ((const unsigned char *)e->map)[h->sh_offset + addr - h->sh_addr + k]);
		return;
	}
}

/* Which of ipctrace:iteration_begin (bit 0) and iteration_end (bit 1) path's .note.stapsdt
 * has, their sites into t; -1 with errno when the file cannot be read, -2 when it is no
 * 64-bit ELF file. */
static int usdt_notes(const char *path, struct mark_target *t)
{
	struct elf_map e;
	__u64 base_addr = 0;
	bool has_base = false;
	int found = 0, rc, i;

	rc = elf_open(path, &e);
	if (rc)
		return rc;
	for (i = 0; i < e.eh->e_shnum; i++)
		if (section_is(&e, i, ".stapsdt.base")) {
			base_addr = e.sh[i].sh_addr;
			has_base = true;
		}
	for (i = 0; i < e.eh->e_shnum; i++) {
		const char *p, *end;

		if (e.sh[i].sh_type != SHT_NOTE || !section_is(&e, i, ".note.stapsdt"))
			continue;
		p = (const char *)e.map + e.sh[i].sh_offset;
		end = p + e.sh[i].sh_size;
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
				int bit = 0;

				if (probe < desc + nh->n_descsz && memchr(probe, 0, desc + nh->n_descsz - probe) &&
				    !strcmp(prov, PROVIDER))
					bit = !strcmp(probe, BEGIN) ? 1 : !strcmp(probe, END) ? 2 : 0;
				if (bit) {
					__u64 pc, base;

					memcpy(&pc, desc, 8);
					memcpy(&base, desc + 8, 8);
					/* a prelinked object's notes say where .stapsdt.base was then */
					add_site(&e, has_base ? pc + base_addr - base : pc, t);
				}
				found |= bit;
			}
			p = next;
		}
	}
	elf_close(&e);
	return found;
}

/* The first bytes of func in path's symbol tables into t's sites ("" if not found: libbpf
 * may still resolve it, the analysis then says the kind is unknown). */
static void func_site(const char *path, struct mark_target *t)
{
	struct elf_map e;
	int i;

	if (elf_open(path, &e))
		return;
	for (i = 0; i < e.eh->e_shnum && !t->nsites; i++) {
		const Elf64_Shdr *h = &e.sh[i];
		const Elf64_Sym *sym;
		const char *str;
		__u64 n, k, strsz;

		if ((h->sh_type != SHT_SYMTAB && h->sh_type != SHT_DYNSYM) || h->sh_link >= e.eh->e_shnum ||
		    h->sh_offset + h->sh_size > e.size || e.sh[h->sh_link].sh_offset + e.sh[h->sh_link].sh_size > e.size)
			continue;
		sym = (const Elf64_Sym *)((const char *)e.map + h->sh_offset);
		n = h->sh_size / sizeof(*sym);
		str = (const char *)e.map + e.sh[h->sh_link].sh_offset;
		strsz = e.sh[h->sh_link].sh_size;
		for (k = 0; k < n; k++)
			if ((ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC || ELF64_ST_TYPE(sym[k].st_info) == STT_GNU_IFUNC) &&
			    sym[k].st_value && sym[k].st_name < strsz &&
			    !strncmp(str + sym[k].st_name, t->func, strsz - sym[k].st_name)) {
				add_site(&e, sym[k].st_value, t);
				break;
			}
	}
	elf_close(&e);
	if (!t->nsites)
		t->sites[t->nsites++][0] = '\0';
}

int marks_check(struct marks *m, char *err, size_t errlen)
{
	int i, n;

	for (i = 0; i < m->nusdt; i++) {
		if (resolve(&m->usdt[i], err, errlen))
			return -1;
		n = usdt_notes(m->usdt[i].path, &m->usdt[i]);
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
	for (i = 0; i < m->nuprobe; i++) {
		if (resolve(&m->uprobe[i], err, errlen))
			return -1;
		func_site(m->uprobe[i].path, &m->uprobe[i]);
	}
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

static bool cal_link(struct marks *m, struct bpf_link *l, const char *what)
{
	if (!l) {
		snprintf(m->cal_error, sizeof(m->cal_error), "cannot attach to %s in %s: %s", what, m->calibrate,
			 strerror(errno));
		return false;
	}
	m->links[m->nlinks++] = l;
	m->cal_probes[m->ncal] = strdup(what);
	if (!m->cal_probes[m->ncal]) {
		snprintf(m->cal_error, sizeof(m->cal_error), "out of memory");
		return false;
	}
	m->ncal++;
	return true;
}

/* The calibration's probes, made like the targets' (the same programs, a function's entry
 * probe attached before its return probe, as below); all or none. */
static void attach_calibration(struct marks *m, struct trace_bpf *skel)
{
	static const char *const fns[] = { "ipcbench_probe_cal_fn", "ipcbench_probe_cal_fn_clock" };
	char what[96];
	int j, k, first = m->nlinks;
	bool ok = true;

	if (!m->calibrate)
		return;
	for (j = 0; ok && m->nusdt && j < 2; j++) {
		snprintf(what, sizeof(what), "usdt ipctrace_cal:%s", j ? "end" : "begin");
		ok = cal_link(m, bpf_program__attach_usdt(j ? skel->progs.mark_end_usdt : skel->progs.mark_begin_usdt, -1,
							  m->calibrate, "ipctrace_cal", j ? "end" : "begin", NULL), what);
	}
	for (k = 0; ok && m->nuprobe && k < 2; k++)
		for (j = 0; ok && j < 2; j++) {
			LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = fns[k], .retprobe = j == 1);

			snprintf(what, sizeof(what), "%s %s", j ? "uretprobe" : "uprobe", fns[k]);
			ok = cal_link(m, bpf_program__attach_uprobe_opts(j ? skel->progs.mark_end_uretprobe
									   : skel->progs.mark_begin_uprobe,
									 -1, m->calibrate, 0, &opts), what);
		}
	if (ok)
		return;
	while (m->nlinks > first)
		bpf_link__destroy(m->links[--m->nlinks]);
	while (m->ncal > 0)
		free(m->cal_probes[--m->ncal]);
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
	attach_calibration(m, skel);
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
	fputs("], \"sites\": [", f);
	for (i = 0; i < m->nusdt + m->nuprobe; i++) {
		const struct mark_target *t = i < m->nusdt ? &m->usdt[i] : &m->uprobe[i - m->nusdt];

		fprintf(f, "%s{\"kind\": \"%s\", \"target\": ", i ? ", " : "", i < m->nusdt ? "usdt" : "uprobe");
		json_str(f, t->arg, strlen(t->arg));
		fputs(", \"bytes\": [", f);
		for (n = 0; n < t->nsites; n++) {
			fputs(n ? ", " : "", f);
			json_str(f, t->sites[n], strlen(t->sites[n]));
		}
		fputs("]}", f);
	}
	fputs("], \"calibration\": ", f);
	if (m->calibrate) {
		fputs("{\"binary\": ", f);
		json_str(f, m->calibrate, strlen(m->calibrate));
		fputs(", \"probes\": [", f);
		for (i = 0; i < m->ncal; i++) {
			fputs(i ? ", " : "", f);
			json_str(f, m->cal_probes[i], strlen(m->cal_probes[i]));
		}
		fputs("], \"error\": ", f);
		if (m->cal_error[0])
			json_str(f, m->cal_error, strlen(m->cal_error));
		else
			fputs("null", f);
		fputs("}", f);
	} else {
		fputs("null", f);
	}
	fprintf(f, ", \"count\": %llu}", (unsigned long long)count);
}

void marks_free(struct marks *m)
{
	int i;

	for (i = 0; i < m->nprobes; i++)
		free(m->probes[i]);
	for (i = 0; i < m->ncal; i++)
		free(m->cal_probes[i]);
	m->ncal = 0;
	for (i = 0; i < m->nusdt; i++)
		free(m->usdt[i].copy);
	for (i = 0; i < m->nuprobe; i++)
		free(m->uprobe[i].copy);
	m->nprobes = m->nusdt = m->nuprobe = 0;
}
