"""Each thread's state step function (model/timeline.py, timeline.c) on events worked out by
hand, and its window sums against brute force."""

import numpy as np
import pytest
from scenarios import (
    EARLY_WAKE,
    EARLY_WAKE_ON_CPU,
    OTHER,
    PING_PONG,
    SAME_CPU_PREEMPTED,
    TIMER,
    A,
    B,
    events,
)

from analysis.model import breakdown as bd
from analysis.model import decoded, timeline

# WORKLOAD has no copy_calibration: the copy estimate takes the assumed costs, and each data
# syscall that returned 1 byte loses round(15 + 1 x 0.1) = 15 ns of its time to copy (rule 6).
assert (bd.COPY_NS_PER_CALL, bd.COPY_NS_PER_BYTE) == (15.0, 0.1)
RULES = timeline.StepRules("x86_64", 0, 0, bd.COPY_NS_PER_CALL, bd.COPY_NS_PER_BYTE)


def test_thread_timeline_by_hand():
    # Rule 1 with the copy carve of rule 6, PING_PONG's threads on their own:
    #   A: on CPU since 0, in no known mode before its first syscall event (400); getpid()
    #      400-500 (not a data syscall: no copy); write() 1100-1300 loses 1100-1115 to copy (a
    #      write copies first); read() 1350-, blocked at 1400, runqueue from the waking at 1600,
    #      on CPU at 1720, the read's copy 1785-1800 (a read copies last), user from 1800.
    #   B: read() from 20, blocked at 50, runqueue from 1200, on CPU 1450 (syscall; copy
    #      1485-1500), user 1500-1550, write() 1550-1700 (copy 1550-1565, irq 1620-1640),
    #      user 1700-1750, read() from 1750, blocked at 1780.
    ev = timeline.Events(events(PING_PONG))
    a = timeline.thread_timeline(ev, A, RULES)
    assert list(zip(a.ts.tolist(), a.state.tolist())) == [
        (0, timeline.UNKNOWN),
        (400, timeline.SYSCALL),
        (500, timeline.USER),
        (1100, timeline.COPY),
        (1115, timeline.SYSCALL),
        (1300, timeline.USER),
        (1350, timeline.SYSCALL),
        (1400, timeline.BLOCKED),
        (1600, timeline.RUNQUEUE),
        (1720, timeline.SYSCALL),
        (1785, timeline.COPY),
        (1800, timeline.USER),
    ]
    b = timeline.thread_timeline(ev, B, RULES)
    t = [10, 30, 100, 1300, 1460, 1490, 1520, 1560, 1600, 1630, 1645, 1720, 1760, 1790]
    assert list(b.at(t)) == [
        timeline.UNKNOWN,
        timeline.SYSCALL,
        timeline.BLOCKED,
        timeline.RUNQUEUE,
        timeline.SYSCALL,
        timeline.COPY,
        timeline.USER,
        timeline.COPY,
        timeline.SYSCALL,
        timeline.IRQ,
        timeline.SYSCALL,
        timeline.USER,
        timeline.SYSCALL,
        timeline.BLOCKED,
    ]
    # (switch in, from the waking, from the start of runqueue): the same, no sched_wakeup
    on, delay, rq = timeline.wakeup_delays(b)
    assert (list(on), list(delay), list(rq)) == ([1450], [250], [250])
    on, delay, rq = timeline.wakeup_delays(a)
    assert (list(on), list(delay), list(rq)) == ([1720], [120], [120])
    # Who ended each sleep: B's at 1200 by A, A's at 1600 by B.
    assert (list(b.sleep_end), list(b.sleep_waker)) == ([1200], [A])
    assert (list(a.sleep_end), list(a.sleep_waker)) == ([1600], [B])
    # Without the copy estimate (copy routines probed: copy_call < 0) the syscalls keep it all.
    a = timeline.thread_timeline(ev, A, timeline.StepRules("x86_64"))
    assert list(a.at([1105, 1790])) == [timeline.SYSCALL, timeline.SYSCALL]


def test_time_in_counts_before_first_event_as_unknown():
    tl = timeline.Timeline([10, 20], [timeline.USER, timeline.SYSCALL])
    got = tl.time_in(np.array([0, 15]), np.array([30, 18]))
    assert got[0, timeline.UNKNOWN] == 10 and got[0, timeline.USER] == 10 and got[0, timeline.SYSCALL] == 10
    assert got[1, timeline.USER] == 3 and got[1].sum() == 3


