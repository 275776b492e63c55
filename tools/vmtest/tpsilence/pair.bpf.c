// SPDX-License-Identifier: MIT
/* Two programs that do nothing: their run counts (run_cnt) say whether each tracepoint runs. */
typedef unsigned long long u64;
#define SEC(name) __attribute__((section(name), used))

SEC("tp_btf/sched_waking") int waking(u64 *ctx) { return 0; }
SEC("tp_btf/sched_wakeup") int wakeup(u64 *ctx) { return 0; }
char LICENSE[] SEC("license") = "GPL";
