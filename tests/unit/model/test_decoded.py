"""The decoded model of a trace (model/decoded.py): the one place above store/ that reads a
record's raw fields, and the one rule that makes system calls of sys_enter/sys_exit records,
which the whole-trace view, explain, --rtt and the Perfetto export all follow."""

import re
from pathlib import Path

import numpy as np
from scenarios import PING_PONG, WORKLOAD, A, B, events, iterations

from analysis.model import activity, decoded, explain, timeline
from analysis.model import breakdown as bd
from analysis.render import perfetto
from analysis.store import events as events_mod
from analysis.store import records

READ, WRITE = 0, 1  # x86_64
ANALYSIS = Path(__file__).resolve().parents[3] / "analysis"


def test_raw_record_fields_are_read_only_in_store_and_the_decoded_model():
    """No module above store/ but the decoded model and the C timeline's interface names a
    record's raw fields (the acceptance check's pattern)."""
    raw = re.compile(r"[\"'.]a0\b|\baux\b")
    readers = sorted(
        str(p.relative_to(ANALYSIS))
        for p in ANALYSIS.rglob("*.py")
        if p.parts[len(ANALYSIS.parts)] != "store" and raw.search(p.read_text())
    )
    assert readers == ["model/decoded.py", "model/native.py"]


def test_events_unpack_the_other_task_as_decode_c_does():
    """A frame without decode.c's next_tid/other_tid columns gives the same Events as one with
    them: records made as the tracer writes them, decoded by the C decoder."""
    pattern = [
        ("sys_enter", A, WRITE, 4),
        ("waking", B, 1 | records.WAKE_IN_HARDIRQ, A | 7 << 32),
        ("sys_exit", A, WRITE, 1),
        ("switch", A, 1, B | 8 << 32),
        ("fork", B, 0, 300 | 9 << 32),
        ("migrate", B, 1, 0),
    ]
    frame = events_mod.to_frame(events_mod.records_of(np.arange(12, dtype=np.uint64) * 10, pattern, 0))
    full, bare = decoded.Events(frame), decoded.Events(frame.drop(columns=["next_tid", "other_tid"]))
    assert np.array_equal(full.next_tid, bare.next_tid)
    assert np.array_equal(full.other_tid, bare.other_tid)
    assert full.next_tid[3] == B and full.other_tid[1] == A and full.other_tid[4] == 300
    assert full.in_hardirq[1] and full.target_cpu[1] == 1 and full.nr[0] == WRITE and full.ret[2] == 1
    assert full.to_cpu[5] == 1 and full.from_cpu[5] == 0 and full.prev_state[3] == 1


# A's write lost its exit; its read then pairs. Its second read's exit was lost and a write's
# enter too: the read's enter and the write's exit are no call. B's read spans A's records.
LOST = [
    (0, "switch", 0, 0, 0, A),
    (0, "switch", 0, 0, 0, B),
    (100, "sys_enter", A, WRITE, 4, 0),
    (150, "sys_enter", B, READ, 3, 0),
    (200, "sys_enter", A, READ, 3, 0),
    (300, "sys_exit", A, READ, 1, 0),
    (400, "sys_enter", A, READ, 3, 0),
    (450, "sys_exit", B, READ, 1, 0),
    (500, "sys_exit", A, WRITE, 1, 0),
    (600, "sys_enter", A, WRITE, 4, 0),
    (700, "sys_exit", A, WRITE, 1, 0),
]


def test_calls_pair_an_enter_with_the_next_record_of_its_thread_and_number():
    c = decoded.calls(decoded.Events(events(LOST)))
    assert list(zip(c.tid, c.enter, c.exit, c.nr)) == [(A, 200, 300, READ), (A, 600, 700, WRITE), (B, 150, 450, READ)]
    assert c.unmatched == 3
    assert list(c.of_thread(B).enter) == [150] and list(c.of_thread(A).exit) == [300, 700]


def test_an_exit_whose_number_the_call_replaced_closes_it():
    """An optimized uprobe enters the kernel by the uprobe system call (336 on x86_64), which
    exits numbered -1 (orig_ax replaced): its exit closes it, in the model and in the C
    timeline, where the time between was in no known state."""
    uprobe = 336
    recs = [
        (0, "switch", 0, 0, 0, A),
        (100, "sys_enter", A, uprobe, 0, 0),
        (160, "sys_exit", A, decoded.NR_REPLACED, 0, 0),
        (200, "sys_enter", A, WRITE, 4, 0),
        (300, "sys_exit", A, WRITE, 1, 0),
    ]
    ev = decoded.Events(events(recs))
    c = decoded.calls(ev)
    assert list(zip(c.enter, c.exit, c.nr)) == [(100, 160, uprobe), (200, 300, WRITE)] and c.unmatched == 0
    tl = timeline.thread_timeline(ev, A, timeline.StepRules("x86_64"))
    assert tl.time_in([100], [160])[0, timeline.STATE_NAMES.index("syscall")] == 60


