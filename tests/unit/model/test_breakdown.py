"""The breakdown on event tables worked out by hand (each rule of docs/DESIGN.md, "The rules of
the breakdown", has a test of its own here), and on real traced runs."""

import dataclasses

import numpy as np
import pytest
from scenarios import (
    EARLY_WAKE,
    EARLY_WAKE_ON_CPU,
    HARDIRQ,
    HOGGED,
    OTHER,
    PING_PONG,
    SAME_CPU_PREEMPTED,
    TASKS,
    TIMER_WAKE,
    USER_PREEMPTION,
    WORKLOAD,
    A,
    B,
    C,
    events,
    iterations,
    path_segments,
)

from analysis.model import breakdown as bd
from analysis.model import timeline
from analysis.store.jsonfiles import Workload, tasks_from_json
from analysis.store.summaryfile import Holder

# WORKLOAD has no copy_calibration: the copy estimate takes the assumed costs, and each data
# syscall that returned 1 byte loses round(15 + 1 x 0.1) = 15 ns of its time to copy (rule 6).
assert (bd.COPY_NS_PER_CALL, bd.COPY_NS_PER_BYTE) == (15.0, 0.1)
RULES = timeline.StepRules("x86_64", 0, 0, bd.COPY_NS_PER_CALL, bd.COPY_NS_PER_BYTE)


def comps(frame, row=0, prefix=""):
    return {c: frame[prefix + c].iloc[row] for c in bd.COMPONENTS}


def want(**ns):
    """All the components, those not given 0."""
    return {c: ns.get(c, 0) for c in bd.COMPONENTS}


def test_critical_path_by_hand():
    # Rule 3, walked back from 2000 on A:
    #   A 1800-2000 user 200, 1785-1800 copy 15, 1720-1785 syscall 65 (read()),
    #   A 1600-1720 runqueue 120: CPU 0, where A came back, was idle (rule 4: its own wait);
    #   before 1600 A is blocked, woken by B, on CPU in write() then: the path moves to B at 1600:
    #   B 1565-1600 syscall 35, 1550-1565 copy 15, 1500-1550 user 50, 1485-1500 copy 15,
    #   1450-1485 syscall 35, 1200-1450 runqueue 250 (CPU 1 idle);
    #   before 1200 B is blocked, woken by A in write(): A 1115-1200 syscall 85, 1100-1115 copy 15,
    #   1000-1100 user 100.
    # user 200 + 50 + 100 = 350, syscall 65 + 35 + 35 + 85 = 220, copy 4 x 15 = 60,
    # runqueue 120 + 250 = 370: 1000. B's interrupt (1620-1640, after B woke A) and A's
    # 1200-1400 (while B was being woken) are off the path; no calibration: entry 0.
    frame, info = bd.compute(iterations([(1000, 2000)]), events(PING_PONG), WORKLOAD)
    assert comps(frame) == want(user=350, syscall=220, copy=60, runqueue=370)
    assert info.critical_path
    assert info.entry["source"].startswith("not calibrated")
    # Per side: each thread's own states over the window (test_thread_timeline_by_hand):
    #   A: user 100 + 50 + 200, syscall 185 + 50 + 65 and copy 15 + 15, blocked 1400-1600, runqueue 1600-1720.
    #   B: user 50 + 50, syscall 35 + 55 + 60 + 30 and copy 15 + 15, irq 20, blocked 1000-1200 and
    #   1780-2000, runqueue 1200-1450.
    assert comps(frame, prefix="measuring.") == want(user=350, syscall=300, copy=30, blocked=200, runqueue=120)
    assert comps(frame, prefix="peer.") == want(user=100, syscall=180, copy=30, irq=20, blocked=420, runqueue=250)
    assert frame["copy_bytes"].iloc[0] == 4


def test_waking_then_wakeup_splits_wakeup_and_runqueue():
    # Rule 1: B's wake-up starts at the waking (1200) and is queued on CPU 1 at 1380 (sched_wakeup),
    # A's starts at 1600 and is queued at 1650. On the path of test_critical_path_by_hand:
    #   B 1200-1380 wakeup 180, 1380-1450 runqueue 70; A 1600-1650 wakeup 50, 1650-1720 runqueue 70
    # (CPUs idle): wakeup 230, runqueue 140; the rest as there.
    rows = PING_PONG + [(1380, "wakeup", B, 1, A, 0), (1650, "wakeup", A, 0, B, 0)]
    frame, _ = bd.compute(iterations([(1000, 2000)]), events(rows), WORKLOAD)
    assert comps(frame) == want(user=350, syscall=220, copy=60, wakeup=230, runqueue=140)
    assert comps(frame, prefix="measuring.") == want(
        user=350, syscall=300, copy=30, blocked=200, wakeup=50, runqueue=70
    )
    assert comps(frame, prefix="peer.") == want(
        user=100, syscall=180, copy=30, irq=20, blocked=420, wakeup=180, runqueue=70
    )
    ev = timeline.Events(events(rows))
    b = timeline.thread_timeline(ev, B, RULES)
    assert list(b.at([1199, 1200, 1379, 1380, 1449, 1450])) == [
        timeline.BLOCKED,
        timeline.WAKEUP,
        timeline.WAKEUP,
        timeline.RUNQUEUE,
        timeline.RUNQUEUE,
        timeline.SYSCALL,
    ]
    on, delay, rq = timeline.wakeup_delays(b)
    assert (list(on), list(delay), list(rq)) == ([1450], [250], [70])
    on, delay, rq = timeline.wakeup_delays(timeline.thread_timeline(ev, A, RULES))
    assert (list(on), list(delay), list(rq)) == ([1720], [120], [70])
    b = bd.summarize(iterations([(1000, 2000)]), events(rows), WORKLOAD).metrics["rtt"]
    assert b.per_side["peer"].wakeup_delay["median"] == 250
    assert b.per_side["peer"].runqueue_delay["median"] == 70
    assert b.per_side["measuring"].wakeup_delay["median"] == 120
    assert b.per_side["measuring"].runqueue_delay["median"] == 70


