/* SPDX-License-Identifier: MIT */
/*
 * The workload case table and what the driver (workloads/ipcbench.c) offers to
 * each case. A case is one file in workloads/cases/ defining one
 * `const struct workload wl_NAME` and one line in workloads/table.c.
 *
 * Life of an invocation:  setup() once -> run() once per --runs -> teardown().
 * run() does warm-up and timed iterations itself and calls wl_record() for
 * every iteration index i in [0, warmup + iterations); wl_record() drops the
 * warm-up ones. The timed loop must not allocate, print or do I/O other than
 * the IPC under test: wl_record() only stores into pre-touched arrays.
 */
#ifndef IPCTRACE_WORKLOAD_H
#define IPCTRACE_WORKLOAD_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define WL_MAX_METRICS 4
#define WL_MAX_THREADS 4

/* struct workload.flags */
#define WL_SIZE          (1u << 0) /* --size means something (bytes per message) */
#define WL_PROCS         (1u << 1) /* --procs: peer is a forked process instead of a thread */
#define WL_FRESH         (1u << 2) /* --fresh: create the object every iteration */
#define WL_NEEDS_ROOT    (1u << 3) /* exits 2 without root (e.g. network namespaces) */
#define WL_CONTAINERS    (1u << 4) /* --containers is accepted */
#define WL_SPINS         (1u << 5) /* peers spin: one CPU for both gets a warning */
#define WL_SAME_CPU_DEF  (1u << 6) /* default placement is both sides on one CPU */
#define WL_SINGLE        (1u << 7) /* one thread only: placement pins just that one */
#define WL_INJECT        (1u << 8) /* calls wl_inject_peer/wl_inject_measuring: --inject-* accepted */
#define WL_NO_COPY       (1u << 9) /* its data syscalls move no bytes through user memory (/dev/null) */

enum wl_placement { PLACE_CROSS, PLACE_SAME, PLACE_CPUS, PLACE_NONE };

/* Known costs added at known places of a ping-pong (--inject-*, for known-answer
 * validation of the breakdown); 0 = not injected. */
struct wl_inject {
	uint64_t peer_spin_ns;       /* the peer spins in user space after receiving, before replying */
	uint64_t peer_syscalls;      /* ... then makes this many null syscalls (getppid) */
	uint64_t peer_sleep_us;      /* ... then sleeps (timer slack 1 ns) */
	uint64_t measuring_spin_ns;  /* the measuring side spins right after sending, before waiting */
	uint64_t every;              /* only into every k-th message (0, 1: all): message m, counted per side
				      * from the first (warm-up included), gets it when m % every == every - 1,
				      * so one run holds the injected iterations and their baseline interleaved */
	int peer, measuring;         /* whether any of the peer's / the measuring side's is set */
};

struct wl_opts {
	uint64_t iterations;   /* timed iterations per run */
	uint64_t warmup;       /* untimed iterations before each run */
	uint32_t runs;
	uint64_t size;         /* bytes per message (1 by default) */
	enum wl_placement placement;
	int cpu[2];            /* resolved CPU of side A (measuring) and B (peer); -1 = unpinned */
	const char *mode;      /* --mode, NULL if not given (case picks its default) */
	int procs, fresh, containers;
	const char *privdir;   /* private 0700 directory of this invocation: socket files, FIFOs, ipc:// */
	const char *tag;       /* unique token of this invocation for POSIX names: "/ipctrace-<tag>-sem0" */
	struct wl_inject inject;
	/* rt-tests style: a pause after each iteration, a time limit per run, a latency that
	 * ends the measurement (0: none of them) */
	uint64_t interval_ns, duration_ns, break_ns;
};

struct wl_thread {             /* placement record, written to workload.json */
	char role[16];         /* "measuring", "peer", ... */
	pid_t pid, tid;
	int cpu;               /* pinned CPU or -1 */
};

