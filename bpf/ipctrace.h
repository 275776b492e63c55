/* SPDX-License-Identifier: MIT */
/*
 * Records shared by the BPF programs in bpf/, the loader (loaders/) and the
 * decoder (analysis/store/events.py, decode.c; analysis/store/layout.c exports the layouts
 * and flags below that the analysis reads, which checks its own against them). Every ring-buffer record has the same
 * fixed 32-byte layout so that the decoder is one numpy structured dtype and
 * the loader can copy records to events.bin without looking inside.
 *
 * Field use per type (tid/pid = the task the record is about):
 *   SYS_ENTER      aux = syscall nr            a0 = first argument
 *   SYS_EXIT       aux = syscall nr            a0 = return value (signed)
 *   SWITCH         tid/pid = prev task, aux = prev_state (0 = runnable, i.e. preempted)
 *                  a0 = next_tid | (u64)next_pid << 32
 *   WAKING, WAKEUP, WAKEUP_NEW
 *                  tid/pid = wakee, aux = target cpu | WAKE_IN_HARDIRQ when the waker's CPU
 *                  was inside a hard interrupt or an x86 vector handler (a timer, not the
 *                  waker's own work, woke the task), a0 = waker tid | (u64)waker pid << 32
 *   MIGRATE        tid/pid = task, aux = dest cpu, a0 = orig cpu
 *   FORK           tid/pid = parent, a0 = child tid | (u64)child pid << 32
 *   EXIT           tid/pid = exiting task
 *   IRQ_ENTRY/EXIT aux = irq number             a0 = handler return (exit)
 *   SOFTIRQ_ENTRY/EXIT aux = vector
 *   PAGE_FAULT     aux = error code            a0 = address
 *   FUNC_ENTRY/EXIT aux = enum func_id         a0 = size argument (entry) / return value (exit)
 *   VECTOR_ENTRY/EXIT aux = x86 vector (irq_vectors tracepoints: local timer 0xec,
 *                  reschedule 0xfd, call function 0xfc, call function single 0xfb, ...)
 *   STEAL          tid = 0, aux = cpu, a0 = ns the hypervisor took this CPU since the
 *                  last STEAL record of this CPU (emitted when the kernel's count grew)
 *   MARK           an iteration marker of the traced program (ipctrace-loader --usdt/--uprobe):
 *                  tid/pid = the task, aux = MARK_BEGIN (1) or MARK_END (2), a0 = the
 *                  user-space address of the marker's metric name (0 when none: a USDT
 *                  probe without argument, a uprobe); trace.json's marks.names maps the
 *                  address (decimal) to the name, read once per address
 *   MSG            a message a followed task sent (write, sendto: at the system call's entry) or
 *                  received (read, recvfrom: at its exit, ret > 0): aux = MSG_SEND (1) or
 *                  MSG_RECV (2), | MSG_UNREAD when its bytes could not be read; a0 = the
 *                  FNV-1a hash of its first MSG_HASH_BYTES bytes | (u64)its length << 32
 * A pid inside a0 is 0 where the attach mode cannot see it (classic tracepoints).
 * IRQ and SOFTIRQ records are taken for the workload's tasks and for idle CPUs (tid 0).
 * cpu is the CPU the record was taken on; ts is bpf_ktime_get_ns() (CLOCK_MONOTONIC).
 */
