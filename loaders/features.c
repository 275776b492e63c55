// SPDX-License-Identifier: MIT
/*
 * Start-up calibration: each feature is tried for real (a two-instruction
 * program loaded and attached, a perf event opened) rather than guessed from
 * the kernel version, and the answer says why when it is no.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include "features.h"
#include "json.h"

const char *const feature_names[F_COUNT] = {
	[F_PRIVILEGES] = "privileges",
	[F_BTF] = "btf",
	[F_TP_BTF] = "tp_btf",
	[F_RAW_TP] = "raw_tp",
	[F_TRACEPOINT] = "tracepoint",
	[F_KPROBE] = "kprobe",
	[F_FENTRY] = "fentry",
	[F_PERF_SAMPLING] = "perf_sampling",
	[F_RINGBUF] = "ringbuf",
	[F_LOCKDOWN] = "lockdown",
	[F_MEMLOCK] = "memlock",
	[F_CLOCK] = "clock",
	[F_STEAL] = "steal",
};

static void answer(struct features *ft, enum feature f, bool ok, const char *fmt, ...)
{
	va_list ap;

	ft->f[f].ok = ok;
	va_start(ap, fmt);
	vsnprintf(ft->f[f].detail, sizeof(ft->f[f].detail), fmt, ap);
	va_end(ap);
}

static long perf_open(struct perf_event_attr *attr, int cpu)
{
	return syscall(SYS_perf_event_open, attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* r0 = 0; exit */
static const struct bpf_insn ret0[] = {
	{ .code = 0xb7, .dst_reg = 0, .imm = 0 },
	{ .code = 0x95 },
};

static int load_ret0(enum bpf_prog_type type, enum bpf_attach_type attach, __u32 btf_id)
{
	LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = attach,
		    .attach_btf_id = btf_id);
	int fd = bpf_prog_load(type, NULL, "GPL", ret0, 2, &opts);

	return fd < 0 ? -errno : fd;
}

/* Load a do-nothing program of the given kind and attach it; 0 or -errno. */
static int try_attach(enum bpf_prog_type type, enum bpf_attach_type attach, __u32 btf_id,
		      const char *raw_tp_name, const char **step)
{
	int fd, link;

	*step = "load";
	fd = load_ret0(type, attach, btf_id);
	if (fd < 0)
		return fd;
	*step = "attach";
	link = bpf_raw_tracepoint_open(raw_tp_name, fd);
	if (link < 0) {
		int err = -errno;
		close(fd);
		return err;
	}
	close(link);
	close(fd);
	return 0;
}

static void probe_privileges(struct features *ft)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = {};
	bool bpf, perfmon, sys_admin;

	if (syscall(SYS_capget, &hdr, data)) {
		answer(ft, F_PRIVILEGES, false, "capget failed: %s", strerror(errno));
		return;
	}
#define HAS(cap) (data[(cap) / 32].effective & (1u << ((cap) % 32)))
	bpf = HAS(39);        /* CAP_BPF, 5.8 */
	perfmon = HAS(38);    /* CAP_PERFMON, 5.8 */
	sys_admin = HAS(CAP_SYS_ADMIN);
#undef HAS
	if (sys_admin || (bpf && perfmon))
		answer(ft, F_PRIVILEGES, true, "%s", sys_admin ? "CAP_SYS_ADMIN" : "CAP_BPF + CAP_PERFMON");
	else
		answer(ft, F_PRIVILEGES, false, "missing %s%s (need CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN: run as root)",
		       bpf ? "" : "CAP_BPF ", perfmon ? "" : "CAP_PERFMON");
}

static void probe_tracefs(struct features *ft)
{
	static const char *const dirs[] = { "/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events" };
	char path[128];
	unsigned i;

	for (i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/sched/sched_switch/id", dirs[i]);
		if (access(path, R_OK) == 0) {
			snprintf(ft->tracefs, sizeof(ft->tracefs), "%s", dirs[i]);
			return;
		}
	}
	ft->tracefs[0] = '\0';
}

