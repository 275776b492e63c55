// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The kernel side of ipctrace: one record per syscall entry/exit, scheduler
 * event, interrupt, user page fault and IPC function call of the workload's
 * tasks, into one ring buffer. Policy (which programs load, which pid is the
 * root) is the loader's: each probe exists as tp_btf, raw_tp and classic
 * tracepoint program (function probes as fentry/fexit and kprobe/kretprobe)
 * around one shared body, and the loader switches on the one it can use.
 *
 * Who runs on each CPU is kept by the sched_switch program (cur[cpu]), so the
 * filter every other program starts with is two loads, not a helper call: on
 * this class of machine (SRSO return thunks) each helper call costs ~15 ns,
 * which an untraced process would otherwise pay on every syscall.
 *
 * Beside the records: the name of every task a record names (the tasks map,
 * filled once per task), and the hypervisor's steal count, read where it is
 * cheap (vector exits, switches of followed tasks) and recorded when it grew.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>
#include "ipctrace.h"
#include "core_fixes.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define MAX_CPUS     IPT_MAX_CPUS
#ifndef E2BIG
#define E2BIG        7            /* errno (usdt.bpf.h's <linux/errno.h> has it) */
#endif
#define PID_LIMIT    (1u << 22)   /* PID_MAX_LIMIT on 64-bit kernels */

const volatile __u32 root_tgid = 0;     /* the driver the loader started */
const volatile bool floor_only = false; /* --floor: attach everything, record nothing */
const volatile bool floor_clock = false; /* --floor=clock: and read the clock once per hit */
const volatile __u64 wakeup_bytes = 0;  /* wake the consumer only above this fill */
const volatile bool record_msgs = false; /* --messages: MSG records (emit_msg) */
/* Function probes: how to find the size argument, per enum func_id (set from BTF). */
const volatile __u8 fn_size_arg[FN_MAX] = {};
const volatile __u8 fn_size_kind[FN_MAX] = {};
/* --comm: tasks that exec or rename themselves into one of these names are followed. */
#define FOLLOW_COMMS 4
const volatile char follow_comm[FOLLOW_COMMS][16] = {};
const volatile __u32 follow_comms = 0;
/* --comm under sudo: only tasks whose real and effective uid are the invoking user's. */
const volatile __u32 follow_comm_uid = (__u32)-1;
/* --all-cpus: every task on the machine is followed but the tracer's own, whose tids the
 * loader marks FOLLOW_EXCLUDED in followed[] (their children and threads inherit the mark),
 * and the idle tasks (tid 0). */
const volatile bool follow_all = false;
/* --only-uid UID (under sudo, the invoking user): only tasks whose real, effective, saved and
 * file-system uids are all UID are recorded. With --all-cpus each task's verdict is kept in
 * followed[] (FOLLOW_YES or FOLLOW_OTHER_USER: the loader reads the running tasks' from
 * /proc, a child gets its parent's at fork, and exec and the credential calls decide again);
 * otherwise a followed task that takes another user's rights (a setuid exec, setuid() and the
 * like) is followed no more, nor are the children it makes after. Either way it is in the
 * left map. ONLY_UID_NONE: no filter (the verifier drops every test of it). */
const volatile __u32 only_uid = ONLY_UID_NONE;
/* --only-uid: the system calls after whose exit the caller's credentials are checked again
 * (bit nr; the loader sets setuid ... capset from the kernel headers of its architecture). */
const volatile __u64 cred_syscalls[SYSCALL_MASK_WORDS] = {};
/* --syscalls: only these system calls' entries and exits are recorded (bit nr of the mask). */
const volatile bool syscall_filter = false;
const volatile __u64 syscall_mask[SYSCALL_MASK_WORDS] = {};

/* Tasks of the workload, indexed by tid; a byte each so that marking needs no atomics. */
__u8 followed[PID_LIMIT] = {};
__u64 drops[MAX_CPUS] = {};
__u64 spans_unrecorded = 0;      /* lost records whose one-record span did not fit into lost_rb */
__u64 switches_missed = 0;       /* context switches the sched_switch probe did not see (on_switch) */
__u64 switches_missed_other = 0; /* the same between two tasks not followed */
__u64 gaps_unrecorded = 0;       /* their spans that did not fit into lost_rb */

struct cpu_cur cur[MAX_CPUS] = {};

/* Where the hypervisor's steal count is read (the loader's choice, see features.c). */
enum steal_source { STEAL_NONE, STEAL_RQ };
const volatile __u8 steal_source = STEAL_NONE;
/* Set by the loader once it has put each CPU's count at the start into cur[].steal. */
__u32 steal_seeded = 0;
__u64 steal_snap[MAX_CPUS] = {};        /* steal_snapshot's answer */
__u8 steal_seen[MAX_CPUS] = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 << 20);   /* resized by the loader (--ringbuf-mb) */
} rb SEC(".maps");

static __always_inline bool is_followed(__u32 tid)
{
	if (follow_all) {
		if (only_uid != ONLY_UID_NONE)
			return tid && followed[tid & (PID_LIMIT - 1)] == FOLLOW_YES;
		return tid && followed[tid & (PID_LIMIT - 1)] != FOLLOW_EXCLUDED;
	}
	if (tid == root_tgid)
		return only_uid == ONLY_UID_NONE || followed[tid & (PID_LIMIT - 1)] != FOLLOW_OTHER_USER;
	if (only_uid != ONLY_UID_NONE)
		return followed[tid & (PID_LIMIT - 1)] == FOLLOW_YES;
	return followed[tid & (PID_LIMIT - 1)];
}

static __always_inline struct cpu_cur *this_cpu(void)
{
	return &cur[bpf_get_smp_processor_id() & (MAX_CPUS - 1)];
}

/*
 * The floors of the probe-effect benchmark: every program attached but returning at
 * once (what attaching costs), or reading the clock first (the least that any tracer
 * that timestamps each event pays: on this class of machine the read costs ~50 ns).
 */
static __always_inline bool floored(void)
{
	if (!floor_only)
		return false;
	if (floor_clock)
		this_cpu()->since = bpf_ktime_get_ns();   /* a store, so the read is kept */
	return true;
}

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct rec_batch);
} batches SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 << 10);
} lost_rb SEC(".maps");

/*
 * Records that did not fit are counted in drops[cpu] and said when they were.
 * The guarantee the loader and the analysis rely on: every record counted in
 * drops is in exactly one place, so that at the end of a run
 *   sum(drops) == records of the spans in lost_rb + of the open spans (batches
 *                 map: open and direct) + spans_unrecorded.
 * A lost batch joins its CPU's open span (only its own CPU's programs touch it,
 * under busy); a record written directly (a program interrupting another) joins
 * the CPU's direct span (under direct_busy), or, interrupting a program that was
 * at that span, is a one-record span of its own, counted in spans_unrecorded if
 * lost_rb is full too.
 */
