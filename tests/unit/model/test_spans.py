"""The spans of a kept request (model/spans.py), from critical paths made by hand: which
stretches become spans, what nests, the names and attributes, the wall clock."""

import pytest

from analysis.model.spans import Piece, Request, resource, spans, stretches

C, S = 1, 2  # the client's and the server's tids


def req(path, how="rtt", name="", offset=1_000_000_000_000):
    return Request(
        how=how,
        name=name,
        service="known_pingpong",
        host="h",
        pid=C,
        tid=C,
        thread_name="client",
        start_ns=5_000,
        end_ns=5_000 + path[-1].end_ns,
        clock_offset_ns=offset,
        path=path,
        components={"user": 2_000_000.0, "syscall": 0.0},
    )


def P(a, b, tid, comp, call="", cpu=0, holder=""):
    return Piece(a, b, tid, "client" if tid == C else "server", comp, call, cpu, holder)


# (what, path, the spans as (name, start, end, parent index) with times since the request's start)
CASES = [
    (
        "one piece each: user, each call by name, copy, wake-up, run queue with its holder",
        [
            P(0, 10, C, "syscall", "sendto"),
            P(10, 20, C, "copy", "sendto"),
            P(20, 30, S, "wakeup"),
            P(30, 40, S, "runqueue", holder="stress (9)"),
            P(40, 2_000_040, S, "user"),
            P(2_000_040, 2_000_050, S, "syscall", "write"),
        ],
        [
            ("round trip", 0, 2_000_050, None),
            ("sendto", 0, 10, 0),
            ("copy", 10, 20, 0),
            ("wakeup", 20, 30, 0),
            ("runqueue", 30, 40, 0),
            ("user", 40, 2_000_040, 0),
            ("write", 2_000_040, 2_000_050, 0),
        ],
    ),
    (
        "a timer tick inside a 2 ms spin: one user span with the irq nested in it",
        [
            P(0, 1_000_000, S, "user"),
            P(1_000_000, 1_000_005, S, "irq"),
            P(1_000_005, 2_000_005, S, "user"),
        ],
        [
            ("round trip", 0, 2_000_005, None),
            ("user", 0, 2_000_005, 0),
            ("irq", 1_000_000, 1_000_005, 1),
        ],
    ),
    (
        "an irq and steal between two pieces of one call: both nested in the call's span",
        [
            P(0, 10, C, "syscall", "read"),
            P(10, 12, C, "irq"),
            P(12, 15, C, "steal"),
            P(15, 30, C, "syscall", "read"),
        ],
        [("round trip", 0, 30, None), ("read", 0, 30, 0), ("irq", 10, 12, 1), ("steal", 12, 15, 1)],
    ),
    (
        "an irq between two different calls does not nest",
        [P(0, 10, C, "syscall", "write"), P(10, 12, C, "irq"), P(12, 30, C, "syscall", "read")],
        [("round trip", 0, 30, None), ("write", 0, 10, 0), ("irq", 10, 12, 0), ("read", 12, 30, 0)],
    ),
    (
        "user time of two threads one after the other: two spans",
        [P(0, 10, C, "user"), P(10, 20, S, "user")],
        [("round trip", 0, 20, None), ("user", 0, 10, 0), ("user", 10, 20, 0)],
    ),
    (
        "adjacent pieces of one stretch on one CPU are joined; a CPU change keeps them apart",
        [P(0, 10, C, "user"), P(10, 20, C, "user"), P(20, 30, C, "user", cpu=1)],
        [("round trip", 0, 30, None), ("user", 0, 20, 0), ("user", 20, 30, 0)],
    ),
    (
        "a preemption inside a spin nests in its user span, as an irq does",
        [P(0, 10, S, "user"), P(10, 50, S, "preempted", holder="kworker (7)"), P(50, 60, S, "user")],
        [("round trip", 0, 60, None), ("user", 0, 60, 0), ("preempted", 10, 50, 1)],
    ),
    (
        "preempted and resumed on another CPU: two user spans",
        [P(0, 10, S, "user"), P(10, 50, S, "preempted", holder="kworker (7)"), P(50, 60, S, "user", cpu=1)],
        [("round trip", 0, 60, None), ("user", 0, 10, 0), ("preempted", 10, 50, 0), ("user", 50, 60, 0)],
    ),
    (
        "preempted between a call and user time: a span of its own",
        [P(0, 10, S, "syscall", "write"), P(10, 50, S, "preempted", holder="kworker (7)"), P(50, 60, S, "user")],
        [("round trip", 0, 60, None), ("write", 0, 10, 0), ("preempted", 10, 50, 0), ("user", 50, 60, 0)],
    ),
]


@pytest.mark.parametrize("what,path,want", CASES, ids=[c[0] for c in CASES])
def test_spans_of_a_path(what, path, want):
    r = req(path)
    got = spans(r)
    wall = r.start_ns + r.clock_offset_ns
    assert [(s.name, s.start_ns - wall, s.end_ns - wall, s.parent) for s in got] == want


def test_children_tile_the_root():
    """The top-level children of the root cover the request without gaps or overlaps."""
    path = CASES[0][1]
    got = spans(req(path))
    top = [s for s in got if s.parent == 0]
    assert top[0].start_ns == got[0].start_ns and top[-1].end_ns == got[0].end_ns
    assert all(a.end_ns == b.start_ns for a, b in zip(top, top[1:]))


def test_attributes_follow_the_conventions():
    path = [P(0, 10, S, "runqueue", holder="stress (9)", cpu=1), P(10, 20, S, "syscall", "write", cpu=1)]
    r = req(path)
    got = spans(r)
    assert resource(r) == {"service.name": "known_pingpong", "host.name": "h", "process.pid": C}
    root = got[0].attributes
    assert root["thread.id"] == C and root["thread.name"] == "client"
    assert root["ipctrace.clock.offset_ns"] == r.clock_offset_ns
    assert root["ipctrace.latency_ns"] == 20
    assert root["ipctrace.components.user_ns"] == 2_000_000 and "ipctrace.components.syscall_ns" not in root
    rq, call = got[1].attributes, got[2].attributes
    assert rq == {
        "thread.id": S,
        "thread.name": "server",
        "ipctrace.component": "runqueue",
        "ipctrace.cpu": 1,
        "ipctrace.cpu_holder": "stress (9)",
    }
    assert call["ipctrace.syscall"] == "write" and "ipctrace.cpu_holder" not in call


@pytest.mark.parametrize(
    "how,name,want", [("rtt", "", "round trip"), ("markers", "", "iteration"), ("function", "handle", "handle")]
)
def test_root_name(how, name, want):
    assert spans(req([P(0, 10, C, "user")], how, name))[0].name == want


def test_wall_clock_is_kernel_time_plus_the_offset():
    r = req([P(0, 10, C, "user")], offset=7)
    assert spans(r)[0].start_ns == 5_007 and spans(r)[1].end_ns == 5_017


def test_a_waiting_piece_without_holder_says_idle():
    got = spans(req([P(0, 10, S, "runqueue")]))
    assert got[1].attributes["ipctrace.cpu_holder"] == "idle"


def test_stretches_keep_every_piece():
    path = CASES[2][1]
    out = stretches(path)
    assert sum(1 + len(inner) for _, inner in out) == 3  # read (joined), irq, steal