static void probe_tracepoint(struct features *ft)
{
	struct perf_event_attr attr = { .size = sizeof(attr), .type = PERF_TYPE_TRACEPOINT };
	char path[160];
	FILE *f;
	long fd;

	probe_tracefs(ft);
	if (!ft->tracefs[0]) {
		answer(ft, F_TRACEPOINT, false, "tracefs not mounted (mount -t tracefs nodev /sys/kernel/tracing)");
		return;
	}
	snprintf(path, sizeof(path), "%s/sched/sched_switch/id", ft->tracefs);
	f = fopen(path, "r");
	if (!f || fscanf(f, "%llu", (unsigned long long *)&attr.config) != 1) {
		answer(ft, F_TRACEPOINT, false, "cannot read %s", path);
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	fd = perf_open(&attr, 0);
	if (fd < 0) {
		answer(ft, F_TRACEPOINT, false, "perf_event_open(tracepoint): %s", strerror(errno));
		return;
	}
	close(fd);
	answer(ft, F_TRACEPOINT, true, "tracefs at %s", ft->tracefs);
}

static void probe_kprobe(struct features *ft, const char *func)
{
	struct perf_event_attr attr = { .size = sizeof(attr) };
	FILE *f = fopen("/sys/bus/event_source/devices/kprobe/type", "r");
	long fd;

	if (!f) {
		answer(ft, F_KPROBE, false, "kernel built without CONFIG_KPROBES (no kprobe PMU)");
		return;
	}
	if (fscanf(f, "%u", &attr.type) != 1) {
		fclose(f);
		answer(ft, F_KPROBE, false, "unreadable kprobe PMU type");
		return;
	}
	fclose(f);
	if (!func) {
		answer(ft, F_KPROBE, false, "no probe target found in BTF to test with");
		return;
	}
	attr.config1 = (unsigned long)func;  /* kprobe_func */
	fd = perf_open(&attr, 0);
	if (fd < 0) {
		answer(ft, F_KPROBE, false, "perf_event_open(kprobe %s): %s", func, strerror(errno));
		return;
	}
	close(fd);
	answer(ft, F_KPROBE, true, "kprobe PMU type %u", attr.type);
}

static void probe_perf_sampling(struct features *ft)
{
	struct perf_event_attr attr = {
		.size = sizeof(attr), .type = PERF_TYPE_SOFTWARE,
		.config = PERF_COUNT_SW_CPU_CLOCK, .sample_period = 1000000, .disabled = 1,
	};
	long fd = perf_open(&attr, 0);

	if (fd < 0) {
		answer(ft, F_PERF_SAMPLING, false, "perf_event_open(cpu-clock sampling): %s", strerror(errno));
		return;
	}
	close(fd);
	answer(ft, F_PERF_SAMPLING, true, "cpu-clock sampling events open");
}

static void probe_lockdown(struct features *ft)
{
	char buf[128] = "", *l, *r;
	FILE *f = fopen("/sys/kernel/security/lockdown", "r");

	if (!f) {
		answer(ft, F_LOCKDOWN, true, "none (no lockdown LSM file)");
		return;
	}
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	l = strchr(buf, '[');
	r = l ? strchr(l, ']') : NULL;
	if (!l || !r) {
		answer(ft, F_LOCKDOWN, true, "unknown (%s)", buf);
		return;
	}
	*r = '\0';
	/* confidentiality forbids reading kernel memory, which every probe does. */
	answer(ft, F_LOCKDOWN, strcmp(l + 1, "confidentiality") != 0, "%s", l + 1);
}

static void probe_memlock(struct features *ft)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl)) {
		answer(ft, F_MEMLOCK, false, "getrlimit: %s", strerror(errno));
		return;
	}
	if (rl.rlim_cur == RLIM_INFINITY)
		answer(ft, F_MEMLOCK, true, "unlimited");
	else
		answer(ft, F_MEMLOCK, true, "%llu KiB (BPF memory is charged to the cgroup since 5.11)",
		       (unsigned long long)rl.rlim_cur / 1024);
}