static __always_inline void lost_batch(struct rec_batch *b, __u32 cpu)
{
	/* A program that interrupted another before it set busy appended a later
	 * record first: the batch is not quite in time order. */
	__u64 start = b->recs[0].ts, end = start;

	for (int i = 1; i < REC_BATCH; i++) {
		start = b->recs[i].ts < start ? b->recs[i].ts : start;
		end = b->recs[i].ts > end ? b->recs[i].ts : end;
	}
	__sync_fetch_and_add(&drops[cpu & (MAX_CPUS - 1)], REC_BATCH);
	if (!b->open.n) {
		b->open.start = start;
		b->open.cpu = cpu;
	}
	b->open.end = end;
	b->open.n += REC_BATCH;
}

/* The ring buffer took a batch again: the open span is complete. If lost_rb is
 * full it stays open (and may grow) until it fits or the loader reads it. */
static __always_inline void close_span(struct rec_batch *b)
{
	if (b->open.n && !bpf_ringbuf_output(&lost_rb, &b->open, sizeof(b->open), 0))
		b->open.n = 0;
}

static __always_inline void lost_one(__u32 cpu, __u64 ts)
{
	struct lost_span s = { .start = ts, .end = ts, .n = 1, .cpu = cpu };

	__sync_fetch_and_add(&drops[cpu & (MAX_CPUS - 1)], 1);
	if (bpf_ringbuf_output(&lost_rb, &s, sizeof(s), 0))
		__sync_fetch_and_add(&spans_unrecorded, 1);
}

/*
 * A record written directly (interrupting a program on this CPU) that the ring
 * buffer refused: it joins the CPU's open direct span, so that an episode of a
 * full buffer is one span however many interrupts came in it (the x86 vectors
 * interrupt the other programs often). A program interrupting that one in turn
 * (a hard interrupt in a softirq program) gives a span of its own.
 */
static __always_inline void lost_direct(struct rec_batch *b, __u32 cpu, __u64 ts)
{
	volatile __u32 *busy = &b->direct_busy;

	if (*busy) {
		lost_one(cpu, ts);
		return;
	}
	*busy = 1;
	__sync_fetch_and_add(&drops[cpu & (MAX_CPUS - 1)], 1);
	if (!b->direct.n) {
		b->direct.start = ts;
		b->direct.end = ts;
		b->direct.cpu = cpu;
	}
	/* a deeper interrupt may have taken a later record first */
	b->direct.start = ts < b->direct.start ? ts : b->direct.start;
	b->direct.end = ts > b->direct.end ? ts : b->direct.end;
	b->direct.n++;
	barrier();
	*busy = 0;
}

/* The ring buffer took a direct record again: the open direct span is complete. */
static __always_inline void close_direct(struct rec_batch *b)
{
	volatile __u32 *busy = &b->direct_busy;

	if (!b->direct.n || *busy)
		return;
	*busy = 1;
	if (!bpf_ringbuf_output(&lost_rb, &b->direct, sizeof(b->direct), 0))
		b->direct.n = 0;
	barrier();
	*busy = 0;
}

/* Batched wake-ups: a wake-up per record multiplied a pipe round trip several times. */
static __always_inline __u64 wakeup_flag(void)
{
	return bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) >= wakeup_bytes ?
		BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline void fill(struct rec *r, __u16 type, __u32 cpu, __u64 ts, __u32 tid,
				 __u32 pid, __u32 aux, __u64 a0)
{
	r->type = type;
	r->cpu = cpu;
	r->tid = tid;
	r->ts = ts;
	r->pid = pid;
	r->aux = aux;
	r->a0 = a0;
}

/* Returns the record's timestamp. */
/* Records a record taken at ts (a program that must read the clock before its other work). */
static __always_inline __u64 emit_at(__u64 ts, __u16 type, __u32 tid, __u32 pid, __u32 aux, __u64 a0)
{
	__u32 cpu = bpf_get_smp_processor_id(), zero = 0, n;
	volatile __u32 *busy;
	struct rec_batch *b;
	struct rec one;

	b = bpf_map_lookup_elem(&batches, &zero);
	if (!b)
		return ts;
	busy = &b->busy;
	if (*busy) {
		/* We interrupted a program appending on this CPU: bypass the batch. */
		fill(&one, type, cpu, ts, tid, pid, aux, a0);
		if (bpf_ringbuf_output(&rb, &one, sizeof(one), wakeup_flag()))
			lost_direct(b, cpu, ts);
		else
			close_direct(b);
		return ts;
	}
	*busy = 1;
	/* Read n only once busy is set: an interrupting program then keeps off. */
	n = *(volatile __u32 *)&b->n & (REC_BATCH - 1);
	fill(&b->recs[n], type, cpu, ts, tid, pid, aux, a0);
	if (++n == REC_BATCH) {
		if (bpf_ringbuf_output(&rb, b->recs, sizeof(b->recs), wakeup_flag()))
			lost_batch(b, cpu);
		else
			close_span(b);
		n = 0;
	}
	*(volatile __u32 *)&b->n = n;
	/* The record and the open span are plain stores: keep them before busy is cleared. */
	barrier();
	*busy = 0;
	return ts;
}

/* Returns the record's timestamp. */
static __always_inline __u64 emit(__u16 type, __u32 tid, __u32 pid, __u32 aux, __u64 a0)
{
	return emit_at(bpf_ktime_get_ns(), type, tid, pid, aux, a0);
}

static __always_inline __u64 pair(__u32 tid, __u32 pid)
{
	return (__u64)tid | (__u64)pid << 32;
}

/* ---- task names ------------------------------------------------------------ */
/*
 * Every task a record names (both sides of a recorded switch, the waker of a
 * recorded wake-up) gets its command name into the tasks map once: a bit per
 * tid says it is there, so a switch between two named tasks costs two loads.
 * A followed task's exec and rename write it again.
 */
#define TASKS_MAX 32768

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TASKS_MAX);
	__type(key, __u32);
	__type(value, struct task_name);
} tasks SEC(".maps");

/*
 * The tids written since the loader's --live-names last looked, so that it reads those
 * entries alone: it read the whole map each second it grew, and a watch's map grows all the
 * time (in an hour's soak the loader's main thread then held a CPU 1.3-2 ms about once a
 * second while a traced thread waited for it). When the queue is full the tid is counted
 * as lost, and the loader reads the whole map once more.
 */
#define TASKS_NEWS_MAX 4096

struct {
	__uint(type, BPF_MAP_TYPE_QUEUE);
	__uint(max_entries, TASKS_NEWS_MAX);
	__type(value, __u32);
} tasks_news SEC(".maps");

__u64 named[PID_LIMIT / 64] = {};
__u64 tasks_unnamed = 0;        /* tasks that did not fit into the tasks map */
__u64 tasks_news_lost = 0;      /* updates of the tasks map not in tasks_news (it was full) */

static __always_inline void written(__u32 tid)
{
	if (bpf_map_push_elem(&tasks_news, &tid, 0))
		__sync_fetch_and_add(&tasks_news_lost, 1);
}

static __always_inline bool is_named(__u32 tid)
{
	return named[(tid & (PID_LIMIT - 1)) / 64] & (1ull << (tid % 64));
}

/* Plain stores: a bit lost to a race costs one more update, nothing else. */
static __always_inline void remember(__u32 tid, const struct task_name *n)
{
	long rc = bpf_map_update_elem(&tasks, &tid, n, BPF_ANY);

	if (rc == -E2BIG)
		__sync_fetch_and_add(&tasks_unnamed, 1);
	else if (!rc)
		written(tid);
	named[(tid & (PID_LIMIT - 1)) / 64] |= 1ull << (tid % 64);
}