struct wl_ctx {
	const struct wl_opts *o;
	const struct workload *w;
	void *priv;                         /* the case's own state */
	uint32_t run;                       /* current run index */
	uint64_t done;                      /* timed iterations completed in this run */
	/* [metric * iterations + i]; MAP_SHARED so a forked peer may record too */
	uint64_t *t0, *t1;
	uint16_t *cpu;                      /* [metric * iterations + i] */
	uint32_t *tid;                      /* [metric * iterations + i] */
	volatile uint64_t *progress;        /* shared counter read by the front end, may be NULL */
	struct wl_thread threads[WL_MAX_THREADS];
	int nthreads;
	char warning[256];                  /* shown to the user and stored in workload.json */
	char mode_used[32];                 /* mode actually measured, "" if none */
	unsigned primary;                   /* index of the metric this mode measures (default 0) */
	char extra_json[512];               /* case-specific facts for workload.json, a JSON object body or "" */
	uint64_t timed_start;               /* when this run's first timed iteration began */
	uint64_t break_iteration;           /* --break-at: the iteration that crossed it + 1 (0: none) */
	uint32_t break_run;
	uint64_t break_latency;
};

struct workload {
	const char *name;
	const char *summary;                /* one line: what it measures */
	const char *seed;                   /* which report it reproduces and its figure, or "" */
	const char *metrics[WL_MAX_METRICS];/* measured metrics, primary first */
	const char *derived;                /* "one_way=rtt/2" or NULL */
	const char *modes;                  /* "lock,handoff" or NULL; the first is the default */
	const char *mode_help;              /* what each mode measures, for `list` */
	unsigned flags;
	uint64_t max_size;                  /* largest --size, 0 = no limit beyond the driver's */
	int  (*setup)(struct wl_ctx *c);    /* 0, or -errno / 2 for "usage or environment" (message via wl_fail) */
	int  (*run)(struct wl_ctx *c);      /* one run: warm-up + timed loop; 0 or -errno */
	void (*teardown)(struct wl_ctx *c); /* must undo setup even after a failed or interrupted run */
};

extern volatile sig_atomic_t wl_stop;  /* set by SIGINT/SIGTERM; loops check it */
/* set with wl_stop by the driver itself (--duration, --break-at): an end, not an interruption */
extern volatile sig_atomic_t wl_ended;

static inline uint64_t wl_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The CPU's spin-wait hint, for loops that poll memory another CPU writes: it saves
 * power and lets the sibling hyperthread run. */
static inline void wl_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* getppid() as the bare system call instruction where we know it (x86-64): no libc wrapper,
 * so that a loop of them is the kernel's entry and exit paths and the call, next to no user
 * code (the entry calibration and --inject-peer-syscalls use it). */
static inline long wl_bare_getppid(void)
{
#if defined(__x86_64__)
	long ret;

	__asm__ volatile("syscall" : "=a"(ret) : "0"(110L) : "rcx", "r11", "memory");
	return ret;
#else
	return syscall(SYS_getppid);
#endif
}

/* Store iteration i (warm-up included in the numbering) of metric m. */
void wl_record(struct wl_ctx *c, unsigned m, uint64_t i, uint64_t t0, uint64_t t1);

static inline uint64_t wl_total(const struct wl_ctx *c)
{
	return c->o->warmup + c->o->iterations;
}

/* One run of a ping-pong case: warm-up + timed rounds of metric 0, each round(arg) a
 * message and its answer (0 or -errno). A failed round ends the run: 0 if a stop
 * signal caused it, else its error. Always inlined, so that with a static round the
 * timed window holds the round alone, with no call through a pointer. */
static inline __attribute__((always_inline))
int wl_time_rounds(struct wl_ctx *c, int (*round)(void *arg), void *arg)
{
	uint64_t total = wl_total(c);

	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		int err = round(arg);
		uint64_t t1 = wl_now();
		if (err)
			return wl_stop ? 0 : err;
		wl_record(c, 0, i, t0, t1);
	}
	return 0;
}