/* Average ns of one run of insns over `repeat` runs (BPF_PROG_TEST_RUN), or -errno. */
static double time_socket_filter(const struct bpf_insn *insns, size_t n, int repeat)
{
	char packet[64] = { 0 };
	LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = packet, .data_size_in = sizeof(packet),
		    .repeat = repeat);
	int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, NULL, "GPL", insns, n, NULL);
	double ns;

	if (fd < 0)
		return -errno;
	ns = bpf_prog_test_run_opts(fd, &run) ? -errno : (double)run.duration;
	close(fd);
	return ns;
}

/*
 * What one read of the tracer's clock costs here: every record carries one, a traced
 * syscall two, which bounds the probe effect from below (ipctrace bench shows it in
 * context). Timed as 8 reads against none, the least of 5 tries (interference only adds).
 */
#define CLOCK_READS 8
static void probe_clock(struct features *ft)
{
	struct bpf_insn reads[CLOCK_READS + 2];
	double best = -1, with, without;
	int i;

	for (i = 0; i < CLOCK_READS; i++)   /* call bpf_ktime_get_ns */
		reads[i] = (struct bpf_insn){ .code = BPF_JMP | BPF_CALL, .imm = BPF_FUNC_ktime_get_ns };
	reads[i++] = ret0[0];
	reads[i] = ret0[1];
	for (i = 0; i < 5; i++) {
		with = time_socket_filter(reads, CLOCK_READS + 2, 2000);
		without = time_socket_filter(ret0, 2, 2000);
		if (with < 0 || without < 0) {
			answer(ft, F_CLOCK, false, "cannot time bpf_ktime_get_ns with BPF_PROG_TEST_RUN: %s",
			       strerror((int)-(with < 0 ? with : without)));
			return;
		}
		if (best < 0 || (with - without) / CLOCK_READS < best)
			best = (with - without) / CLOCK_READS;
	}
	answer(ft, F_CLOCK, true, "bpf_ktime_get_ns: %.0f ns a read (two per traced syscall)",
	       best > 0 ? best : 0);
}

/*
 * Whether the hypervisor keeps a steal clock for this guest: KVM's CPUID leaves
 * (arch/x86/kernel/kvm.c: the signature at 0x40000000 or a later base, then
 * KVM_FEATURE_STEAL_TIME, bit 5 of the features leaf). NULL if it does, else why not.
 */
static const char *kvm_steal_clock(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned int a, b, c, d, base;
	char sig[13] = "";

	__cpuid(1, a, b, c, d);
	if (!(c & (1u << 31)))
		return "not a guest (no hypervisor in CPUID)";
	for (base = 0x40000000; base < 0x40010000; base += 0x100) {
		__cpuid(base, a, b, c, d);
		memcpy(sig, &b, 4);
		memcpy(sig + 4, &c, 4);
		memcpy(sig + 8, &d, 4);
		if (!memcmp(sig, "KVMKVMKVM\0\0\0", 12) && a >= base + 1) {
			__cpuid(base + 1, a, b, c, d);
			return a & (1u << 5) ? NULL : "the KVM host offers no steal time (CPUID)";
		}
	}
	return "the hypervisor is not KVM (CPUID)";
#else
	return "KVM's steal time is read on x86 only";
#endif
}

/* Whether struct `type` of the kernel's BTF has a member `member`. */
static bool btf_has_member(const struct btf *btf, const char *type, const char *member)
{
	__s32 id = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
	const struct btf_type *t = id > 0 ? btf__type_by_id(btf, id) : NULL;
	const struct btf_member *m;
	int i;

	for (i = 0, m = t ? btf_members(t) : NULL; t && i < btf_vlen(t); i++, m++)
		if (!strcmp(btf__name_by_offset(btf, m->name_off), member))
			return true;
	return false;
}

