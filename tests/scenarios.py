"""Event tables worked out by hand, shared by the breakdown's and explain's tests: two threads
A (measuring, CPU 0) and B (peer, CPU 1) of a pipe round trip, and the frames the analysis reads."""

import numpy as np
import pandas as pd

from analysis.model import breakdown as bd
from analysis.model import timeline
from analysis.store import records
from analysis.store.jsonfiles import Workload

A, B, C, OTHER = 100, 200, 300, 999
WORKLOAD_JSON = {  # workload.json of a pipe run of A and B; WORKLOAD: as model/ takes it
    "workload": "pipe",
    "metrics": ["rtt"],
    "primary_metric": "rtt",
    "threads": [{"role": "measuring", "pid": A, "tid": A, "cpu": 0}, {"role": "peer", "pid": B, "tid": B, "cpu": 1}],
}
WORKLOAD = Workload.from_json(WORKLOAD_JSON)
HARDIRQ = records.WAKE_IN_HARDIRQ  # a waking's aux flag
TIMER = 0xEC  # the local timer's x86 vector


def events(rows, cpus=None):
    """rows: (ts, type, tid, aux, a0, next_tid) -> an events.parquet-like frame. cpus: {tid: CPU}
    (default B on CPU 1), every other task on CPU 0; a switch is on the CPU of the task it
    switches to if that one is in cpus, else on that of the task it switches out."""
    cpus = {B: 1} if cpus is None else cpus
    df = pd.DataFrame(rows, columns=["ts", "type", "tid", "aux", "a0", "next_tid"])
    df["type"] = pd.Categorical(df["type"], categories=timeline.Events.TYPES)
    df["pid"] = df["tid"]
    to = df["next_tid"].where(df["type"] == "switch").map(cpus)
    df["cpu"] = to.fillna(df["tid"].map(cpus)).fillna(0).astype(np.int16)
    return df.sort_values("ts", kind="stable").reset_index(drop=True)


def iterations(windows, tid=A):
    s = np.array([w[0] for w in windows], np.int64)
    e = np.array([w[1] for w in windows], np.int64)
    return pd.DataFrame(
        {
            "run": 0,
            "iteration": np.arange(len(s)),
            "seq": np.arange(len(s)),
            "metric": pd.Categorical(["rtt"] * len(s), categories=["rtt"]),
            "t_start_ns": s,
            "t_end_ns": e,
            "latency_ns": e - s,
            "cpu": 0,
            "tid": tid,
        }
    )


# One pipe round trip across two CPUs, window [1000, 2000):
#   A: user 1000-1100, write() 1100-1300 (wakes B at 1200), user, read() from 1350,
#      off CPU 1400, woken by B 1600, on CPU 1720, read() returns 1800, user to 2000.
#   B: blocked in read() since 50, woken 1200, on CPU 1450, read() returns 1500,
#      write() 1550-1700 (wakes A 1600, irq 1620-1640), read() 1750, off CPU 1780.
# No sched_wakeup follows either waking (the kernel woke both at once): runqueue starts at
# the waking, wakeup is 0 (rule 1).
PING_PONG = [
    (0, "switch", 0, 0, 0, A),
    (0, "switch", 0, 0, 0, B),
    (20, "sys_enter", B, 0, 3, 0),
    (50, "switch", B, 1, 0, 0),
    (400, "sys_enter", A, 39, 0, 0),
    (500, "sys_exit", A, 39, A, 0),
    (1100, "sys_enter", A, 1, 4, 0),
    (1200, "waking", B, 1, A, 0),
    (1300, "sys_exit", A, 1, 1, 0),
    (1350, "sys_enter", A, 0, 3, 0),
    (1400, "switch", A, 1, 0, 0),
    (1450, "switch", 0, 0, 0, B),
    (1500, "sys_exit", B, 0, 1, 0),
    (1550, "sys_enter", B, 1, 4, 0),
    (1600, "waking", A, 0, B, 0),
    (1620, "irq_entry", B, 30, 0, 0),
    (1640, "irq_exit", B, 30, 1, 0),
    (1700, "sys_exit", B, 1, 1, 0),
    (1720, "switch", 0, 0, 0, A),
    (1750, "sys_enter", B, 0, 3, 0),
    (1780, "switch", B, 1, 0, 0),
    (1800, "sys_exit", A, 0, 1, 0),
]


