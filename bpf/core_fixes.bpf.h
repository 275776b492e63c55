/* SPDX-License-Identifier: MIT */
/* Kernel differences the probes read across, one CO-RE check each. */
#ifndef IPCTRACE_CORE_FIXES_BPF_H
#define IPCTRACE_CORE_FIXES_BPF_H

#include <bpf/bpf_core_read.h>

/* 2f064a59a11f ("sched: Change task_struct::state", 5.14) renamed state to __state. */
struct task_struct___pre_5_14 {
	long state;
};

static __always_inline __u32 task_state(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return BPF_CORE_READ(t, __state);
	return BPF_CORE_READ((struct task_struct___pre_5_14 *)t, state);
}

/* The same through a BTF pointer (tp_btf): a plain load instead of a helper call. */
static __always_inline __u32 task_state_btf(struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return t->__state;
	return ((struct task_struct___pre_5_14 *)t)->state;
}

/* bcf9033e5449 ("sched: move CPU field back into thread_info if THREAD_INFO_IN_TASK", 5.16). */
struct task_struct___pre_5_16 {
	unsigned int cpu;
};

static __always_inline __u32 task_cpu(struct task_struct *t)
{
	if (bpf_core_field_exists(t->thread_info.cpu))
		return BPF_CORE_READ(t, thread_info.cpu);
	return BPF_CORE_READ((struct task_struct___pre_5_16 *)t, cpu);
}

static __always_inline __u32 task_cpu_btf(struct task_struct *t)
{
	if (bpf_core_field_exists(t->thread_info.cpu))
		return t->thread_info.cpu;
	return ((struct task_struct___pre_5_16 *)t)->cpu;
}

/*
 * struct rq's steal fields, as the kernel may or may not have them: prev_steal_time_rq with
 * CONFIG_PARAVIRT_TIME_ACCOUNTING, prev_steal_time with CONFIG_PARAVIRT (the x86 headers have
 * both; Debian's arm64 cloud kernel, which bpf/arch/arm64/vmlinux.h comes from, has the second
 * only). Config options, not a kernel commit: either may be absent on any kernel.
 */
struct rq___steal {
	u64 prev_steal_time;
	u64 prev_steal_time_rq;
} __attribute__((preserve_access_index));

/* arm64's pt_regs as CO-RE finds it (s32 syscallno, after orig_x0): without
 * preserve_access_index a direct read would take offset 0 of this local struct, x0, the
 * call's return value at sys_exit; and a read of 8 bytes would take pmr above it. */
struct pt_regs___arm64_nr {
	int syscallno;
} __attribute__((preserve_access_index));

/* The syscall number survives in the saved registers at sys_exit. */
#if defined(__TARGET_ARCH_x86)
#define REGS_SYSCALL_NR(regs) ((regs)->orig_ax)
#elif defined(__TARGET_ARCH_arm64)
#define REGS_SYSCALL_NR(regs) (((struct pt_regs___arm64_nr *)(regs))->syscallno)
#else
#error "ipctrace: syscall number register unknown for this architecture"
#endif

/* raw_tp arguments are plain kernel pointers: read through the helper. */
static __always_inline long regs_syscall_nr(struct pt_regs *regs)
{
	__typeof__(REGS_SYSCALL_NR(regs)) nr;   /* its own size: arm64's is 32 bits */

	bpf_core_read(&nr, sizeof(nr), &REGS_SYSCALL_NR(regs));
	return nr;
}

#endif
