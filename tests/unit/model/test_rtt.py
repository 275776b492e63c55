"""Round trips found in system calls (model/rtt.py) and iterations from marks (model/marks.py),
on event tables worked out by hand: each case names the windows a reader finds in it."""

import numpy as np
import pandas as pd
import pytest

from analysis.model import marks, rtt, timeline
from analysis.store.jsonfiles import Marks

A, B = 100, 200
READ, WRITE, CLOSE, SENDTO, RECVFROM, EXECVE, FUTEX = 0, 1, 3, 44, 45, 59, 202  # x86_64
ADDR = 0x7F00_0000_1000  # a futex word


def frame(rows):
    """rows: (ts, type, tid, aux, a0[, other_tid]) -> the columns rtt and marks read."""
    full = [r if len(r) == 6 else (*r, -1) for r in rows]
    df = pd.DataFrame(full, columns=["ts", "type", "tid", "aux", "a0", "other_tid"])
    df["type"] = pd.Categorical(df["type"], categories=timeline.Events.TYPES)
    df["pid"] = df["tid"]
    df["cpu"] = 0
    return df.sort_values("ts", kind="stable").reset_index(drop=True)


def call(tid, nr, arg, enter, leave, ret=1):
    return [(enter, "sys_enter", tid, nr, arg), (leave, "sys_exit", tid, nr, ret)]


def server(tid, rd, wr, times):
    """The echoing side: a read of rd (answered at t) then a write to wr, for each t."""
    rows = []
    for t in times:
        rows += call(tid, READ, rd, t - 60, t) + call(tid, WRITE, wr, t + 10, t + 20)
    return rows


PIPES = (
    call(A, WRITE, 5, 100, 110) + call(A, READ, 6, 120, 200) + call(A, WRITE, 5, 300, 310) + call(A, READ, 6, 320, 400)
)
CASES = {
    # two pipes: A asks, B (whose first call receives) answers and is not counted
    "pipe ping-pong": (PIPES + server(B, 4, 7, [115, 315]), [(A, 100, 200), (A, 300, 400)]),
    # the program's own output (descriptor 1) is no request
    "stdout is left out": (call(A, WRITE, 1, 10, 20) + PIPES, [(A, 100, 200), (A, 300, 400)]),
    # a file read before the conversation, its descriptor closed and then reused by a pipe
    "descriptor reused after close": (
        call(A, READ, 5, 5, 8, ret=100) + call(A, CLOSE, 5, 9, 10, ret=0) + PIPES,
        [(A, 100, 200), (A, 300, 400)],
    ),
    # a read that brings nothing (EAGAIN) is no answer; the next one is
    "empty read is no answer": (
        call(A, WRITE, 5, 100, 110) + call(A, READ, 6, 120, 130, ret=-11) + call(A, READ, 6, 150, 200),
        [(A, 100, 200)],
    ),
    # a request written in two parts is one round trip from the first part
    "request in two writes": (
        call(A, WRITE, 5, 100, 105) + call(A, WRITE, 5, 106, 110) + call(A, READ, 6, 150, 200),
        [(A, 100, 200)],
    ),
    # sockets: each connection of one thread pairs with itself, interleaved
    "two connections of one thread": (
        call(A, SENDTO, 7, 100, 105)
        + call(A, SENDTO, 8, 110, 115)
        + call(A, RECVFROM, 7, 190, 200)
        + call(A, RECVFROM, 8, 205, 210),
        [(A, 100, 200), (A, 110, 210)],
    ),
    # a socket's server: its first call on the descriptor receives
    "socket server not counted": (
        call(B, RECVFROM, 9, 50, 100) + call(B, SENDTO, 9, 110, 120) + call(B, RECVFROM, 9, 130, 300),
        [],
    ),
    # futex: the call that woke B sends, the call in which A slept answers
    "futex wake then wait": (
        call(A, FUTEX, ADDR, 100, 130, ret=1)
        + [(120, "waking", B, 0, 0, A)]
        + call(A, FUTEX, ADDR + 4, 140, 400, ret=0)
        + [(150, "switch", A, 1, 0)],
        [(A, 100, 400)],
    ),
    # a program's descriptor written before an exec and the same number read after it
    "exec starts anew": (
        call(A, WRITE, 4, 10, 20) + call(A, EXECVE, 0, 30, 40, ret=0) + call(A, READ, 4, 50, 60, ret=100) + PIPES,
        [(A, 100, 200), (A, 300, 400)],
    ),
    # a file written at the start and another read at the end do not interleave: no pair
    "files written and read apart": (
        call(A, WRITE, 8, 10, 12)
        + call(A, WRITE, 8, 20, 22)
        + PIPES
        + call(A, READ, 9, 500, 505)
        + call(A, READ, 9, 510, 515),
        [(A, 100, 200), (A, 300, 400)],
    ),
    # only sends: nothing waits for an answer
    "no answer": (call(A, WRITE, 5, 100, 110) + call(A, WRITE, 5, 200, 210), []),
}