def path_segments(rows, window, workload=WORKLOAD, cpus=None):
    """The critical path's segments of one window in time order: (start, end, thread, component),
    the thread as A, B, C or its tid."""
    _, info = bd.compute(iterations([window]), events(rows, cpus), workload, path=True)
    everyone, seg = info.path[0]
    letter = {A: "A", B: "B", C: "C"}
    return sorted(
        (int(a), int(b), letter.get(everyone[th][1], everyone[th][1]), timeline.STATE_NAMES[st])
        for a, b, th, st in zip(seg.a, seg.b, seg.thread, seg.state)
    )


# Rule 5: a pipe round trip in which B sleeps in clock_nanosleep() before it replies, window
# [1000, 2500). A writes 1100-1300 (wakes B at 1200), then spins in user space, taking the
# local timer's interrupt 1700-1720, in which B's timer fires (1710: waking of B flagged
# WAKE_IN_HARDIRQ, the waker recorded is A, the task the interrupt hit); A enters read() at
# 1950, blocks at 2000, is woken by B's write() at 2100, on CPU 2250, read() returns 2400.
# B: read() returns 1500 (on CPU 1450), clock_nanosleep() 1510, off CPU 1520, on CPU 1800,
# returns 1810, write() 1850-2200, read() 2260, off CPU 2300.
TIMER_WAKE = [
    (0, "switch", 0, 0, 0, A),
    (0, "switch", 0, 0, 0, B),
    (20, "sys_enter", B, 0, 3, 0),
    (50, "switch", B, 1, 0, 0),
    (400, "sys_enter", A, 39, 0, 0),
    (500, "sys_exit", A, 39, A, 0),
    (1100, "sys_enter", A, 1, 4, 0),
    (1200, "waking", B, 1, A, 0),
    (1300, "sys_exit", A, 1, 1, 0),
    (1450, "switch", 0, 0, 0, B),
    (1500, "sys_exit", B, 0, 1, 0),
    (1510, "sys_enter", B, 230, 1, 0),
    (1520, "switch", B, 1, 0, 0),
    (1700, "vector_entry", A, TIMER, 0, 0),
    (1710, "waking", B, 1 | HARDIRQ, A, 0),
    (1720, "vector_exit", A, TIMER, 0, 0),
    (1800, "switch", 0, 0, 0, B),
    (1810, "sys_exit", B, 230, 0, 0),
    (1850, "sys_enter", B, 1, 4, 0),
    (1950, "sys_enter", A, 0, 3, 0),
    (2000, "switch", A, 1, 0, 0),
    (2100, "waking", A, 0, B, 0),
    (2200, "sys_exit", B, 1, 1, 0),
    (2250, "switch", 0, 0, 0, A),
    (2260, "sys_enter", B, 0, 3, 0),
    (2300, "switch", B, 1, 0, 0),
    (2400, "sys_exit", A, 0, 1, 0),
]


# A preempted in user space: the local timer interrupts A 1025-1035 and the scheduler gives
# CPU 0 to another task (OTHER) 1040-1070.
USER_PREEMPTION = [
    (1025, "vector_entry", A, TIMER, 0, 0),
    (1035, "vector_exit", A, TIMER, 0, 0),
    (1040, "switch", A, 0, 0, OTHER),
    (1070, "switch", OTHER, 0, 0, A),
]
# PING_PONG where OTHER ("hog") holds CPU 0 twice: USER_PREEMPTION, and A blocks at 1400
# switching to OTHER, which keeps CPU 0 until A, woken at 1600, preempts it at 1720.
HOGGED = (
    [r for r in PING_PONG if r[0] not in (1400, 1720)]
    + USER_PREEMPTION
    + [(1400, "switch", A, 1, 0, OTHER), (1720, "switch", OTHER, 0, 0, A)]
)
TASKS = {"999": {"comm": "hog", "pid": 999}}