def test_nobody_working_is_blocked():
    # Rule 5: B is not woken by A's write() but by a hard interrupt at 1490 (waker: idle), in
    # the run queue to 1501, its read() returns at 1510.
    # The path from 2000: A user 200, copy 15, syscall 65, runqueue 1600-1720 120; B (woke A,
    # on CPU) syscall 1565-1600 35, copy 15, user 1510-1550 40, copy 1501-1510 9 (the read's
    # 15 ns carve capped by its 9 ns on CPU), runqueue 1490-1501 11 (CPU 1 idle); then B's
    # sleep, ended by no task: blocked, and the walk stays on B, blocked since 50: 1000-1490 490.
    # user 240, syscall 100, copy 39, runqueue 131, blocked 490: 1000. A's work before 1400
    # woke nobody: off the path.
    rows = [r for r in PING_PONG if r[0] not in (1200, 1450, 1500)] + [
        (1490, "waking", B, 1 | HARDIRQ, 0, 0),
        (1501, "switch", 0, 0, 0, B),
        (1510, "sys_exit", B, 0, 1, 0),
    ]
    frame, _ = bd.compute(iterations([(1000, 2000)]), events(rows), WORKLOAD)
    assert comps(frame) == want(user=240, syscall=100, copy=39, runqueue=131, blocked=490)
    b = timeline.thread_timeline(timeline.Events(events(rows)), B, RULES)
    assert (list(b.sleep_end), list(b.sleep_waker)) == ([1490], [-1])


def test_timer_wake_is_blocked():
    # The path from 2500: A user 2400-2500 100, copy 15, syscall 2250-2385 135, runqueue
    # 2100-2250 150 (CPU 0 idle); B woke A in write(): B syscall 1865-2100 235, copy 1850-1865 15,
    # user 1810-1850 40, syscall 1800-1810 10, runqueue 1710-1800 90 (CPU 1 idle); B's sleep
    # 1520-1710, ended by the timer: blocked 190 although the waker recorded (A) was on a CPU,
    # and the walk stays on B: syscall 1510-1520 10, user 1500-1510 10, copy 1485-1500 15,
    # syscall 1450-1485 35, runqueue 1200-1450 250; B woken by A in write(): A syscall 1115-1200
    # 85, copy 15, user 1000-1100 100.
    # user 100 + 40 + 10 + 100 = 250, syscall 135 + 235 + 10 + 10 + 35 + 85 = 510, copy 4 x 15 = 60,
    # runqueue 150 + 90 + 250 = 490, blocked 190: 1500. (Taken for A's wake-up, the path would
    # have gone to A at 1710 and found no blocked time.)
    frame, _ = bd.compute(iterations([(1000, 2500)]), events(TIMER_WAKE), WORKLOAD)
    assert comps(frame) == want(user=250, syscall=510, copy=60, runqueue=490, blocked=190)
    # A on its own: user 100 + 400 + 230 + 100, irq 20, syscall 185 + 50 + 135 and copy 30,
    # blocked 2000-2100, runqueue 2100-2250.
    assert comps(frame, prefix="measuring.") == want(user=830, irq=20, syscall=370, copy=30, blocked=100, runqueue=150)


# Same CPU, B not preempting: A's write() wakes B at 1200, A enters read() at 1350 and blocks
# at 1400, B runs: read() returns 1450, write() 1500-1600 wakes A at 1550 (A waits in the run
# queue while B goes on), read() 1650, B blocks at 1700, A's read() returns 1850.
SAME_CPU_QUEUED = [
    (0, "switch", 0, 0, 0, B),
    (20, "sys_enter", B, 0, 3, 0),
    (50, "switch", B, 1, 0, A),
    (400, "sys_enter", A, 39, 0, 0),
    (500, "sys_exit", A, 39, A, 0),
    (1100, "sys_enter", A, 1, 4, 0),
    (1200, "waking", B, 0, A, 0),
    (1300, "sys_exit", A, 1, 1, 0),
    (1350, "sys_enter", A, 0, 3, 0),
    (1400, "switch", A, 1, 0, B),
    (1450, "sys_exit", B, 0, 1, 0),
    (1500, "sys_enter", B, 1, 4, 0),
    (1550, "waking", A, 0, B, 0),
    (1600, "sys_exit", B, 1, 1, 0),
    (1650, "sys_enter", B, 0, 3, 0),
    (1700, "switch", B, 1, 0, A),
    (1850, "sys_exit", A, 0, 1, 0),
]


