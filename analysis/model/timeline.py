"""Each thread's state step function, from its events: the Python side of timeline.c.

Per thread, from its events (sorted by time):
- mode: sys_enter -> in a syscall, sys_exit -> in user space;
- run state: sched_switch out -> blocked (prev_state != 0) or preempted (prev_state 0);
  a wake-up of a blocked thread: sched_waking starts WAKEUP (the remote activation: IPI,
  idle exit), the sched_wakeup on the target CPU RUNQUEUE, the switch in ends it (a
  wake-up that comes while the thread is still on CPU makes its next time off CPU a wait
  for the CPU); sched_switch in -> on CPU;
- overlays while on CPU: hard irq, softirq, x86 vectors, copy routines (func_entry/exit);
- carves: the entry path's estimate around each syscall, the copy estimate (StepRules);
- steal: where the kernel accounts the hypervisor's steal per CPU (the KVM steal clock; the
  tracer's steal records), the time the hypervisor held the CPU a thread was on, or was
  waiting for, is STEAL, cut out of whatever state the thread was in there (_with_steal).
A step between two events is trusted only when the pair is consistent (enter -> exit of
the same syscall, out -> in, entry -> exit); anything else (a lost record, time before a
thread's first event) is UNKNOWN. The breakdown sums these states per window, explain's
account and the Perfetto export read them (docs/DESIGN.md, "The rules of the breakdown")."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from analysis.model import native
from analysis.model.decoded import Events
from analysis.store import records, syscalls

if TYPE_CHECKING:
    import numpy.typing as npt

# Thread states; STATE_NAMES[state] is the component it counts towards (timeline.c's enum).
USER, SYSCALL, COPY, IRQ, ENTRY, STEAL, BLOCKED, WAKEUP, RUNQUEUE, PREEMPTED, UNKNOWN = range(len(records.STATES))
STATE_NAMES = records.STATES
ON_CPU = len(STATE_NAMES)  # run state only: the mode and overlays decide
# The states a window's edges happen in (a mask, 1 << state), for the critical path's edge rule:
# the workload's clock reads are made in user space; a traced program's round trip (--rtt) runs
# from the measuring thread's sys_enter to its sys_exit, on a CPU in any known state. Either may
# come where the hypervisor had just held the CPU (STEAL): the thread was on it, as far as it knows.
CLOCK_EDGES = 1 << USER | 1 << ENTRY | 1 << STEAL
SYSCALL_EDGES = CLOCK_EDGES | 1 << SYSCALL | 1 << COPY | 1 << IRQ

# Syscalls whose return value is the count of bytes copied between user and kernel
# (not recvmmsg/sendmmsg: they return a count of messages).
DATA_SYSCALLS = (
    "read",
    "write",
    "pread64",
    "pwrite64",
    "readv",
    "writev",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "mq_timedreceive",
    "preadv",
    "pwritev",
)


class Timeline:
    """A step function of time: state[i] holds on [ts[i], ts[i+1]); UNKNOWN before ts[0]."""

    def __init__(self, ts: npt.ArrayLike, state: npt.ArrayLike):
        self.ts = np.asarray(ts, dtype=np.int64)
        self.state = np.asarray(state, dtype=np.int8)
        self.wakeups: tuple[np.ndarray, np.ndarray, np.ndarray] = (  # see wakeup_delays
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
        )
        self.sleep_end, self.sleep_waker = np.zeros(0, np.int64), np.zeros(0, np.int64)
        # its switches in: when, onto which CPU
        self.in_ts, self.in_cpu = np.zeros(0, np.int64), np.zeros(0, np.int16)
        # its data syscalls that moved bytes, sys_enter and sys_exit paired: enter, exit, number, return value
        self.calls = tuple(np.zeros(0, np.int64) for _ in range(4))
        # the wake-ups that made it runnable (a sleep's first, or one while it was still on CPU): when, by whom
        self.woke = (np.zeros(0, np.int64), np.zeros(0, np.int64))

    def at(self, t: npt.ArrayLike, before: int = UNKNOWN) -> np.ndarray:
        """State at each time t (the step containing t, right-continuous)."""
        i = np.searchsorted(self.ts, t, side="right") - 1
        if len(self.ts) == 0:
            return np.full(np.shape(t), before, dtype=np.int8)
        return np.where(i >= 0, self.state[np.maximum(i, 0)], before).astype(np.int8)

    def time_in(self, starts: npt.ArrayLike, ends: npt.ArrayLike) -> np.ndarray:
        """ns spent in each state within each window [starts, ends): array (n, len(STATE_NAMES))."""
        return time_in(self.ts, [self.state], starts, ends)[0]


def time_in(
    ts: npt.ArrayLike,
    states: Sequence[npt.ArrayLike],
    starts: npt.ArrayLike,
    ends: npt.ArrayLike,
    nstates: int = len(STATE_NAMES),
) -> list[np.ndarray]:
    """ns spent in each state within each window [starts, ends), for several state arrays
    on the same change points ts (UNKNOWN before ts[0]): one (n, nstates) array each.
    The windows may come in any order and overlap."""
    state_arrays = [np.asarray(st, np.int8) for st in states]
    if any(len(st) and (st.min() < 0 or st.max() >= nstates) for st in state_arrays):
        raise ValueError(f"time_in: states outside 0..{nstates - 1}")
    return native.time_in(ts, state_arrays, starts, ends, nstates)


def _pair_steps(
    ts: np.ndarray, is_open: np.ndarray, inside: npt.ArrayLike, outside: int, match: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Steps of an open/close pair sequence: inside (a state, or one per event) between
    an open and the next close, outside between a close and the next open, UNKNOWN
    where the alternation breaks. match: optional key that an open and its close
    must share (the syscall nr)."""
    if len(ts) == 0:
        return ts, np.zeros(0, dtype=np.int8)
    # ok[i]: event i is followed by its counterpart (the last one is followed by nothing,
    # which is as good as its counterpart).
    ok = np.ones(len(is_open), bool)
    np.not_equal(is_open[:-1], is_open[1:], out=ok[:-1])
    if match is not None:
        ok[:-1] &= ~is_open[:-1] | (match[1:] == match[:-1])
    steps = np.where(is_open, np.asarray(inside, np.int8), np.int8(outside))
    steps[~ok] = UNKNOWN
    return ts, steps