def test_preempted_on_the_way_out_of_a_syscall():
    # Rule 2 on A of SAME_CPU_PREEMPTED, with an entry path of 10 ns in and 20 ns out (rule 6):
    # write() 1100-1300 and on to the switch at 1400 is syscall; preempted 1400-1700; the exit
    # path's 20 ns go after the switch back in (1700-1720), not after the sys_exit at 1300;
    # user to 1740, entry 1740-1750 before read(), read() 1750-1850, exit path 1850-1870.
    # Before: no known mode before getpid() (its entry carve needs user time), exit path 500-520,
    # user, entry 1090-1100.
    ev = timeline.Events(events(SAME_CPU_PREEMPTED, cpus={}))
    a = timeline.thread_timeline(ev, A, timeline.StepRules("x86_64", 10, 20))
    assert list(zip(a.ts.tolist(), a.state.tolist())) == [
        (50, timeline.UNKNOWN),
        (400, timeline.SYSCALL),
        (500, timeline.ENTRY),
        (520, timeline.USER),
        (1090, timeline.ENTRY),
        (1100, timeline.SYSCALL),
        (1400, timeline.PREEMPTED),
        (1700, timeline.ENTRY),
        (1720, timeline.USER),
        (1740, timeline.ENTRY),
        (1750, timeline.SYSCALL),
        (1850, timeline.ENTRY),
        (1870, timeline.USER),
    ]
    # A record in between (the local timer's interrupt) makes it a preemption in user space.
    rows = SAME_CPU_PREEMPTED + [(1320, "vector_entry", A, TIMER, 0, 0), (1330, "vector_exit", A, TIMER, 0, 0)]
    a = timeline.thread_timeline(timeline.Events(events(rows, cpus={})), A, RULES)
    assert list(a.at([1310, 1325, 1390, 1400])) == [timeline.USER, timeline.IRQ, timeline.USER, timeline.PREEMPTED]


@pytest.mark.parametrize(
    "windows",
    [
        [(0, 30), (15, 18)],  # overlapping: prefix sums
        [(15, 18), (0, 12), (25, 40)],  # disjoint, unsorted: bincount
        [(12, 14), (14, 16), (16, 30)],  # touching
    ],
)
def test_time_in_matches_brute_force(windows):
    tl = timeline.Timeline([10, 13, 20, 22], [timeline.USER, timeline.SYSCALL, timeline.BLOCKED, timeline.USER])
    got = tl.time_in(np.array([w[0] for w in windows]), np.array([w[1] for w in windows]))
    for row, (s, e) in zip(got, windows):
        want = np.zeros(len(timeline.STATE_NAMES))
        for t in range(s, e):
            want[tl.at(np.array([t]))[0]] += 1
        assert list(row) == list(want)


def test_time_in_counts_a_reversed_window_negatively():
    tl = timeline.Timeline([10, 13], [timeline.USER, timeline.SYSCALL])
    got = tl.time_in(np.array([15, 5]), np.array([11, 5]))
    assert got[0][timeline.USER] == -2 and got[0][timeline.SYSCALL] == -2 and got[1].sum() == 0


@pytest.mark.parametrize(
    "ts, x",
    [
        ([], [0, 5]),
        ([10], [9, 10, 11]),
        ([1, 2, 2, 2, 5, 9], [0, 2, 2, 3, 9, 100]),  # ascending, with repeats
        ([1, 2, 2, 2, 5, 9], [100, 9, 3, 2, 0, 5]),  # any order
        (list(range(0, 3000, 3)), list(range(-5, 3100, 7)) + [1500, 2]),
    ],
)
def test_count_upto_is_searchsorted_right(ts, x):
    from analysis.model import native

    ts, x = np.array(ts, np.int64), np.array(x, np.int64)
    assert list(native.count_upto(ts, x)) == list(np.searchsorted(ts, x, side="right"))


def test_states_outside_the_table_are_refused():
    with pytest.raises(ValueError):
        timeline.time_in(np.array([1, 2]), [np.array([0, len(timeline.STATE_NAMES)])], np.array([0]), np.array([3]))


def test_woken_before_switching_out_waits_for_cpu():
    # B wakes A at 1390 while A, inside read(), has not yet left the CPU (it switches out at
    # 1400 with a sleeping state); A needs no further wake-up and runs again at 1500:
    # 1400-1500 is waiting for a CPU (runqueue), and the wake-up delay counts from 1390, all
    # of it in the run queue (no sched_wakeup).
    rows = [
        (0, "switch", 0, 0, 0, A),
        (400, "sys_enter", A, 39, 0, 0),
        (500, "sys_exit", A, 39, A, 0),
        (1350, "sys_enter", A, 0, 3, 0),
        (1390, "waking", A, 0, B, 0),
        (1400, "switch", A, 1, OTHER, OTHER),
        (1500, "switch", OTHER, 0, 0, A),
        (1600, "sys_exit", A, 0, 1, 0),
    ]
    ev = timeline.Events(events(rows))
    a = timeline.thread_timeline(ev, A, RULES)
    assert list(a.at([1395, 1450, 1550, 1590])) == [
        timeline.SYSCALL,
        timeline.RUNQUEUE,
        timeline.SYSCALL,
        timeline.COPY,
    ]
    on, delay, rq = timeline.wakeup_delays(a)
    assert (list(on), list(delay), list(rq)) == ([1500], [110], [110])
    # Not a sleep that ended: nobody to move the path to.
    assert len(a.sleep_end) == 0


