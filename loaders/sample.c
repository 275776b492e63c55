// SPDX-License-Identifier: MIT
/*
 * User side of the stack sampler (see sampler.h): per-CPU perf_event timers
 * running bpf/sample.bpf.c, a thread that snapshots /proc/PID/maps of every
 * workload process while it lives (user stacks are symbolised afterwards), and
 * the writer of samples.json.
 */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "outfile.h"
#include "sample.h"
#include "sample.skel.h"
#include "sampler.h"
#include "json.h"

#define MAX_PROCS   64
#define MAPS_MAX    (256 << 10)

struct proc_maps {
	pid_t pid;
	char exe[PATH_MAX];
	char *maps;             /* executable mappings: "start end offset path" lines */
};

struct sampler {
	struct sample_bpf *skel;
	int ncpus;
	int *perf_fds;
	struct bpf_link **links;
	unsigned int hz;
	bool cycles;            /* sampling event: PMU cycles, else the cpu-clock timer */
	pthread_t snapper;
	bool snapper_running;
	atomic_bool stop;
	pthread_mutex_t lock;
	struct proc_maps procs[MAX_PROCS];
	int nprocs;
};

static void errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* Executable mappings of pid as "start end offset path" lines, or NULL if it is gone. */
static char *read_exec_maps(pid_t pid)
{
	char path[64], line[PATH_MAX + 128], *out;
	size_t used = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	out = calloc(1, MAPS_MAX);
	while (out && fgets(line, sizeof(line), f)) {
		unsigned long start, end, off;
		char perms[8], file[PATH_MAX] = "";
		int n;

		if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095[^\n]", &start, &end, perms, &off, file) < 4)
			continue;
		if (perms[2] != 'x')
			continue;
		n = snprintf(out + used, MAPS_MAX - used, "%lx %lx %lx %s\n", start, end, off, file);
		if (n < 0 || (size_t)n >= MAPS_MAX - used)
			break;
		used += n;
	}
	fclose(f);
	return out;
}

/* Snapshot the maps of every followed process that is new or has exec'd since. */
static void snap_all(struct sampler *s)
{
	int fd = bpf_map__fd(s->skel->maps.tgids);
	__u32 key, next, *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		char link[64], exe[PATH_MAX];
		ssize_t n;
		int i;

		key = next;
		prev = &key;
		snprintf(link, sizeof(link), "/proc/%u/exe", key);
		n = readlink(link, exe, sizeof(exe) - 1);
		if (n <= 0)
			continue;
		exe[n] = '\0';
		pthread_mutex_lock(&s->lock);
		for (i = 0; i < s->nprocs && s->procs[i].pid != (pid_t)key; i++)
			;
		if (i < MAX_PROCS && (i == s->nprocs || strcmp(s->procs[i].exe, exe))) {
			char *maps = read_exec_maps(key);

			if (maps) {
				free(s->procs[i].maps);
				s->procs[i].pid = key;
				snprintf(s->procs[i].exe, sizeof(s->procs[i].exe), "%s", exe);
				s->procs[i].maps = maps;
				if (i == s->nprocs)
					s->nprocs++;
			}
		}
		pthread_mutex_unlock(&s->lock);
	}
}

/* The processes exit before the end of the run, so their maps are taken while they live:
 * often at first (the child is still the loader before it execs), then every 50 ms. */