@pytest.mark.parametrize(
    "rows, segments",
    [
        # Rules 2 and 4, SAME_CPU_PREEMPTED. The path from 2000: A user 1850-2000 150, copy
        # 1835-1850, syscall 1750-1835 85, user 1700-1750 50; A preempted 1400-1700 while B held
        # CPU 0: B's own states, syscall 1650-1700 50, user 1600-1650 50, syscall 1515-1600 85, copy
        # 1500-1515, user 1450-1500 50, copy 1435-1450, syscall 1400-1435 35; A's write() to the
        # switch 1115-1400 285 (rule 2), copy 1100-1115, user 1000-1100 100.
        (
            SAME_CPU_PREEMPTED,
            [
                (1000, 1100, "A", "user"),
                (1100, 1115, "A", "copy"),
                (1115, 1400, "A", "syscall"),
                (1400, 1435, "B", "syscall"),
                (1435, 1450, "B", "copy"),
                (1450, 1500, "B", "user"),
                (1500, 1515, "B", "copy"),
                (1515, 1600, "B", "syscall"),
                (1600, 1650, "B", "user"),
                (1650, 1700, "B", "syscall"),
                (1700, 1750, "A", "user"),
                (1750, 1835, "A", "syscall"),
                (1835, 1850, "A", "copy"),
                (1850, 2000, "A", "user"),
            ],
        ),
        # Rule 4, SAME_CPU_QUEUED. From 2000: A user 150, copy 1835-1850, syscall 1700-1835 135; A
        # in the run queue 1550-1700 while B held CPU 0: B's syscall 1650-1700, user 1600-1650,
        # syscall 1550-1600; A blocked before 1550, woken by B, on CPU: B syscall 1515-1550 (one
        # segment with the one before), copy 1500-1515, user 1450-1500, copy 1435-1450, syscall
        # 1400-1435; B in the run queue 1200-1400 while A held CPU 0: A's syscall 1350-1400, user
        # 1300-1350, syscall 1200-1300; B blocked before 1200, woken by A in write(): A syscall
        # 1115-1200, copy 1100-1115, user 1000-1100.
        (
            SAME_CPU_QUEUED,
            [
                (1000, 1100, "A", "user"),
                (1100, 1115, "A", "copy"),
                (1115, 1300, "A", "syscall"),
                (1300, 1350, "A", "user"),
                (1350, 1400, "A", "syscall"),
                (1400, 1435, "B", "syscall"),
                (1435, 1450, "B", "copy"),
                (1450, 1500, "B", "user"),
                (1500, 1515, "B", "copy"),
                (1515, 1600, "B", "syscall"),
                (1600, 1650, "B", "user"),
                (1650, 1700, "B", "syscall"),
                (1700, 1835, "A", "syscall"),
                (1835, 1850, "A", "copy"),
                (1850, 2000, "A", "user"),
            ],
        ),
    ],
)
def test_same_cpu_hand_over_counts_the_peer_s_work(rows, segments):
    # Either way: user 400, syscall 540, copy 4 x 15 = 60, and no preempted or runqueue on
    # the path: the CPU was never idle nor held by another task.
    assert path_segments(rows, (1000, 2000), cpus={}) == segments
    frame, _ = bd.compute(iterations([(1000, 2000)]), events(rows, cpus={}), WORKLOAD)
    assert comps(frame) == want(user=400, syscall=540, copy=60)
    # Each side on its own keeps its wait. A: user 100 + 50 + 150 (SAME_CPU_PREEMPTED: 1700-1750;
    # SAME_CPU_QUEUED: 1300-1350), syscall 285 + 85 or 185 + 50 + 135, copy 30, and preempted
    # 1400-1700, or blocked 1400-1550 and runqueue 1550-1700. B: blocked 1000-1200 and 1700-2000,
    # runqueue 1200-1400, syscall 35 + 85 + 50, copy 30, user 100.
    a = (
        want(user=300, syscall=370, copy=30, preempted=300)
        if rows is SAME_CPU_PREEMPTED
        else want(user=300, syscall=370, copy=30, blocked=150, runqueue=150)
    )
    assert comps(frame, prefix="measuring.") == a
    assert comps(frame, prefix="peer.") == want(blocked=500, runqueue=200, syscall=170, copy=30, user=100)


# The answer's path after an early wake-up (EARLY_WAKE), walked back from 2200: A user 2100-2200,
# its read()'s copy 2085-2100 and syscall 2000-2085; A waits for CPU 0 (idle) from the answer's
# send on: B's write() returned at 1950, runqueue 1950-2000. The path moves to B there (B's
# write-space wake-up at 1480 did not end A's wait: B was in read(), and A stayed in the same
# read() until B's write() brought the data): write() 1915-1950 syscall and 1900-1915 copy, the
# spin 1500-1900 user, read() 1485-1500 copy and 1450-1485 syscall, runqueue 1200-1450 (CPU 1
# idle), then B's sleep, ended by A's write(): A 1115-1200 syscall, 1100-1115 copy, 1000-1100 user.
# user 100 + 400 + 100 = 600, syscall 85 + 35 + 35 + 85 = 240, copy 4 x 15 = 60, runqueue 50 + 250 = 300.
EARLY_WAKE_PATH = [
    (1000, 1100, "A", "user"),
    (1100, 1115, "A", "copy"),
    (1115, 1200, "A", "syscall"),
    (1200, 1450, "B", "runqueue"),
    (1450, 1485, "B", "syscall"),
    (1485, 1500, "B", "copy"),
    (1500, 1900, "B", "user"),
    (1900, 1915, "B", "copy"),
    (1915, 1950, "B", "syscall"),
]


def test_early_wake_up_path_goes_to_the_send_that_delivered():
    assert path_segments(EARLY_WAKE, (1000, 2200)) == EARLY_WAKE_PATH + [
        (1950, 2000, "A", "runqueue"),
        (2000, 2085, "A", "syscall"),
        (2085, 2100, "A", "copy"),
        (2100, 2200, "A", "user"),
    ]
    frame, _ = bd.compute(iterations([(1000, 2200)]), events(EARLY_WAKE), WORKLOAD)
    assert comps(frame) == want(user=600, syscall=240, copy=60, runqueue=300)
    # A on its own keeps its wake-up as the kernel told it: being woken 1480-1700, queued 1700-2000.
    assert comps(frame, prefix="measuring.") == want(
        user=100 + 50 + 100, syscall=185 + 50 + 85, copy=30, blocked=80, wakeup=220, runqueue=300
    )
    on, delay, rq = timeline.wakeup_delays(timeline.thread_timeline(timeline.Events(events(EARLY_WAKE)), A, RULES))
    assert (list(on), list(delay), list(rq)) == ([2000], [520], [300])