/* A task seen through a kernel pointer (tp_btf and raw_tp arguments). */
static __always_inline void name_task(__u32 tid, __u32 pid, struct task_struct *t)
{
	struct task_name n = { .pid = pid };

	if (is_named(tid))
		return;
	bpf_probe_read_kernel(n.comm, sizeof(n.comm), __builtin_preserve_access_index(&t->comm));
	remember(tid, &n);
}

/* The task on this CPU, if tid (who the records say it is) has no name yet. */
static __always_inline void name_current(__u32 tid)
{
	struct task_name n;
	__u64 id;

	if (is_named(tid))
		return;
	id = bpf_get_current_pid_tgid();
	n.pid = id >> 32;
	bpf_get_current_comm(n.comm, sizeof(n.comm));
	remember((__u32)id, &n);
}

/* A rename: the new name is an argument (task->comm still holds the old one). */
static __always_inline void rename_task(__u32 tid, __u32 pid, const char *comm)
{
	struct task_name n = { .pid = pid };

	bpf_probe_read_kernel_str(n.comm, sizeof(n.comm), comm);
	remember(tid, &n);
}

/* ---- hypervisor steal time ------------------------------------------------ */
/*
 * The hypervisor's steal clock (KVM: struct kvm_steal_time, ns, which the host
 * adds to each time it runs the vCPU again) is a per-CPU variable, and per-CPU
 * variables reach a program through __ksym only on kernels built with
 * CONFIG_KALLSYMS_ALL (the verifier looks their address up in kallsyms: 6.18
 * here has them in BTF, not in kallsyms). The scheduler keeps a copy in each
 * CPU's struct rq, which any task leads to: prev_steal_time_rq, the clock as of
 * the last update_rq_clock() there (every switch, tick and enqueue;
 * CONFIG_PARAVIRT_TIME_ACCOUNTING), and prev_steal_time, what the tick has
 * taken into the books (CONFIG_PARAVIRT). Both follow the same clock: the larger
 * is the fresher.
 */
#define STEAL_UNKNOWN (~0ull)           /* cur[].steal of a CPU not read yet */

static __always_inline __u64 rq_steal(const struct rq *rq)
{
	__u64 at_clock = 0, at_tick = 0;

	const struct rq___steal *r = (const void *)rq;

	if (bpf_core_field_exists(r->prev_steal_time_rq))
		at_clock = r->prev_steal_time_rq;
	if (bpf_core_field_exists(r->prev_steal_time))
		at_tick = r->prev_steal_time;
	return at_clock > at_tick ? at_clock : at_tick;
}

/* The run queue a task was last put on (CONFIG_FAIR_GROUP_SCHED's se.cfs_rq). */
static __always_inline const struct rq *rq_of(struct task_struct *t)
{
	return t->se.cfs_rq->rq;
}

/* A STEAL record when this CPU's count grew since it was last read here. */
static __always_inline void steal_check(struct cpu_cur *c)
{
	const struct rq *rq;
	__u64 now, last;
	__u32 cpu;

	if (steal_source == STEAL_NONE || !steal_seeded)
		return;
	rq = rq_of(bpf_get_current_task_btf());
	cpu = bpf_get_smp_processor_id();
	if (!rq || rq->cpu != cpu)
		return;
	now = rq_steal(rq);
	last = c->steal;
	if (now <= last && last != STEAL_UNKNOWN)
		return;
	c->steal = now;
	if (last != STEAL_UNKNOWN)
		emit(REC_STEAL, 0, 0, cpu, now - last);
}

/* Run by the loader at the start and the end (a task iterator): each CPU's count, from
 * the run queues its tasks lead to (every CPU has bound kernel threads). */
SEC("iter/task")
int steal_snapshot(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	const struct rq *rq;
	__u32 cpu;

	if (!t || steal_source == STEAL_NONE)
		return 0;
	rq = rq_of(t);
	if (!rq)
		return 0;
	cpu = rq->cpu;
	if (cpu < MAX_CPUS) {
		steal_snap[cpu] = rq_steal(rq);
		steal_seen[cpu] = 1;
	}
	return 0;
}

/* ---- credentials (--only-uid) ------------------------------------------- */

/* Tasks that were recorded and took another user's rights, by tid (trace.json "left_trace"). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, LEFT_MAX);
	__type(key, __u32);
	__type(value, struct left_task);
} left SEC(".maps");

__u64 left_total = 0;           /* such departures, listed in left or not */

/* Are the current task's real, effective, saved and file-system uids all only_uid? */
static __always_inline bool creds_all_user(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	const struct cred *cr = BPF_CORE_READ(t, cred);

	return BPF_CORE_READ(cr, uid.val) == only_uid && BPF_CORE_READ(cr, euid.val) == only_uid &&
	       BPF_CORE_READ(cr, suid.val) == only_uid && BPF_CORE_READ(cr, fsuid.val) == only_uid;
}

/* The current task's followed[] entry and this CPU's filter set to mark. */
static __always_inline void set_follow(__u32 tid, __u8 mark)
{
	struct cpu_cur *c = this_cpu();

	followed[tid & (PID_LIMIT - 1)] = mark;
	if ((__u32)c->id == tid)
		c->followed = mark == FOLLOW_YES;
}

static __always_inline void took_rights(__u64 id, __u32 why)
{
	struct left_task l = { .pid = id >> 32, .why = why };
	__u32 tid = (__u32)id;

	set_follow(tid, FOLLOW_OTHER_USER);
	__sync_fetch_and_add(&left_total, 1);
	l.ts = bpf_ktime_get_ns();
	bpf_get_current_comm(l.comm, sizeof(l.comm));
	bpf_map_update_elem(&left, &tid, &l, BPF_ANY);
}

/*
 * --only-uid: the current task's credentials may have changed (why: an exec, or the exit of
 * a credential call): check them again. A recorded task that is no longer all the user's
 * leaves (took_rights); with --all-cpus one that now is joins. True when it joined.
 */
static __always_inline bool recheck_creds(__u32 why)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u8 mark = followed[tid & (PID_LIMIT - 1)];
	bool was = is_followed(tid), mine;

	if (only_uid == ONLY_UID_NONE || (follow_all ? !tid || mark == FOLLOW_EXCLUDED : !was))
		return false;
	mine = creds_all_user();
	if (was && !mine)
		took_rights(id, why);
	else if (follow_all && mine != was)
		set_follow(tid, mine ? FOLLOW_YES : FOLLOW_OTHER_USER);
	else if (follow_all && !mine && mark != FOLLOW_OTHER_USER)
		followed[tid & (PID_LIMIT - 1)] = FOLLOW_OTHER_USER;
	return mine && !was;
}

/* At a system call's exit: after a credential call, check again. True: the task joined (its
 * exit, whose entry was not recorded, is not recorded either). */
static __always_inline bool cred_call_exit(long nr)
{
	__u64 n = (__u64)nr;

	if (only_uid == ONLY_UID_NONE || n >= SYSCALL_MASK_WORDS * 64 ||
	    !(cred_syscalls[n / 64] & (1ull << (n % 64))))
		return false;
	return recheck_creds(LEFT_CRED_CHANGE);
}