/*
 * Where the programs read the hypervisor's steal count (trace.bpf.c): the
 * scheduler's copy in each CPU's struct rq, reached from the current task. The
 * per-CPU variables themselves (kvm's steal_time, kernel_cpustat) are in BTF
 * but reach BPF only with CONFIG_KALLSYMS_ALL, which distribution kernels have
 * and this class of guest kernel may not; the run queue's copy needs neither.
 * Whether the load works is tried for real: without it the loader goes on
 * without the count (loader.c load_with_fallbacks).
 */
static void probe_steal(struct features *ft, const struct btf *btf)
{
	const char *no_kvm = kvm_steal_clock();
	bool at_clock, at_tick;

	ft->steal = STEAL_NONE;
	if (!btf) {
		answer(ft, F_STEAL, false, "none: needs BTF");
		return;
	}
	at_clock = btf_has_member(btf, "rq", "prev_steal_time_rq");
	at_tick = btf_has_member(btf, "rq", "prev_steal_time");
	if (!at_clock && !at_tick) {
		answer(ft, F_STEAL, false, "none: the kernel keeps no steal clock (no CONFIG_PARAVIRT)");
		return;
	}
	if (!btf_has_member(btf, "sched_entity", "cfs_rq") || !btf_has_member(btf, "cfs_rq", "rq")) {
		answer(ft, F_STEAL, false, "none: no way from a task to its run queue (no CONFIG_FAIR_GROUP_SCHED)");
		return;
	}
	ft->steal = STEAL_RQ;
	answer(ft, F_STEAL, true, "rq %s: ns, %s; %s", at_clock ? "prev_steal_time_rq" : "prev_steal_time",
	       at_clock ? "as of each scheduler clock update" : "as of each tick",
	       no_kvm ? no_kvm : "KVM offers steal time");
}