def test_calls_and_the_wake_ups_that_made_it_runnable():
    # EARLY_WAKE_ON_CPU's A: its data syscalls that moved bytes (write, read; not getpid), and the wake-ups that made it
    # runnable: B's write-space wake-up at 1480, which ended its sleep, and B's answer at 1930, which
    # came while A was still on CPU 0 (no sleep of A ends there).
    a = timeline.thread_timeline(timeline.Events(events(EARLY_WAKE_ON_CPU)), A, RULES)
    enter, exit_, nr, ret = a.calls
    assert list(zip(enter, exit_, nr, ret)) == [(1100, 1300, 1, 1), (1350, 2100, 0, 1)]
    assert (list(a.woke[0]), list(a.woke[1])) == ([1480, 1930], [B, B])
    assert list(a.sleep_end) == [1480]
    # The first wake-up of a sleep only: EARLY_WAKE's sched_wakeup at 1700 is the same wake-up.
    a = timeline.thread_timeline(timeline.Events(events(EARLY_WAKE)), A, RULES)
    assert (list(a.woke[0]), list(a.woke[1])) == ([1480], [B])


def _as_lists(tl):
    return [
        a.tolist() for a in (tl.ts, tl.state, tl.sleep_end, tl.sleep_waker, tl.in_ts, tl.in_cpu, *tl.calls, *tl.woke)
    ]


def test_timelines_made_after_one_another_keep_their_own_steps():
    # The C pass writes into arrays each thread keeps from call to call (native._room, the C's
    # scratch): a timeline made later, in the same thread or in another at once, changes none
    # made before it, and the arrays let go of are made anew.
    from concurrent import futures

    from analysis.model import native

    ev = timeline.Events(events(PING_PONG))
    alone = {t: _as_lists(timeline.thread_timeline(ev, t, RULES)) for t in (A, B)}
    native.release_scratch()
    a = timeline.thread_timeline(ev, A, RULES)
    b = timeline.thread_timeline(ev, B, RULES)
    bigger = timeline.Events(events(EARLY_WAKE_ON_CPU))
    timeline.thread_timeline(bigger, A, RULES)
    with futures.ThreadPoolExecutor(max_workers=2) as pool:
        others = list(pool.map(lambda t: _as_lists(timeline.thread_timeline(ev, t, RULES)), [A, B] * 4))
    assert (_as_lists(a), _as_lists(b)) == (alone[A], alone[B])
    assert others == [alone[A], alone[B]] * 4
    native.release_scratch()
    assert _as_lists(timeline.thread_timeline(ev, A, RULES)) == alone[A]


@pytest.mark.parametrize("seed", range(20))
def test_steal_cut_out_matches_brute_force(seed):
    """_with_steal (only the steps near a span looked at, the cut points inserted) against the
    rule applied at every ns: on a CPU, the CPU of the last switch in (before any, the first
    record's); woken or preempted, that of the next switch in; in a span of that CPU: STEAL."""
    r = np.random.default_rng(seed)
    m = 200
    ts = np.cumsum(r.integers(1, 50, m)).astype(np.int64)
    states = [timeline.USER, timeline.SYSCALL, timeline.BLOCKED, timeline.RUNQUEUE, timeline.PREEMPTED]
    state = r.choice(states + [timeline.UNKNOWN], m).astype(np.int8)
    in_ts = np.sort(r.choice(ts, 40, replace=False))
    in_cpu = r.integers(0, 2, 40).astype(np.int16)
    spans = {c: decoded._packed(np.sort(r.integers(ts[0], ts[-1] + 100, 8)), r.integers(1, 60, 8)) for c in (0, 1)}
    got_ts, got_st = timeline._with_steal(ts, state, in_ts, in_cpu, 1, spans)
    assert (np.diff(got_ts) > 0).all() and (got_st[1:] != got_st[:-1]).all()
    for t in range(int(ts[0]), int(ts[-1]) + 50):
        i = np.searchsorted(ts, t, "right") - 1
        want = state[i]
        if want < timeline.STEAL:
            j = np.searchsorted(in_ts, ts[i], "right") - 1
            cpu = in_cpu[j] if j >= 0 else 1
        elif want in (timeline.WAKEUP, timeline.RUNQUEUE, timeline.PREEMPTED):
            j = np.searchsorted(in_ts, ts[i], "right")
            cpu = in_cpu[j] if j < len(in_ts) else -1
        else:
            cpu = -1
        if cpu in spans:
            a, b = spans[cpu]
            q = np.searchsorted(a, t, "right") - 1
            if q >= 0 and t < b[q]:
                want = timeline.STEAL
        assert got_st[np.searchsorted(got_ts, t, "right") - 1] == want, t