def test_wake_up_while_still_on_cpu_ends_the_wait():
    # EARLY_WAKE_ON_CPU: the answer's wake-up (1930, by B in write()) came while A was still on
    # CPU 0 in its read(), so no sleep of A ends there; it ended the wait all the same. Walked back
    # from 2200: A user, copy, syscall 2000-2085, runqueue 1940-2000 (woken before it left), syscall
    # 1930-1940, then B from 1930: write() 1915-1930 syscall, 1900-1915 copy, then as EARLY_WAKE.
    assert path_segments(EARLY_WAKE_ON_CPU, (1000, 2200)) == EARLY_WAKE_PATH[:-1] + [
        (1915, 1930, "B", "syscall"),
        (1930, 1940, "A", "syscall"),
        (1940, 2000, "A", "runqueue"),
        (2000, 2085, "A", "syscall"),
        (2085, 2100, "A", "copy"),
        (2100, 2200, "A", "user"),
    ]


def test_wake_up_by_a_send_is_followed_as_before():
    # The rule for what ended a wait changes nothing where a send woke the reader: PING_PONG's A
    # was woken by B in write(), its receive's last wake-up; EARLY_WAKE without the answer's
    # write() leaves the early wake-up on the path (nothing else ended the wait).
    ev = timeline.Events(events(PING_PONG))
    tls = [timeline.thread_timeline(ev, t, RULES) for t in (A, B)]
    assert [len(at) for at, _ in timeline.deliveries(tls, [A, B], RULES.data_kind)] == [0, 0]
    rows = [r for r in EARLY_WAKE if r[0] not in (1900, 1950)]
    assert (1450, 1480, "B", "syscall") in path_segments(rows, (1000, 2200))
    # Woken by a call that moves no bytes (mq_timedsend(), 242, from 1470 after B's read() returned
    # at 1460): that wake-up ended A's wait, and B's later write() (to a log, say) is not the answer.
    rows = [r for r in EARLY_WAKE if r[0] != 1500] + [
        (1460, "sys_exit", B, 0, 1, 0),
        (1470, "sys_enter", B, 242, 3, 0),
        (1490, "sys_exit", B, 242, 0, 0),
    ]
    ev = timeline.Events(events(rows))
    tls = [timeline.thread_timeline(ev, t, RULES) for t in (A, B)]
    assert [len(at) for at, _ in timeline.deliveries(tls, [A, B], RULES.data_kind)] == [0, 0]
    assert (1470, 1480, "B", "syscall") in path_segments(rows, (1000, 2200))


def test_other_task_holding_the_cpu_is_named():
    # Rule 4: A 1000-1100 on the path is user 25, irq 10, user 5, preempted 30 (by OTHER: an
    # involuntary switch out), user 30; A's wait 1600-1720 after its wake-up is runqueue, OTHER
    # holding the CPU it came back on (perf sched's and runqlat's run-queue delay: from a
    # wake-up to running, whoever held the CPU). The rest as in test_critical_path_by_hand: user
    # 350 - 100 + 60 = 310, irq 10, preempted 30, syscall 220, copy 60, runqueue 120 + 250 (B's,
    # CPU 1 idle): 1000. Both waits name OTHER as the holder: 150 ns.
    frame, _ = bd.compute(iterations([(1000, 2000)]), events(HOGGED), WORKLOAD)
    assert comps(frame) == want(user=310, irq=10, preempted=30, syscall=220, copy=60, runqueue=370)
    # A on its own keeps its states: preempted 30, runqueue 120 (and user 310, irq 10, syscall
    # 300, copy 30, blocked 200 as before).
    assert comps(frame, prefix="measuring.") == want(
        user=310, irq=10, preempted=30, syscall=300, copy=30, blocked=200, runqueue=120
    )
    b = bd.summarize(iterations([(1000, 2000)]), events(HOGGED), WORKLOAD, tasks=tasks_from_json(TASKS)).metrics["rtt"]
    assert b.preempted_by == [Holder(tid=OTHER, comm="hog", pid=999, tracer=False, ns_per_iteration=150.0, share=1.0)]
    # Without the interrupt's records the switch at 1040 is a preemption on getpid()'s way out
    # (rule 2: nothing recorded since its sys_exit at 500): A's 500-1040 is syscall. A on its
    # own: user 30 + 50 + 200, syscall 40 + 300. On the path that syscall holds the window's
    # start, where B is blocked: residual 40 (rule 7); user 310 - 25 - 5 = 280, no irq.
    rows = [r for r in HOGGED if r[1] not in ("vector_entry", "vector_exit")]
    frame, _ = bd.compute(iterations([(1000, 2000)]), events(rows), WORKLOAD)
    assert comps(frame, prefix="measuring.") == want(
        user=280, syscall=340, preempted=30, copy=30, blocked=200, runqueue=120
    )
    assert comps(frame) == want(residual=40, user=280, syscall=220, preempted=30, copy=60, runqueue=370)