#ifndef IPCTRACE_H
#define IPCTRACE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/*
 * Every record type and function id once, as X(ENUM_SUFFIX, name): the enums below, the
 * loader's and the decoder's names and analysis/store/records.py (tests/unit/store/test_records.py checks
 * it against the built library's tables) all come from these lists.
 */
#define IPT_REC_TYPES(X) \
	X(SYS_ENTER, sys_enter) X(SYS_EXIT, sys_exit) X(SWITCH, switch) X(WAKING, waking) \
	X(WAKEUP, wakeup) X(WAKEUP_NEW, wakeup_new) X(MIGRATE, migrate) X(FORK, fork) X(EXIT, exit) \
	X(IRQ_ENTRY, irq_entry) X(IRQ_EXIT, irq_exit) X(SOFTIRQ_ENTRY, softirq_entry) \
	X(SOFTIRQ_EXIT, softirq_exit) X(PAGE_FAULT, page_fault) X(FUNC_ENTRY, func_entry) \
	X(FUNC_EXIT, func_exit) X(VECTOR_ENTRY, vector_entry) X(VECTOR_EXIT, vector_exit) X(STEAL, steal) \
	X(MARK, mark) X(MSG, msg)

#define IPT_FUNC_IDS(X) \
	X(PIPE_WRITE, pipe_write) X(PIPE_READ, pipe_read) X(FUTEX_WAIT, futex_wait) X(FUTEX_WAKE, futex_wake) \
	X(UNIX_SEND, unix_send) X(UNIX_RECV, unix_recv) X(COPY_TO_ITER, copy_to_iter) \
	X(COPY_FROM_ITER, copy_from_iter) X(COPY_PAGE_TO_ITER, copy_page_to_iter) \
	X(COPY_PAGE_FROM_ITER, copy_page_from_iter) X(UNIX_DGRAM_SEND, unix_dgram_send) \
	X(UNIX_DGRAM_RECV, unix_dgram_recv)

#define IPT_REC_ENUM(e, name) REC_##e,
#define IPT_FUNC_ENUM(e, name) FN_##e,
enum rec_type { REC_NONE, IPT_REC_TYPES(IPT_REC_ENUM) REC_TYPE_MAX };     /* REC_SYS_ENTER = 1 */
enum func_id { FN_NONE, IPT_FUNC_IDS(IPT_FUNC_ENUM) FN_MAX };                 /* FN_PIPE_WRITE = 1 */

/* WAKING/WAKEUP/WAKEUP_NEW aux: the waker's CPU was in a hard interrupt or vector handler. */
#define WAKE_IN_HARDIRQ (1u << 31)
#define WAKE_CPU_MASK   0xffffu

/* MSG aux, and how many of a message's first bytes its hash covers (a power of two). */
#define MSG_SEND 1
#define MSG_RECV 2
#define MSG_UNREAD (1u << 8)
#define MSG_HASH_BYTES 64

/* MARK aux. */
#define MARK_BEGIN 1
#define MARK_END   2
/* The mark_names map of trace.bpf.c: user-space address -> the name there, NUL-terminated. */
#define MARK_NAME_LEN 32
#define MARK_NAMES_MAX 1024

/* How a probed function's size argument (fn_size_arg) gives the bytes it moves. */
enum size_kind { SIZE_NONE, SIZE_SCALAR, SIZE_ITER };

/* CPUs the per-CPU arrays of trace.bpf.c and the loader hold (a power of two: masks). */
#define IPT_MAX_CPUS 1024

struct rec {
	__u16 type;     /* enum rec_type */
	__u16 cpu;
	__u32 tid;
	__u64 ts;
	__u32 pid;
	__u32 aux;
	__u64 a0;
};                      /* 32 bytes */

/*
 * When the ring buffer is full, the records are lost but not when they were: a
 * lost_span goes to a small second ring buffer (lost_rb), so that the analysis
 * can leave out exactly the iterations whose events are incomplete.
 */
struct lost_span {
	__u64 start, end;       /* first and last timestamp of the lost records */
	__u64 n;                /* how many records */
	__u32 cpu;              /* where */
	__u32 pad;
};

/*
 * Records are staged per CPU and reach the ring buffer REC_BATCH at a time (one
 * ring-buffer operation per batch instead of per record); a program that
 * interrupts another on the same CPU (busy set) writes its record directly.
 * Batches the ring buffer refuses extend the CPU's open lost span, which goes
 * to lost_rb once the ring buffer takes a batch again (one span per episode,
 * not per batch); records written directly that it refuses extend a second
 * one (direct, under direct_busy), which goes once it takes such a record
 * again. The loader reads the partial batches and the open spans from the map
 * when the run ends.
 */
#define REC_BATCH 64

struct rec_batch {
	__u32 n;                /* records staged */
	__u32 busy;             /* a program on this CPU is appending */
	struct lost_span open;  /* batches lost and not yet in lost_rb (open.n > 0) */
	struct lost_span direct; /* records written directly, lost, not yet in lost_rb */
	__u32 direct_busy;      /* a program on this CPU is extending or closing direct */
	__u32 pad;
	struct rec recs[REC_BATCH];
};

/* --syscalls: a bit per system call number, up to 1024 (x86_64 and arm64 end below 512). */
#define SYSCALL_MASK_WORDS 16
/* followed[tid]: 1 followed; with --all-cpus, the tracer's own tasks are FOLLOW_EXCLUDED (any
 * other value follows the task, but with --only-uid, where only FOLLOW_YES does). */
#define FOLLOW_YES 1
#define FOLLOW_EXCLUDED 2
/* --only-uid: a task whose credentials are not all the user's (another user's task with
 * --all-cpus; a followed task that took another user's rights, no longer followed). */
#define FOLLOW_OTHER_USER 3
/* --only-uid: no uid given. */
#define ONLY_UID_NONE 0xffffffffu

/* --only-uid: a task that was recorded and took another user's rights (the left map of
 * trace.bpf.c, by tid): trace.json "left_trace". */
#define LEFT_MAX 256
enum left_why {
	LEFT_SETUID_EXEC = 1,   /* sched_process_exec: the new program's credentials */
	LEFT_CRED_CHANGE = 2,   /* the exit of setuid, setresuid, ..., capset */
};

struct left_task {
	__u64 ts;               /* when it was seen (CLOCK_MONOTONIC ns, as the records) */
	__u32 pid;              /* its process */
	__u32 why;              /* enum left_why */
	char comm[16];          /* its name then (after an exec: the new program's) */
};

/* The tasks map of trace.bpf.c, tid -> this: each task a record names, once. */
struct task_name {
	char comm[16];          /* as the kernel's task->comm: NUL-terminated, may be cut */
	__u32 pid;              /* 0 where the attach mode could not see it */
};

/* The task on each CPU since its last sched_switch (the probes' filter); a cache line each. */
struct cpu_cur {
	__u64 id;               /* tid | (u64)pid << 32 (pid 0 with classic tracepoints) */
	__u32 followed;
	__u32 known;            /* a sched_switch has been seen here since the probes attached */
	__u32 in_hardirq;       /* inside irq_handler_entry..exit or an x86 vector's entry..exit */
	__u64 since;            /* ts of the last switch recorded here */
	__u64 steal;            /* the hypervisor's steal count (ns) last read here */
	__u64 regs;             /* the pt_regs of the last system call checked here since the last
				 * switch (a task's own: the top of its kernel stack), 0: none */
} __attribute__((aligned(64)));

#define EVENTS_FILE_MAGIC "IPTEVT01"   /* events.bin: 64-byte header, then struct rec */
#define EVENTS_FILE_VERSION 1

struct events_file_header {
	char  magic[8];         /* EVENTS_FILE_MAGIC, no NUL */
	__u32 version;          /* EVENTS_FILE_VERSION */
	__u32 rec_size;         /* sizeof(struct rec) */
	__u64 count;            /* records that follow; rewritten when the loader finishes */
	__u64 drops;            /* records lost in the kernel (ring buffer full); while the loader
				 * runs, those lost so far (rewritten each second: the live line) */
	__u32 ncpus;            /* possible CPUs */
	__u32 floor;            /* 1: --floor run, programs recorded nothing */
	__u32 reserved[6];
};                              /* 64 bytes */

#endif
