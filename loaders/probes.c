// SPDX-License-Identifier: MIT
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "ipctrace.h"
#include "callsite.h"
#include "probes.h"
#include "json.h"
#include "trace.skel.h"

#define PROG(name) offsetof(struct trace_bpf, progs.name)

static struct bpf_program *prog_at(struct trace_bpf *skel, size_t off)
{
	return *(struct bpf_program **)((char *)skel + off);
}

enum { MODE_BTF, MODE_RAW, MODE_TP };

static const struct tp_def {
	const char *name, *category;
	bool required;
	size_t prog[3];                 /* tp_btf, raw_tp, classic tracepoint */
} tp_defs[] = {
#define TP(n, cat, req) { #n, cat, req, { PROG(n##_btf), PROG(n##_raw), PROG(n##_tp) } }
	TP(sys_enter, "raw_syscalls", true),
	TP(sys_exit, "raw_syscalls", true),
	TP(sched_switch, "sched", true),
	TP(sched_waking, "sched", false),
	TP(sched_wakeup, "sched", false),
	TP(sched_wakeup_new, "sched", false),
	TP(sched_migrate_task, "sched", false),
	TP(sched_process_fork, "sched", true),
	TP(sched_process_exit, "sched", false),
	TP(irq_handler_entry, "irq", false),
	TP(irq_handler_exit, "irq", false),
	TP(softirq_entry, "irq", false),
	TP(softirq_exit, "irq", false),
	TP(page_fault_user, "exceptions", false),
	TP(sched_process_exec, "sched", false),      /* a followed task's new name */
	TP(task_rename, "task", false),
	/* x86 system vectors; absent on other architectures */
#define VECTOR(n, cat) TP(n##_entry, cat, false), TP(n##_exit, cat, false)
	VECTOR(local_timer, "irq_vectors"),
	VECTOR(reschedule, "irq_vectors"),
	VECTOR(call_function, "irq_vectors"),
	VECTOR(call_function_single, "irq_vectors"),
	VECTOR(irq_work, "irq_vectors"),
	VECTOR(x86_platform_ipi, "irq_vectors"),
	VECTOR(spurious_apic, "irq_vectors"),
	VECTOR(error_apic, "irq_vectors"),
	VECTOR(thermal_apic, "irq_vectors"),
	VECTOR(threshold_apic, "irq_vectors"),
	VECTOR(deferred_error_apic, "irq_vectors"),
#undef VECTOR
#undef TP
};

