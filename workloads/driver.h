/* SPDX-License-Identifier: MIT */
/*
 * Driver internals shared by ipcbench.c, driver.c and selftest.c. Cases see
 * only workload.h; everything here is free of printing so selftest can call it.
 */
#ifndef IPCTRACE_DRIVER_H
#define IPCTRACE_DRIVER_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "workload.h"

#define DRV_MAX_SIZE       (64ull << 20)   /* bytes per message */
#define DRV_MAX_ITERATIONS 1000000000ull   /* per run; also the warm-up bound */
#define DRV_MAX_RUNS       10000ull
#define DRV_MAX_INJECT_NS  1000000000ull   /* --inject-*-spin: at most 1 s per iteration */
#define DRV_MAX_INJECT_US  1000000ull      /* --inject-peer-sleep: at most 1 s */
#define DRV_MAX_INJECT_EVERY 1000000ull    /* --inject-every */
#define DRV_MAX_INJECT_SYSCALLS 1000000ull
/* timestamp arrays per timed iteration and metric: t0, t1, cpu, tid */
#define DRV_BYTES_PER_REC  (2 * sizeof(uint64_t) + sizeof(uint16_t) + sizeof(uint32_t))

extern const struct workload *const workloads[];   /* table.c, NULL-terminated */

struct run_args {
	const char *name, *out, *progress, *mode;
	int owner_given;               /* --owner UID:GID: every file made is theirs at once */
	unsigned owner_uid, owner_gid;
	uint64_t iterations, warmup, size, runs;
	int size_given, procs, fresh, containers;
	enum wl_placement placement;
	int placement_given;
	int cpus[2];                   /* --cpus A[,B]; B = -1 when only A was given */
	struct wl_inject inject;       /* --inject-*; .peer/.measuring say whether any was given */
	uint64_t interval_us, duration_s, break_us, priority;  /* rt-tests style; 0: not given */
};

const struct workload *drv_find(const char *name);
unsigned drv_nmetrics(const struct workload *w);
/* Decimal without sign, optional K/M suffix (KiB/MiB) when suffix is set; 0 or -1. */
int drv_parse_u64(const char *s, int suffix, uint64_t *out);
/* "one_way=rtt/2" or "x=y*0.5" -> name, source metric, factor; 0 or -1. */
int drv_parse_derived(const char *spec, char *name, size_t nlen, char *from, size_t flen, double *factor);
/* Whether word is one of the comma-separated items of list. */
int drv_list_has(const char *list, const char *word);

/* Option parsing and checks return 0, or WL_FAIL_USAGE with one line in err. */
int drv_parse_run(int argc, char **argv, struct run_args *a, char *err, size_t len);
/* mem_bytes: available memory; the timestamp arrays may take half of it (0: no limit). */
int drv_check_run(const struct workload *w, struct run_args *a, uint64_t mem_bytes, char *err, size_t len);
/* Resolve the placement against the usable CPUs (online and in our affinity mask). */
int drv_place(const struct workload *w, const struct run_args *a, const cpu_set_t *usable,
	      struct wl_opts *o, char *warn, size_t wlen, char *err, size_t len);
/* CPUs that are online and that this process may run on. */
int drv_usable_cpus(cpu_set_t *set);
const char *drv_placement_name(enum wl_placement p);

/* Timestamp arrays of one invocation, MAP_SHARED so forked peers can record. */
int drv_map_arrays(struct wl_ctx *c, unsigned nmetrics, uint64_t iterations);
int drv_clear_arrays(struct wl_ctx *c, unsigned nmetrics, uint64_t iterations);
void drv_unmap_arrays(struct wl_ctx *c, unsigned nmetrics, uint64_t iterations);

/* iterations.bin writer (layout in iterfile.h). */
struct iterfile {
	int fd;
	uint64_t count;     /* records written so far */
	uint64_t seq;       /* next sequence number */
	uint32_t nmetrics;
};
/* A new file name in dirfd (O_EXCL | O_NOFOLLOW, given to --owner: loaders/outfile.h); 0 or -errno. */
int iterfile_create(struct iterfile *f, int dirfd, const char *name, uint32_t nmetrics);
/* Append the iterations recorded in this run in time order; *unrecorded counts timed
 * slots before the last recorded one that hold nothing (a case that skipped some). */