def test_preemption_and_tail_label():
    # PING_PONG with USER_PREEMPTION, then 99 windows without events.
    rows = PING_PONG + USER_PREEMPTION
    wins = [(1000 + 2000 * k, 1500 + 2000 * k) for k in range(1, 100)]
    frame, info = bd.compute(iterations([(1000, 2000)] + wins), events(rows), WORKLOAD)
    # A 1000-1100: user 25 + 5 + 30, irq 10, preempted 30; the rest as in test_critical_path_by_hand.
    assert comps(frame) == want(user=310, irq=10, preempted=30, syscall=220, copy=60, runqueue=370)
    # Above p99: A's timer interrupt and B's, A's preemption by another task, and B's 250 ns
    # wake-up, the longer of the two wake-ups, so above their p99.
    assert frame["tail"].iloc[0] == "irq,preemption,long_wakeup"
    assert (frame["tail"].iloc[1:] == "").all()
    summary = bd.summarize(iterations([(1000, 2000)] + wins), events(rows), WORKLOAD)
    assert summary.tail.iterations == 1
    assert summary.tail.labels == {
        "irq": 1,
        "softirq": 0,
        "preemption": 1,
        "migration": 0,
        "page_fault": 0,
        "long_wakeup": 1,
        "steal": 0,
        "none": 0,
    }
    # 30 ns of the path over 100 windows; no name for OTHER in this summary
    assert summary.metrics["rtt"].preempted_by == [
        Holder(tid=OTHER, comm=None, pid=None, tracer=False, ns_per_iteration=0.3, share=1.0)
    ]


# Rule 6: a null-syscall run (the measuring thread alone) with the driver's entry calibration:
# 11 getppid() calls (nr 110) timed t0..t1, 8 with sys_enter 100 ns after t0 and sys_exit
# 81 ns before t1 (t1 - t0 = 500), 3 with 300 and 200 (t1 - t0 = 800), and one call whose
# records were lost (nothing traced inside its t0..t1); the clock read costs nothing here
# (empty_ns 0). entry = median(100 x 8, 300 x 3) = 100, exit = median(81 x 8, 200 x 3) = 81;
# the traced syscall: median(319 x 8, 300 x 3) = 319.
def null_syscall_run():
    calls, rows = [], [(0, "switch", 0, 0, 0, A)]
    for k in range(11):
        t0 = 10000 + 1000 * k
        slow = k in (2, 5, 9)
        t1 = t0 + (800 if slow else 500)
        calls.append([t0, t1])
        rows += [
            (t0 + (300 if slow else 100), "sys_enter", A, 110, 0, 0),
            (t1 - (200 if slow else 81), "sys_exit", A, 110, 1, 0),
        ]
    calls.append([21000, 21500])
    # The iterations: getppid() 99500-99700, then the timed one 100060-100310 in the window
    # [100000, 100412), the next from 100600.
    rows += [
        (99500, "sys_enter", A, 110, 0, 0),
        (99700, "sys_exit", A, 110, 1, 0),
        (100060, "sys_enter", A, 110, 0, 0),
        (100310, "sys_exit", A, 110, 1, 0),
        (100600, "sys_enter", A, 110, 0, 0),
        (100850, "sys_exit", A, 110, 1, 0),
    ]
    wl = {
        "workload": "null-syscall",
        "metrics": ["rtt"],
        "primary_metric": "rtt",
        "threads": [{"role": "measuring", "pid": A, "tid": A, "cpu": 0}],
        "entry_calibration": {"tid": A, "cpu": 0, "syscall_nr": 110, "empty_ns": 0, "empty_ns_min": 0, "calls": calls},
    }
    return rows, Workload.from_json(wl)


def test_entry_path_carved_from_a_null_syscall():
    rows, wl = null_syscall_run()
    ev = timeline.Events(events(rows))
    e_in, e_out, basis = bd.entry_costs(ev, wl)
    assert (e_in, e_out) == (100, 81)
    assert basis["source"].startswith("estimated") and "CPU 0" in basis["source"]
    assert {k: basis[k] for k in ("entry_ns", "exit_ns", "traced_syscall_ns", "clock_read_ns", "calls")} == {
        "entry_ns": 100,
        "exit_ns": 81,
        "traced_syscall_ns": 319.0,
        "clock_read_ns": 0.0,
        "calls": 11,
    }
    # The user time 99700-100060 between two calls: exit path 99700-99781, user 99781-99960,
    # entry path 99960-100060; getppid() 100060-100310; exit path 100310-100391, user to
    # 100500, entry path 100500-100600.
    tl = timeline.thread_timeline(ev, A, timeline.StepRules("x86_64", 100, 81))
    i = np.searchsorted(tl.ts, 99700)
    assert list(zip(tl.ts[i : i + 7].tolist(), tl.state[i : i + 7].tolist())) == [
        (99700, timeline.ENTRY),
        (99781, timeline.USER),
        (99960, timeline.ENTRY),
        (100060, timeline.SYSCALL),
        (100310, timeline.ENTRY),
        (100391, timeline.USER),
        (100500, timeline.ENTRY),
    ]
    # The window [100000, 100412) (DESIGN's example): entry 0-60 (all the user time before the call
    # that is in the window) and 310-391: 141, syscall 250, user 391-412: 21.
    frame, info = bd.compute(iterations([(100000, 100412)]), events(rows), wl)
    assert comps(frame) == want(entry=141, syscall=250, user=21)
    assert not info.critical_path
    b = bd.summarize(iterations([(100000, 100412)]), events(rows), wl)
    assert b.metrics["rtt"].entry_source == basis["source"]
    assert b.metrics["rtt"].entry_calibration["entry_ns"] == 100
    # Fewer than 10 calls joined: no estimate.
    cal = wl.entry_calibration or {}
    wl = dataclasses.replace(wl, entry_calibration={**cal, "calls": cal["calls"][:9]})
    assert bd.entry_costs(ev, wl)[:2] == (0, 0)


