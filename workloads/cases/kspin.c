// SPDX-License-Identifier: MIT
/* kspin: a kernel spinlock's lock+unlock, the experiment report 004 ran as a
 * kernel module. Modules are refused on locked-down kernels, so the lock is
 * bpf_spin_lock on a map value (bpf/kspin.bpf.c). One iteration runs the locked
 * program with BPF_PROG_TEST_RUN, KSPIN_REPEAT times; the kernel returns the mean
 * ns per program run. The figure is (locked - baseline) / KSPIN_PAIRS, the
 * baseline being the unlocked program's median time, taken before each run.
 * The kernel does the timing, so a record's t_start is when the locked test run
 * began and t_end is t_start plus the figure; the locked and (after it) the
 * unlocked per-run times are stored as metrics of their own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kspin.h"
#include "kspin.skel.h"
#include "workload.h"

#define KSPIN_REPEAT 256
#define KSPIN_CALIB  65    /* unlocked test runs before each run: their median is the baseline */

enum { M_LOCK_UNLOCK, M_RUN_LOCKED, M_RUN_UNLOCKED };

struct kspin_state {
	struct kspin_bpf *skel;
	int fd_locked, fd_unlocked;
};

static int silent(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	return 0;
}

static int kspin_setup(struct wl_ctx *c)
{
	struct kspin_state *s = calloc(1, sizeof(*s));
	int err;

	if (!s)
		return -ENOMEM;
	c->priv = s;
	libbpf_set_print(silent);   /* failures are reported as one line below */
	s->skel = kspin_bpf__open();
	if (!s->skel)
		return wl_fail(c, "kspin: cannot open the BPF object: %s", strerror(errno));
	err = kspin_bpf__load(s->skel);
	if (err == -EPERM || err == -EACCES)
		return wl_fail(c, "kspin needs root (CAP_BPF and CAP_NET_ADMIN) to load its BPF programs");
	if (err)
		return wl_fail(c, "kspin: the kernel refused the BPF programs: %s", strerror(-err));
	s->fd_locked = bpf_program__fd(s->skel->progs.kspin_locked);
	s->fd_unlocked = bpf_program__fd(s->skel->progs.kspin_unlocked);
	snprintf(c->extra_json, sizeof(c->extra_json),
		 "\"pairs_per_run\": %d, \"repeat\": %d, \"lock\": \"bpf_spin_lock (arch spinlock, irqsave)\", "
		 "\"method\": \"BPF_PROG_TEST_RUN mean ns per run: (locked - median of %d unlocked runs before each run) / pairs_per_run\"",
		 KSPIN_PAIRS, KSPIN_REPEAT, KSPIN_CALIB);
	return 0;
}

/* Mean ns per run of prog over KSPIN_REPEAT runs, or -errno. */
static long long test_run(int fd)
{
	unsigned char pkt[64] = { 0 };   /* tc programs need at least an Ethernet header */
	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = KSPIN_REPEAT);
	int err = bpf_prog_test_run_opts(fd, &opts);

	return err ? (errno ? -errno : -EIO) : (long long)opts.duration;
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;

	return (x > y) - (x < y);
}

/* The unlocked program's time per run, as the median of KSPIN_CALIB test runs: a
 * single run can be hit by an interrupt or a stolen vCPU and would then make one
 * iteration's difference meaningless, even negative. */
static long long baseline(int fd)
{
	long long t[KSPIN_CALIB];

	for (int k = 0; k < KSPIN_CALIB; k++) {
		t[k] = test_run(fd);
		if (t[k] < 0)
			return t[k];
	}
	qsort(t, KSPIN_CALIB, sizeof(t[0]), cmp_ll);
	return t[KSPIN_CALIB / 2];
}

static int kspin_run(struct wl_ctx *c)
{
	struct kspin_state *s = c->priv;
	uint64_t total = wl_total(c);
	long long base = baseline(s->fd_unlocked);

	if (base < 0)
		return (int)base;
	for (uint64_t i = 0; i < total && !wl_stop; i++) {
		uint64_t t0 = wl_now();
		long long locked = test_run(s->fd_locked);
		uint64_t t1 = wl_now();
		long long unlocked = locked < 0 ? locked : test_run(s->fd_unlocked);

		if (unlocked < 0)
			return (int)unlocked;
		if (locked < base) {
			wl_fail(c, "kspin: the locked program ran faster than the unlocked one (%lld < %lld ns)",
				locked, base);
			return -EIO;
		}
		/* rounded to the nearest ns: the record holds integer timestamps */
		wl_record(c, M_LOCK_UNLOCK, i, t0, t0 + (uint64_t)(locked - base + KSPIN_PAIRS / 2) / KSPIN_PAIRS);
		wl_record(c, M_RUN_LOCKED, i, t0, t0 + (uint64_t)locked);
		wl_record(c, M_RUN_UNLOCKED, i, t1, t1 + (uint64_t)unlocked);
	}
	return 0;
}

static void kspin_teardown(struct wl_ctx *c)
{
	struct kspin_state *s = c->priv;

	if (!s)
		return;
	kspin_bpf__destroy(s->skel);
	free(s);
	c->priv = NULL;
}

const struct workload wl_kspin = {
	.name = "kspin",
	.summary = "kernel spinlock lock+unlock: bpf_spin_lock in BPF_PROG_TEST_RUN, minus the same program without it",
	.seed = "004_dc97f491540bbac1.txt: 59.5 ns mean (kernel module, spin_lock+spin_unlock incl. ktime_get_ns, Linux)",
	.metrics = { "lock_unlock", "run_locked", "run_unlocked" },
	.flags = WL_SINGLE | WL_NEEDS_ROOT,
	.setup = kspin_setup,
	.run = kspin_run,
	.teardown = kspin_teardown,
};
