"""The names of the C side's enums, as the analysis uses them: record types and function
ids (bpf/ipctrace.h's IPT_REC_TYPES and IPT_FUNC_IDS), thread states and the record types
ipt_thread_steps reads (analysis/model/timeline.c's IPT_STATES and IPT_STEP_TYPES), the wake-up
flags. The C lists are the source; tests/unit/store/test_records.py checks these against the built
library's tables (ipt_name), and clib.py refuses a library that disagrees; the flags likewise
(layout.c's ipt_constant)."""

# enum rec_type: TYPES[code - 1] is the name of record type `code`.
TYPES = (
    "sys_enter",
    "sys_exit",
    "switch",
    "waking",
    "wakeup",
    "wakeup_new",
    "migrate",
    "fork",
    "exit",
    "irq_entry",
    "irq_exit",
    "softirq_entry",
    "softirq_exit",
    "page_fault",
    "func_entry",
    "func_exit",
    "vector_entry",
    "vector_exit",
    "steal",
    "mark",
    "msg",
)
# enum func_id: FUNCS[id - 1]
FUNCS = (
    "pipe_write",
    "pipe_read",
    "futex_wait",
    "futex_wake",
    "unix_send",
    "unix_recv",
    "copy_to_iter",
    "copy_from_iter",
    "copy_page_to_iter",
    "copy_page_from_iter",
    "unix_dgram_send",
    "unix_dgram_recv",
)
# timeline.c's thread states: STATES[state] is the component it counts towards.
STATES = ("user", "syscall", "copy", "irq", "entry", "steal", "blocked", "wakeup", "runqueue", "preempted", "residual")
# The record types whose codes ipt_thread_steps reads, in the order of its codes[].
STEP_TYPES = ("sys_enter", "sys_exit", "switch", "waking", "wakeup", "wakeup_new")

# The copy routines among FUNCS (their func ids).
COPY_FUNC_IDS = tuple(
    FUNCS.index(f) + 1 for f in ("copy_to_iter", "copy_from_iter", "copy_page_to_iter", "copy_page_from_iter")
)

# Wake-up records' aux: the target CPU, and the flag set when the waker's CPU was in a
# hard interrupt or an x86 vector handler.
WAKE_IN_HARDIRQ = 1 << 31
WAKE_CPU_MASK = 0xFFFF

# MSG records' aux (bpf/ipctrace.h): the direction, and the flag set when the bytes were unreadable.
MSG_SEND, MSG_RECV, MSG_UNREAD = 1, 2, 1 << 8

# MARK records' aux: an iteration begins, ends.
MARK_BEGIN, MARK_END = 1, 2

# The C tables ipt_name(table, i) gives, in its table numbering.
TABLES = (TYPES, FUNCS, STATES, STEP_TYPES)
