/* SPDX-License-Identifier: MIT */
/*
 * --live-names (ipctrace watch): the tasks map's names, as they come, appended to
 * DIR/tasks.bin once a tick. A watch names a kept request's tasks while the trace goes
 * on; a task that ended before the front end read /proc is named only here (trace.json's
 * "tasks" comes at the end).
 */
#ifndef IPCTRACE_LIVENAMES_H
#define IPCTRACE_LIVENAMES_H

#include <linux/types.h>
#include "ipctrace.h"

/* A record of tasks.bin (analysis/store/livenames.py reads it): a task's name, again
 * whenever it changed (the last one of a tid holds). */
struct live_name {
	__u32 tid;
	__u32 pid;
	char comm[16];
};

struct live_names {
	int fd;                         /* tasks.bin, appended */
	int map_fd;                     /* the programs' tasks map */
	int news_fd;                    /* the tids written to it since (the programs' tasks_news queue) */
	const volatile __u64 *lost;     /* the tids tasks_news had no room for (tasks_news_lost) */
	__u64 lost_at;                  /* *lost when the whole map was last read */
	struct live_name *known;        /* what tasks.bin says already: open addressing by tid */
	__u32 cap;                      /* a power of two, twice the map's entries */
	int err;                        /* the first write's errno, 0 */
};

/* 0, or -errno (tasks.bin could not be created). */
int live_names_open(struct live_names *l, int dirfd, int map_fd, int news_fd, const volatile __u64 *lost,
		    __u32 max_entries);
/* The map's new and renamed tasks appended: those tasks_news names, or, when it lost some
 * (or at the first call), those of the whole map that tasks.bin does not say yet. */
void live_names_tick(struct live_names *l);
void live_names_close(struct live_names *l);

#endif