void features_probe(struct features *ft)
{
	struct btf *vmlinux;
	const char *step, *func = NULL, *force, *btf_path;
	__s32 tp_id = -1, fn_id = -1;
	int err, fd;

	memset(ft, 0, sizeof(*ft));
	probe_privileges(ft);

	/* IPCTRACE_BTF_PATH stands in for the kernel's BTF: the tests simulate a kernel without it. */
	btf_path = getenv("IPCTRACE_BTF_PATH");
	vmlinux = btf_path ? btf__parse(btf_path, NULL) : btf__load_vmlinux_btf();
	if (!vmlinux) {
		answer(ft, F_BTF, false, "no kernel BTF (%s: %s; needs CONFIG_DEBUG_INFO_BTF)",
		       btf_path ? btf_path : "/sys/kernel/btf/vmlinux", strerror(errno));
		probe_steal(ft, NULL);
	} else {
		answer(ft, F_BTF, true, "%s", btf_path ? btf_path : "/sys/kernel/btf/vmlinux");
		tp_id = btf__find_by_name_kind(vmlinux, "btf_trace_sched_switch", BTF_KIND_TYPEDEF);
		/* A function of fs/pipe.c: lib/ (the copy routines) is built without
		 * ftrace, so fentry and kprobes fail there on every kernel. */
		fn_id = btf__find_by_name_kind(vmlinux, func = "anon_pipe_write", BTF_KIND_FUNC);
		if (fn_id < 0)
			fn_id = btf__find_by_name_kind(vmlinux, func = "pipe_write", BTF_KIND_FUNC);
		if (fn_id < 0)
			func = NULL;
		probe_steal(ft, vmlinux);
		btf__free(vmlinux);
	}

	if (tp_id < 0)
		answer(ft, F_TP_BTF, false, "%s", ft->f[F_BTF].ok ? "no btf_trace_sched_switch in BTF" : "needs BTF");
	else if ((err = try_attach(BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP, tp_id, NULL, &step)))
		answer(ft, F_TP_BTF, false, "%s: %s", step, strerror(-err));
	else
		answer(ft, F_TP_BTF, true, "loaded and attached to sched_switch");

	if ((err = try_attach(BPF_PROG_TYPE_RAW_TRACEPOINT, 0, 0, "sched_switch", &step)))
		answer(ft, F_RAW_TP, false, "%s: %s", step, strerror(-err));
	else
		answer(ft, F_RAW_TP, true, "loaded and attached to sched_switch");

	probe_tracepoint(ft);
	probe_kprobe(ft, func);

	if (fn_id < 0)
		answer(ft, F_FENTRY, false, "%s", ft->f[F_BTF].ok ? "no probe target in BTF" : "needs BTF");
	else if ((err = try_attach(BPF_PROG_TYPE_TRACING, BPF_TRACE_FENTRY, fn_id, NULL, &step)))
		answer(ft, F_FENTRY, false, "%s on %s: %s", step, func, strerror(-err));
	else
		answer(ft, F_FENTRY, true, "loaded and attached to %s", func);
	/* make vmtest proves the kprobe fallback on kernels where fentry works. */
	force = getenv("IPCTRACE_FORCE_ATTACH");
	if (force && strcmp(force, "kprobe") == 0 && ft->f[F_FENTRY].ok)
		answer(ft, F_FENTRY, false, "works, but IPCTRACE_FORCE_ATTACH=kprobe");

	probe_perf_sampling(ft);

	fd = bpf_map_create(BPF_MAP_TYPE_RINGBUF, NULL, 0, 0, getpagesize(), NULL);
	if (fd < 0) {
		answer(ft, F_RINGBUF, false, "cannot create a BPF ring buffer (needs 5.8): %s", strerror(errno));
	} else {
		close(fd);
		answer(ft, F_RINGBUF, true, "created");
	}
	probe_lockdown(ft);
	probe_memlock(ft);
	probe_clock(ft);

	if (!ft->f[F_PRIVILEGES].ok)
		snprintf(ft->why_impossible, sizeof(ft->why_impossible), "no privileges to trace: %s",
			 ft->f[F_PRIVILEGES].detail);
	else if (!ft->f[F_BTF].ok)
		snprintf(ft->why_impossible, sizeof(ft->why_impossible), "%s", ft->f[F_BTF].detail);
	else if (!ft->f[F_LOCKDOWN].ok)
		snprintf(ft->why_impossible, sizeof(ft->why_impossible),
			 "kernel lockdown '%s' forbids BPF tracing", ft->f[F_LOCKDOWN].detail);
	else if (!ft->f[F_RINGBUF].ok)
		snprintf(ft->why_impossible, sizeof(ft->why_impossible), "%s", ft->f[F_RINGBUF].detail);
	else if (!ft->f[F_TP_BTF].ok && !ft->f[F_RAW_TP].ok && !ft->f[F_TRACEPOINT].ok)
		snprintf(ft->why_impossible, sizeof(ft->why_impossible),
			 "no way to attach to tracepoints (tp_btf: %s; raw_tp: %s; tracepoint: %s)",
			 ft->f[F_TP_BTF].detail, ft->f[F_RAW_TP].detail, ft->f[F_TRACEPOINT].detail);
}

void features_json(const struct features *ft, FILE *f)
{
	int i;

	fputc('{', f);
	for (i = 0; i < F_COUNT; i++) {
		fprintf(f, "%s\"%s\": {\"ok\": %s, \"detail\": ", i ? ", " : "", feature_names[i],
			ft->f[i].ok ? "true" : "false");
		json_str(f, ft->f[i].detail, sizeof(ft->f[i].detail));
		fputc('}', f);
	}
	fprintf(f, ", \"possible\": %s, \"why_impossible\": ", ft->why_impossible[0] ? "false" : "true");
	json_str(f, ft->why_impossible, sizeof(ft->why_impossible));
	fputc('}', f);
}

void features_print_json(const struct features *ft, FILE *out)
{
	features_json(ft, out);
	fputc('\n', out);
}