/* ---- syscalls ---------------------------------------------------------- */

/* --syscalls: is nr one to record? (always, without the filter) */
static __always_inline bool syscall_wanted(long nr)
{
	if (!syscall_filter)
		return true;
	__u64 n = (__u64)nr;

	if (n >= SYSCALL_MASK_WORDS * 64)      /* a negative nr too */
		return false;
	return syscall_mask[n / 64] & (1ull << (n % 64));
}

/*
 * A switch went by here without the sched_switch program: the task leaving (or running, for
 * running_here) is not the one the last switch here brought in. The filter has been wrong
 * since: a followed task's switches, wake-up waits and interrupts not taken, or taken under
 * the wrong task. Its time, from the last switch recorded here, goes to lost_rb as a span of
 * no known records. This 6.18 guest misses switches of other tasks (its agent's threads) to
 * idle, also on a CPU the workload never uses, and under load the switch back from them to a
 * followed task (perf record -e sched:sched_switch sees no switch either). Between a task not
 * followed (the last one switched in) and another, no followed task's records are in doubt
 * unless one was switched both in and out unseen, so those are only counted: a span from the
 * last recorded switch (the start of the trace on a CPU the workload never ran on) would
 * leave out every iteration since.
 */
static __always_inline void switch_unseen(struct cpu_cur *c, __u32 tid)
{
	if (c->followed || is_followed(tid)) {
		struct lost_span s = { .start = c->since, .end = bpf_ktime_get_ns(),
				       .cpu = bpf_get_smp_processor_id() };

		__sync_fetch_and_add(&switches_missed, 1);
		if (bpf_ringbuf_output(&lost_rb, &s, sizeof(s), 0))
			__sync_fetch_and_add(&gaps_unrecorded, 1);
	} else {
		__sync_fetch_and_add(&switches_missed_other, 1);
	}
}

/*
 * This CPU's state for a program in the context of the task it runs (a system call, a user
 * page fault, a function probe): the last switch recorded here says which task that is,
 * checked against current, since a switch the sched_switch program did not see
 * (switch_unseen) made the filter drop a followed task's system calls (72 of a pipe
 * ping-pong's 2 000 round trips on a loaded machine). From a mismatch on, the state is
 * current's, and the next missed switch's span starts here.
 */
static __always_inline struct cpu_cur *running_here(void)
{
	struct cpu_cur *c = this_cpu();
	__u64 cur = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)cur;

	if ((__u32)c->id == tid && c->known)
		return c;
	if (c->known)
		switch_unseen(c, tid);
	c->id = cur;                    /* tid | tgid << 32, as pair() */
	c->followed = is_followed(tid);
	c->known = 1;
	c->since = bpf_ktime_get_ns();
	return c;
}

/*
 * running_here() for a system call, whose pt_regs are its task's own (the top of its kernel
 * stack): the same regs as the last call checked here, with no switch since (on_switch clears
 * them), is the same task, so only a task's first call after a switch pays the helper call
 * (a kernel with Safe RET, as this one, makes each ~35 ns: two per call of every task was
 * +70 ns a system call for tasks not traced).
 */
static __always_inline struct cpu_cur *running_call(const void *regs)
{
	struct cpu_cur *c = this_cpu();

	if (c->regs == (__u64)regs && regs)
		return c;
	c = running_here();
	c->regs = (__u64)regs;
	return c;
}

/* c: running_here(), read once by the program */
static __always_inline int on_sys(struct cpu_cur *c, __u16 type, long nr, __u64 arg)
{
	if (c->followed && syscall_wanted(nr))
		emit(type, (__u32)c->id, c->id >> 32, nr, arg);
	return 0;
}

/*
 * Messages: what a followed task sends (write, sendto) and receives (read, recvfrom), as the
 * FNV-1a hash of its first MSG_HASH_BYTES bytes and its length (a MSG record), so that a trace
 * on another host can find the same message by its content (`ipctrace merge`). A send is
 * hashed at the system call's entry (its buffer as given), a receive at its exit (the bytes
 * it returned: the buffer's address is kept from the entry, per task).
 */
#if defined(__TARGET_ARCH_x86)
#define NR_READ 0
#define NR_WRITE 1
#define NR_SENDTO 44
#define NR_RECVFROM 45
#elif defined(__TARGET_ARCH_arm64)
#define NR_READ 63
#define NR_WRITE 64
#define NR_SENDTO 206
#define NR_RECVFROM 207
#endif

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);     /* tid */
	__type(value, __u64);   /* the receive's buffer */
} recv_buf SEC(".maps");

struct msg_bytes {
	__u8 b[MSG_HASH_BYTES];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct msg_bytes);
} msg_scratch SEC(".maps");

static __always_inline void emit_msg(struct cpu_cur *c, __u32 dir, __u64 buf, __u64 len)
{
	__u32 zero = 0, hash = 2166136261u, n = len < MSG_HASH_BYTES ? len : MSG_HASH_BYTES;
	struct msg_bytes *m = bpf_map_lookup_elem(&msg_scratch, &zero);

	if (!m || !len)
		return;
	if (bpf_probe_read_user(m->b, n & (MSG_HASH_BYTES - 1) ? n & (MSG_HASH_BYTES - 1) : MSG_HASH_BYTES,
				(const void *)buf)) {
		dir |= MSG_UNREAD;
	} else {
		for (__u32 i = 0; i < MSG_HASH_BYTES; i++) {
			if (i >= n)
				break;
			hash = (hash ^ m->b[i]) * 16777619u;
		}
	}
	emit(REC_MSG, (__u32)c->id, c->id >> 32, dir, (__u64)hash | (len & 0xffffffffu) << 32);
}

static __always_inline void msg_enter(struct cpu_cur *c, long nr, __u64 buf, __u64 len)
{
#ifdef NR_READ
	__u32 tid;

	if (!record_msgs || !c->followed)
		return;
	tid = (__u32)c->id;
	if (nr == NR_WRITE || nr == NR_SENDTO)
		emit_msg(c, MSG_SEND, buf, len);
	else if (nr == NR_READ || nr == NR_RECVFROM)
		bpf_map_update_elem(&recv_buf, &tid, &buf, BPF_ANY);
#endif
}

static __always_inline void msg_exit(struct cpu_cur *c, long nr, long ret)
{
#ifdef NR_READ
	__u32 tid;
	__u64 *buf;

	if (!record_msgs || !c->followed || (nr != NR_READ && nr != NR_RECVFROM))
		return;
	tid = (__u32)c->id;
	buf = bpf_map_lookup_elem(&recv_buf, &tid);
	if (!buf)
		return;
	if (ret > 0)
		emit_msg(c, MSG_RECV, *buf, ret);
	bpf_map_delete_elem(&recv_buf, &tid);
#endif
}

SEC("tp_btf/sys_enter")
int BPF_PROG(sys_enter_btf, struct pt_regs *regs, long nr)
{
	struct cpu_cur *c;

	if (floored())
		return 0;
	c = running_call(regs);
	on_sys(c, REC_SYS_ENTER, nr, PT_REGS_PARM1(regs));
	msg_enter(c, nr, PT_REGS_PARM2(regs), PT_REGS_PARM3(regs));
	return 0;
}

