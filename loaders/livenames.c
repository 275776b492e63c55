// SPDX-License-Identifier: MIT
/* DIR/tasks.bin of --live-names (livenames.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include "livenames.h"
#include "outfile.h"

int live_names_open(struct live_names *l, int dirfd, int map_fd, int news_fd, const volatile __u64 *lost,
		    __u32 max_entries)
{
	__u32 cap = 1;

	while (cap < 2 * max_entries)
		cap <<= 1;
	/* lost_at: none read yet, the first tick reads the whole map */
	*l = (struct live_names){
		.fd = -1, .map_fd = map_fd, .news_fd = news_fd, .lost = lost, .lost_at = ~0ull, .cap = cap
	};
	l->known = calloc(cap, sizeof(*l->known));
	if (!l->known)
		return -ENOMEM;
	l->fd = outfile_create_final(dirfd, "tasks.bin");
	if (l->fd < 0) {
		int e = errno;

		free(l->known);
		l->known = NULL;
		return -e;
	}
	return 0;
}

/* Whether tid's name is news (and remembered as said). tid 0 is the idle task's, named by nobody. */
static bool news(struct live_names *l, const struct live_name *n)
{
	__u32 i = (n->tid * 2654435761u) & (l->cap - 1);

	for (__u32 probes = 0; probes < l->cap; probes++, i = (i + 1) & (l->cap - 1)) {
		struct live_name *k = &l->known[i];

		if (k->tid == 0) {
			*k = *n;
			return true;
		}
		if (k->tid == n->tid) {
			if (k->pid == n->pid && !memcmp(k->comm, n->comm, sizeof(k->comm)))
				return false;
			*k = *n;
			return true;
		}
	}
	return true;    /* full (more tids than twice the map holds over the run): said again */
}

/* Tasks read from the whole map a system call (when tasks_news lost some). A key and its
 * value a call, two calls a task, took ~1.9 us a task (40 ms of the main thread's CPU in
 * 55 s at 387 tasks); in batches of 256: 10 ms in 55 s at 357 tasks, each call short on a
 * kernel without preemption. */
#define LIVE_BATCH 256

struct pending {
	struct live_name out[256];
	size_t n;
};

/* tid's name appended (through p.out) if it is news. */
static void take(struct live_names *l, struct pending *p, __u32 tid, const struct task_name *tn)
{
	struct live_name *n = &p->out[p->n];

	if (!tid)
		return;
	*n = (struct live_name){ .tid = tid, .pid = tn->pid };
	memcpy(n->comm, tn->comm, sizeof(n->comm));
	if (!news(l, n))
		return;
	if (++p->n == sizeof(p->out) / sizeof(p->out[0])) {
		if (write(l->fd, p->out, sizeof(p->out)) != (ssize_t)sizeof(p->out))
			l->err = errno ? errno : EIO;
		p->n = 0;
	}
}

/* The map a key and a value at a time: where batches are refused (a bucket of more than
 * LIVE_BATCH tasks: ENOSPC; a kernel without them). */
static void take_one_by_one(struct live_names *l, struct pending *p)
{
	struct task_name tn;
	__u32 key, next;
	bool started = false;

	while (!bpf_map_get_next_key(l->map_fd, started ? &key : NULL, &next)) {
		started = true;
		key = next;
		if (!bpf_map_lookup_elem(l->map_fd, &key, &tn))
			take(l, p, key, &tn);
	}
}

/* The whole map, what tasks.bin does not say yet. */
static void take_all(struct live_names *l, struct pending *p)
{
	static __u32 keys[LIVE_BATCH];
	static struct task_name values[LIVE_BATCH];
	__u32 in = 0, out = 0, count;
	bool first = true;
	int rc;

	do {
		count = LIVE_BATCH;
		rc = bpf_map_lookup_batch(l->map_fd, first ? NULL : &in, &out, keys, values, &count, NULL);
		if (rc && errno != ENOENT) {
			/* what a batch took is news no more: the whole map again, one by one */
			take_one_by_one(l, p);
			return;
		}
		for (__u32 i = 0; i < count; i++)
			take(l, p, keys[i], &values[i]);
		in = out;
		first = false;
	} while (!rc);
}

void live_names_tick(struct live_names *l)
{
	struct pending p = { .n = 0 };
	struct task_name tn;
	__u64 lost;
	__u32 tid;

	if (l->fd < 0 || l->err)
		return;
	lost = __atomic_load_n(l->lost, __ATOMIC_RELAXED);
	if (lost != l->lost_at) {
		/* the queue emptied first: a tid written from here on is in the map read next, or
		 * in the queue the next tick reads (or both: tasks.bin says a name once) */
		while (!bpf_map_lookup_and_delete_elem(l->news_fd, NULL, &tid))
			;
		l->lost_at = lost;
		take_all(l, &p);
	} else {
		/* a pop and a lookup a written tid: none but the pop when nothing was written */
		while (!bpf_map_lookup_and_delete_elem(l->news_fd, NULL, &tid))
			if (!bpf_map_lookup_elem(l->map_fd, &tid, &tn))
				take(l, &p, tid, &tn);
	}
	if (p.n && write(l->fd, p.out, p.n * sizeof(p.out[0])) != (ssize_t)(p.n * sizeof(p.out[0])))
		l->err = errno ? errno : EIO;
}

void live_names_close(struct live_names *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	free(l->known);
	l->known = NULL;
}