# Same CPU (all on CPU 0), window [1000, 2000): A's write() 1100-1300 wakes B at 1200; the
# scheduler switches from A to B at 1400 with nothing recorded since write() returned (a
# wake-up preemption on the way out, rule 2). B's read() returns 1450, write() 1500-1600 (A
# does not wait: nobody to wake), read() 1650, blocks at 1700, back to A, whose read()
# 1750-1850 finds the reply.
SAME_CPU_PREEMPTED = [
    (0, "switch", 0, 0, 0, B),
    (20, "sys_enter", B, 0, 3, 0),
    (50, "switch", B, 1, 0, A),
    (400, "sys_enter", A, 39, 0, 0),
    (500, "sys_exit", A, 39, A, 0),
    (1100, "sys_enter", A, 1, 4, 0),
    (1200, "waking", B, 0, A, 0),
    (1300, "sys_exit", A, 1, 1, 0),
    (1400, "switch", A, 0, 0, B),
    (1450, "sys_exit", B, 0, 1, 0),
    (1500, "sys_enter", B, 1, 4, 0),
    (1600, "sys_exit", B, 1, 1, 0),
    (1650, "sys_enter", B, 0, 3, 0),
    (1700, "switch", B, 1, 0, A),
    (1750, "sys_enter", A, 0, 3, 0),
    (1850, "sys_exit", A, 0, 1, 0),
]


# A UNIX socket pair across two CPUs (one descriptor each, 3), window [1000, 2200): A in user
# space since its getpid() 400-500; A's write()
# 1100-1300 wakes B at 1200; A's read() from 1350, blocked at 1400. B's read() returns 1500, and
# taking the request it frees room in A's send buffer: the write-space wake-up of A at 1480, by B
# in read(), not in a send. A is queued at 1700 and runs at 2000. Meanwhile B spins in user space
# 1500-1900 and answers, write() 1900-1950: A is runnable already, so the answer wakes nobody. A's
# read() finds it and returns 2100. B's next read() 1960, blocked at 1980.
EARLY_WAKE = [
    (0, "switch", 0, 0, 0, A),
    (0, "switch", 0, 0, 0, B),
    (20, "sys_enter", B, 0, 3, 0),
    (50, "switch", B, 1, 0, 0),
    (400, "sys_enter", A, 39, 0, 0),
    (500, "sys_exit", A, 39, A, 0),
    (1100, "sys_enter", A, 1, 3, 0),
    (1200, "waking", B, 1, A, 0),
    (1300, "sys_exit", A, 1, 1, 0),
    (1350, "sys_enter", A, 0, 3, 0),
    (1400, "switch", A, 1, 0, 0),
    (1450, "switch", 0, 0, 0, B),
    (1480, "waking", A, 0, B, 0),
    (1500, "sys_exit", B, 0, 1, 0),
    (1700, "wakeup", A, 0, B, 0),
    (1900, "sys_enter", B, 1, 3, 0),
    (1950, "sys_exit", B, 1, 1, 0),
    (1960, "sys_enter", B, 0, 3, 0),
    (1980, "switch", B, 1, 0, 0),
    (2000, "switch", 0, 0, 0, A),
    (2100, "sys_exit", A, 0, 1, 0),
]
# The same, but A runs at 1600 (after B's early wake-up), finds nothing, sets itself to sleep;
# B's write() 1900-1950 wakes it at 1930 before it has left CPU 0, which it does at 1940 (prev_state
# not 0: it had set itself to sleep), already woken; back on CPU 2000, read() returns 2100.
EARLY_WAKE_ON_CPU = [r for r in EARLY_WAKE if r[0] != 1700] + [
    (1600, "switch", 0, 0, 0, A),
    (1930, "waking", A, 0, B, 0),
    (1940, "switch", A, 1, 0, 0),
]