SEC("raw_tp/sys_enter")
int BPF_PROG(sys_enter_raw, struct pt_regs *regs, long nr)
{
	struct cpu_cur *c;

	if (floored() || !(c = running_call(regs))->followed)
		return 0;
	on_sys(c, REC_SYS_ENTER, nr, PT_REGS_PARM1_CORE(regs));
	msg_enter(c, nr, PT_REGS_PARM2_CORE(regs), PT_REGS_PARM3_CORE(regs));
	return 0;
}

SEC("tp/raw_syscalls/sys_enter")
int sys_enter_tp(struct trace_event_raw_sys_enter *ctx)
{
	/* read before the helper call: the verifier refuses a ctx load at an offset kept in a register */
	long nr = ctx->id;
	__u64 a0 = ctx->args[0], a1 = ctx->args[1], a2 = ctx->args[2];
	struct cpu_cur *c;

	barrier_var(a0);
	barrier_var(a1);
	barrier_var(a2);
	if (floored())
		return 0;
	c = running_here();
	on_sys(c, REC_SYS_ENTER, nr, a0);
	msg_enter(c, nr, a1, a2);
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(sys_exit_btf, struct pt_regs *regs, long ret)
{
	long nr = REGS_SYSCALL_NR(regs);
	struct cpu_cur *c;

	if (floored())
		return 0;
	c = running_call(regs);
	msg_exit(c, nr, ret);
	if (cred_call_exit(nr))
		return 0;
	return on_sys(c, REC_SYS_EXIT, nr, ret);
}

SEC("raw_tp/sys_exit")
int BPF_PROG(sys_exit_raw, struct pt_regs *regs, long ret)
{
	struct cpu_cur *c;
	long nr;

	if (floored())
		return 0;
	c = running_call(regs);
	/* --only-uid --all-cpus: a task not followed may become the user's here */
	if (!c->followed && !(only_uid != ONLY_UID_NONE && follow_all))
		return 0;
	nr = regs_syscall_nr(regs);
	msg_exit(c, nr, ret);
	if (cred_call_exit(nr))
		return 0;
	return on_sys(c, REC_SYS_EXIT, nr, ret);
}

SEC("tp/raw_syscalls/sys_exit")
int sys_exit_tp(struct trace_event_raw_sys_exit *ctx)
{
	/* read before the helper call, as in sys_enter_tp */
	long nr = ctx->id, ret = ctx->ret;
	struct cpu_cur *c;

	barrier_var(nr);
	barrier_var(ret);
	if (floored())
		return 0;
	c = running_here();
	msg_exit(c, nr, ret);
	if (cred_call_exit(nr))
		return 0;
	return on_sys(c, REC_SYS_EXIT, nr, ret);
}

/* ---- scheduler ----------------------------------------------------------- */

/* Returns whether the switch was recorded (a followed task on either side). */
static __always_inline bool on_switch(__u32 prev_tid, __u32 prev_pid, __u32 prev_state,
				      __u32 next_tid, __u32 next_pid)
{
	struct cpu_cur *c = this_cpu();
	bool next_followed = is_followed(next_tid);

	if (c->known && (__u32)c->id != prev_tid)
		switch_unseen(c, prev_tid);
	c->id = pair(next_tid, next_pid);
	c->followed = next_followed;
	c->known = 1;
	c->regs = 0;
	if (!next_followed && !is_followed(prev_tid))
		return false;
	steal_check(c);
	c->since = emit(REC_SWITCH, prev_tid, prev_pid, prev_state, pair(next_tid, next_pid));
	return true;
}

/* A preempted task is runnable whatever its state word says. */
SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	if (floored())
		return 0;
	if (on_switch(prev->pid, prev->tgid, preempt ? 0 : task_state_btf(prev), next->pid, next->tgid)) {
		name_task(prev->pid, prev->tgid, prev);
		name_task(next->pid, next->tgid, next);
	}
	return 0;
}

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u32 prev_tid, next_tid, prev_pid, next_pid;

	if (floored())
		return 0;
	prev_tid = BPF_CORE_READ(prev, pid);
	next_tid = BPF_CORE_READ(next, pid);
	prev_pid = BPF_CORE_READ(prev, tgid);
	next_pid = BPF_CORE_READ(next, tgid);
	if (on_switch(prev_tid, prev_pid, preempt ? 0 : task_state(prev), next_tid, next_pid)) {
		name_task(prev_tid, prev_pid, prev);
		name_task(next_tid, next_pid, next);
	}
	return 0;
}

/* The classic format has tids only: prev is current; next's pid is unknown (0), so next
 * is named for now and again once it is seen leaving a CPU, as current. */
SEC("tp/sched/sched_switch")
int sched_switch_tp(struct trace_event_raw_sched_switch *ctx)
{
	long state = ctx->prev_state;
	struct task_name n = {};
	__u32 next = ctx->next_pid;

	if (floored())
		return 0;
	/* TASK_REPORT_MAX (0x100 and up) marks a preempted task in this format. */
	if (state >= 0x100)
		state = 0;
	if (on_switch(ctx->prev_pid, this_cpu()->id >> 32, state, next, 0)) {
		name_current(ctx->prev_pid);
		if (!is_named(next) && !bpf_map_lookup_elem(&tasks, &next)) {
			bpf_probe_read_kernel(n.comm, sizeof(n.comm), ctx->next_comm);
			if (!bpf_map_update_elem(&tasks, &next, &n, BPF_NOEXIST))
				written(next);
		}
	}
	return 0;
}

/*
 * Every sched_waking and sched_wakeup is kept. The two of one try_to_wake_up() on the
 * same CPU were once taken for one moment and the wakeup left out; on this class of VM
 * the remote activation between them (select_task_rq, the target run queue's lock)
 * takes up to ~10 us, which is the `wakeup` component and what runqlat and perf sched
 * leave out of the scheduling delay they measure from sched_wakeup.
 */
static __always_inline int on_wake(__u16 type, __u32 tid, __u32 pid, __u32 cpu)
{
	struct cpu_cur *c = this_cpu();

	if (!c->followed && !is_followed(tid))
		return 0;
	/* --only-uid: a wake-up is the woken task's; another user's is not recorded, whoever woke it */
	if (only_uid != ONLY_UID_NONE && c->followed && !is_followed(tid))
		return 0;
	/* In a hard interrupt the "waker" is only the task the interrupt hit. */
	emit(type, tid, pid, cpu | (c->in_hardirq ? WAKE_IN_HARDIRQ : 0), c->id);
	name_current((__u32)c->id);
	return 0;
}