def test_every_view_finds_the_same_calls():
    """The whole-trace view, the Perfetto export and explain pair calls by the one rule: an
    exit after the enter of another call is none (before, the export and explain paired any)."""
    ev = events(LOST)
    c = decoded.calls(decoded.Events(ev))
    want = sorted(zip(c.tid.tolist(), c.enter.tolist(), c.exit.tolist()))
    act = activity.summarize(ev, None, [A, B])
    assert sum(s.count for s in act.syscalls) == len(want) and act.unpaired_syscalls == 3
    slices = [e for e in perfetto.build(iterations([(0, 800)]), ev, WORKLOAD, [A, B]) if e.get("cat") == "syscall"]
    assert sorted((e["tid"], round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in slices) == want
    lines = explain.chain(timeline.Events(ev), bd.sides_of(WORKLOAD, A), 50, 750)
    returns = {rel + 50: text for rel, _, text in lines if " returns " in text}
    assert sorted(returns) == [300, 450, 500, 700]
    assert [t for t, text in returns.items() if "after it was entered" in text] == [300, 450, 700]


def test_switches_and_wake_ups_by_what_their_fields_hold():
    ev = decoded.Events(events(PING_PONG))
    w = decoded.wakeups(ev)
    assert list(zip(w.ts, w.wakee, w.waker, w.target_cpu)) == [(1200, B, A, 1), (1600, A, B, 0)]
    s = decoded.switches(ev)
    asleep = s.prev_state != 0
    assert list(zip(s.ts[asleep], s.prev_tid[asleep])) == [(50, B), (1400, A), (1780, B)]
    assert list(s.next_tid[s.ts == 1720]) == [A]


def test_records_of_a_type_by_name_alike_in_a_frame_its_strings_and_the_events():
    """of_type on a frame (categorical, or its type as plain strings) and Events.mask/kind_at
    pick the same records as comparing each record's type name; a type the trace lacks, none."""
    frame = events(PING_PONG)
    names = frame["type"].astype(str).to_numpy()
    plain = frame.assign(type=names)
    ev = decoded.Events(frame)
    for kinds in (("switch",), ("waking", "wakeup"), ("mark",)):
        want = np.isin(names, kinds)
        assert np.array_equal(decoded.of_type(frame, *kinds), want)
        assert np.array_equal(decoded.of_type(plain, *kinds), want)
        assert np.array_equal(ev.mask(*kinds), want[np.argsort(frame["ts"].to_numpy(), kind="stable")])
    assert [ev.kind_at(i) for i in range(len(names))] == list(names)  # the frame is in time order


def test_the_sys_enter_table_holds_the_calls_in_progress_too():
    """watch names the call a thread is in by its last sys_enter, whose exit may be still to
    come or lost (calls() leaves those out)."""
    e = decoded.enters(decoded.Events(events(LOST)))
    ts, nr = e.of_thread(A)
    assert list(zip(ts, nr)) == [(100, WRITE), (200, READ), (400, READ), (600, WRITE)]
    assert list(e.of_thread(B)[0]) == [150] and not len(e.of_thread(A + B + 1)[0])
    assert list(decoded.calling_tids(events(LOST))) == sorted([A, B])


def test_successful_returns_are_the_exits_of_those_numbers_that_returned_0():
    execve = 59  # x86_64
    frame = events(
        [
            (100, "sys_enter", A, execve, 0, 0),
            (200, "sys_exit", A, execve, -2, 0),
            (300, "sys_enter", A, execve, 0, 0),
            (400, "sys_exit", A, execve, 0, 0),
            (500, "sys_exit", A, READ, 0, 0),
            (600, "sys_enter", B, execve, 0, 0),
        ]
    )
    assert list(frame["ts"][decoded.successful_returns(frame, [execve])]) == [400]


def test_the_threads_with_system_call_records_by_names_or_codes():
    """PING_PONG's A and B call; a switch record's other task does not make one a caller."""
    ev = events(PING_PONG)
    want = {int(t) for t in ev["tid"][ev["type"].astype(str).isin(["sys_enter", "sys_exit"])]}
    assert want == {A, B}
    assert decoded.syscall_tids(ev.assign(type=ev["type"].astype("category"))) == want
    assert decoded.syscall_tids(ev.assign(type=ev["type"].astype(str))) == want
    # a categorical whose categories lack sys_exit (a trace of enters alone) still finds them
    enters = ev[ev["type"].astype(str) != "sys_exit"]
    assert decoded.syscall_tids(enters.assign(type=enters["type"].astype(str).astype("category"))) == want
