// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * kspin: the kernel's spinlock measured without a kernel module. Both programs
 * do KSPIN_PAIRS increments of a map value; kspin_locked wraps each in
 * bpf_spin_lock/bpf_spin_unlock (the kernel's arch spinlock with interrupts
 * saved and restored). The workload runs both with BPF_PROG_TEST_RUN and a
 * repeat count; their difference over KSPIN_PAIRS is one lock+unlock pair.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "kspin.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

struct kspin_val {
	struct bpf_spin_lock lock;
	__u64 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kspin_val);
} kspin_map SEC(".maps");

/* volatile: every increment is its own load and store in both programs, so the
 * compiler cannot fold the unlocked loop into one add */
static __always_inline volatile __u64 *counter(void)
{
	__u32 key = 0;
	struct kspin_val *v = bpf_map_lookup_elem(&kspin_map, &key);

	return v ? &v->count : 0;
}

SEC("tc")
int kspin_locked(struct __sk_buff *skb)
{
	__u32 key = 0;
	struct kspin_val *v = bpf_map_lookup_elem(&kspin_map, &key);
	volatile __u64 *cnt;

	if (!v)
		return 0;
	cnt = &v->count;
#pragma clang loop unroll(full)
	for (int i = 0; i < KSPIN_PAIRS; i++) {
		bpf_spin_lock(&v->lock);
		(*cnt)++;
		bpf_spin_unlock(&v->lock);
	}
	return 0;
}

SEC("tc")
int kspin_unlocked(struct __sk_buff *skb)
{
	volatile __u64 *cnt = counter();

	if (!cnt)
		return 0;
#pragma clang loop unroll(full)
	for (int i = 0; i < KSPIN_PAIRS; i++)
		(*cnt)++;
	return 0;
}
