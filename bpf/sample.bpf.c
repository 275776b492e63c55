// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Stack sampler of the workload's tasks: on-CPU stacks from a perf_event
 * timer on every CPU, off-CPU stacks taken at sched_switch and weighted by the
 * ns until the task runs again. Stacks are counted in kernel maps (no ring
 * buffer traffic while the workload runs); the loader reads them at the end.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "ipctrace.h"
#include "sample.h"
#include "core_fixes.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define EFAULT 14

/* Processes of the workload: the root the loader inserts, plus forked children. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SAMPLE_MAX_TGIDS);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, SAMPLE_MAX_STACKS);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, SAMPLE_MAX_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SAMPLE_MAX_STACKS);
	__type(key, struct sample_key);
	__type(value, struct sample_val);
} oncpu SEC(".maps"), offcpu SEC(".maps");

struct switch_out {
	__u64 ts;
	struct sample_key key;
};

/* Tasks of the workload that are off CPU now, by tid. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct switch_out);
} sleeping SEC(".maps");

struct sample_stats stats = {};

/* --only-uid UID: only tasks whose real, effective, saved and file-system uids are all UID
 * are sampled (a followed process that took another user's rights, a setuid program, is not);
 * ONLY_UID_NONE: any. */
const volatile __u32 only_uid = ONLY_UID_NONE;

static __always_inline bool followed(__u32 tgid)
{
	return bpf_map_lookup_elem(&tgids, &tgid) != NULL;
}

static __always_inline bool users(struct task_struct *t)
{
	const struct cred *cr;

	if (only_uid == ONLY_UID_NONE)
		return true;
	cr = BPF_CORE_READ(t, cred);
	return BPF_CORE_READ(cr, uid.val) == only_uid && BPF_CORE_READ(cr, euid.val) == only_uid &&
	       BPF_CORE_READ(cr, suid.val) == only_uid && BPF_CORE_READ(cr, fsuid.val) == only_uid;
}

static __always_inline struct sample_val *slot(void *map, struct sample_key *key)
{
	static const struct sample_val zero = {};
	struct sample_val *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

SEC("perf_event")
int sample_oncpu(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct sample_key key = {};
	struct sample_val *v;

	key.tgid = id >> 32;
	if (!followed(key.tgid) || !users((struct task_struct *)bpf_get_current_task()))
		return 0;
	key.tid = (__u32)id;
	key.kstack = bpf_get_stackid(ctx, &stacks, 0);
	key.ustack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	bpf_get_current_comm(key.comm, sizeof(key.comm));
	__sync_fetch_and_add(&stats.samples, 1);
	v = slot(&oncpu, &key);
	if (!v) {
		__sync_fetch_and_add(&stats.lost_samples, 1);
		return 0;
	}
	__sync_fetch_and_add(&v->count, 1);
	return 0;
}

static __always_inline int on_switch(void *ctx, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	struct switch_out *out;
	struct sample_val *v;
	__u32 tid;

	if (followed(BPF_CORE_READ(prev, tgid)) && users(prev)) {
		struct switch_out o = { .ts = now };

		tid = BPF_CORE_READ(prev, pid);
		o.key.tgid = BPF_CORE_READ(prev, tgid);
		o.key.tid = tid;
		/* prev is still current here, so its stacks are the ones it sleeps in. */
		o.key.kstack = bpf_get_stackid(ctx, &stacks, 0);
		o.key.ustack = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
		o.key.blocked = task_state(prev) != 0;
		BPF_CORE_READ_STR_INTO(&o.key.comm, prev, comm);
		bpf_map_update_elem(&sleeping, &tid, &o, BPF_ANY);
	}
	if (!followed(BPF_CORE_READ(next, tgid)) || !users(next))
		return 0;
	tid = BPF_CORE_READ(next, pid);
	out = bpf_map_lookup_elem(&sleeping, &tid);
	if (!out)
		return 0;
	v = slot(&offcpu, &out->key);
	if (v) {
		__sync_fetch_and_add(&v->count, 1);
		__sync_fetch_and_add(&v->ns, now - out->ts);
	} else {
		__sync_fetch_and_add(&stats.lost_switches, 1);
		__sync_fetch_and_add(&stats.lost_ns, now - out->ts);
	}
	bpf_map_delete_elem(&sleeping, &tid);
	return 0;
}

static __always_inline int on_fork(struct task_struct *parent, struct task_struct *child)
{
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	__u8 one = 1;

	if (followed(BPF_CORE_READ(parent, tgid)) && users(parent))
		bpf_map_update_elem(&tgids, &child_tgid, &one, BPF_ANY);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(switch_btf, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, prev, next);
}

SEC("raw_tp/sched_switch")
int BPF_PROG(switch_raw, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	return on_switch(ctx, prev, next);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork_btf, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(fork_raw, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}