#define WAKE_PROGS(name, type)                                                        \
SEC("tp_btf/" #name)                                                                   \
int BPF_PROG(name##_btf, struct task_struct *p)                                       \
{                                                                                      \
	if (floored())                                                              \
		return 0;                                                              \
	return on_wake(type, p->pid, p->tgid, task_cpu_btf(p));                       \
}                                                                                      \
SEC("raw_tp/" #name)                                                                   \
int BPF_PROG(name##_raw, struct task_struct *p)                                       \
{                                                                                      \
	if (floored())                                                              \
		return 0;                                                              \
	return on_wake(type, BPF_CORE_READ(p, pid), BPF_CORE_READ(p, tgid), task_cpu(p)); \
}                                                                                      \
SEC("tp/sched/" #name)                                                                 \
int name##_tp(struct trace_event_raw_sched_wakeup_template *ctx)                      \
{                                                                                      \
	if (floored())                                                              \
		return 0;                                                              \
	return on_wake(type, ctx->pid, 0, ctx->target_cpu);                            \
}

WAKE_PROGS(sched_waking, REC_WAKING)
WAKE_PROGS(sched_wakeup, REC_WAKEUP)
WAKE_PROGS(sched_wakeup_new, REC_WAKEUP_NEW)

static __always_inline int on_migrate(__u32 tid, __u32 pid, __u32 dest, __u32 orig)
{
	if (!is_followed(tid))
		return 0;
	emit(REC_MIGRATE, tid, pid, dest, orig);
	return 0;
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(sched_migrate_task_btf, struct task_struct *p, int dest_cpu)
{
	if (floored())
		return 0;
	return on_migrate(p->pid, p->tgid, dest_cpu, task_cpu_btf(p));
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(sched_migrate_task_raw, struct task_struct *p, int dest_cpu)
{
	if (floored())
		return 0;
	return on_migrate(BPF_CORE_READ(p, pid), BPF_CORE_READ(p, tgid), dest_cpu, task_cpu(p));
}

SEC("tp/sched/sched_migrate_task")
int sched_migrate_task_tp(struct trace_event_raw_sched_migrate_task *ctx)
{
	if (floored())
		return 0;
	return on_migrate(ctx->pid, 0, ctx->dest_cpu, ctx->orig_cpu);
}

/* Children and threads of a followed task are followed from their first instruction.
 * Forks and exits are rare: the helper's answer needs no per-CPU state. */
static __always_inline int on_fork(__u32 parent_tid, __u32 parent_pid, __u32 child_tid,
				   __u32 child_pid)
{
	__u8 parent = followed[parent_tid & (PID_LIMIT - 1)];

	/* --all-cpus: a thread or child of the tracer is the tracer's */
	if (follow_all && parent == FOLLOW_EXCLUDED) {
		followed[child_tid & (PID_LIMIT - 1)] = FOLLOW_EXCLUDED;
		return 0;
	}
	if (!is_followed(parent_tid)) {
		/* --only-uid: the child has its parent's credentials (and a tid that may have been a
		 * followed task's): with --all-cpus its parent's verdict, otherwise not followed */
		if (only_uid != ONLY_UID_NONE)
			followed[child_tid & (PID_LIMIT - 1)] = follow_all ? parent : 0;
		return 0;
	}
	followed[child_tid & (PID_LIMIT - 1)] = FOLLOW_YES;
	emit(REC_FORK, parent_tid, parent_pid, 0, pair(child_tid, child_pid));
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(sched_process_fork_btf, struct task_struct *parent, struct task_struct *child)
{
	__u64 id;

	if (floored())
		return 0;
	id = bpf_get_current_pid_tgid();
	return on_fork((__u32)id, id >> 32, child->pid, child->tgid);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(sched_process_fork_raw, struct task_struct *parent, struct task_struct *child)
{
	__u64 id;

	if (floored())
		return 0;
	id = bpf_get_current_pid_tgid();
	return on_fork((__u32)id, id >> 32, BPF_CORE_READ(child, pid), BPF_CORE_READ(child, tgid));
}

SEC("tp/sched/sched_process_fork")
int sched_process_fork_tp(struct trace_event_raw_sched_process_fork *ctx)
{
	__u64 id;

	if (floored())
		return 0;
	id = bpf_get_current_pid_tgid();
	return on_fork((__u32)id, id >> 32, ctx->child_pid, 0);
}

static __always_inline int on_exit(void)
{
	__u64 id = bpf_get_current_pid_tgid();

	if (!is_followed((__u32)id))
		return 0;
	emit(REC_EXIT, (__u32)id, id >> 32, 0, 0);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit_btf)
{
	if (floored())
		return 0;
	return on_exit();
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(sched_process_exit_raw)
{
	if (floored())
		return 0;
	return on_exit();
}

SEC("tp/sched/sched_process_exit")
int sched_process_exit_tp(void *ctx)
{
	if (floored())
		return 0;
	return on_exit();
}

/* --comm: is this name (a task's comm, NUL-terminated within 16 bytes) one to follow? */
static __always_inline bool comm_wanted(const char *comm)
{
	if (only_uid != ONLY_UID_NONE && !creds_all_user())
		return false;
	if (follow_comm_uid != (__u32)-1) {
		struct task_struct *t = (struct task_struct *)bpf_get_current_task();

		if ((__u32)bpf_get_current_uid_gid() != follow_comm_uid ||
		    BPF_CORE_READ(t, cred, euid.val) != follow_comm_uid)
			return false;
	}
	for (__u32 i = 0; i < FOLLOW_COMMS && i < follow_comms; i++) {
		bool same = true;

		for (int j = 0; j < 16; j++) {
			if (comm[j] != follow_comm[i][j]) {
				same = false;
				break;
			}
			if (!comm[j])
				break;
		}
		if (same)
			return true;
	}
	return false;
}

/* Follow tid from now on; the filter cache of the CPU it runs on too (it need not switch first). */
static __always_inline void follow_now(__u32 tid)
{
	struct cpu_cur *c = this_cpu();

	followed[tid & (PID_LIMIT - 1)] = 1;
	if ((__u32)c->id == tid)
		c->followed = 1;
}

/* A followed task's new name: after exec (current), or a rename (any task, the new name given).
 * A task that execs under a --comm name is followed from there. */
static __always_inline int on_exec(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct task_name n = { .pid = id >> 32 };

	bpf_get_current_comm(n.comm, sizeof(n.comm));
	/* --only-uid: the new program's credentials are committed by now (a setuid program's) */
	recheck_creds(LEFT_SETUID_EXEC);
	if (!is_followed((__u32)id)) {
		if (!follow_comms || !comm_wanted(n.comm))
			return 0;
		follow_now((__u32)id);
	}
	remember((__u32)id, &n);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(sched_process_exec_btf)
{
	return floored() ? 0 : on_exec();
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(sched_process_exec_raw)
{
	return floored() ? 0 : on_exec();
}

SEC("tp/sched/sched_process_exec")
int sched_process_exec_tp(void *ctx)
{
	return floored() ? 0 : on_exec();
}

/* --comm: a task renaming itself into a name to follow (prctl(PR_SET_NAME) renames current). */
static __always_inline bool follow_renamed(__u32 tid, const char *comm)
{
	char name[16] = {};

	if (!follow_comms)
		return false;
	bpf_probe_read_kernel_str(name, sizeof(name), comm);
	if (!comm_wanted(name))
		return false;
	follow_now(tid);
	return true;
}

SEC("tp_btf/task_rename")
int BPF_PROG(task_rename_btf, struct task_struct *task, const char *comm)
{
	if (floored() || (!is_followed(task->pid) && !follow_renamed(task->pid, comm)))
		return 0;
	rename_task(task->pid, task->tgid, comm);
	return 0;
}

SEC("raw_tp/task_rename")
int BPF_PROG(task_rename_raw, struct task_struct *task, const char *comm)
{
	__u32 tid;

	if (floored())
		return 0;
	tid = BPF_CORE_READ(task, pid);
	if (is_followed(tid) || follow_renamed(tid, comm))
		rename_task(tid, BPF_CORE_READ(task, tgid), comm);
	return 0;
}

/* The classic format carries the new name itself, and the tid only. */
SEC("tp/task/task_rename")
int task_rename_tp(struct trace_event_raw_task_rename *ctx)
{
	struct task_name n = {}, *old;
	__u32 tid = ctx->pid;

	if (floored())
		return 0;
	bpf_probe_read_kernel(n.comm, sizeof(n.comm), ctx->newcomm);
	if (!is_followed(tid) && !(follow_comms && comm_wanted(n.comm) && (follow_now(tid), true)))
		return 0;
	if ((old = bpf_map_lookup_elem(&tasks, &tid)))
		n.pid = old->pid;
	remember(tid, &n);
	return 0;
}

/* ---- interrupts ---------------------------------------------------------- */

/*
 * Interrupts of an idle CPU count too: they are what wakes a blocked workload.
 * Hard interrupts and x86 vectors also keep cur[cpu].in_hardirq, for every task
 * (a plain store): a wake-up taken there is the interrupt's, not the task's.
 */
enum hard_mark { HARD_KEEP, HARD_ENTER, HARD_EXIT };

static __always_inline int on_irq(__u16 type, __u32 nr, __u64 a0, enum hard_mark mark)
{
	struct cpu_cur *c = this_cpu();

	if (mark != HARD_KEEP)
		c->in_hardirq = mark == HARD_ENTER;
	if (c->followed || (c->known && (__u32)c->id == 0))
		emit(type, (__u32)c->id, c->id >> 32, nr, a0);
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(irq_handler_entry_btf, int irq)
{
	return floored() ? 0 : on_irq(REC_IRQ_ENTRY, irq, 0, HARD_ENTER);
}

SEC("raw_tp/irq_handler_entry")
int BPF_PROG(irq_handler_entry_raw, int irq)
{
	return floored() ? 0 : on_irq(REC_IRQ_ENTRY, irq, 0, HARD_ENTER);
}

SEC("tp/irq/irq_handler_entry")
int irq_handler_entry_tp(struct trace_event_raw_irq_handler_entry *ctx)
{
	return floored() ? 0 : on_irq(REC_IRQ_ENTRY, ctx->irq, 0, HARD_ENTER);
}

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(irq_handler_exit_btf, int irq, struct irqaction *action, int ret)
{
	return floored() ? 0 : on_irq(REC_IRQ_EXIT, irq, ret, HARD_EXIT);
}

SEC("raw_tp/irq_handler_exit")
int BPF_PROG(irq_handler_exit_raw, int irq, struct irqaction *action, int ret)
{
	return floored() ? 0 : on_irq(REC_IRQ_EXIT, irq, ret, HARD_EXIT);
}

SEC("tp/irq/irq_handler_exit")
int irq_handler_exit_tp(struct trace_event_raw_irq_handler_exit *ctx)
{
	return floored() ? 0 : on_irq(REC_IRQ_EXIT, ctx->irq, ctx->ret, HARD_EXIT);
}

#define SOFTIRQ_PROGS(name, type)                                  \
SEC("tp_btf/" #name)                                               \
int BPF_PROG(name##_btf, unsigned int vec)                         \
{                                                                  \
	return floored() ? 0 : on_irq(type, vec, 0, HARD_KEEP);   \
}                                                                  \
SEC("raw_tp/" #name)                                               \
int BPF_PROG(name##_raw, unsigned int vec)                         \
{                                                                  \
	return floored() ? 0 : on_irq(type, vec, 0, HARD_KEEP);   \
}                                                                  \
SEC("tp/irq/" #name)                                               \
int name##_tp(struct trace_event_raw_softirq *ctx)                 \
{                                                                  \
	return floored() ? 0 : on_irq(type, ctx->vec, 0, HARD_KEEP);  \
}

SOFTIRQ_PROGS(softirq_entry, REC_SOFTIRQ_ENTRY)
SOFTIRQ_PROGS(softirq_exit, REC_SOFTIRQ_EXIT)

/*
 * x86 system vectors (arch/x86/include/asm/trace/irq_vectors.h): the local timer,
 * the scheduler's and smp_call_function's IPIs, irq_work, ... each a pair of
 * tracepoints with the vector number. Their exits also read the steal count:
 * the local timer's at least once a tick on a busy CPU. The classic format is
 * spelt out here, so the programs build for any architecture (elsewhere the
 * tracepoints are absent).
 */
struct vector_tp_args {
	struct trace_entry ent;
	int vector;
};

static __always_inline int on_vector(bool entry, int vector)
{
	struct cpu_cur *c = this_cpu();

	c->in_hardirq = entry;
	if (!entry)
		steal_check(c);
	if (c->followed || (c->known && (__u32)c->id == 0))
		emit(entry ? REC_VECTOR_ENTRY : REC_VECTOR_EXIT, (__u32)c->id, c->id >> 32, vector, 0);
	return 0;
}

#define VECTOR_PROGS(name, entry)                                  \
SEC("tp_btf/" #name)                                               \
int BPF_PROG(name##_btf, int vector)                               \
{                                                                  \
	return floored() ? 0 : on_vector(entry, vector);           \
}                                                                  \
SEC("raw_tp/" #name)                                               \
int BPF_PROG(name##_raw, int vector)                               \
{                                                                  \
	return floored() ? 0 : on_vector(entry, vector);           \
}                                                                  \
SEC("tp/irq_vectors/" #name)                                       \
int name##_tp(struct vector_tp_args *ctx)                          \
{                                                                  \
	return floored() ? 0 : on_vector(entry, ctx->vector);      \
}
#define VECTOR(name) VECTOR_PROGS(name##_entry, true) VECTOR_PROGS(name##_exit, false)

VECTOR(local_timer)
VECTOR(reschedule)
VECTOR(call_function)
VECTOR(call_function_single)
VECTOR(irq_work)
VECTOR(x86_platform_ipi)
VECTOR(spurious_apic)
VECTOR(error_apic)
VECTOR(thermal_apic)
VECTOR(threshold_apic)
VECTOR(deferred_error_apic)

/* ---- user page faults ---------------------------------------------------- */

/* The classic exceptions format is not in BTF (x86: address, ip, error_code). */
struct page_fault_tp_args {
	struct trace_entry ent;
	unsigned long address;
	unsigned long ip;
	unsigned long error_code;
};

static __always_inline int on_fault(__u64 address, __u64 error_code)
{
	struct cpu_cur *c = running_here();

	if (c->followed)
		emit(REC_PAGE_FAULT, (__u32)c->id, c->id >> 32, error_code, address);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_user_btf, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	return floored() ? 0 : on_fault(address, error_code);
}

SEC("raw_tp/page_fault_user")
int BPF_PROG(page_fault_user_raw, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	return floored() ? 0 : on_fault(address, error_code);
}

SEC("tp/exceptions/page_fault_user")
int page_fault_user_tp(struct page_fault_tp_args *ctx)
{
	return floored() ? 0 : on_fault(ctx->address, ctx->error_code);
}

/* ---- IPC function probes ------------------------------------------------- */
/*
 * The target of each program is set by the loader from the kernel's BTF
 * (names differ between versions). The size argument is one of the first five
 * arguments, either a byte count or a struct iov_iter whose count is read.
 */

static __always_inline int on_func_entry(__u32 fn, __u64 arg)
{
	struct cpu_cur *c = running_here();
	__u64 size = 0;

	if (!c->followed)
		return 0;
	if (fn_size_kind[fn] == SIZE_SCALAR)
		size = arg;
	else if (fn_size_kind[fn] == SIZE_ITER)
		size = BPF_CORE_READ((struct iov_iter *)arg, count);
	emit(REC_FUNC_ENTRY, (__u32)c->id, c->id >> 32, fn, size);
	return 0;
}

static __always_inline int on_func_exit(__u32 fn, __u64 ret)
{
	struct cpu_cur *c = running_here();

	if (c->followed)
		emit(REC_FUNC_EXIT, (__u32)c->id, c->id >> 32, fn, ret);
	return 0;
}

/* Every argument register is read at its constant offset and then one is chosen:
 * a switch compiles into one ctx load at a computed offset, which the verifier
 * refuses ("dereference of modified ctx ptr"). */
static __always_inline __u64 regs_arg(struct pt_regs *regs, __u32 n)
{
	__u64 a0 = PT_REGS_PARM1(regs), a1 = PT_REGS_PARM2(regs), a2 = PT_REGS_PARM3(regs);
	__u64 a3 = PT_REGS_PARM4(regs), a4 = PT_REGS_PARM5(regs);

	barrier_var(a0);
	barrier_var(a1);
	barrier_var(a2);
	barrier_var(a3);
	barrier_var(a4);
	return n == 0 ? a0 : n == 1 ? a1 : n == 2 ? a2 : n == 3 ? a3 : a4;
}

/* fentry reads arguments through helpers because the argument count differs per target. */
#define FUNC_PROGS(name, fn)                                                   \
SEC("fentry")                                                                   \
int BPF_PROG(name##_fentry)                                                     \
{                                                                               \
	__u64 arg = 0;                                                          \
                                                                                \
	if (floored())                                                       \
		return 0;                                                       \
	if (fn_size_kind[fn] != SIZE_NONE)                                      \
		bpf_get_func_arg(ctx, fn_size_arg[fn], &arg);                   \
	return on_func_entry(fn, arg);                                          \
}                                                                               \
SEC("fexit")                                                                    \
int BPF_PROG(name##_fexit)                                                      \
{                                                                               \
	__u64 ret = 0;                                                          \
                                                                                \
	if (floored())                                                       \
		return 0;                                                       \
	bpf_get_func_ret(ctx, &ret);                                            \
	return on_func_exit(fn, ret);                                           \
}                                                                               \
SEC("kprobe")                                                                   \
int BPF_KPROBE(name##_kprobe)                                                   \
{                                                                               \
	if (floored())                                                       \
		return 0;                                                       \
	return on_func_entry(fn, regs_arg(ctx, fn_size_arg[fn]));               \
}                                                                               \
SEC("kretprobe")                                                                \
int BPF_KRETPROBE(name##_kretprobe, long ret)                                   \
{                                                                               \
	if (floored())                                                       \
		return 0;                                                       \
	return on_func_exit(fn, ret);                                           \
}

FUNC_PROGS(pipe_write, FN_PIPE_WRITE)
FUNC_PROGS(pipe_read, FN_PIPE_READ)
FUNC_PROGS(futex_wait, FN_FUTEX_WAIT)
FUNC_PROGS(futex_wake, FN_FUTEX_WAKE)
FUNC_PROGS(unix_send, FN_UNIX_SEND)
FUNC_PROGS(unix_recv, FN_UNIX_RECV)
FUNC_PROGS(unix_dgram_send, FN_UNIX_DGRAM_SEND)
FUNC_PROGS(unix_dgram_recv, FN_UNIX_DGRAM_RECV)
FUNC_PROGS(copy_to_iter, FN_COPY_TO_ITER)
FUNC_PROGS(copy_from_iter, FN_COPY_FROM_ITER)
FUNC_PROGS(copy_page_to_iter, FN_COPY_PAGE_TO_ITER)
FUNC_PROGS(copy_page_from_iter, FN_COPY_PAGE_FROM_ITER)

/* ---- iteration markers ---------------------------------------------------- */
/*
 * The traced program's own iteration boundaries: USDT probes ipctrace:iteration_begin and
 * ipctrace:iteration_end (examples/ipctrace_marker.h; an optional first argument, the
 * metric's name as a const char *), or a uprobe/uretprobe pair on a function that is one
 * iteration. Attached by the loader for every process (pid -1), recorded for the followed
 * tasks only. A name is read from the task's memory the first time its address is seen
 * (mark_names; the same address in another process is taken to be the same name).
 */
struct mark_name {
	char s[MARK_NAME_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MARK_NAMES_MAX);
	__type(key, __u64);
	__type(value, struct mark_name);
} mark_names SEC(".maps");

static __always_inline void remember_name(__u64 name)
{
	struct mark_name n = {};

	if (name && !bpf_map_lookup_elem(&mark_names, &name) &&
	    bpf_probe_read_user_str(n.s, sizeof(n.s), (const void *)name) > 0)
		bpf_map_update_elem(&mark_names, &name, &n, BPF_NOEXIST);
}

static __always_inline __u64 usdt_name(struct pt_regs *ctx)
{
	long name = 0;

	if (bpf_usdt_arg_cnt(ctx) < 1 || bpf_usdt_arg(ctx, 0, &name))
		return 0;
	return name;
}

/*
 * The work a marker's program does besides its record (the name's argument and lookup)
 * lies outside the iteration: before the clock is read at a begin, after it at an end.
 */
static __always_inline int on_begin(struct pt_regs *ctx, bool usdt)
{
	__u64 id = bpf_get_current_pid_tgid(), name;

	if (floored() || !is_followed((__u32)id))
		return 0;
	name = usdt ? usdt_name(ctx) : 0;
	remember_name(name);
	emit(REC_MARK, (__u32)id, id >> 32, MARK_BEGIN, name);
	return 0;
}

static __always_inline int on_end(struct pt_regs *ctx, bool usdt)
{
	__u64 ts = bpf_ktime_get_ns(), id = bpf_get_current_pid_tgid(), name;

	if (floored() || !is_followed((__u32)id))
		return 0;
	name = usdt ? usdt_name(ctx) : 0;
	emit_at(ts, REC_MARK, (__u32)id, id >> 32, MARK_END, name);
	remember_name(name);
	return 0;
}

SEC("usdt")
int mark_begin_usdt(struct pt_regs *ctx)
{
	return on_begin(ctx, true);
}

SEC("usdt")
int mark_end_usdt(struct pt_regs *ctx)
{
	return on_end(ctx, true);
}

SEC("uprobe")
int mark_begin_uprobe(struct pt_regs *ctx)
{
	return on_begin(ctx, false);
}

SEC("uretprobe")
int mark_end_uretprobe(struct pt_regs *ctx)
{
	return on_end(ctx, false);
}
