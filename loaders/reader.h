/* SPDX-License-Identifier: MIT */
/*
 * The consumer of the ring buffer, kept out of the workload's way (the probe
 * effect): a thread of its own at SCHED_IDLE, which a woken workload thread
 * takes the CPU from (at the next tick at worst, where EEVDF finds that thread
 * not yet eligible and the kernel does not preempt), raised to SCHED_OTHER by the loader's main thread only
 * while the ring buffer is more than half full, until it has drained it below
 * an eighth. The programs wake the main thread at half (trace.bpf.c's
 * wakeup_bytes); below that nothing of the tracer is woken but the reader's
 * own POLL_MS timer.
 */
#ifndef IPCTRACE_READER_H
#define IPCTRACE_READER_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ring_buffer;

struct reader {
	struct ring_buffer *rb;         /* consumed by the thread until reader_stop() */
	int map_fd;                     /* the records' ring buffer */
	size_t bytes;                   /* its size */
	const unsigned long *pos;       /* its consumer (pos[0]) and producer (pos[page]) positions */
	size_t page;
	pthread_t thread;
	pid_t tid;
	bool idle;                      /* SCHED_IDLE was granted */
	char idle_error[80];            /* else why not */
	pthread_mutex_t lock;           /* policy changes, raised, started */
	pthread_cond_t started_cond;
	bool started, raised;
	atomic_bool stop;
	int err;                        /* the consume error that ended the thread, 0 (atomic) */
	int notify_fd;                  /* eventfd: the thread lowered itself or failed */
	unsigned long raises;           /* times it was raised to SCHED_OTHER */
};

/* Start the thread (named ipctrace-reader) on rb, whose records come from map_fd of
 * `bytes`. 0, or -1 with a message in err. */
int reader_start(struct reader *r, struct ring_buffer *rb, int map_fd, size_t bytes,
		 char *err, size_t errlen);
/* What the run waits for (reader_watch). */
enum stopped_by { STOPPED_BY_EXIT, STOPPED_BY_DURATION, STOPPED_BY_SIGNAL };

struct watch {
	pid_t child;                    /* -- CMD: until it exits (reaped into status), or -1 */
	volatile sig_atomic_t *child_exited;
	const pid_t *roots;             /* --pid: until every one has exited */
	int nroots;
	double duration;                /* seconds, 0 = none: then CMD gets SIGINT (SIGKILL 2 s
					 * later), or the watch ends */
	int stop_fd;                    /* an eventfd the SIGINT/SIGTERM handler writes, or -1:
					 * ends the watch unless there is a CMD (which the signal
					 * reached and which decides when to stop) */
	void (*tick)(void *arg);        /* called once a second while the run lasts, or NULL */
	void *tick_arg;
	int status;                     /* out: CMD's wait status */
	enum stopped_by stopped_by;     /* out */
};

/* The main thread until the run ends (see struct watch): raises the reader when the ring
 * buffer passes half. Returns 0, or the reader's error (-errno; CMD was sent SIGTERM and
 * reaped). */
int reader_watch(struct reader *r, struct watch *w);
/* Stop and join the thread (raised first, so it ends at once on a busy machine). */
void reader_stop(struct reader *r);
/* Fill of the ring buffer in bytes. */
size_t reader_fill(const struct reader *r);

#endif