def _ffill_on(n: int, pos: np.ndarray, val: np.ndarray, before: int) -> np.ndarray:
    """A step function evaluated on n sorted points: pos[j] is the point of its j-th change
    (ascending); each point takes the value of the last change at or before it."""
    if len(pos) == 0:
        return np.full(n, before, np.int8)
    same = pos[1:] == pos[:-1]
    if same.any():  # of changes at one point the latest holds
        last = np.append(~same, True)
        pos, val = pos[last], val[last]
    values = np.empty(len(pos) + 1, np.int8)
    values[0], values[1:] = before, val
    runs = np.empty(len(pos) + 1, np.intp)
    runs[0], runs[-1] = pos[0], n - pos[-1]
    np.subtract(pos[1:], pos[:-1], out=runs[1:-1])
    return np.repeat(values, runs)


class StepRules:
    """What a thread's step function is built with besides its events: the entry path's
    estimate (ns before each sys_enter and after each sys_exit) and, where the copy routines
    are not probed, the copy estimate (ns per call and per byte; per_call < 0: none)."""

    def __init__(
        self, arch: str, entry_in: int = 0, entry_out: int = 0, copy_call: float = -1.0, copy_byte: float = 0.0
    ):
        self.entry_in, self.entry_out = int(entry_in), int(entry_out)
        self.copy_call, self.copy_byte = float(copy_call), float(copy_byte)
        self.data_kind = data_kinds(arch)