static void *snapper(void *arg)
{
	struct sampler *s = arg;
	struct timespec ts = { 0, 5 * 1000 * 1000 };
	int round = 0;

	while (!atomic_load(&s->stop)) {
		snap_all(s);
		ts.tv_nsec = (++round < 40 ? 5 : 50) * 1000 * 1000;
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Cycles sample through the PMU's NMI and so see inside code that runs with interrupts
 * off; without a PMU (many VMs) the cpu-clock timer does, and such code is charged to
 * where interrupts come back on (e.g. _raw_spin_unlock_irqrestore). */
static int open_perf_timer(int cpu, unsigned int hz, bool cycles)
{
	struct perf_event_attr attr = {
		.type = cycles ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE,
		.config = cycles ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_SW_CPU_CLOCK,
		.size = sizeof(attr),
		.freq = 1,
		.sample_freq = hz,
	};

	return syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

int sampler_follow(struct sampler *s, pid_t tgid)
{
	__u32 key = tgid;
	__u8 one = 1;

	return bpf_map_update_elem(bpf_map__fd(s->skel->maps.tgids), &key, &one, BPF_ANY) ? -errno : 0;
}

struct sampler *sampler_start(pid_t root_tgid, unsigned int hz, bool tp_btf, unsigned int only_uid,
			      char *err, size_t errlen)
{
	struct sampler *s = calloc(1, sizeof(*s));
	__u32 tgid = root_tgid;
	__u8 one = 1;
	int cpu, e;

	if (!s) {
		errf(err, errlen, "sampler: out of memory");
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->hz = hz;
	s->ncpus = libbpf_num_possible_cpus();
	if (s->ncpus <= 0) {
		errf(err, errlen, "sampler: cannot count CPUs: %s", strerror(-s->ncpus));
		goto fail;
	}
	s->perf_fds = malloc(s->ncpus * sizeof(int));
	s->links = calloc(s->ncpus, sizeof(*s->links));
	if (!s->perf_fds || !s->links) {
		errf(err, errlen, "sampler: out of memory");
		goto fail;
	}
	for (cpu = 0; cpu < s->ncpus; cpu++)
		s->perf_fds[cpu] = -1;

	s->skel = sample_bpf__open();
	if (!s->skel) {
		errf(err, errlen, "sampler: open BPF skeleton: %s", strerror(errno));
		goto fail;
	}
	s->skel->rodata->only_uid = only_uid;
	bpf_program__set_autoload(s->skel->progs.switch_btf, tp_btf);
	bpf_program__set_autoload(s->skel->progs.fork_btf, tp_btf);
	bpf_program__set_autoload(s->skel->progs.switch_raw, !tp_btf);
	bpf_program__set_autoload(s->skel->progs.fork_raw, !tp_btf);
	e = sample_bpf__load(s->skel);
	if (e) {
		errf(err, errlen, "sampler: load BPF programs: %s", strerror(-e));
		goto fail;
	}
	e = root_tgid > 0 ? bpf_map_update_elem(bpf_map__fd(s->skel->maps.tgids), &tgid, &one, BPF_ANY) : 0;
	if (e) {
		errf(err, errlen, "sampler: follow pid %d: %s", root_tgid, strerror(errno));
		goto fail;
	}
	e = sample_bpf__attach(s->skel);
	if (e) {
		errf(err, errlen, "sampler: attach sched_switch/sched_process_fork: %s", strerror(-e));
		goto fail;
	}
	s->cycles = true;
	for (cpu = 0; cpu < s->ncpus; cpu++) {
		s->perf_fds[cpu] = open_perf_timer(cpu, hz, s->cycles);
		if (s->perf_fds[cpu] < 0 && s->cycles && cpu == 0 && (errno == ENOENT || errno == EOPNOTSUPP)) {
			s->cycles = false;      /* no PMU here */
			s->perf_fds[cpu] = open_perf_timer(cpu, hz, false);
		}
		if (s->perf_fds[cpu] < 0) {
			if (errno == ENODEV)    /* possible but offline CPU */
				continue;
			errf(err, errlen, "sampler: perf_event_open on cpu %d at %u Hz: %s", cpu, hz, strerror(errno));
			goto fail;
		}
		s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.sample_oncpu, s->perf_fds[cpu]);
		if (!s->links[cpu]) {
			errf(err, errlen, "sampler: attach perf_event on cpu %d: %s", cpu, strerror(errno));
			goto fail;
		}
	}
	e = pthread_create(&s->snapper, NULL, snapper, s);
	if (e) {
		errf(err, errlen, "sampler: start maps snapshot thread: %s", strerror(e));
		goto fail;
	}
	s->snapper_running = true;
	return s;
fail:
	sampler_destroy(s);
	return NULL;
}

static void detach(struct sampler *s)
{
	int cpu;

	if (s->snapper_running) {
		atomic_store(&s->stop, true);
		pthread_join(s->snapper, NULL);
		s->snapper_running = false;
	}
	for (cpu = 0; s->links && cpu < s->ncpus; cpu++) {
		bpf_link__destroy(s->links[cpu]);
		s->links[cpu] = NULL;
	}
	for (cpu = 0; s->perf_fds && cpu < s->ncpus; cpu++) {
		if (s->perf_fds[cpu] >= 0)
			close(s->perf_fds[cpu]);
		s->perf_fds[cpu] = -1;
	}
	if (s->skel)
		sample_bpf__detach(s->skel);
}

/* A stack as a JSON array of addresses, innermost first; [] when the id is not a stack. */
static void json_stack(FILE *f, int stack_fd, __s32 id)
{
	__u64 ips[SAMPLE_MAX_DEPTH] = {};
	__u32 key = id;

	fputc('[', f);
	if (id >= 0 && bpf_map_lookup_elem(stack_fd, &key, ips) == 0) {
		for (int i = 0; i < SAMPLE_MAX_DEPTH && ips[i]; i++)
			fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)ips[i]);
	}
	fputc(']', f);
}

static void json_entries(FILE *f, int map_fd, int stack_fd, bool offcpu)
{
	struct sample_key key, *prev = NULL;
	struct sample_val val;
	bool first = true;

	while (bpf_map_get_next_key(map_fd, prev, &key) == 0) {
		prev = &key;
		if (bpf_map_lookup_elem(map_fd, &key, &val))
			continue;
		fprintf(f, "%s\n  {\"pid\":%u,\"tid\":%u,\"comm\":", first ? "" : ",", key.tgid, key.tid);
		json_str(f, key.comm, sizeof(key.comm));
		/* A stack id below zero other than -EFAULT (none of that kind) is a stack the kernel lost. */
		fprintf(f, ",\"lost\":%s,\"kstack\":",
			(key.kstack < 0 && key.kstack != -EFAULT) || (key.ustack < 0 && key.ustack != -EFAULT) ?
			"true" : "false");
		json_stack(f, stack_fd, key.kstack);
		fprintf(f, ",\"ustack\":");
		json_stack(f, stack_fd, key.ustack);
		fprintf(f, ",\"count\":%llu", (unsigned long long)val.count);
		if (offcpu)
			fprintf(f, ",\"ns\":%llu,\"blocked\":%s", (unsigned long long)val.ns,
				key.blocked ? "true" : "false");
		fputc('}', f);
		first = false;
	}
}

int sampler_finish(struct sampler *s, int dirfd, char *err, size_t errlen)
{
	int stack_fd = bpf_map__fd(s->skel->maps.stacks);
	struct sample_stats *st = &s->skel->bss->stats;
	char tmp[64], boot_id[64] = "";
	FILE *f;
	int i, rc;

	detach(s);
	snap_all(s);    /* processes that still live: nothing newer to lose */
	f = fopen("/proc/sys/kernel/random/boot_id", "re");
	if (f) {
		if (fgets(boot_id, sizeof(boot_id), f))
			boot_id[strcspn(boot_id, "\n")] = '\0';
		fclose(f);
	}
	f = outfile_create(dirfd, "samples.json", tmp, sizeof(tmp));
	if (!f) {
		errf(err, errlen, "sampler: create samples.json: %s", strerror(errno));
		return -errno;
	}
	fprintf(f, "{\"hz\":%u,\"event\":\"%s\",\"boot_id\":", s->hz, s->cycles ? "cpu-cycles" : "cpu-clock");
	json_str(f, boot_id, sizeof(boot_id));
	fprintf(f, ",\n\"stats\":{\"samples\":%llu,\"lost_samples\":%llu,\"lost_switches\":%llu,\"lost_ns\":%llu},",
		(unsigned long long)st->samples, (unsigned long long)st->lost_samples,
		(unsigned long long)st->lost_switches, (unsigned long long)st->lost_ns);
	fprintf(f, "\n\"maps\":{");
	for (i = 0; i < s->nprocs; i++) {
		char *line = s->procs[i].maps, *nl;
		bool first = true;

		fprintf(f, "%s\n \"%d\":[", i ? "," : "", s->procs[i].pid);
		for (; line && *line; line = nl + 1) {
			unsigned long start, end, off;
			char file[PATH_MAX] = "";

			nl = strchr(line, '\n');
			if (!nl)
				break;
			*nl = '\0';
			if (sscanf(line, "%lx %lx %lx %4095[^\n]", &start, &end, &off, file) >= 3) {
				fprintf(f, "%s{\"start\":%lu,\"end\":%lu,\"offset\":%lu,\"path\":", first ? "" : ",",
					start, end, off);
				json_str(f, file, sizeof(file));
				fputc('}', f);
				first = false;
			}
			*nl = '\n';
		}
		fputc(']', f);
	}
	fprintf(f, "},\n\"oncpu\":[");
	json_entries(f, bpf_map__fd(s->skel->maps.oncpu), stack_fd, false);
	fprintf(f, "],\n\"offcpu\":[");
	json_entries(f, bpf_map__fd(s->skel->maps.offcpu), stack_fd, true);
	fprintf(f, "]}\n");
	rc = outfile_commit(dirfd, f, tmp, "samples.json");
	if (rc)
		errf(err, errlen, "sampler: write samples.json: %s", strerror(-rc));
	return rc;
}

void sampler_destroy(struct sampler *s)
{
	if (!s)
		return;
	detach(s);
	free(s->links);
	free(s->perf_fds);
	sample_bpf__destroy(s->skel);
	for (int i = 0; i < s->nprocs; i++)
		free(s->procs[i].maps);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