/* The injection points of a ping-pong case (flag WL_INJECT): wl_inject_peer(c) in
 * the peer after it received a message and before it replies, wl_inject_measuring(c)
 * on the measuring side right after it sent and before it waits for the answer.
 * Not set, each is one predictable branch on a word the loop keeps in cache. */
void wl_inject_peer_work(const struct wl_inject *in);
void wl_inject_measuring_work(const struct wl_inject *in);

static inline __attribute__((always_inline)) void wl_inject_peer(const struct wl_ctx *c)
{
	if (__builtin_expect(c->o->inject.peer, 0))
		wl_inject_peer_work(&c->o->inject);
}

static inline __attribute__((always_inline)) void wl_inject_measuring(const struct wl_ctx *c)
{
	if (__builtin_expect(c->o->inject.measuring, 0))
		wl_inject_measuring_work(&c->o->inject);
}

/* Pin the calling thread to side's CPU (0 = measuring, 1 = peer) and record it. */
int wl_pin(struct wl_ctx *c, int side, const char *role);
/* Fork a peer process: pinned to side 1, dies with its parent (PR_SET_PDEATHSIG),
 * ignores SIGINT/SIGTERM so the measuring side decides when to stop; runs fn and
 * _exit()s with its return value. Returns the child's pid or -errno. */
pid_t wl_fork_peer(struct wl_ctx *c, int (*fn)(struct wl_ctx *c, void *arg), void *arg);
/* Start a peer thread pinned to side 1 with SIGINT/SIGTERM/SIGALRM blocked; runs fn
 * and drops its return value. */
int wl_start_thread(struct wl_ctx *c, int (*fn)(struct wl_ctx *c, void *arg), void *arg, pthread_t *tid_out);
/* Kill (SIGKILL) and reap a forked peer; safe with pid <= 0. */
void wl_reap(pid_t pid);

/* A case's peer: a thread, or a forked process. Zeroed means none. */
struct wl_peer {
	pid_t pid;             /* forked peer; 0 none, < 0 its fork failed (-errno) */
	pthread_t thread;
	int thread_started;    /* the case must make a started thread return before wl_peer_stop */
};
/* Run fn(c, arg) as a forked peer (wl_fork_peer) when procs, else as a peer thread
 * (wl_start_thread); 0 or -errno. */
int wl_peer_start(struct wl_ctx *c, struct wl_peer *p, int procs,
		  int (*fn)(struct wl_ctx *c, void *arg), void *arg);
/* Join the peer thread, or kill and reap the forked peer; safe on a zeroed or
 * half-started peer. */
void wl_peer_stop(struct wl_peer *p);
/* wl_peer_stop for a peer thread that blocks in a cancellation point: it is
 * cancelled first. */
void wl_peer_cancel(struct wl_peer *p);
/* A zeroed MAP_SHARED block of bytes that a forked peer inherits: anonymous, or when
 * shm_what is given backed by shm_open of wl_posix_name(shm_what), unlinked once
 * mapped. NULL with errno set on failure; release with munmap. */
void *wl_map_shared(const struct wl_ctx *c, const char *shm_what, size_t bytes);
/* Build a POSIX IPC name "/ipctrace-<tag>-<what>" or a path "<privdir>/<what>". */
void wl_posix_name(const struct wl_ctx *c, const char *what, char *buf, size_t len);
void wl_path(const struct wl_ctx *c, const char *what, char *buf, size_t len);
/* Report a usage/environment error (one line) from setup: return wl_fail(c, ...) */
int wl_fail(struct wl_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Read/write exactly n bytes, retrying short transfers; -errno on failure, -EPIPE on EOF. */
int wl_write_full(int fd, const void *buf, size_t n);
int wl_read_full(int fd, void *buf, size_t n);
/* Close those of fds[0..n) that are open (>= 0) and mark them closed (-1). */
void wl_close_fds(int *fds, int n);

#define WL_FAIL_USAGE 2

#endif