def test_entry_calibration_says_where_it_ran():
    """The CPU named is the one the calibration's calls were traced on (the driver's look at
    its start may differ), and for `ipctrace trace` what that means for the program (issue 28,
    point 9: "timed on CPU 1" for a program pinned to CPU 0)."""
    rows, wl = null_syscall_run()
    ev = timeline.Events(events(rows, cpus={A: 1}))
    assert "timed on CPU 1 at the run's start (the measuring thread's CPU: 0)" in bd.entry_costs(ev, wl)[2]["source"]
    assert bd.entry_costs(ev, wl)[2]["cpus"] == [1]
    traced = dataclasses.replace(wl, params={"iterations_from": "rtt", "cpus": None})
    source = bd.entry_costs(ev, traced)[2]["source"]
    assert "timed on CPU 1 before the program started, unplaced" in source and "taskset -c" in source
    traced.params["cpus"] = [1]
    source = bd.entry_costs(ev, traced)[2]["source"]
    assert "timed on CPU 1 before the program started (within its --cpus 1)" in source
    # a run whose measuring thread timed it on its own CPU: said as before
    assert "timed on CPU 0 at the run's start (" in bd.entry_costs(timeline.Events(events(rows)), wl)[2]["source"]


@pytest.mark.parametrize(
    "window, ns",
    [
        # Rule 7. The window claims to start at 1150, inside A's write() by the kernel's account,
        # with B blocked: the path's segment at that edge, A's write() 1150-1200 (where the path
        # came to A from B's wake-up), is residual 50. The rest of test_critical_path_by_hand's
        # path: user 200 + 50, syscall 65 + 35 + 35, copy 3 x 15, runqueue 370: 850.
        ((1150, 2000), want(residual=50, user=250, syscall=135, copy=45, runqueue=370)),
        # It ends at 1760: A in read() (on CPU since 1720), B in read() since 1750: A's segment
        # 1720-1760 is residual 40; A runqueue 120, B syscall 35 + 35, copy 2 x 15, user 50,
        # runqueue 250, A syscall 85, copy 15, user 100: 760.
        ((1000, 1760), want(residual=40, runqueue=370, syscall=155, copy=45, user=150)),
        # It ends at 1740, where B is in user space (1700-1750): the clock read may be B's view, no
        # residual; A's syscall 1720-1740 20 on the path.
        ((1000, 1740), want(runqueue=370, syscall=175, copy=45, user=150)),
    ],
)
def test_edge_against_clock_read(window, ns):
    frame, _ = bd.compute(iterations([window]), events(PING_PONG), WORKLOAD)
    assert comps(frame) == ns


def test_round_trip_edges_are_syscall_events():
    # A traced program's round trip (--rtt) runs from the measuring thread's sys_enter of its
    # send to the sys_exit of the answer's receive: at both edges A is in the kernel, on CPU,
    # whatever B does. PING_PONG's A writes 1100-1300 and reads 1350-1800: the window
    # [1100, 1800) has no residual, where the same window between clock reads (A in a syscall at
    # both edges, B blocked at 1100 and in write() at 1800) has its edge segments residual: at
    # 1800, A's read()'s copy 1785-1800 (15); at 1100, A's write()'s copy 1100-1115 (15).
    rtt = dataclasses.replace(WORKLOAD, params={"iterations_from": "rtt"})
    frame, _ = bd.compute(iterations([(1100, 1800)]), events(PING_PONG), rtt)
    assert comps(frame) == want(syscall=220, copy=60, user=50, runqueue=370)
    frame, _ = bd.compute(iterations([(1100, 1800)]), events(PING_PONG), WORKLOAD)
    assert comps(frame) == want(syscall=220, copy=30, user=50, runqueue=370, residual=30)


def test_lost_sys_exit_is_residual():
    # A's write() exit (1300) is lost: its sys_enter at 1100 is followed by read()'s, 1100-1350
    # is in no known state (rule 1), and write() has no copy carve. The path from 2000 as in
    # test_critical_path_by_hand down to B's wake-up at 1200 by A, which was on a CPU then (its
    # switches: in at 0, out at 1400), so the path moves to A (rule 3): A 1100-1200 residual 100,
    # user 1000-1100 100. user 200 + 50 + 100 = 350, syscall 65 + 35 + 35 = 135, copy 3 x 15 = 45,
    # runqueue 370, residual 100: 1000.
    rows = [r for r in PING_PONG if r[0] != 1300]
    frame, _ = bd.compute(iterations([(1000, 2000)]), events(rows), WORKLOAD)
    assert comps(frame) == want(user=350, syscall=135, copy=45, runqueue=370, residual=100)
    summary = bd.summarize(iterations([(1000, 2000)]), events(rows), WORKLOAD)
    assert summary.metrics["rtt"].closure_residual_pct == pytest.approx(10.0)


def test_untraced_peer_is_residual():
    # B has no events: A's sleep 1400-1600 was ended by B (the waking's waker), whose state
    # nothing shows: not blocked (nobody working) but residual 200. The path stays on A:
    # user 200 + 50 + 100, syscall 65 + 50 + 185, copy 2 x 15, runqueue 120, residual 200: 1000.
    rows = [r for r in PING_PONG if r[2] != B and r[5] != B]
    frame, _ = bd.compute(iterations([(1000, 2000)]), events(rows), WORKLOAD)
    assert comps(frame) == want(user=350, syscall=300, copy=30, runqueue=120, residual=200)


def test_measured_copy_nests_in_syscall():
    # The copy routines probed in A's write() (copy_page_from_iter 1110-1150 around
    # _copy_from_iter 1130-1140): copy is measured, no estimate. On the path (A's write() up to
    # B's wake-up at 1200): copy 40, syscall 1100-1110 and 1150-1200 60, with A's read() 80,
    # B's 50 + 50: 240.
    rows = PING_PONG + [
        (1110, "func_entry", A, 9, 1, 0),
        (1130, "func_entry", A, 8, 1, 0),
        (1140, "func_exit", A, 8, 1, 0),
        (1150, "func_exit", A, 9, 1, 0),
    ]
    b = bd.summarize(iterations([(1000, 2000)]), events(rows), WORKLOAD).metrics["rtt"]
    assert b.copy_source == "measured"
    assert b.components["copy"].mean == 40
    assert b.components["syscall"].mean == 240


