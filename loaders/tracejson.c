// SPDX-License-Identifier: MIT
/* DIR/trace.json: what the tracer saw and lost, how each probe attached, the tasks it
 * followed and their names, its own threads, the hypervisor's steal, the features. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/utsname.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "json.h"
#include "marks.h"
#include "outfile.h"
#include "tracejson.h"
#include "trace.skel.h"

#define MAX_CPUS IPT_MAX_CPUS

static int cmp_u32(const void *a, const void *b)
{
	__u32 x = *(const __u32 *)a, y = *(const __u32 *)b;

	return x < y ? -1 : x > y;
}

/* Was tid recorded, by its followed[] mark? With --only-uid --all-cpus, the tasks that are the
 * user's (FOLLOW_YES) and those that were and took another user's rights; otherwise any mark
 * (--all-cpus: but the tracer's). */
static bool recorded(const struct trace_facts *t, __u32 tid, __u8 mark)
{
	bool all = !strcmp(t->mode, "all");

	if (t->only_uid < 0 || !all)
		return all ? mark != FOLLOW_EXCLUDED : mark != 0;
	if (mark == FOLLOW_YES)
		return true;
	for (int i = 0; i < t->nleft; i++)
		if (t->left[i].tid == tid)
			return true;
	return false;
}

/* Followed tids from the kernel's table; process ids from the fork records and those followed
 * from the start; both with the root (the CMD; none: 0). */
static void write_ids(FILE *f, const struct trace_bpf *skel, pid_t root, struct sink *s,
		      const struct trace_facts *t)
{
	const __u8 *fl = skel->bss->followed;
	size_t n = sizeof(skel->bss->followed), i, nfl = 0, np;
	int tasks_fd = bpf_map__fd(skel->maps.tasks);
	struct task_name tn;
	__u32 *pids;
	const char *sep = "";

	for (i = 1; i < n; i++)
		nfl += fl[i] != 0;
	np = s->npids + t->nprocs;
	pids = malloc((np + nfl + 1) * sizeof(*pids));

	fprintf(f, "\"tids\": [");
	if (root > 0) {
		fprintf(f, "%d", root);
		sep = ", ";
	}
	if (!strcmp(t->mode, "all")) {
		/* --all-cpus: every task a record named (the tasks map), but the tracer's */
		__u32 key, next;
		bool started = false;

		while (!bpf_map_get_next_key(tasks_fd, started ? &key : NULL, &next)) {
			started = true;
			key = next;
			if (key && key < n && recorded(t, key, fl[key]) && (pid_t)key != root) {
				fprintf(f, "%s%u", sep, key);
				sep = ", ";
			}
		}
	} else {
		for (i = 1; i < n; i++)
			if (fl[i] && (pid_t)i != root) {
				fprintf(f, "%s%zu", sep, i);
				sep = ", ";
			}
	}
	fprintf(f, "], \"pids\": [");
	sep = "";
	if (root > 0) {
		fprintf(f, "%d", root);
		sep = ", ";
	}
	if (!pids)      /* out of memory: the fork records' only */
		np = 0;
	else {
		memcpy(pids, s->pids, s->npids * sizeof(*pids));
		for (i = 0; i < (size_t)t->nprocs; i++)
			pids[s->npids + i] = t->procs[i];
		/* and the processes of tasks followed from an exec or rename (--comm), as named */
		for (i = 1; i < n; i++)
			if (fl[i] && (t->only_uid < 0 || recorded(t, i, fl[i])) &&
			    !bpf_map_lookup_elem(tasks_fd, &(__u32){ i }, &tn) && tn.pid)
				pids[np++] = tn.pid;
	}
	if (np)
		qsort(pids, np, sizeof(*pids), cmp_u32);
	for (i = 0; i < np; i++)
		if (pids[i] != (__u32)root && (i == 0 || pids[i] != pids[i - 1])) {
			fprintf(f, "%s%u", sep, pids[i]);
			sep = ", ";
		}
	fprintf(f, "]");
	free(pids);
}

void tracer_threads(struct tracer_threads *t)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;

	t->n = 0;
	while (d && (e = readdir(d)) && t->n < TRACER_TIDS_MAX)
		if (e->d_name[0] >= '0' && e->d_name[0] <= '9')
			t->tids[t->n++] = atoi(e->d_name);
	if (d)
		closedir(d);
	if (!t->n)
		t->tids[t->n++] = getpid();
}

