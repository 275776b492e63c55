"""What the analysis states of the C side, in one place: the names of its enums (record types
and function ids: bpf/ipctrace.h's IPT_REC_TYPES and IPT_FUNC_IDS; thread states and the record
types ipt_thread_steps reads: analysis/model/timeline.c's IPT_STATES and IPT_STEP_TYPES), the
records' flags, and the layouts of events.bin and iterations.bin with their magics. The C side
is the source: clib.py refuses a library whose tables say otherwise (ipt_name for the names,
analysis/store/layout.c's ipt_layout and ipt_constant for the rest), and
tests/unit/store/test_records.py and test_layout.py check them against the built library."""

import numpy as np

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
# the code of each record type, by name (as REC["type"] holds it)
TYPE_CODE = {name: k + 1 for k, name in enumerate(TYPES)}
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
# A sys_exit's number (aux) where the call replaced it: it closes the call it follows
# (model/timeline.h, which timeline.c and the decoded model read).
NR_REPLACED = 0xFFFFFFFF

# events.bin: struct events_file_header, then struct rec (bpf/ipctrace.h)
EVENTS_MAGIC, EVENTS_VERSION = b"IPTEVT01", 1
EVENTS_HEADER = np.dtype(
    [
        ("magic", "S8"),
        ("version", "<u4"),
        ("rec_size", "<u4"),
        ("count", "<u8"),
        ("drops", "<u8"),
        ("ncpus", "<u4"),
        ("floor", "<u4"),
        ("reserved", "<u4", 6),
    ]
)
REC = np.dtype(
    [("type", "<u2"), ("cpu", "<u2"), ("tid", "<u4"), ("ts", "<u8"), ("pid", "<u4"), ("aux", "<u4"), ("a0", "<u8")]
)

# iterations.bin: struct iter_file_header, then struct iter_rec (workloads/iterfile.h)
ITER_MAGIC, ITER_VERSION = b"IPTITER1", 1
ITER_HEADER = np.dtype(
    [
        ("magic", "S8"),
        ("version", "<u4"),
        ("rec_size", "<u4"),
        ("count", "<u8"),
        ("nmetrics", "<u4"),
        ("reserved", "<u4", 9),
    ]
)
ITER_REC = np.dtype(
    [
        ("seq", "<u8"),
        ("t_start_ns", "<u8"),
        ("t_end_ns", "<u8"),
        ("run", "<u4"),
        ("metric", "<u2"),
        ("cpu", "<u2"),
        ("tid", "<u4"),
        ("iteration", "<u4"),
    ]
)

# The C structs and constants these mirror, by the names layout.c's tables give them.
LAYOUTS = {"rec": REC, "events_file_header": EVENTS_HEADER, "iter_rec": ITER_REC, "iter_file_header": ITER_HEADER}
CONSTANTS = {
    "EVENTS_FILE_MAGIC": EVENTS_MAGIC,
    "EVENTS_FILE_VERSION": EVENTS_VERSION,
    "ITER_FILE_MAGIC": ITER_MAGIC,
    "ITER_FILE_VERSION": ITER_VERSION,
    "WAKE_IN_HARDIRQ": WAKE_IN_HARDIRQ,
    "WAKE_CPU_MASK": WAKE_CPU_MASK,
    "MSG_SEND": MSG_SEND,
    "MSG_RECV": MSG_RECV,
    "MSG_UNREAD": MSG_UNREAD,
    "MARK_BEGIN": MARK_BEGIN,
    "MARK_END": MARK_END,
    "NR_REPLACED": NR_REPLACED,
}

# The C tables ipt_name(table, i) gives, in its table numbering.
TABLES = (TYPES, FUNCS, STATES, STEP_TYPES)