def thread_timeline(ev: Events, tid: int, rules: StepRules, steal: bool = True) -> Timeline:
    """The state step function of one thread from its events (ev sorted by time).

    On the thread's event times (its own events and the switches to it), in one pass
    (timeline.c): the mode, user <-> syscall, from consistent sys_enter/sys_exit pairs;
    the run state from switches out (blocked or preempted) and in (on CPU), where outs and
    ins alternate; wake-ups: sched_waking starts WAKEUP (the remote activation: IPI, idle
    exit), the sched_wakeup on the target CPU RUNQUEUE (or at once where the kernel did
    both in one go), the switch in ends it. A wake-up that fires while the thread is still
    on CPU (it set itself sleeping, not yet switched out) makes its next time off CPU
    RUNQUEUE. Then the overlays (interrupts, copy routines) and the carves (entry path,
    copy estimate: StepRules), and the hypervisor's steal (_with_steal; steal=False: without it,
    for the switches' own account of when the thread was off CPU). The Timeline also keeps who
    ended each sleep, the thread's switches in and its wake-up delays, for the critical path and
    the statistics."""
    r = native.thread_steps(
        *ev.step_columns(),
        ev.code,
        tid,
        rules.data_kind,
        rules.entry_in,
        rules.entry_out,
        rules.copy_call,
        rules.copy_byte,
    )
    ov = ev.of(*OVERLAY_TYPES)
    ov = ov[ev.tid[ov] == tid]
    overlay = _overlay(ev, ov, r.grid)
    ts, state = native.thread_finish(r, overlay)
    spans = ev.steal_spans() if steal else {}
    if spans:
        mine = np.flatnonzero(ev.tid == tid) if len(ts) else np.zeros(0, np.int64)
        first_cpu = int(ev.cpu[mine[0]]) if len(mine) else -1
        ts, state = _with_steal(ts, state, r.in_ts, r.in_cpu, first_cpu, spans)
    tl = Timeline(ts, state)
    tl.wakeups = (r.wake_on, r.wake_delay, r.wake_rq)
    tl.sleep_end, tl.sleep_waker = r.sleep_end, r.sleep_waker
    tl.in_ts, tl.in_cpu = r.in_ts, r.in_cpu
    tl.calls = (r.call_enter, r.call_exit, r.call_nr, r.call_ret)
    tl.woke = (r.woke_ts, r.woke_waker)
    return tl


WAITING = np.array([WAKEUP, RUNQUEUE, PREEMPTED], np.int8)


def _sorted_distinct(v: np.ndarray) -> np.ndarray:
    """np.unique(v) by a sort (numpy 2's hash-based unique took 20 s for 2 M times here)."""
    v = np.sort(v)
    keep = np.ones(len(v), bool)
    keep[1:] = v[1:] != v[:-1]
    return v[keep]


def _ranges(lo: np.ndarray, count: np.ndarray) -> np.ndarray:
    """lo[k], lo[k] + 1, ... (count[k] of them) for each k, concatenated."""
    count = np.maximum(count, 0)
    total = int(count.sum())
    if not total:
        return np.zeros(0, np.int64)
    start = np.cumsum(count) - count
    return np.repeat(lo - start, count) + np.arange(total)