struct named_task {
	__u32 tid;
	struct task_name n;
};

static int cmp_named(const void *a, const void *b)
{
	__u32 x = ((const struct named_task *)a)->tid, y = ((const struct named_task *)b)->tid;

	return x < y ? -1 : x > y;
}

/* "tasks": {"<tid>": {"comm": "...", "pid": N}, ...} by tid, from the programs' tasks map. */
static void write_tasks(FILE *f, const struct trace_bpf *skel)
{
	int fd = bpf_map__fd(skel->maps.tasks);
	size_t n = 0, cap = bpf_map__max_entries(skel->maps.tasks), i;
	struct named_task *all = calloc(cap, sizeof(*all));
	__u32 key, next;
	bool started = false;

	while (all && n < cap && !bpf_map_get_next_key(fd, started ? &key : NULL, &next)) {
		started = true;
		key = next;
		if (!bpf_map_lookup_elem(fd, &key, &all[n].n))
			all[n++].tid = key;
	}
	if (n)
		qsort(all, n, sizeof(*all), cmp_named);
	fprintf(f, "\"tasks\": {");
	for (i = 0; i < n; i++) {
		fprintf(f, "%s\"%u\": {\"comm\": ", i ? ", " : "", all[i].tid);
		json_str(f, all[i].n.comm, sizeof(all[i].n.comm));
		fprintf(f, ", \"pid\": %u}", all[i].n.pid);
	}
	fprintf(f, "}");
	free(all);
}

const char *left_why_name(__u32 why)
{
	return why == LEFT_SETUID_EXEC ? "setuid exec" : why == LEFT_CRED_CHANGE ? "credential change" : "unknown";
}

/* --only-uid: "only_uid": {"uid", "calls": {name: nr}} (null without), and "left_trace":
 * {"count": times a recorded task took another user's rights, "tasks": [{"pid", "tid", "comm",
 * "why", "ts"}, ...] (in time order, at most LEFT_MAX)}. */
static void write_only_uid(FILE *f, const struct trace_facts *t)
{
	if (t->only_uid < 0) {
		fprintf(f, "\"only_uid\": null, \"left_trace\": {\"count\": 0, \"tasks\": []}");
		return;
	}
	fprintf(f, "\"only_uid\": {\"uid\": %ld, \"calls\": {", t->only_uid);
	for (int i = 0; i < t->ncred_calls; i++)
		fprintf(f, "%s\"%s\": %ld", i ? ", " : "", t->cred_calls[i].name, t->cred_calls[i].nr);
	fprintf(f, "}},\n \"left_trace\": {\"count\": %llu, \"tasks\": [", (unsigned long long)t->left_total);
	for (int i = 0; i < t->nleft; i++) {
		const struct left_entry *e = &t->left[i];

		fprintf(f, "%s{\"pid\": %u, \"tid\": %u, \"comm\": ", i ? ", " : "", e->l.pid, e->tid);
		json_str(f, e->l.comm, sizeof(e->l.comm));
		fprintf(f, ", \"why\": \"%s\", \"ts\": %llu}", left_why_name(e->l.why), (unsigned long long)e->l.ts);
	}
	fprintf(f, "]}");
}

static const char *status_of(int code)
{
	if (code == 0)
		return "complete";
	if (code == 130 || code == 143)
		return "interrupted";
	return "failed";
}

/*
 * Runs of our programs the kernel skipped because one was already running on that
 * CPU (bpf_prog_info.recursion_misses): each may have been a record, at a time
 * nobody knows. -errno if a program could not be asked.
 */
int recursion_misses(const struct trace_bpf *skel, __u64 *n)
{
	struct bpf_program *prog;

	*n = 0;
	bpf_object__for_each_program(prog, skel->obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);
		int fd = bpf_program__fd(prog);

		if (fd < 0)     /* not loaded: the probe set chose another attach mode */
			continue;
		if (bpf_obj_get_info_by_fd(fd, &info, &len))
			return -errno;
		*n += info.recursion_misses;
	}
	return 0;
}

/*
 * "drops": what the kernel lost. As trace.bpf.c guarantees, total equals the
 * records of lost_spans plus spans_unrecorded (one record each); recursion_misses
 * are runs that never got as far as taking a record, and switches_missed context
 * switches the probe did not see (each a span of 0 records in lost_spans, or
 * counted in gaps_unrecorded), counted apart; switches_missed_other those between
 * two tasks not followed (no span).
 */