def test_single_thread_has_no_critical_path():
    wl = dataclasses.replace(WORKLOAD, threads=WORKLOAD.threads[:1])
    rows = [
        (0, "switch", 0, 0, 0, A),
        (400, "sys_enter", A, 39, 0, 0),
        (500, "sys_exit", A, 39, A, 0),
        (600, "sys_enter", A, 39, 0, 0),
        (700, "sys_exit", A, 39, A, 0),
    ]
    frame, info = bd.compute(iterations([(520, 720), (450, 650)]), events(rows), wl)
    assert not info.critical_path
    assert comps(frame) == want(syscall=100, user=80 + 20)
    # A window that starts and ends inside syscalls contradicts the clock reads (rule 7).
    assert comps(frame, 1) == want(residual=50 + 50, user=100)


def test_summary_shape():
    b = bd.summarize(iterations([(1000, 2000)] * 10), events(PING_PONG), WORKLOAD).metrics["rtt"]
    assert set(b.components) == set(bd.COMPONENTS) | {"sched_delay"}
    # the old name of the wake-up, kept for readers of earlier results: wakeup + runqueue
    assert b.components["sched_delay"].derived == "wakeup + runqueue"
    assert b.components["sched_delay"].mean == pytest.approx(
        b.components["wakeup"].mean + b.components["runqueue"].mean
    )
    for key in ("n", "mean", "std", "min", "max", "median", "p90", "p95", "p99", "p999", "ci95_mean", "ci95_median"):
        assert key in b.components["user"].keys
    assert b.components["runqueue"].mean == 370
    assert b.closure_residual_pct == 0
    assert b.copy_source.startswith("estimated")
    assert b.entry_source.startswith("not calibrated")
    assert b.preempted_by == [] and b.steal_ns_mean == 0
    assert set(b.per_side) == {"measuring", "peer"}
    assert b.per_side["peer"].wakeup_delay["median"] == 250
    assert b.per_side["peer"].runqueue_delay["median"] == 250


# PING_PONG where A's write() wakes not B but a third thread of A's process, C (like a ZeroMQ
# I/O thread, on CPU 2), blocked in epoll_wait() since 30: woken at 1200, on CPU 1250,
# epoll_wait() returns 1260, user, sendmsg() 1380-1480 wakes B at 1470, C blocks at 1485. B on
# CPU 1501, its read() returns 1510, then as in PING_PONG.
THIRD_THREAD = [r for r in PING_PONG if r[0] not in (1200, 1450, 1500)] + [
    (0, "switch", 0, 0, 0, C),
    (10, "sys_enter", C, 232, 0, 0),
    (30, "switch", C, 1, 0, 0),
    (1200, "waking", C, 2, A, 0),
    (1250, "switch", 0, 0, 0, C),
    (1260, "sys_exit", C, 232, 1, 0),
    (1380, "sys_enter", C, 46, 0, 0),
    (1470, "waking", B, 1, C, 0),
    (1480, "sys_exit", C, 46, 1, 0),
    (1485, "switch", C, 1, 0, 0),
    (1501, "switch", 0, 0, 0, B),
    (1510, "sys_exit", B, 0, 1, 0),
]
# A fourth thread of A's process (299, on CPU 3), preempted since 1370 and never back: it
# wakes nobody.
BYSTANDER = [(0, "switch", 0, 0, 0, 299), (1370, "switch", 299, 0, 0, OTHER)]


@pytest.mark.parametrize("bystander", [False, True])
def test_path_goes_through_another_thread_of_the_workload(bystander):
    # Rule 3 through C. From 2000: A user 200, copy 15, syscall 65, runqueue 1600-1720 120; B
    # (woke A): syscall 1565-1600 35, copy 15, user 1510-1550 40, copy 1501-1510 9 (capped by
    # the read's 9 ns on CPU), runqueue 1470-1501 31 (CPU 1 idle); B woken by C in sendmsg():
    # C syscall 1395-1470 75, copy 1380-1395 15 (a send copies first), user 1260-1380 120,
    # syscall 1250-1260 10 (epoll_wait(): no copy), runqueue 1200-1250 50 (CPU 2 idle); C woken by
    # A in write(): A syscall 1115-1200 85, copy 15, user 100.
    # user 200 + 40 + 120 + 100 = 460, syscall 65 + 35 + 75 + 10 + 85 = 270,
    # copy 15 + 15 + 9 + 15 + 15 = 69, runqueue 120 + 31 + 50 = 201: 1000. The bystander
    # (299) changes nothing: its wait is on no one's path.
    rows = THIRD_THREAD + (BYSTANDER if bystander else [])
    df = events(rows, cpus={B: 1, C: 2, 299: 3})
    df.loc[df["tid"].isin([C, 299]), "pid"] = A
    frame, _ = bd.compute(iterations([(1000, 2000)]), df, WORKLOAD)
    assert comps(frame) == want(user=460, syscall=270, copy=69, runqueue=201)
    assert "thread.user" not in frame.columns  # no per-side view of such threads
    _, info = bd.compute(iterations([(1000, 2000)]), df, WORKLOAD, path=True)
    everyone, seg = info.path[0]
    assert [t for _, t in everyone] == [A, B] + ([299] if bystander else []) + [C]  # others by tid
    got = sorted(
        (int(a), int(b), everyone[th][1], timeline.STATE_NAMES[st])
        for a, b, th, st in zip(seg.a, seg.b, seg.thread, seg.state)
    )
    assert got == [
        (1000, 1100, A, "user"),
        (1100, 1115, A, "copy"),
        (1115, 1200, A, "syscall"),
        (1200, 1250, C, "runqueue"),
        (1250, 1260, C, "syscall"),
        (1260, 1380, C, "user"),
        (1380, 1395, C, "copy"),
        (1395, 1470, C, "syscall"),
        (1470, 1501, B, "runqueue"),
        (1501, 1510, B, "copy"),
        (1510, 1550, B, "user"),
        (1550, 1565, B, "copy"),
        (1565, 1600, B, "syscall"),
        (1600, 1720, A, "runqueue"),
        (1720, 1785, A, "syscall"),
        (1785, 1800, A, "copy"),
        (1800, 2000, A, "user"),
    ]