def _with_steal(
    ts: np.ndarray,
    state: np.ndarray,
    in_ts: np.ndarray,
    in_cpu: np.ndarray,
    first_cpu: int,
    spans: dict[int, tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray]:
    """The step function (ts, state) with STEAL where the hypervisor held the CPU the thread
    was on (a state on a CPU: the CPU of its last switch in, before the first one first_cpu, the
    CPU of its first record) or was waiting for (woken or preempted: the CPU of its next switch
    in); spans: Events.steal_spans(). Blocked or in no known state, steal is not the thread's.
    Only the steps that meet a span are looked at: a thread's steps are millions, the spans few."""
    n = len(ts)
    if not n or not spans:
        return ts, state
    last_end = max([int(ts[-1])] + [int(b[-1]) for _, b in spans.values() if len(b)])  # the last step: open-ended
    near = []
    for a, b in spans.values():
        lo = np.maximum(np.searchsorted(ts, a, "right") - 1, 0)  # the step holding each span's start
        near.append(_ranges(lo, np.searchsorted(ts, b, "left") - lo))  # to the last that starts before its end
    idx = _sorted_distinct(np.concatenate(near)) if near else np.zeros(0, np.int64)
    if not len(idx):
        return ts, state
    st = state[idx]
    s0 = ts[idx]
    s1 = np.where(idx + 1 < n, ts[np.minimum(idx + 1, n - 1)], last_end)
    j = np.searchsorted(in_ts, s0, side="right") - 1
    on, waiting = st < STEAL, np.isin(st, WAITING)
    cpu = np.full(len(idx), -1, np.int64)
    if len(in_cpu):
        cpu[on] = np.where(j[on] >= 0, in_cpu[np.maximum(j[on], 0)], first_cpu)
        nxt = j[waiting] + 1
        cpu[waiting] = np.where(nxt < len(in_cpu), in_cpu[np.minimum(nxt, len(in_cpu) - 1)], -1)
    else:
        cpu[on] = first_cpu
    xs, ys = [], []
    for c, (a, b) in spans.items():
        mine = np.flatnonzero(cpu == c)
        if not len(mine) or not len(a):
            continue
        k0 = np.searchsorted(b, s0[mine], side="right")  # the first span that ends after the step starts
        k1 = np.searchsorted(a, s1[mine], side="left")  # past the last that starts before it ends
        count = np.maximum(k1 - k0, 0)
        step = np.repeat(mine, count)
        k = _ranges(k0, count)
        x, y = np.maximum(s0[step], a[k]), np.minimum(s1[step], b[k])
        keep = x < y
        xs.append(x[keep])
        ys.append(y[keep])
    x = np.concatenate(xs) if xs else np.zeros(0, np.int64)
    if not len(x):
        return ts, state
    y = np.concatenate(ys)
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]  # disjoint: the steps are, and each CPU's spans
    # Insert each x (STEAL from there) and y (the state there before) after the points at or
    # before it, x_k before y_k before x_(k+1); the points strictly inside [x_k, y_k) become STEAL.
    px, py = np.searchsorted(ts, x, side="right"), np.searchsorted(ts, y, side="right")
    pos = np.column_stack((px, py)).ravel()
    vals = np.column_stack((x, y)).ravel()
    after = state[np.maximum(py - 1, 0)]
    new_ts = np.insert(ts, pos, vals)
    new_st = np.insert(state, pos, np.column_stack((np.full(len(x), STEAL, np.int8), after)).ravel())
    k = np.arange(len(x))
    inside = _ranges(px + 2 * k + 1, py - px)  # original points px..py-1 land 2k + 1 later
    new_st[inside] = STEAL
    # of several changes at one time the latest holds; then only where the state changes
    keep = np.ones(len(new_ts), bool)
    keep[:-1] = new_ts[1:] != new_ts[:-1]
    new_ts, new_st = new_ts[keep], new_st[keep]
    change = np.ones(len(new_ts), bool)
    change[1:] = new_st[1:] != new_st[:-1]
    return new_ts[change], new_st[change]


