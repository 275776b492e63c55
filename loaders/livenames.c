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

int live_names_open(struct live_names *l, int dirfd, int map_fd, const volatile __u64 *written, __u32 max_entries)
{
	__u32 cap = 1;

	while (cap < 2 * max_entries)
		cap <<= 1;
	*l = (struct live_names){ .fd = -1, .map_fd = map_fd, .written = written, .cap = cap };
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

void live_names_tick(struct live_names *l)
{
	struct live_name out[256];
	struct task_name tn;
	__u64 now;
	__u32 key, next;
	bool started = false;
	size_t n = 0;

	if (l->fd < 0 || l->err)
		return;
	now = __atomic_load_n(l->written, __ATOMIC_RELAXED);
	if (now == l->read_at)
		return;
	l->read_at = now;
	while (!bpf_map_get_next_key(l->map_fd, started ? &key : NULL, &next)) {
		started = true;
		key = next;
		if (!key || bpf_map_lookup_elem(l->map_fd, &key, &tn))
			continue;
		out[n] = (struct live_name){ .tid = key, .pid = tn.pid };
		memcpy(out[n].comm, tn.comm, sizeof(out[n].comm));
		if (!news(l, &out[n]))
			continue;
		if (++n == sizeof(out) / sizeof(out[0])) {
			if (write(l->fd, out, sizeof(out)) != (ssize_t)sizeof(out))
				l->err = errno ? errno : EIO;
			n = 0;
		}
	}
	if (n && write(l->fd, out, n * sizeof(out[0])) != (ssize_t)(n * sizeof(out[0])))
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