@pytest.mark.parametrize("name", CASES)
def test_round_trips(name):
    rows, want = CASES[name]
    it = rtt.round_trips(frame(rows), "x86_64")
    got = list(zip(it["tid"].tolist(), it["t_start_ns"].tolist(), it["t_end_ns"].tolist()))
    assert got == want
    assert (it["latency_ns"] == it["t_end_ns"] - it["t_start_ns"]).all()
    assert it["iteration"].tolist() == list(range(len(want)))
    assert list(it["metric"].cat.categories) == ["rtt"]


def test_partners_are_who_wakes_and_is_woken():
    ev = frame([(10, "waking", B, 0, 0, A), (20, "waking", A, 0, 0, B), (30, "waking", 300, 0, 0, A)])
    assert rtt.partners(ev, [A], {A, B, 300}) == [B, 300]
    assert rtt.partners(ev, [A], {A, B}) == [B]  # a task not followed is nobody's partner


NAME = 0x5555_0000_2000
MARK_CASES = {
    "begin end pairs": ([(10, A, 1, 0), (50, A, 2, 0), (60, A, 1, 0), (90, A, 2, 0)], [(A, 10, 50), (A, 60, 90)]),
    # nested calls (recursion): the end closes the innermost begin
    "nested": ([(10, A, 1, 0), (20, A, 1, 0), (30, A, 2, 0), (90, A, 2, 0)], [(A, 10, 90), (A, 20, 30)]),
    # the trace starts inside one and ends inside another: neither counts
    "cut at both ends": ([(5, A, 2, 0), (10, A, 1, 0), (40, A, 2, 0), (60, A, 1, 0)], [(A, 10, 40)]),
    # threads apart: B's end does not close A's begin
    "per thread": ([(10, A, 1, 0), (20, B, 1, 0), (30, B, 2, 0), (40, A, 2, 0)], [(A, 10, 40), (B, 20, 30)]),
}


@pytest.mark.parametrize("name", MARK_CASES)
def test_mark_windows(name):
    rows, want = MARK_CASES[name]
    it = marks.windows(frame([(ts, "mark", tid, aux, a0) for ts, tid, aux, a0 in rows]), None)
    got = sorted(zip(it["tid"].tolist(), it["t_start_ns"].tolist(), it["t_end_ns"].tolist()))
    assert got == sorted(want)
    assert set(it["metric"].astype(str)) <= {"iteration"}


def test_mark_names_give_metrics():
    rows = [(10, A, 1, NAME), (20, A, 2, NAME), (30, A, 1, 0), (40, A, 2, 0)]
    it = marks.windows(frame([(ts, "mark", tid, aux, a0) for ts, tid, aux, a0 in rows]), Marks(names={NAME: "get"}))
    assert it["metric"].astype(str).tolist() == ["get", "iteration"]
    assert np.array_equal(it["latency_ns"].to_numpy(), [10, 10])


def test_attached_in_mid_conversation():
    """A thread already running when the trace began (--pid) may first receive the answer
    to a request sent before: that answer is passed over, and it asks from its first send;
    one whose whole life the trace saw and whose first call receives answers only."""
    rows = call(A, READ, 6, 20, 50) + PIPES
    ev = frame(rows)
    it = rtt.round_trips(ev, "x86_64", born=set())
    assert list(zip(it["t_start_ns"], it["t_end_ns"])) == [(100, 200), (300, 400)]
    assert len(rtt.round_trips(ev, "x86_64", born={A})) == 0


def _iters(windows):
    """[(tid, start, end)] -> an iterations frame."""
    tid, s, e = (np.array(x, np.int64) for x in zip(*windows))
    return rtt.as_iterations(s, e, tid, np.zeros(len(s), np.int64), np.zeros(len(s), np.int64), ["rtt"])


def test_a_symmetric_ping_pong_seen_from_its_middle_is_counted_from_one_side():
    """Issue 26 part 5: a client A and its server B over one socket, both traced from the middle
    of their conversation: A's windows (request -> answer) each hold B's answer, and B's (answer
    -> next request) each hold A's next request: the same requests counted twice. Only the
    side choose() names keeps its windows, numbered anew."""
    client = [(A, 100 * k, 100 * k + 60) for k in range(10)]  # sends at 100k, answer read at +60
    server = [(B, 100 * k + 50, 100 * k + 110) for k in range(10)]  # answers at +50, next request at +110
    it = _iters(client + server)
    assert rtt.answering_each_other(it) == [(A, B)]
    kept, pairs = rtt.one_side_each(it, lambda a, b: a)
    assert pairs == [(A, B)] and set(kept["tid"]) == {A} and len(kept) == 10
    assert list(kept["iteration"]) == list(range(10))
    kept, pairs = rtt.one_side_each(it, lambda a, b: b)
    assert pairs == [(B, A)] and set(kept["tid"]) == {B}