@pytest.mark.parametrize(
    "calibration, sweep, want",
    [
        (None, None, (bd.COPY_NS_PER_CALL, bd.COPY_NS_PER_BYTE, "per call assumed, per byte assumed")),
        (
            {"ns_per_call": 8.2, "ns_per_byte": 0.02},
            None,
            (8.2, 0.02, "per call timed on this CPU, per byte timed on this CPU, cache-hot"),
        ),
        (
            {"ns_per_call": 8.2, "ns_per_byte": 0.02},
            0.1,
            (8.2, 0.1, "per call timed on this CPU, per byte from the size sweep"),
        ),
        (None, 0.3, (bd.COPY_NS_PER_CALL, 0.3, "per call assumed, per byte from the size sweep")),
    ],
)
def test_copy_costs_prefer_sweep_then_calibration(calibration, sweep, want):
    assert bd.copy_costs(dataclasses.replace(WORKLOAD, copy_calibration=calibration), sweep) == want


def test_no_copy_is_estimated_where_the_workload_copies_nothing():
    # orwc's /dev/null: write() returns the bytes it was given and copies none. With
    # workload.json's copies false, the estimate's 15 ns a data syscall stay in syscall.
    plain, _ = bd.compute(iterations([(1000, 2000)]), events(PING_PONG), WORKLOAD)
    none, info = bd.compute(iterations([(1000, 2000)]), events(PING_PONG), dataclasses.replace(WORKLOAD, copies=False))
    assert comps(plain)["copy"] > 0 and comps(none)["copy"] == 0 and not info.copies
    assert comps(none)["syscall"] == comps(plain)["syscall"] + comps(plain)["copy"]
    b = bd.summarize(
        iterations([(1000, 2000)]), events(PING_PONG), dataclasses.replace(WORKLOAD, copies=False)
    ).metrics["rtt"]
    assert b.copy_source.startswith("none: this workload's data syscalls copy nothing")


def test_steal_is_a_component_where_the_path_or_a_side_was_on_the_cpu():
    # PING_PONG with the hypervisor's steal records (tid 0, aux = CPU, a0 = ns since the CPU's
    # last one; the span is placed just before the record):
    #   CPU 1 1500-1560: B on CPU there (user 1500-1550, write()'s copy 1550-1560), on the path
    #     (test_critical_path_by_hand): steal 60 instead of user 50 and copy 10, on the path and
    #     on B's side;
    #   CPU 0 1650-1700: A woken (since 1600) and waiting for CPU 0 (it came back there at 1720):
    #     steal 50 instead of runqueue 50, on the path and on A's side;
    #   CPU 0 20 ns at 1450 and 20 more at 1460: the second reaches back over the first, which
    #     moves back (1420-1440, 1440-1460): A blocked then (the path on B, CPU 1): nobody's.
    rows = PING_PONG + [
        (1560, "steal", 0, 1, 60, 0),
        (1700, "steal", 0, 0, 50, 0),
        (1450, "steal", 0, 0, 20, 0),
        (1460, "steal", 0, 0, 20, 0),
    ]
    frame, _ = bd.compute(iterations([(1000, 2000)]), events(rows), WORKLOAD)
    assert comps(frame) == want(user=300, syscall=220, copy=50, runqueue=320, steal=110)
    assert comps(frame, prefix="measuring.") == want(user=350, syscall=300, copy=30, blocked=200, runqueue=70, steal=50)
    assert comps(frame, prefix="peer.") == want(
        user=50, syscall=180, copy=20, irq=20, blocked=420, runqueue=250, steal=60
    )
    assert frame["steal_ns"].iloc[0] == 60 + 50 + 40
    assert path_segments(rows, (1000, 2000))[6:11] == [
        (1500, 1560, "B", "steal"),
        (1560, 1565, "B", "copy"),
        (1565, 1600, "B", "syscall"),
        (1600, 1650, "A", "runqueue"),
        (1650, 1700, "A", "steal"),
    ]


def test_steal_spans_keep_every_ns_once():
    # CPU 1: 50 ns at 100, 40 at 120 (reaching back to 80, over the first), 30 at 125 (back to 95,
    # over both): 125-95, then 95-55, then 55-5; CPU 0: 10 at 300.
    ev = timeline.Events(
        events(
            [
                (100, "steal", 0, 1, 50, 0),
                (120, "steal", 0, 1, 40, 0),
                (125, "steal", 0, 1, 30, 0),
                (300, "steal", 0, 0, 10, 0),
            ]
        )
    )
    spans = ev.steal_spans()
    got = {c: (a.tolist(), b.tolist()) for c, (a, b) in spans.items()}
    assert got == {1: ([5, 55, 95], [55, 95, 125]), 0: ([290], [300])}