def deliveries(tls: Sequence[Timeline], tids: Sequence[int], data_kind: np.ndarray) -> list[tuple]:
    """What ended each thread's waits where the critical path's wake-up rule would not find it:
    per thread of tls (the threads of one critical path, whose tids are tids), (times, sender
    index) in time order, for ipt_causal; one pass in C (ipt_deliveries).

    A receive (a data syscall into user space that returned data) waited until the data came.
    Its last wake-up by a thread of tls (the first of a sleep, or one that came while the
    thread, setting itself to sleep, was still on CPU):
    - if the waker was itself receiving then (on a UNIX stream socket each read by one end
      wakes the waiters of the other: the write-space wake-up), the thread was woken early and
      still waited for the data: a send (a data syscall from user space) that another thread
      of tls began after the wake-up and before the receive returned delivered it (the first
      such), and the wait ended at that send's return, or the receive's if that came first;
    - otherwise it ended the wait, at the wake-up; the path's rule for a sleep goes there
      already, so only a wake-up that came while the thread was still on CPU is listed."""
    return native.deliveries(
        tids, [tl.calls for tl in tls], [tl.woke for tl in tls], [tl.sleep_end for tl in tls], data_kind
    )


def data_kinds(arch: str) -> np.ndarray:
    """Per syscall number: 1 copies into user space (read-like), 2 from it (write-like), 0 neither."""
    table = syscalls.numbers(arch, DATA_SYSCALLS)
    kind = np.zeros(max(table) + 1, np.uint8)
    for nr, name in table.items():
        kind[nr] = 2 if name.startswith(("write", "pwrite", "send")) else 1
    return kind


# What an overlay's state (0: none, 1: inside, UNKNOWN) makes of the thread's state on CPU:
# interrupts IRQ, copy routines COPY. The codes rise with precedence (nothing < COPY < IRQ <
# UNKNOWN), so the state under several overlays is the largest of their codes.
INTERRUPT_CODE = np.array([0, IRQ] + [0] * (UNKNOWN - 2) + [UNKNOWN], np.int8)
COPY_CODE = np.array([0, COPY] + [0] * (UNKNOWN - 2) + [UNKNOWN], np.int8)
assert 0 < COPY < IRQ < UNKNOWN


OVERLAY_TYPES = (
    "irq_entry",
    "irq_exit",
    "softirq_entry",
    "softirq_exit",
    "vector_entry",
    "vector_exit",
    "func_entry",
    "func_exit",
)


def _overlay(ev: Events, ov: np.ndarray, grid: np.ndarray) -> np.ndarray | None:
    """The overlays of a thread while on CPU, on its change points grid, from its own
    events of OVERLAY_TYPES (ev's rows ov): hard and soft interrupts (entry/exit pairs)
    and copy routines, which may nest (copy_page_to_iter calls _copy_to_iter): depth,
    not pairs. None if there are no such events. The few overlay events are combined
    among themselves, then spread over the change points once."""
    if len(ov) == 0:
        return None
    ts, func = ev.ts[ov], ev.func[ov]
    parts = []
    for entry, exit_ in (("irq_entry", "irq_exit"), ("softirq_entry", "softirq_exit"), ("vector_entry", "vector_exit")):
        m = ev.at(ov, entry, exit_)
        parts.append((ts[m], _pair_steps(ts[m], ev.at(ov[m], entry), 1, 0)[1], INTERRUPT_CODE))
    m = ev.at(ov, "func_entry", "func_exit")
    m[m] = np.isin(func[m], records.COPY_FUNC_IDS)
    depth = np.cumsum(np.where(ev.at(ov[m], "func_entry"), 1, -1))
    parts.append((ts[m], np.where(depth < 0, UNKNOWN, np.minimum(depth, 1)).astype(np.int8), COPY_CODE))
    points, values = native.merge_steps([(t, v, 0) for t, v, _ in parts])
    code = np.max([table[v] for (_, _, table), v in zip(parts, values)], axis=0)
    # The overlay events' times are among the thread's change points: their places there.
    return _ffill_on(len(grid), np.searchsorted(grid, points), code, 0)


def wakeup_delays(tl: Timeline) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ts_on_cpu, delay_ns, runqueue_ns) of every wake-up of a thread: from the wake-up
    (sched_waking, or sched_wakeup where no waking was recorded) that ended a sleep to its
    next switch-in, and the part of it from sched_wakeup on (the run-queue wait)."""
    return tl.wakeups