# (a's pid, b's pid, started in the trace, named by --pid, parents: pid -> parent) -> (asker, why)
ASKER_CASES = [
    # a server named by --pid (b) beside the command that talks to it (a): the command asks,
    # although b is the one named (the redis-benchmark run whose server's accept was lost)
    ((10, 20, {10}, {20}, {}), (A, "started in the trace")),
    ((10, 20, {20}, {10}, {}), (B, "started in the trace")),
    # both or neither started: the one named by --pid
    ((10, 20, set(), {20}, {}), (B, "named by --pid")),
    ((10, 20, {10, 20}, {10}, {}), (A, "named by --pid")),
    # neither named: the parent, either way round, else the older process
    ((10, 20, set(), set(), {20: 10}), (A, "the parent of pid 20")),
    ((30, 20, set(), set(), {30: 20}), (B, "the parent of pid 30")),
    ((30, 20, set(), set(), {}), (B, "the older process")),
    # two threads of one process: the lower tid
    ((10, 10, {10}, {10}, {}), (A, "the older thread")),
]


@pytest.mark.parametrize("case, want", ASKER_CASES)
def test_which_of_two_threads_that_answer_each_other_asks(case, want):
    pa, pb, started, named, parents = case
    assert rtt.asker_of(A, B, pa, pb, started, named, parents.get) == want


def test_a_proxy_and_its_client_both_ask():
    """A asks B, which asks C before it answers (a proxy): B's windows begin inside A's, A's
    outside B's: two sets of round trips, both kept."""
    a = [(A, 100 * k, 100 * k + 80) for k in range(10)]
    b = [(B, 100 * k + 20, 100 * k + 60) for k in range(10)]
    it = _iters(a + b)
    assert rtt.answering_each_other(it) == []
    kept, pairs = rtt.one_side_each(it, lambda x, y: x)
    assert pairs == [] and len(kept) == 20


def test_a_lost_first_request_does_not_make_the_client_a_server():
    """Issue 26 part 5 (the flaky 'no round trips in the trace of taskset'): a client A and its
    server B, both seen from their start, over a socket each (fd 5 and 6). A lost record of A's
    first send left A's channel beginning with a receive, which made A a server too: no round
    trips at all. Both begin by receiving, their calls alternate, and A's first answer comes
    after B's: A asks, from its first send the trace holds."""
    a = call(A, WRITE, 5, 100, 110) + call(A, READ, 5, 120, 200)
    a += call(A, WRITE, 5, 300, 310) + call(A, READ, 5, 320, 400)
    a += call(A, WRITE, 5, 500, 510) + call(A, READ, 5, 520, 600)
    b = call(B, READ, 6, 90, 150) + call(B, WRITE, 6, 160, 170)
    b += call(B, READ, 6, 180, 350) + call(B, WRITE, 6, 360, 370)
    b += call(B, READ, 6, 380, 550) + call(B, WRITE, 6, 560, 570)
    whole = rtt.round_trips(frame(a + b), "x86_64", born={A, B})
    assert list(zip(whole["tid"], whole["t_start_ns"], whole["t_end_ns"])) == [
        (A, 100, 200),
        (A, 300, 400),
        (A, 500, 600),
    ]
    lost = rtt.round_trips(frame(a[1:] + b), "x86_64", born={A, B})  # A's first sys_enter lost
    assert list(zip(lost["tid"], lost["t_start_ns"], lost["t_end_ns"])) == [(A, 300, 400), (A, 500, 600)]


def test_two_servers_that_do_not_answer_each_other_stay_servers():
    """Two threads seen from their start whose channels begin with a receive, not alternating
    with each other's sends (each answers a client the trace does not hold): no round trips."""
    a = call(A, READ, 5, 100, 110) + call(A, WRITE, 5, 120, 130) + call(A, READ, 5, 140, 150)
    a += call(A, WRITE, 5, 160, 170) + call(A, READ, 5, 180, 190)
    b = call(B, READ, 6, 400, 410) + call(B, WRITE, 6, 420, 430) + call(B, READ, 6, 440, 450)
    b += call(B, WRITE, 6, 460, 470) + call(B, READ, 6, 480, 490)
    assert len(rtt.round_trips(frame(a + b), "x86_64", born={A, B})) == 0