static const struct func_def {
	const char *name;
	enum func_id id;
	const char *kfuncs[4];          /* kernel names, newest first */
	int size_kind, size_arg;
	size_t prog[4];                 /* fentry, fexit, kprobe, kretprobe */
	const char *callers[3];         /* probed around its calls there when kfunc is notrace */
} func_defs[] = {
#define FN(n, id, kind, arg, ...) { #n, id, { __VA_ARGS__ }, kind, arg, \
	{ PROG(n##_fentry), PROG(n##_fexit), PROG(n##_kprobe), PROG(n##_kretprobe) }, { NULL } }
#define FN_CALLED_IN(n, id, kind, arg, kfunc, ...) { #n, id, { kfunc }, kind, arg, \
	{ PROG(n##_fentry), PROG(n##_fexit), PROG(n##_kprobe), PROG(n##_kretprobe) }, { __VA_ARGS__ } }
	FN(pipe_write, FN_PIPE_WRITE, SIZE_ITER, 1, "anon_pipe_write", "pipe_write"),
	FN(pipe_read, FN_PIPE_READ, SIZE_ITER, 1, "anon_pipe_read", "pipe_read"),
	/* the sleeping part of a futex wait: 6.7+, 5.16+, older */
	FN(futex_wait, FN_FUTEX_WAIT, SIZE_NONE, 0, "futex_do_wait", "futex_wait_queue", "futex_wait_queue_me"),
	FN(futex_wake, FN_FUTEX_WAKE, SIZE_SCALAR, 2, "futex_wake"),
	FN(unix_send, FN_UNIX_SEND, SIZE_SCALAR, 2, "unix_stream_sendmsg"),
	FN(unix_recv, FN_UNIX_RECV, SIZE_SCALAR, 2, "unix_stream_recvmsg"),
	FN(unix_dgram_send, FN_UNIX_DGRAM_SEND, SIZE_SCALAR, 2, "unix_dgram_sendmsg"),
	FN(unix_dgram_recv, FN_UNIX_DGRAM_RECV, SIZE_SCALAR, 2, "unix_dgram_recvmsg"),
	/* lib/ is notrace: the copy routines are probed around their calls in the IPC paths */
	FN_CALLED_IN(copy_to_iter, FN_COPY_TO_ITER, SIZE_SCALAR, 1, "_copy_to_iter", "simple_copy_to_iter"),
	FN_CALLED_IN(copy_from_iter, FN_COPY_FROM_ITER, SIZE_SCALAR, 1, "_copy_from_iter",
		     "skb_copy_datagram_from_iter"),
	FN_CALLED_IN(copy_page_to_iter, FN_COPY_PAGE_TO_ITER, SIZE_SCALAR, 2, "copy_page_to_iter",
		     "anon_pipe_read", "pipe_read"),
	FN_CALLED_IN(copy_page_from_iter, FN_COPY_PAGE_FROM_ITER, SIZE_SCALAR, 2, "copy_page_from_iter",
		     "anon_pipe_write", "pipe_write"),
#undef FN_CALLED_IN
#undef FN
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static bool btf_has(const struct btf *btf, const char *name, int kind)
{
	return btf && btf__find_by_name_kind(btf, name, kind) > 0;
}

static bool classic_exists(const struct features *ft, const struct tp_def *d)
{
	char path[192];

	if (!ft->tracefs[0])
		return false;
	snprintf(path, sizeof(path), "%s/%s/%s/id", ft->tracefs, d->category, d->name);
	return access(path, R_OK) == 0;
}

static int choose_tracepoint(struct probe *p, const struct tp_def *d, struct trace_bpf *skel,
			     const struct features *ft, const struct btf *btf)
{
	char type[96];
	bool in_btf;
	int mode = -1;

	snprintf(type, sizeof(type), "btf_trace_%s", d->name);
	in_btf = btf_has(btf, type, BTF_KIND_TYPEDEF);
	if (in_btf && ft->f[F_TP_BTF].ok)
		mode = MODE_BTF;
	else if (in_btf && ft->f[F_RAW_TP].ok)
		mode = MODE_RAW;
	else if (ft->f[F_TRACEPOINT].ok && classic_exists(ft, d))
		mode = MODE_TP;

	if (mode < 0) {
		if (!in_btf && !classic_exists(ft, d))
			snprintf(p->mode, sizeof(p->mode), "absent: no tracepoint %s:%s in this kernel",
				 d->category, d->name);
		else
			snprintf(p->mode, sizeof(p->mode), "absent: tp_btf: %s; raw_tp: %s; tracepoint: %s",
				 ft->f[F_TP_BTF].detail, ft->f[F_RAW_TP].detail, ft->f[F_TRACEPOINT].detail);
		return -1;
	}
	snprintf(p->mode, sizeof(p->mode), "%s", mode == MODE_BTF ? "tp_btf" : mode == MODE_RAW ? "raw_tp" : "tracepoint");
	if (skel) {
		p->prog[0] = prog_at(skel, d->prog[mode]);
		bpf_program__set_autoload(p->prog[0], true);
	}
	return 0;
}

/* kfunc is notrace: kprobes around its calls in the first caller this kernel has. */
static bool choose_callsites(struct probe *p, const struct func_def *d, const char *kfunc,
			     const struct features *ft, const struct btf *btf)
{
	char why[160] = "no caller in BTF";
	unsigned i;

	if (!ft->f[F_KPROBE].ok) {
		snprintf(p->mode, sizeof(p->mode), "absent: %s is notrace, and kprobes around its calls need kprobes (%s)",
			 kfunc, ft->f[F_KPROBE].detail);
		return false;
	}
	for (i = 0; i < ARRAY_LEN(d->callers) && d->callers[i]; i++)
		if (btf_has(btf, d->callers[i], BTF_KIND_FUNC) &&
		    !callsites_find(d->callers[i], kfunc, &p->sites, why, sizeof(why)))
			break;
	if (!p->sites.n) {
		snprintf(p->mode, sizeof(p->mode), "absent: %s is notrace; %s", kfunc, why);
		return false;
	}
	snprintf(p->mode, sizeof(p->mode), "kprobe around %d call%s of %s in %s (%s is notrace)", p->sites.n,
		 p->sites.n > 1 ? "s" : "", kfunc, p->sites.caller, kfunc);
	return true;
}

static void choose_function(struct probe *p, const struct func_def *d, struct trace_bpf *skel,
			    const struct features *ft, const struct btf *btf)
{
	const char *kfunc = NULL;
	char tracing[80];
	unsigned i;

	for (i = 0; i < ARRAY_LEN(d->kfuncs) && d->kfuncs[i] && !kfunc; i++)
		if (btf_has(btf, d->kfuncs[i], BTF_KIND_FUNC))
			kfunc = d->kfuncs[i];
	if (!kfunc) {
		snprintf(p->mode, sizeof(p->mode), "absent: no kernel function %s%s%s in BTF", d->kfuncs[0],
			 d->kfuncs[1] ? " or " : "", d->kfuncs[1] ? d->kfuncs[1] : "");
		return;
	}
	/* tracefs is the events directory; its parent lists what ftrace can hook */
	snprintf(tracing, sizeof(tracing), "%s/..", ft->tracefs);
	if (d->callers[0] && ft->tracefs[0] && !kfunc_traceable(tracing, kfunc)) {
		if (!choose_callsites(p, d, kfunc, ft, btf))
			return;
		if (skel) {
			p->prog[0] = prog_at(skel, d->prog[2]);
			p->prog[1] = prog_at(skel, d->prog[3]);
			bpf_program__set_autoload(p->prog[0], true);
			bpf_program__set_autoload(p->prog[1], true);
		}
	} else if (ft->f[F_FENTRY].ok) {
		snprintf(p->mode, sizeof(p->mode), "fentry/fexit %s", kfunc);
		if (skel) {
			p->prog[0] = prog_at(skel, d->prog[0]);
			p->prog[1] = prog_at(skel, d->prog[1]);
			for (i = 0; i < 2; i++) {
				bpf_program__set_autoload(p->prog[i], true);
				bpf_program__set_attach_target(p->prog[i], 0, kfunc);
			}
		}
	} else if (ft->f[F_KPROBE].ok) {
		snprintf(p->mode, sizeof(p->mode), "kprobe/kretprobe %s", kfunc);
		p->kfunc = kfunc;
		if (skel) {
			p->prog[0] = prog_at(skel, d->prog[2]);
			p->prog[1] = prog_at(skel, d->prog[3]);
			bpf_program__set_autoload(p->prog[0], true);
			bpf_program__set_autoload(p->prog[1], true);
		}
	} else {
		snprintf(p->mode, sizeof(p->mode), "absent: no fentry (%s), no kprobes (%s)",
			 ft->f[F_FENTRY].detail, ft->f[F_KPROBE].detail);
		return;
	}
	if (skel) {
		skel->rodata->fn_size_kind[d->id] = d->size_kind;
		skel->rodata->fn_size_arg[d->id] = d->size_arg;
	}
}

int probes_choose(struct probe_set *ps, struct trace_bpf *skel, const struct features *ft,
		  const struct btf *btf, const char *funcs_off, char *err, size_t errlen)
{
	struct bpf_program *prog;
	unsigned i;
	int rc = 0;

	memset(ps, 0, sizeof(*ps));
	if (skel)
		bpf_object__for_each_program(prog, skel->obj)
			bpf_program__set_autoload(prog, false);

	for (i = 0; i < ARRAY_LEN(tp_defs); i++) {
		struct probe *p = &ps->p[ps->n++];

		p->name = tp_defs[i].name;
		p->required = tp_defs[i].required;
		if (choose_tracepoint(p, &tp_defs[i], skel, ft, btf) && p->required && !rc) {
			snprintf(err, errlen, "cannot trace %s: %s", p->name, p->mode + strlen("absent: "));
			rc = -1;
		}
	}
	for (i = 0; i < ARRAY_LEN(func_defs); i++) {
		struct probe *p = &ps->p[ps->n++];

		p->name = func_defs[i].name;
		p->func = true;
		if (funcs_off)
			snprintf(p->mode, sizeof(p->mode), "absent: %s", funcs_off);
		else
			choose_function(p, &func_defs[i], skel, ft, btf);
	}
	return rc;
}

bool probes_any_function(const struct probe_set *ps)
{
	int i;

	for (i = 0; i < ps->n; i++)
		if (ps->p[i].func && ps->p[i].prog[0])
			return true;
	return false;
}

int probes_attach(struct probe_set *ps, char *err, size_t errlen)
{
	int i, j;

	for (i = 0; i < ps->n; i++) {
		struct probe *p = &ps->p[i];

		if (p->sites.n && p->prog[0]) {
			char why[400];

			if (callsites_attach(&p->sites, p->prog[0], p->prog[1], why, sizeof(why))) {
				callsites_detach(&p->sites);
				/* the breakdown carves copy out of syscall time only where it is probed */
				snprintf(p->mode, sizeof(p->mode), "absent: %s; the copy it makes stays in syscall time",
					 why);
			}
			continue;
		}
		for (j = 0; j < 2 && p->prog[j]; j++) {
			if (p->kfunc)
				p->link[j] = bpf_program__attach_kprobe(p->prog[j], j == 1, p->kfunc);
			else
				p->link[j] = bpf_program__attach(p->prog[j]);
			if (!p->link[j] && p->func) {
				/* Some kernel functions refuse both fentry and kprobes
				 * (notrace, e.g. all of lib/): go without this one, say why. */
				char why[sizeof(p->mode)];

				snprintf(why, sizeof(why), "absent: %s failed to attach: %s", p->mode, strerror(errno));
				snprintf(p->mode, sizeof(p->mode), "%s", why);
				bpf_link__destroy(p->link[0]);
				p->link[0] = NULL;
				break;
			}
			if (!p->link[j]) {
				snprintf(err, errlen, "failed to attach %s (%s): %s", p->name, p->mode,
					 strerror(errno));
				return -1;
			}
		}
	}
	return 0;
}

/*
 * Tracepoints that every wake-up (every system call) passes through in pairs: one of a pair
 * that attached but never runs while its partner does is silent, not idle. Seen on arm64
 * 6.12 under multi-threaded TCG (tools/vmtest/README.md): sched_waking attached by tp_btf
 * ran in no wake-up of a whole run while sched_wakeup ran in every one.
 */
/* tracepoints (probe names, not record types: those are bpf/ipctrace.h's list) */
static const struct {
	const char *tracepoint, *partner;
} paired[] = {
	{ .tracepoint = "sched_waking", .partner = "sched_wakeup" },
	{ .tracepoint = "sys_enter", .partner = "sys_exit" },
};

#define CHECK_ROUNDS 20
#define CHECK_ATTEMPTS 3

static struct probe *probe_named(struct probe_set *ps, const char *name)
{
	for (int i = 0; i < ps->n; i++)
		if (!strcmp(ps->p[i].name, name) && ps->p[i].link[0] && !ps->p[i].func)
			return &ps->p[i];
	return NULL;
}

static __u64 run_count(const struct probe *p)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(p->prog[0]), &info, &len))
		return 0;
	return info.run_cnt;
}

/* 0 when one byte went; a signal for the tracer (handled without SA_RESTART) is not an error */
static int one_byte(int fd, char *c, bool out)
{
	ssize_t n;

	do
		n = out ? write(fd, c, 1) : read(fd, c, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

/* CHECK_ROUNDS round trips with a child over two pipes: each blocked read is woken up. */
static int wake_rounds(void)
{
	int to[2], from[2], status, i, rc = 0;
	char c = 0;
	pid_t pid;

	if (pipe(to))
		return -errno;
	if (pipe(from)) {
		rc = -errno;
		close(to[0]);
		close(to[1]);
		return rc;
	}
	pid = fork();
	if (pid == 0) {
		/* a Ctrl-C meant for the tracer (its process group) ends the run, not this check */
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		close(to[1]);
		close(from[0]);
		while (read(to[0], &c, 1) == 1 && write(from[1], &c, 1) == 1)
			;
		_exit(0);
	}
	close(to[0]);
	close(from[1]);
	if (pid < 0)
		rc = -errno;
	for (i = 0; !rc && i < CHECK_ROUNDS; i++)
		if (one_byte(to[1], &c, true) || one_byte(from[0], &c, false))
			rc = -EIO;
	close(to[1]);
	close(from[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	return rc;
}

int probes_check_silent(struct probe_set *ps, char *err, size_t errlen)
{
	__u64 before[ARRAY_LEN(paired)][2], ran[2];
	struct probe *pair[ARRAY_LEN(paired)][2];
	int stats_fd, attempt, rc = 0;
	unsigned i, k;

	for (i = 0; i < ARRAY_LEN(paired); i++) {
		pair[i][0] = probe_named(ps, paired[i].tracepoint);
		pair[i][1] = probe_named(ps, paired[i].partner);
	}
	/* run_cnt counts only while run-time statistics are on: for this check alone */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0)
		return 0;       /* kernels before 5.8: unchecked, the report still finds a silent one */
	for (attempt = 1; attempt <= CHECK_ATTEMPTS; attempt++) {
		bool silent = false;

		for (i = 0; i < ARRAY_LEN(paired); i++)
			for (k = 0; k < 2; k++)
				before[i][k] = pair[i][k] ? run_count(pair[i][k]) : 0;
		if ((rc = wake_rounds())) {
			snprintf(err, errlen, "cannot check the tracepoints: a wake-up round trip failed: %s",
				 strerror(-rc));
			break;
		}
		for (i = 0; i < ARRAY_LEN(paired); i++) {
			if (!pair[i][0] || !pair[i][1])
				continue;
			for (k = 0; k < 2; k++)
				ran[k] = run_count(pair[i][k]) - before[i][k];
			for (k = 0; k < 2; k++) {
				struct probe *p = pair[i][k];

				if (ran[k] || !ran[!k])
					continue;
				silent = true;
				if (attempt == CHECK_ATTEMPTS) {
					snprintf(err, errlen, "%s attached (%s) but ran in none of %d wake-up round trips "
						 "that ran %s %llu times, attached %d times: this kernel (or its emulator) "
						 "does not run it", p->name, p->mode, CHECK_ROUNDS, pair[i][!k]->name,
						 (unsigned long long)ran[!k], CHECK_ATTEMPTS);
					rc = -1;
					break;
				}
				fprintf(stderr, "ipctrace-loader: %s attached (%s) but ran in none of %d wake-up round "
					"trips that ran %s %llu times: attached again\n", p->name, p->mode, CHECK_ROUNDS,
					pair[i][!k]->name, (unsigned long long)ran[!k]);
				bpf_link__destroy(p->link[0]);
				p->link[0] = bpf_program__attach(p->prog[0]);
				if (!p->link[0]) {
					snprintf(err, errlen, "failed to attach %s (%s) again: %s", p->name, p->mode,
						 strerror(errno));
					rc = -1;
					break;
				}
			}
			if (rc)
				break;
		}
		if (rc || !silent)
			break;
	}
	close(stats_fd);
	return rc;
}

/* In reverse: each exit goes before its entry, as it was attached after it, so that the
 * trace never holds an exit (of a syscall, an interrupt) without its entry. */
void probes_detach(struct probe_set *ps)
{
	int i, j;

	for (i = ps->n - 1; i >= 0; i--) {
		for (j = 0; j < 2; j++) {
			bpf_link__destroy(ps->p[i].link[j]);
			ps->p[i].link[j] = NULL;
		}
		callsites_detach(&ps->p[i].sites);
	}
}

void probes_json(const struct probe_set *ps, FILE *f)
{
	fputc('{', f);
	for (int i = 0; i < ps->n; i++) {
		fprintf(f, "%s\"%s\": ", i ? ", " : "", ps->p[i].name);
		json_str(f, ps->p[i].mode, sizeof(ps->p[i].mode));
	}
	fputc('}', f);
}
