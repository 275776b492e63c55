// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "ipctrace.h"
#include "steal.h"
#include "trace.skel.h"

#define MAX_CPUS 1024           /* as in trace.bpf.c */
#define STEAL_UNKNOWN (~0ull)   /* as in trace.bpf.c: a CPU not read yet */

/* Each CPU's steal column of /proc/stat in ns (counted there in USER_HZ ticks). */
static bool proc_stat_steal(__u64 *ns, int ncpus, long hz)
{
	unsigned long long v[8];
	char line[512];
	bool any = false;
	unsigned cpu;
	FILE *f = fopen("/proc/stat", "r");

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		/* "cpuN user nice system idle iowait irq softirq steal ..."; "cpu " is the sum */
		if (strncmp(line, "cpu", 3) || line[3] < '0' || line[3] > '9')
			continue;
		if (sscanf(line + 3, "%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &v[0], &v[1], &v[2],
			   &v[3], &v[4], &v[5], &v[6], &v[7]) == 9 && cpu < (unsigned)ncpus) {
			ns[cpu] = v[7] * (1000000000ull / hz);
			any = true;
		}
	}
	fclose(f);
	return any;
}

/* Each CPU's count now: steal_snapshot, a task iterator, run to its end. Counts of CPUs
 * no task led to are STEAL_UNKNOWN (trace.bpf.c). */
static int snapshot(struct trace_bpf *skel, __u64 *out, int ncpus)
{
	struct bpf_link *link = bpf_program__attach_iter(skel->progs.steal_snapshot, NULL);
	char buf[64];
	int fd, i, err = 0;

	if (!link)
		return -errno;
	memset(skel->bss->steal_seen, 0, sizeof(skel->bss->steal_seen));
	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0)
		err = -errno;
	while (!err && (i = read(fd, buf, sizeof(buf))) != 0)
		if (i < 0 && errno != EINTR)
			err = -errno;
	if (fd >= 0)
		close(fd);
	bpf_link__destroy(link);
	for (i = 0; !err && i < ncpus; i++)
		out[i] = skel->bss->steal_seen[i] ? skel->bss->steal_snap[i] : STEAL_UNKNOWN;
	return err;
}

int steal_begin(struct steal *st, struct trace_bpf *skel, const struct features *ft,
		const char *not_loaded, int ncpus)
{
	int i, err;

	memset(st, 0, sizeof(*st));
	st->ncpus = ncpus > MAX_CPUS ? MAX_CPUS : ncpus;
	st->user_hz = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
	st->start = calloc(st->ncpus, sizeof(__u64));
	st->end = calloc(st->ncpus, sizeof(__u64));
	st->stat_start = calloc(st->ncpus, sizeof(__u64));
	st->stat_end = calloc(st->ncpus, sizeof(__u64));
	if (!st->start || !st->end || !st->stat_start || !st->stat_end)
		return -1;
	st->source = ft->steal;
	snprintf(st->what, sizeof(st->what), "%s", ft->f[F_STEAL].detail);
	if (not_loaded) {
		st->source = STEAL_NONE;
		snprintf(st->what, sizeof(st->what), "none: %s", not_loaded);
	} else if (st->source != STEAL_NONE) {
		if ((err = snapshot(skel, st->start, st->ncpus))) {
			st->source = STEAL_NONE;
			snprintf(st->what, sizeof(st->what), "none: reading it failed (task iterator: %s)",
				 strerror(-err));
		} else {
			for (i = 0; i < st->ncpus; i++)
				skel->bss->cur[i].steal = st->start[i];
			skel->bss->steal_seeded = 1;
		}
	}
	st->stat_ok = proc_stat_steal(st->stat_start, st->ncpus, st->user_hz);
	return 0;
}

void steal_end(struct steal *st, struct trace_bpf *skel)
{
	int err;

	if (st->source != STEAL_NONE && (err = snapshot(skel, st->end, st->ncpus))) {
		st->source = STEAL_NONE;
		snprintf(st->what, sizeof(st->what), "none: reading it at the end failed (task iterator: %s)",
			 strerror(-err));
	}
	st->stat_ok = st->stat_ok && proc_stat_steal(st->stat_end, st->ncpus, st->user_hz);
}

/* Per CPU: b - a (0 where either is unknown or the count went back). */
static void ns_array(FILE *f, const __u64 *a, const __u64 *b, int n, __u64 *total)
{
	int i;

	*total = 0;
	fprintf(f, "[");
	for (i = 0; i < n; i++) {
		__u64 d = b[i] > a[i] && b[i] != STEAL_UNKNOWN ? b[i] - a[i] : 0;

		*total += d;
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)d);
	}
	fprintf(f, "]");
}

/*
 * "steal": {"source": "kvm steal_time: ..." | "kernel_cpustat: ..." | "none: why",
 *           "per_cpu_ns": [...], "total_ns": N, "totals_from": "...",
 *           "proc_stat_ns": [...], "user_hz": 100}
 * per_cpu_ns comes from the programs' source when there is one, else from /proc/stat.
 */
void steal_json(const struct steal *st, FILE *f)
{
	bool own = st->source != STEAL_NONE;
	__u64 total, stat_total;
	const char *c;

	fprintf(f, "\"steal\": {\"source\": \"");
	for (c = st->what; *c; c++)        /* fixed text and strerror: only quotes need care */
		fputc(*c == '"' || *c == '\\' ? '\'' : *c, f);
	fprintf(f, "\", \"per_cpu_ns\": ");
	if (own)
		ns_array(f, st->start, st->end, st->ncpus, &total);
	else if (st->stat_ok)
		ns_array(f, st->stat_start, st->stat_end, st->ncpus, &total);
	else {
		fprintf(f, "null");
		total = 0;
	}
	fprintf(f, ", \"total_ns\": ");
	if (own || st->stat_ok)
		fprintf(f, "%llu", (unsigned long long)total);
	else
		fprintf(f, "null");
	fprintf(f, ", \"totals_from\": \"%s\", \"proc_stat_ns\": ",
		own ? "the run queues at the start and the end" :
		st->stat_ok ? "/proc/stat" : "nowhere: /proc/stat unreadable");
	if (st->stat_ok)
		ns_array(f, st->stat_start, st->stat_end, st->ncpus, &stat_total);
	else
		fprintf(f, "null");
	fprintf(f, ", \"user_hz\": %ld}", st->user_hz);
}

void steal_free(struct steal *st)
{
	free(st->start);
	free(st->end);
	free(st->stat_start);
	free(st->stat_end);
}
