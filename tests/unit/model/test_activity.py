"""The whole-trace view (model/activity.py) on events worked out by hand (tests/scenarios.py), and
on the traced pipe run of tests/fixtures."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scenarios import HARDIRQ, HOGGED, OTHER, PING_PONG, SAME_CPU_PREEMPTED, TASKS, TIMER_WAKE, A, B, events

from analysis.model import activity, timeline
from analysis.store import events as store_events
from analysis.store.jsonfiles import tasks_from_json
from analysis.store.summaryfile import Activity, Preemptor

FIXTURE = Path(__file__).parents[2] / "fixtures" / "pipe-traced"
NAMES = tasks_from_json({str(A): {"comm": "ping", "pid": A}, str(B): {"comm": "pong", "pid": B}, **TASKS})


def states(**ns):
    return {s: ns.get(s, 0) for s in activity.STATES}


# PING_PONG (scenarios.py), no carves:
#   A, 0..1800: unknown 0-400 (no syscall record yet), getpid() 400-500, user 500-1100, write()
#     1100-1300, user 1300-1350, read() 1350-1400, blocked 1400-1600, runqueue 1600-1720 (no
#     sched_wakeup: the kernel woke it at once), read() 1720-1800.
#   B, 0..1780: unknown 0-20, read() 20-50, blocked 50-1200, runqueue 1200-1450, read()
#     1450-1500, user 1500-1550, write() 1550-1700 with irq 1620-1640, user 1700-1750, read()
#     from 1750 (never returns: unpaired).
# REMOTE: PING_PONG where B's wake-up is finished on its own CPU at 1300 (the sched_wakeup
#   taken in the IPI: flagged, its recorded waker the idle task): B is being woken 1200-1300,
#   in the run queue 1300-1450; still one wake-up, A's.
# HOGGED: A preempted in user space by OTHER 1040-1070 (after the timer's vector 1025-1035);
#   its sleep 1400-1720 with OTHER on its CPU is blocked/runqueue, not a preemption.
REMOTE = sorted(PING_PONG + [(1300, "wakeup", B, 1 | HARDIRQ, 0, 0)], key=lambda r: r[0])
THREAD_CASES = [
    (
        "ping-pong",
        PING_PONG,
        {
            A: (0, 1800, states(unknown=400, syscall=430, user=650, blocked=200, runqueue=120), []),
            B: (0, 1780, states(unknown=20, syscall=240, user=100, irq=20, blocked=1150, runqueue=250), []),
        },
    ),
    (
        "remote wake-up",
        REMOTE,
        {B: (0, 1780, states(unknown=20, syscall=240, user=100, irq=20, blocked=1150, wakeup=100, runqueue=150), [])},
    ),
    (
        "hogged",
        HOGGED,
        {
            A: (
                0,
                1800,
                states(unknown=400, syscall=430, user=610, irq=10, preempted=30, blocked=200, runqueue=120),
                [Preemptor(tid=OTHER, comm="hog", count=1, ns=30)],
            )
        },
    ),
]


@pytest.mark.parametrize("name,rows,want", THREAD_CASES, ids=[c[0] for c in THREAD_CASES])
def test_thread_states_by_hand(name, rows, want):
    act = activity.summarize(events(rows), NAMES, [A, B])
    got = {t.tid: t for t in act.threads}
    assert set(got) == {A, B}
    for tid, (start, end, st, by) in want.items():
        t = got[tid]
        assert (t.start_ns, t.end_ns, t.states_ns, t.preempted_by) == (start, end, st, by)
        assert sum(t.states_ns.values()) == t.span_ns
    assert got[A].comm == "ping" and got[A].pid == A


def edge(waker, wakee, count, hardirq, delays):
    """(waker, wakee, count, hardirq, delays, p50, p90, p99, max) with the delays' quantiles by
    linear interpolation, worked out below each case."""
    return (waker, wakee, count, hardirq, *delays)


# PING_PONG: B woken by A's waking at 1200, on CPU 1450 (250); A by B at 1600, on CPU 1720 (120).
# REMOTE: the sched_wakeup at 1300 is part of the same wake-up: A -> B once, from 1200.
# TIMER_WAKE: B woken by A at 1200 (on CPU 1450: 250) and by its timer at 1710 in A's local
#   timer interrupt (flagged; the waker recorded is A), on CPU 1800 (90): A -> B twice, one
#   in a hard interrupt, delays 90 and 250: p50 170, p90 90 + 0.9 x 160 = 234, p99 248.4, max
#   250; A woken by B at 2100, on CPU 2250 (150).
EDGE_CASES = [
    ("ping-pong", PING_PONG, [edge(A, B, 1, 0, (1, 250, 250, 250, 250)), edge(B, A, 1, 0, (1, 120, 120, 120, 120))]),
    ("remote wake-up", REMOTE, [edge(A, B, 1, 0, (1, 250, 250, 250, 250)), edge(B, A, 1, 0, (1, 120, 120, 120, 120))]),
    ("timer", TIMER_WAKE, [edge(A, B, 2, 1, (2, 170, 234, 248.4, 250)), edge(B, A, 1, 0, (1, 150, 150, 150, 150))]),
]


@pytest.mark.parametrize("name,rows,want", EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_wake_edges_by_hand(name, rows, want):
    act = activity.summarize(events(rows), NAMES, [A, B])
    got = [
        (
            e.waker,
            e.wakee,
            e.count,
            e.hardirq,
            e.delays,
            e.delay_p50_ns,
            e.delay_p90_ns,
            e.delay_p99_ns,
            e.delay_max_ns,
        )
        for e in act.wake_edges
    ]
    assert got == want
    assert {(e.waker_comm, e.wakee_comm) for e in act.wake_edges} == {("ping", "pong"), ("pong", "ping")}


def test_wake_without_switch_in_has_no_delay():
    # B woken at 1200 and the trace ends before it runs: a wake-up, no delay.
    rows = [r for r in PING_PONG if r[0] <= 1300]
    (e,) = activity.summarize(events(rows), NAMES, [A, B]).wake_edges
    assert (e.waker, e.wakee, e.count, e.delays, e.delay_p50_ns, e.delay_max_ns) == (A, B, 1, 0, None, None)


def test_syscalls_by_hand():
    # PING_PONG's complete calls: A getpid() 400-500 (100), write() 1100-1300 (200), read()
    # 1350-1800 (450: syscall 50 + 80, blocked 200, runqueue 120); B read() 20-1500 (1480:
    # syscall 30 + 50, blocked 1150, runqueue 250), write() 1550-1700 (150: syscall 130, irq
    # 20); B's read() from 1750 never returns. read: 450, 1480: p50 965, p90 450 + 0.9 x 1030
    # = 1377, p99 1469.7; write: 150, 200: p50 175, p90 195, p99 199.5.
    act = activity.summarize(events(PING_PONG), NAMES, [A, B])
    got = [
        (s.name, s.nr, s.count, s.threads, s.total_ns, s.p50_ns, s.p90_ns, s.p99_ns, s.max_ns, s.states_ns)
        for s in act.syscalls
    ]
    assert got == [
        ("read", 0, 2, 2, 1930, 965, 1377, 1469.7, 1480, states(syscall=210, blocked=1350, runqueue=370)),
        ("write", 1, 2, 2, 350, 175, 195, 199.5, 200, states(syscall=330, irq=20)),
        ("getpid", 39, 1, 1, 100, 100, 100, 100, 100, states(syscall=100)),
    ]
    assert (act.syscalls[0].off_cpu_ns, act.syscalls[0].on_cpu_ns) == (1720, 210)
    assert act.unpaired_syscalls == 1
    assert (act.start_ns, act.end_ns) == (0, 1800)


def test_only_followed_threads():
    act = activity.summarize(events(PING_PONG), NAMES, [B])
    assert [t.tid for t in act.threads] == [B]
    assert [(e.waker, e.wakee) for e in act.wake_edges] == [(A, B)]
    assert {s.name: s.count for s in act.syscalls} == {"read": 1, "write": 1}
    # no events of a followed thread: not listed; nothing at all: empty
    assert [t.tid for t in activity.summarize(events(PING_PONG), NAMES, [B, 4242]).threads] == [B]
    empty = activity.summarize(events(PING_PONG), {}, [4242])
    assert (empty.threads, empty.wake_edges, empty.syscalls, empty.start_ns) == ([], [], [], None)
    assert activity.summarize(events([]), {}, [A]) == empty


def test_json_round_trip():
    act = activity.summarize(events(HOGGED), NAMES, [A, B])
    data = act.to_json()
    assert list(data) == ["arch", "start_ns", "end_ns", "threads", "wake_edges", "syscalls", "unpaired_syscalls"]
    assert list(data["threads"][0]["states_ns"]) == list(activity.STATES)
    text = json.dumps(data)
    assert Activity.from_json(json.loads(text)) == act
    assert json.dumps(Activity.from_json(json.loads(text)).to_json()) == text
    with pytest.raises(ValueError):
        Activity.from_json({"arch": "x86_64"})


def test_a_view_written_before_a_state_existed_reads_it_as_zero():
    """A whole trace written before `steal` was a state: its threads and calls read with steal 0
    (the report and the table of such a directory failed with KeyError: 'steal')."""
    data = activity.summarize(events(HOGGED), NAMES, [A, B]).to_json()
    for row in data["threads"] + data["syscalls"]:
        del row["states_ns"]["steal"]
    old = Activity.from_json(data)
    assert all(t.states_ns["steal"] == 0 and list(t.states_ns) == list(activity.STATES) for t in old.threads)
    assert [t.on_cpu_ns for t in old.threads] == [
        t.on_cpu_ns for t in activity.summarize(events(HOGGED), NAMES, [A, B]).threads
    ]
    assert all(s.states_ns["steal"] == 0 for s in old.syscalls)


def in_pieces(ev, size, lead, tids):
    """The view of ev (Events) from a pass that takes it `size` events at a time."""
    cut = activity.ActivityPass(tids, lead=lead)
    for a in range(0, len(ev.ts), size):
        cut.add(ev.take(np.arange(a, min(a + size, len(ev.ts)))))
    return cut.finish(NAMES)


# REMOTE with a second waking of B in the same sleep (by OTHER at 1250): the first waking starts
# WAKEUP only because the sched_wakeup at 1300 follows; a piece that ends between them cannot
# know yet.
TWO_WAKINGS = sorted(REMOTE + [(1250, "waking", B, 1, OTHER, 0)], key=lambda r: r[0])
# PING_PONG with A's switch in at 1720 missed (a busy machine's ring buffer) and A switched out
# again at 1760: its sleep from 1400 is unknown, which only the second switch out shows; a piece
# that ends between them must not have counted it blocked, woken, in the run queue.
MISSED_SWITCH_IN = sorted(
    [r for r in PING_PONG if r[:2] != (1720, "switch")] + [(1760, "switch", A, 1, 0, 0)], key=lambda r: r[0]
)
CASES = [c[:2] for c in THREAD_CASES + EDGE_CASES] + [
    ("two wakings", TWO_WAKINGS),
    ("same CPU", SAME_CPU_PREEMPTED),
    ("missed switch in", MISSED_SWITCH_IN),
]


@pytest.mark.parametrize("name,rows", CASES, ids=[c[0] for c in CASES])
def test_every_cut_gives_the_view_of_all_events(name, rows):
    # Two pieces cut before every event, and pieces of one event, carrying nothing but what
    # the pass keeps (no lead): each count, state and call lands as in one piece of all.
    ev = timeline.Events(events(rows))
    whole = activity.summarize(ev, NAMES, [A, B])
    assert whole.threads and whole.wake_edges and whole.syscalls
    for at in range(len(ev.ts) + 1):
        cut = activity.ActivityPass([A, B], lead=0)
        cut.add(ev.take(np.arange(at)))
        cut.add(ev.take(np.arange(at, len(ev.ts))))
        assert cut.finish(NAMES) == whole, at
    assert in_pieces(ev, 1, 0, [A, B]) == whole


@pytest.mark.parametrize("size", [1, 7, 50, 333])
def test_the_traced_pipe_run_in_pieces(size):
    # Pieces of 1 and 7 events cut between the wakings of one sleep and its sched_wakeup (the
    # waking starts WAKEUP only if a wakeup follows in the same sleep).
    wl = json.loads((FIXTURE / "workload.json").read_text())
    tids = [t["tid"] for t in wl["threads"]]
    ev = timeline.Events(store_events.read_parquet(FIXTURE))
    whole = activity.summarize(ev, NAMES, tids)
    for lead in (0, 100):
        assert in_pieces(ev, size, lead, tids) == whole


def test_traced_pipe_run():
    # 100 warm-up + 400 timed round trips, the measuring thread on CPU 0, the peer on CPU 1.
    wl = json.loads((FIXTURE / "workload.json").read_text())
    m, p = (t["tid"] for t in wl["threads"])
    df = store_events.read_parquet(FIXTURE)
    act = activity.summarize(df, tasks_from_json({str(m): {"comm": "ipcbench", "pid": m}}), [m, p])
    assert [t.tid for t in act.threads] == sorted([m, p])
    for t in act.threads:
        assert sum(t.states_ns.values()) == t.span_ns > 0
        assert t.states_ns["unknown"] < 0.01 * t.span_ns
        assert t.states_ns["blocked"] > 0 and t.switches_out > 400
    edges = {(e.waker, e.wakee): e for e in act.wake_edges}
    for pair in ((m, p), (p, m)):
        e = edges[pair]
        assert 500 <= e.count <= 505 and e.delays == e.count and e.hardirq == 0
        assert 1_000 < e.delay_p50_ns <= e.delay_p90_ns <= e.delay_p99_ns <= e.delay_max_ns
    assert edges[(m, p)].waker_comm == "ipcbench"
    calls = {s.name: s for s in act.syscalls}
    assert calls["read"].count >= 1000 and calls["write"].count >= 1000
    assert calls["read"].threads == calls["write"].threads == 2
    # a read waits for the other side: mostly off CPU; a write never blocks here
    assert calls["read"].off_cpu_ns > calls["read"].on_cpu_ns
    assert calls["write"].states_ns["blocked"] == 0
    for s in act.syscalls:
        assert sum(s.states_ns.values()) == s.total_ns
        assert s.p50_ns <= s.p90_ns <= s.p99_ns <= s.max_ns
    assert act.syscalls == sorted(act.syscalls, key=lambda s: -s.total_ns)


def _keyed_sequence_numpy(thread_a, rows_a, thread_b, rows_b):
    """activity._keyed_sequence as numpy and pandas do it (a stable sort, factorize's codes)."""
    by_row = np.argsort(np.concatenate((rows_a, rows_b)), kind="stable")
    thread = np.concatenate((thread_a, thread_b)).astype(np.int64)[by_row]
    row = np.concatenate((rows_a, rows_b)).astype(np.int64)[by_row]
    is_b = by_row >= len(rows_a)
    order = np.argsort(pd.factorize(thread)[0], kind="stable")
    return thread[order], row[order], is_b[order]


@pytest.mark.parametrize("seed", range(20))
def test_the_keyed_sequence_in_c_is_the_sort_it_replaces(seed):
    """ipt_keyed_sequence (one pass) gives what the stable sorts gave: rows merged, a's first at
    a tie, grouped by key as the keys first come; from no record to many keys (its table grows)."""
    from analysis.model import native

    rng = np.random.default_rng(seed)
    na, nb = rng.integers(0, [50, 50] if seed < 10 else [5000, 3000])
    nkeys = [1, 3, 200, 4000][seed % 4]
    tids = rng.integers(-5, 1 << 22, nkeys)
    a = (tids[rng.integers(0, nkeys, na)], np.sort(rng.integers(0, 2 * (na + nb) + 1, na)))
    b = (tids[rng.integers(0, nkeys, nb)], np.sort(rng.integers(0, 2 * (na + nb) + 1, nb)))
    got = native.keyed_sequence(a[0], a[1], b[0], b[1])
    want = _keyed_sequence_numpy(a[0], a[1], b[0], b[1])
    assert got is not None
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and (g == w).all()
    assert native.keyed_sequence(a[0][:2], np.array([5, 3]), b[0][:0], b[1][:0]) is None  # not ascending