int iterfile_append_run(struct iterfile *f, const struct wl_ctx *c, unsigned nmetrics,
			uint64_t *written, uint64_t *unrecorded);
void iterfile_close(struct iterfile *f);

/* Unique token "<pid>-<8 hex>"; the path of the private 0700 directory for socket
 * files and FIFOs (wl_path creates it on first use); its removal with its files. */
void drv_make_tag(char *buf, size_t len);
void drv_privdir_path(char *buf, size_t len, const char *tag);
void drv_privdir_remove(const char *path);

/* The last wl_fail() message, "" if none. */
const char *drv_error(void);
/* "peer process N was killed by SIGSEGV" if a forked peer died abnormally, else "". */
void drv_peer_death(char *buf, size_t len);
void drv_clear_error(void);
/* Which signal set wl_stop (0 if none). */
extern volatile sig_atomic_t drv_signal;

int drv_selftest(void);

/* Copy cost of this CPU's copy instruction, timed in user space (copycal.c). */
struct copy_cal {
	double ns_per_call;   /* one 1-byte copy */
	double ns_per_byte;   /* slope from 1 byte to 64 KiB */
};
int copy_calibrate(struct copy_cal *cal);

/* Entry-path calibration (entrycal.c): null system calls timed with the loop of
 * null-syscall, for the analysis to join with their traced sys_enter/sys_exit, and
 * the same loop without the call (what two clock reads cost). */
#define ENTRY_CAL_WARMUP 200
#define ENTRY_CAL_CALLS  200
struct entry_cal {
	pid_t tid;                           /* the thread that made the calls */
	int cpu;                             /* the CPU it was on when it started */
	long syscall_nr;                     /* SYS_getppid of this architecture */
	uint64_t calls[ENTRY_CAL_CALLS][2];  /* t0, t1 around each timed call (CLOCK_MONOTONIC) */
	double empty_ns;                     /* median t1 - t0 of the loop without the call */
	uint64_t empty_ns_min;
	uint64_t tight[2];                   /* clock before and after ENTRY_CAL_CALLS calls back to back */
};
int entry_calibrate(struct entry_cal *cal);
/* cal as workload.json's entry_calibration object (null when cal is NULL); wljson.c */
void json_entry_cal(FILE *f, const struct entry_cal *cal);
/* Probe calibration (probecal.c): empty iteration windows for the tracer's --calibrate
 * probes, phase after phase: USDT empty, USDT with a clock read inside, the empty function,
 * the function with a clock read; phase[i] is the clock at the start of phase i's windows
 * (after its warm-up) and at their end, span the clock before and after them all; mid the
 * clock reads inside the windows. */
#define PROBE_CAL_WARMUP  50
#define PROBE_CAL_WINDOWS 200
struct probe_cal {
	pid_t tid;
	int cpu;
	uint64_t span[2];
	uint64_t phase[4][2];
	uint64_t mid[2][PROBE_CAL_WINDOWS];  /* the clock read inside: USDT's, the function's */
};
int probe_calibrate(struct probe_cal *cal);
void json_probe_cal(FILE *f, const struct probe_cal *cal);
/* `ipcbench exec --entry-fd N -- CMD ARGS...` (entrycal.c): the calibrations written to
 * descriptor N ({"entry": ..., "probes": ...}), then CMD exec'd in this process; returns
 * only on failure. */
int drv_exec(int argc, char **argv);

/* `ipcbench hog --cpu N [--nice X]` (hog.c): 0, or WL_FAIL_USAGE with one line in err. */
int drv_parse_hog(int argc, char **argv, int *cpu, int *nice_value, char *err, size_t len);
int drv_hog(int argc, char **argv);

/* What a run came to, for workload.json (ipcbench.c fills it, wljson.c writes it). */
struct run_outcome {
	const char *status;        /* complete, interrupted, failed */
	char error[320];
	char warnings[3][320];
	int nwarnings;
	uint64_t runs_completed, iterations_completed;
};

/* wljson.c: the case table as JSON on stdout (`ipcbench list`); DIR/workload.json of a run
 * (a calibration NULL when it was not made), 0 or -errno. */
int list_json(void);
int write_workload_json(int dirfd, const struct wl_ctx *c, const struct run_args *a,
			const struct run_outcome *out, const struct copy_cal *copy_cal, const struct entry_cal *entry_cal);

#endif