# native.deliveries (ipt_deliveries), by hand. Threads A, B, C are tids 1, 2, 3 (indices 0, 1, 2);
# system call 1 receives, 2 sends (KIND); a call is (enter, exit, nr, ret), a wake-up (time, waker tid).
KIND = np.array([0, 1, 2], np.uint8)
RECV_A = [(100, 300, 1, 5)]  # A's receive, 100-300
B_RECEIVING = [(140, 160, 1, 1)]  # B in a receive of its own at 150: its wake-up of A was early


@pytest.mark.parametrize(
    "calls, woke, sleep_end, want",
    [
        # a wake-up while A was still on CPU (no sleep of A ends at 150) ended the wait there
        ([RECV_A, []], [[(150, 2)], []], [[], []], [[(150, 1)], []]),
        # one that ended a sleep is the critical path's own rule: not listed
        ([RECV_A, []], [[(150, 2)], []], [[150], []], [[], []]),
        # before the receive began, by A itself, by a thread not of these: none
        ([RECV_A, []], [[(90, 2)], []], [[], []], [[], []]),
        ([RECV_A, []], [[(150, 1)], []], [[], []], [[], []]),
        ([RECV_A, []], [[(150, 9)], []], [[], []], [[], []]),
        # a receive that returned nothing, or a call that moves no data, waited for nothing
        ([[(100, 300, 1, 0)], []], [[(150, 2)], []], [[], []], [[], []]),
        ([[(100, 300, 0, 5)], []], [[(150, 2)], []], [[], []], [[], []]),
        # only the last wake-up before the receive returned counts (250: B's, not 150's C)
        ([RECV_A, [], []], [[(150, 3), (250, 2)], [], []], [[], [], []], [[(250, 1)], [], []]),
        # woken early by B receiving: B's next send, 170-180, delivered, at its return
        ([RECV_A, B_RECEIVING + [(170, 180, 2, 3)]], [[(150, 2)], []], [[], []], [[(180, 1)], []]),
        # ... at the receive's return if the send returned after it
        ([RECV_A, B_RECEIVING + [(170, 400, 2, 3)]], [[(150, 2)], []], [[], []], [[(300, 1)], []]),
        # ... none if the send began after the receive returned, or sent nothing
        ([RECV_A, B_RECEIVING + [(310, 320, 2, 3)]], [[(150, 2)], []], [[], []], [[], []]),
        ([RECV_A, B_RECEIVING + [(170, 180, 2, 0)]], [[(150, 2)], []], [[], []], [[], []]),
        # ... the first send after the wake-up among the other threads: C's at 170, not B's at 200
        (
            [RECV_A, B_RECEIVING + [(200, 210, 2, 3)], [(170, 260, 2, 3)]],
            [[(150, 2)], [], []],
            [[], [], []],
            [[(260, 2)], [], []],
        ),
        # ... never A's own send
        ([RECV_A + [(170, 180, 2, 3)], B_RECEIVING], [[(150, 2)], []], [[], []], [[], []]),
        # B's receive ended before the wake-up (130): not receiving then, so the wake-up ended the wait
        ([RECV_A, [(110, 130, 1, 1), (170, 180, 2, 3)]], [[(150, 2)], []], [[], []], [[(150, 1)], []]),
        # two receives, each its own finding, in time order
        (
            [[(100, 200, 1, 5), (300, 500, 1, 5)], [(340, 360, 1, 1), (370, 380, 2, 3)]],
            [[(150, 2), (350, 2)], []],
            [[], []],
            [[(150, 1), (380, 1)], []],
        ),
        # ... ordered by time, not by receive: the first's send returns after the second's wake-up
        (
            [[(100, 200, 1, 5), (210, 500, 1, 5)], [(140, 160, 1, 1), (170, 260, 2, 3)]],
            [[(150, 2), (220, 2)], []],
            [[], []],
            [[(200, 1), (220, 1)], []],
        ),
        # one thread alone: nothing another thread delivered
        ([RECV_A], [[(150, 1)]], [[]], [[]]),
    ],
)
def test_deliveries_by_hand(calls, woke, sleep_end, want):
    from analysis.model import native

    def cols(rows, n):
        return [np.array([r[i] for r in rows], np.int64) for i in range(n)]

    got = native.deliveries(
        np.arange(1, len(calls) + 1), [cols(c, 4) for c in calls], [cols(w, 2) for w in woke], sleep_end, KIND
    )
    assert [list(zip(at.tolist(), by.tolist())) for at, by in got] == [[tuple(p) for p in w] for w in want]
