// SPDX-License-Identifier: MIT
/* Following tasks already running (see follow.h). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ipctrace.h"
#include "follow.h"
#include "sampler.h"
#include "trace.skel.h"

#define MAX_CPUS IPT_MAX_CPUS

struct proc {
	pid_t pid, ppid;
	char comm[16];
};

static bool numeric(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* "pid (comm) S ppid ...": the name may hold spaces and parentheses, the last ')' ends it. */
static bool read_stat(pid_t pid, struct proc *p)
{
	char path[64], buf[512], *open, *close;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	open = strchr(buf, '(');
	close = strrchr(buf, ')');
	if (!open || !close || close < open || sscanf(close + 1, " %*c %d", &p->ppid) != 1)
		return false;
	p->pid = pid;
	snprintf(p->comm, sizeof(p->comm), "%.*s", (int)(close - open - 1), open + 1);
	return true;
}

/* Are the real, effective, saved and file-system uids in path (a status file) all uid? */
static bool status_owned_by(const char *path, long uid)
{
	char line[256];
	bool yes = false;
	FILE *f;

	if (!(f = fopen(path, "re")))
		return false;
	while (fgets(line, sizeof(line), f)) {
		long r, e, s, fs;

		if (sscanf(line, "Uid: %ld %ld %ld %ld", &r, &e, &s, &fs) == 4) {
			yes = r == uid && e == uid && s == uid && fs == uid;
			break;
		}
	}
	fclose(f);
	return yes;
}

/* Are the real, effective, saved and file-system uids of pid all uid (any uid when -1)? */
static bool owned_by(pid_t pid, long uid)
{
	char path[64];

	if (uid < 0)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	return status_owned_by(path, uid);
}

static int list_procs(struct proc **out, int *n)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	struct proc *all = NULL, *more;
	int cap = 0;

	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		if (!numeric(e->d_name))
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 1024;
			more = realloc(all, cap * sizeof(*all));
			if (!more) {
				free(all);
				closedir(d);
				return -ENOMEM;
			}
			all = more;
		}
		if (read_stat(atoi(e->d_name), &all[*n]))
			(*n)++;
	}
	closedir(d);
	*out = all;
	return 0;
}

bool follow_mark_threads(struct trace_bpf *skel, pid_t pid, __u8 mark)
{
	size_t limit = sizeof(skel->bss->followed);
	char path[64];
	struct dirent *e;
	DIR *d;
	long tid;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return false;
	while ((e = readdir(d))) {
		if (!numeric(e->d_name) || (tid = atol(e->d_name)) <= 0 || (size_t)tid >= limit)
			continue;
		/* --only-uid: a task the programs saw take another user's rights stays out */
		if (mark == FOLLOW_YES && skel->bss->followed[tid] == FOLLOW_OTHER_USER)
			continue;
		skel->bss->followed[tid] = mark;
	}
	closedir(d);
	return true;
}

int follow_scan(struct follow *f, struct trace_bpf *skel, struct sampler *smp)
{
	size_t limit = sizeof(skel->bss->followed);
	unsigned char *in;
	struct proc *all = NULL;
	bool changed = true;
	int n, i, j, rc;

	if (!f->marked && !(f->marked = calloc(limit, 1)))
		return -ENOMEM;
	if ((rc = list_procs(&all, &n)))
		return rc;
	for (i = j = 0; i < n; i++)         /* pid_max is at most the table's size; be sure */
		if ((size_t)all[i].pid < limit)
			all[j++] = all[i];
	n = j;
	in = calloc(limit, 1);
	if (!in) {
		free(all);
		return -ENOMEM;
	}
	for (i = 0; i < f->nroots; i++)
		if (f->roots[i] > 0 && (size_t)f->roots[i] < limit)
			in[f->roots[i]] = 1;
	for (i = 0; i < n; i++)
		for (j = 0; j < f->ncomms; j++)
			if (!strcmp(all[i].comm, f->comms[j]) && owned_by(all[i].pid, f->comm_uid))
				in[all[i].pid] = 1;
	/* the roots' descendants: parents before children is not /proc's order, so until no change */
	while (changed && f->nroots) {
		changed = false;
		for (i = 0; i < n; i++)
			if (!in[all[i].pid] && all[i].ppid > 0 && (size_t)all[i].ppid < limit && in[all[i].ppid]) {
				in[all[i].pid] = 1;
				changed = true;
			}
	}
	for (i = 0; i < n; i++) {
		pid_t pid = all[i].pid;

		if (!in[pid])
			continue;
		/* --only-uid: another user's process is not followed (nor, as a root, by its pid) */
		if (!owned_by(pid, f->only_uid)) {
			follow_mark_threads(skel, pid, FOLLOW_OTHER_USER);
			continue;
		}
		if (!follow_mark_threads(skel, pid, FOLLOW_YES) || f->marked[pid])
			continue;
		f->marked[pid] = 1;
		if (f->nprocs == f->cap) {
			pid_t *more = realloc(f->procs, (f->cap ? f->cap * 2 : 64) * sizeof(*more));

			if (!more) {
				rc = -ENOMEM;
				break;
			}
			f->procs = more;
			f->cap = f->cap ? f->cap * 2 : 64;
		}
		f->procs[f->nprocs++] = pid;
		if (smp)
			sampler_follow(smp, pid);
	}
	/* A marked task already on a CPU is followed there from now, not from its next switch. */
	for (i = 0; i < MAX_CPUS; i++) {
		__u32 tid = (__u32)skel->bss->cur[i].id;

		if (tid && tid < limit && skel->bss->followed[tid] == FOLLOW_YES)
			skel->bss->cur[i].followed = 1;
	}
	free(in);
	free(all);
	return rc;
}

int follow_scan_uid(struct trace_bpf *skel, long uid)
{
	size_t limit = sizeof(skel->bss->followed);
	struct dirent *p, *t;
	char path[96];
	DIR *procs = opendir("/proc"), *tasks;

	if (!procs)
		return -errno;
	while ((p = readdir(procs))) {
		long pid = numeric(p->d_name) ? atol(p->d_name) : 0;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/task", pid);
		if (!(tasks = opendir(path)))
			continue;       /* gone */
		while ((t = readdir(tasks))) {
			long tid = numeric(t->d_name) ? atol(t->d_name) : 0;
			volatile __u8 *mark = &skel->bss->followed[tid];
			bool mine;

			if (tid <= 0 || (size_t)tid >= limit || *mark)
				continue;
			snprintf(path, sizeof(path), "/proc/%ld/task/%ld/status", pid, tid);
			mine = status_owned_by(path, uid);
			/* the programs may have decided meanwhile (an exec, a credential call): theirs holds */
			if (!*mark)
				*mark = mine ? FOLLOW_YES : FOLLOW_OTHER_USER;
		}
		closedir(tasks);
	}
	closedir(procs);
	return 0;
}

void follow_free(struct follow *f)
{
	free(f->marked);
	free(f->procs);
	f->marked = NULL;
	f->procs = NULL;
	f->nprocs = f->cap = 0;
}