int write_trace_json(const struct trace_facts *t, int outfd, const struct features *ft,
			    const struct probe_set *ps, const struct trace_bpf *skel,
			    struct sink *s, __u64 drops, __u64 misses, int ncpus, pid_t root, int code,
			    const struct steal *steal, const struct tracer_threads *tracer,
			    const struct reader *reader)
{
	struct utsname u;
	char tmp[64];
	FILE *f;
	int i;

	f = outfile_create(outfd, "trace.json", tmp, sizeof(tmp));
	if (!f)
		return -errno;
	/* the machine the trace was taken on: its system call numbers (an arm64 guest's trace is
	 * analysed on an x86-64 host by `make vmtest-arm64`) */
	if (uname(&u))
		snprintf(u.machine, sizeof(u.machine), "unknown");
	fprintf(f, "{\"machine\": ");
	json_str(f, u.machine, sizeof(u.machine));
	/* the boot of the kernel the trace was taken on: two traces of one boot read one clock
	 * (merge), whichever machine analyses them */
	{
		char boot[64] = "";
		FILE *b = fopen("/proc/sys/kernel/random/boot_id", "re");

		if (b) {
			if (fgets(boot, sizeof(boot), b))
				boot[strcspn(boot, "\n")] = '\0';
			fclose(b);
		}
		if (boot[0]) {
			fprintf(f, ", \"boot_id\": ");
			json_str(f, boot, sizeof(boot));
		}
	}
	fprintf(f, ", \"drops\": {\"total\": %llu, \"per_cpu\": [", (unsigned long long)drops);
	for (i = 0; i < ncpus && i < MAX_CPUS; i++)
		fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)skel->bss->drops[i]);
	fprintf(f, "], ");
	sink_write_spans(f, s);
	fprintf(f, ", \"spans_unrecorded\": %llu, \"recursion_misses\": %llu, \"switches_missed\": %llu,"
		" \"switches_missed_other\": %llu, \"gaps_unrecorded\": %llu},\n \"events\": {",
		(unsigned long long)skel->bss->spans_unrecorded, (unsigned long long)misses,
		(unsigned long long)skel->bss->switches_missed,
		(unsigned long long)skel->bss->switches_missed_other, (unsigned long long)skel->bss->gaps_unrecorded);
	for (i = 1; i < REC_TYPE_MAX; i++)
		fprintf(f, "%s\"%s\": %llu", i > 1 ? ", " : "", rec_names[i], (unsigned long long)s->per_type[i]);
	fprintf(f, "},\n \"records\": %llu, \"unknown_records\": %llu,\n", (unsigned long long)s->count,
		(unsigned long long)s->unknown);
	fprintf(f, " \"attach\": ");
	probes_json(ps, f);
	fprintf(f, ",\n ");
	write_ids(f, skel, root, s, t);
	fprintf(f, ",\n \"tracer\": {\"pid\": %d, \"tids\": [", (int)getpid());
	for (i = 0; i < tracer->n; i++)
		fprintf(f, "%s%d", i ? ", " : "", (int)tracer->tids[i]);
	fprintf(f, "], \"reader_tid\": %d, \"reader_policy\": \"%s\", \"reader_raised\": %lu},\n ",
		(int)reader->tid, reader->idle ? "SCHED_IDLE" : reader->idle_error, reader->raises);
	write_tasks(f, skel);
	fprintf(f, ", \"tasks_unnamed\": %llu,\n ", (unsigned long long)skel->bss->tasks_unnamed);
	steal_json(steal, f);
	fprintf(f, ",\n \"features\": ");
	features_json(ft, f);
	fprintf(f, ",\n");
	fprintf(f, " \"floor\": %s, \"floor_clock\": %s, \"ringbuf_bytes\": %u, \"root_pid\": %d, \"exit_code\": %d,"
		" \"status\": \"%s\", \"clock\": \"CLOCK_MONOTONIC\",\n \"mode\": \"%s\", \"stopped_by\": \"%s\", \"marks\": ",
		t->floor ? "true" : "false", t->floor_clock ? "true" : "false", t->ringbuf_bytes,
		root > 0 ? root : 0, code, status_of(code), t->mode, t->stopped_by);
	marks_json(t->marks, skel, s->per_type[REC_MARK], f);
	fprintf(f, ",\n ");
	write_only_uid(f, t);
	fprintf(f, "}\n");
	return outfile_commit(outfd, f, tmp, "trace.json");
}
