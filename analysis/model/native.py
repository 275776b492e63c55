"""numpy face of the analysis' C passes over the events (analysis/model/timeline.c, in
the library store/clib.py loads): each thread's state step function, their union with
the critical path over it, the time each window spends in each state. Arrays go in and
come out as numpy arrays; the rules are those of breakdown.py."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from analysis.store import clib, records

if TYPE_CHECKING:
    import numpy.typing as npt

_SIZE = ctypes.c_size_t


class ThreadSteps:
    """What ipt_thread_steps finds of one thread: grid, mode, run (its state before the
    overlays and carves); per sleep-ending wake-up sleep_end and sleep_waker (tid, -1 when
    a hard interrupt woke it); per wake-up wake_on, wake_delay, wake_rq; its switches in
    (in_ts, in_cpu); its data syscalls that moved bytes, enter and exit paired (call_enter,
    call_exit, call_nr, call_ret); the wake-ups that made it runnable (woke_ts, woke_waker);
    the carves (carve_at, carve_len, carve_state, carve_from)."""

    grid: np.ndarray
    mode: np.ndarray
    run: np.ndarray
    wake_on: np.ndarray
    wake_delay: np.ndarray
    wake_rq: np.ndarray
    sleep_end: np.ndarray
    sleep_waker: np.ndarray
    in_ts: np.ndarray
    in_cpu: np.ndarray
    call_enter: np.ndarray
    call_exit: np.ndarray
    call_nr: np.ndarray
    call_ret: np.ndarray
    woke_ts: np.ndarray
    woke_waker: np.ndarray
    carve_at: np.ndarray
    carve_len: np.ndarray
    carve_state: np.ndarray
    carve_from: np.ndarray


# ipt_thread_out's arrays after the grid's (grid, mode, run), each with the field counting its rows.
_ARRAYS = {
    **dict.fromkeys(("wake_on", "wake_delay", "wake_rq"), "nwake"),
    **dict.fromkeys(("sleep_end", "sleep_waker"), "nsleep"),
    **dict.fromkeys(("in_ts", "in_cpu"), "nin"),
    **dict.fromkeys(("call_enter", "call_exit", "call_nr", "call_ret"), "ncall"),
    **dict.fromkeys(("woke_ts", "woke_waker"), "nwoke"),
    **dict.fromkeys(("carve_at", "carve_len", "carve_state", "carve_from"), "ncarve"),
}
_COUNTS = tuple(dict.fromkeys(_ARRAYS.values()))

# Each thread's arrays the C passes write into, kept from one call to the next (and let go of
# with the thread): arrays made afresh each call cost more in page faults (the kernel zeroing
# each huge page first written) than the pass itself (perf: 4 % of the whole-trace analysis,
# the pass 3 %).
_scratch = threading.local()


def _room(name: str, n: int, dtype: npt.DTypeLike) -> np.ndarray:
    """This thread's array `name` with room for n of dtype (its first n): valid until the next
    call for the same name in the same thread."""
    mine = _scratch.__dict__
    a = mine.get(name)
    if a is None or len(a) < n or a.dtype != dtype:
        # a little more than asked: the next piece is usually a little larger
        a = mine[name] = np.empty(n + n // 8, dtype)
    return a[:n]


def release_scratch() -> None:
    """Let go of this thread's arrays the C passes write into, here and in the C (once a pass
    is done; another thread's go when that thread ends)."""
    _scratch.__dict__.clear()
    clib.library().ipt_release_scratch()


def thread_steps(
    ts: npt.ArrayLike,
    typ: npt.ArrayLike,
    tid: npt.ArrayLike,
    next_tid: npt.ArrayLike,
    cpu: npt.ArrayLike,
    aux: npt.ArrayLike,
    a0: npt.ArrayLike,
    codes: dict[str, int],
    want: int,
    data_kind: npt.ArrayLike,
    entry_in: int,
    entry_out: int,
    copy_call: float,
    copy_byte: float,
) -> ThreadSteps:
    """ThreadSteps of thread `want` from all events (sorted by time; typ: type codes, codes:
    {type name: code}); see ipt_thread_steps. copy_call < 0: no copy estimate. Its grid, mode,
    run and carves are valid until the next call in the same thread (thread_finish's input)."""
    lib = clib.library()
    ts, typ, aux, a0 = (
        clib.contiguous(ts, np.int64),
        clib.contiguous(typ, np.int8),
        clib.contiguous(aux, np.int64),
        clib.contiguous(a0, np.int64),
    )
    tid, next_tid, cpu = (
        clib.contiguous(tid, np.int32),
        clib.contiguous(next_tid, np.int32),
        clib.contiguous(cpu, np.int16),
    )
    n = len(ts)
    code = np.array([codes.get(name, -2) for name in records.STEP_TYPES], np.int32)
    data_kind = clib.contiguous(data_kind, np.uint8)
    # Room for every event: only the thread's part is ever written, and only the pages
    # written are backed by memory.
    cap = n
    r = ThreadSteps()
    for name, dtype in clib.pointer_fields("ipt_thread_out").items():  # each of the type the C writes
        setattr(r, name, _room("steps." + name, 2 * cap if name.startswith("carve_") else cap, dtype))
    events = clib.struct("ipt_events", n=n, ts=ts, type=typ, tid=tid, next_tid=next_tid, cpu=cpu, aux=aux, a0=a0)
    options = clib.struct(
        "ipt_step_options",
        codes=code,
        data_kind=data_kind,
        ndata=len(data_kind),
        cap=cap,
        entry_in=int(entry_in),
        entry_out=int(entry_out),
        copy_call=float(copy_call),
        copy_byte=float(copy_byte),
        want=int(want),
    )
    # the output arrays are r's attributes of the same names; the counts start at 0
    out = clib.struct(
        "ipt_thread_out",
        **{name: getattr(r, name) for name in ("grid", "mode", "run", *_ARRAYS)},
        **dict.fromkeys(_COUNTS, 0),
    )
    g = lib.ipt_thread_steps(ctypes.byref(events), ctypes.byref(options), ctypes.byref(out))
    if g < 0:
        raise MemoryError("ipt_thread_steps")
    r.grid, r.mode, r.run = r.grid[:g], r.mode[:g], r.run[:g]
    for name, count in _ARRAYS.items():
        got = getattr(r, name)[: getattr(out, count)]
        # the carves go to thread_finish; the rest outlive the next call: copies of their part
        setattr(r, name, got if name.startswith("carve_") else got.copy())
    return r


def thread_finish(steps: ThreadSteps, overlay: npt.ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ts, state) where the thread's state changes, from ThreadSteps and the overlays."""
    if overlay is not None:
        overlay = clib.contiguous(overlay, np.int8)
    g = len(steps.grid)
    cap = 3 * g
    out_ts, out_st = _room("finish.ts", cap, np.int64), _room("finish.st", cap, np.int8)
    inputs = clib.struct(
        "ipt_finish_in",
        g=g,
        grid=steps.grid,
        mode=steps.mode,
        run=steps.run,
        overlay=overlay,
        ncarve=len(steps.carve_at),
        c_at=steps.carve_at,
        c_len=steps.carve_len,
        c_state=steps.carve_state,
        c_from=steps.carve_from,
    )
    outputs = clib.struct("ipt_finish_out", ts=out_ts, st=out_st)
    m = clib.library().ipt_thread_finish(ctypes.byref(inputs), ctypes.byref(outputs))
    return out_ts[:m].copy(), out_st[:m].copy()


def merge_steps(parts: Sequence[tuple[npt.ArrayLike, npt.ArrayLike, int]]) -> tuple[np.ndarray, list[np.ndarray]]:
    """The sorted union of the change points of several (ts, value, before) step functions
    (each ts sorted) and each function's value there."""
    ts = [clib.contiguous(p[0], np.int64) for p in parts]
    val = [clib.contiguous(p[1], np.int8) for p in parts]
    total = sum(len(t) for t in ts)
    out_ts = np.empty(total, np.int64)
    out_val = [np.empty(total, np.int8) for _ in parts]
    u = clib.library().ipt_merge_steps(
        len(parts),
        clib.pointers(ts),
        clib.pointers(val),
        (_SIZE * len(ts))(*map(len, ts)),
        clib.pointer(np.array([p[2] for p in parts], np.int8)),
        clib.pointer(out_ts),
        clib.pointers(out_val),
    )
    return out_ts[:u], [v[:u] for v in out_val]


class Segments:
    """Critical-path segments of ipt_causal: window index w, [a, b), thread index, state,
    holder (tid of the task outside the workload that held the CPU, -1 if none); lost: those
    that did not fit."""

    w: np.ndarray
    a: np.ndarray
    b: np.ndarray
    thread: np.ndarray
    state: np.ndarray
    holder: np.ndarray
    lost: int


def causal(
    threads: Sequence[Sequence[npt.ArrayLike]],
    occupancy: Sequence[npt.ArrayLike],
    nsides: int,
    starts: npt.ArrayLike,
    ends: npt.ArrayLike,
    nstates: int,
    segments: int = 0,
    holders_only: bool = False,
    edge_states: int = 0,
) -> tuple[np.ndarray, Segments]:
    """ns of each window in each state on the causal critical path ((n, nstates), each
    column contiguous) and, with segments > 0, up to that many Segments (holders_only: only
    those where a task outside the workload held the CPU). threads: per
    thread (ts, state, sleep_end, sleep_waker index, in_ts, in_cpu, deliver_at, deliver_by index);
    occupancy: (offsets per CPU, ts, who index, tid) of what ran on each CPU; edge_states: the
    mask (1 << state) of the states a window's edges happen in. See ipt_causal."""
    k = len(threads)
    cols = [
        [clib.contiguous(t[i], dt) for t in threads]
        for i, dt in enumerate((np.int64, np.int8, np.int64, np.int32, np.int64, np.int16, np.int64, np.int32))
    ]
    lens = [np.array([len(a) for a in col], np.uint64) for col in (cols[0], cols[2], cols[4], cols[6])]
    off, occ_ts, occ_who, occ_tid = (
        clib.contiguous(occupancy[0], np.uint64),
        clib.contiguous(occupancy[1], np.int64),
        clib.contiguous(occupancy[2], np.int32),
        clib.contiguous(occupancy[3], np.int32),
    )
    starts, ends = clib.contiguous(starts, np.int64), clib.contiguous(ends, np.int64)
    n = len(starts)
    out = np.zeros((nstates, n))
    seg = Segments()
    cap = int(segments)
    seg.w, seg.a, seg.b = np.empty(cap, np.int32), np.empty(cap, np.int64), np.empty(cap, np.int64)
    seg.thread, seg.state, seg.holder = np.empty(cap, np.int8), np.empty(cap, np.int8), np.empty(cap, np.int64)
    want = cap > 0
    inputs = clib.struct(
        "ipt_causal_in",
        ts=cols[0],
        st=cols[1],
        len=lens[0],
        sleep_end=cols[2],
        sleep_waker=cols[3],
        nsleep=lens[1],
        in_ts=cols[4],
        in_cpu=cols[5],
        nin=lens[2],
        deliv_at=cols[6],
        deliv_by=cols[7],
        ndeliv=lens[3],
        occ_off=off,
        occ_ts=occ_ts,
        occ_who=occ_who,
        occ_tid=occ_tid,
        s=starts,
        e=ends,
        n=n,
        k=k,
        ncpu=len(off) - 1,
    )
    options = clib.struct(
        "ipt_causal_options", nsides=int(nsides), edge_states=int(edge_states), holders_only=int(holders_only)
    )
    segs = {
        "seg_w": seg.w,
        "seg_a": seg.a,
        "seg_b": seg.b,
        "seg_thread": seg.thread,
        "seg_st": seg.state,
        "seg_holder": seg.holder,
    }
    outputs = clib.struct(
        "ipt_causal_out", out=out, seg_cap=cap, seg_lost=0, **{k: v if want else None for k, v in segs.items()}
    )
    m = clib.library().ipt_causal(ctypes.byref(inputs), ctypes.byref(options), ctypes.byref(outputs))
    for name in ("w", "a", "b", "thread", "state", "holder"):
        setattr(seg, name, getattr(seg, name)[:m])
    seg.lost = outputs.seg_lost
    return out.T, seg


def count_upto(ts: npt.ArrayLike, x: npt.ArrayLike) -> np.ndarray:
    """np.searchsorted(ts, x, side="right"), fast for x in ascending order: each search
    starts where the last one ended."""
    ts, x = clib.contiguous(ts, np.int64), clib.contiguous(x, np.int64)
    out = np.empty(len(x), np.int64)
    clib.library().ipt_count_upto(len(ts), clib.pointer(ts), len(x), clib.pointer(x), clib.pointer(out))
    return out


def keyed_sequence(
    key_a: npt.ArrayLike, row_a: npt.ArrayLike, key_b: npt.ArrayLike, row_b: npt.ArrayLike
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Two kinds of records, each with its key and its row (ascending), merged into each key's
    sequence in row order: (key, row, is_b), the keys in the order they first come; one pass
    (ipt_keyed_sequence). None where a kind's rows are not ascending."""
    ka, ra, kb, rb = (clib.contiguous(a, np.int64) for a in (key_a, row_a, key_b, row_b))
    n = len(ra) + len(rb)
    key, row, is_b = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.uint8)
    got = clib.library().ipt_keyed_sequence(
        len(ra), *clib.pointers([ka, ra]), len(rb), *clib.pointers([kb, rb]), *clib.pointers([key, row, is_b])
    )
    return None if got < 0 else (key, row, is_b.view(bool))


def deliveries(
    tids: npt.ArrayLike,
    calls: Sequence[Sequence[npt.ArrayLike]],
    woke: Sequence[Sequence[npt.ArrayLike]],
    sleep_end: Sequence[npt.ArrayLike],
    data_kind: npt.ArrayLike,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per thread (tids), what ended its waits where the critical path's wake-up rule would not
    find it: (times, sender index among tids) in time order (ipt_deliveries; the rule is
    timeline.deliveries'). calls: per thread (enter, exit, nr, ret) of its system calls;
    woke: per thread (times, waker tid) of its wake-ups; sleep_end: the ends of its sleeps;
    data_kind: per syscall number, 1 a receive, 2 a send."""
    k = len(calls)
    ids = clib.contiguous(tids, np.int64)
    call_cols = [[clib.contiguous(c[i], np.int64) for c in calls] for i in range(4)]
    woke_cols = [[clib.contiguous(w[i], np.int64) for w in woke] for i in range(2)]
    ends = [clib.contiguous(e, np.int64) for e in sleep_end]
    kind = clib.contiguous(data_kind, np.uint8)
    ncall = np.array([len(a) for a in call_cols[0]], np.uint64)
    at = [np.empty(int(n), np.int64) for n in ncall]
    by = [np.empty(int(n), np.int32) for n in ncall]
    nout = np.zeros(k, np.uint64)
    if (
        clib.library().ipt_deliveries(
            k,
            clib.pointer(ids),
            clib.pointer(ncall),
            *(clib.pointers(col) for col in call_cols),
            clib.pointer(np.array([len(a) for a in woke_cols[0]], np.uint64)),
            *(clib.pointers(col) for col in woke_cols),
            clib.pointer(np.array([len(a) for a in ends], np.uint64)),
            clib.pointers(ends),
            len(kind),
            clib.pointer(kind),
            clib.pointers(at),
            clib.pointers(by),
            clib.pointer(nout),
        )
        < 0
    ):
        raise MemoryError("ipt_deliveries")
    return [(a[: int(n)], b[: int(n)]) for a, b, n in zip(at, by, nout)]


def time_in(
    ts: npt.ArrayLike, states: Sequence[npt.ArrayLike], starts: npt.ArrayLike, ends: npt.ArrayLike, nstates: int
) -> list[np.ndarray]:
    """ns of each window [starts, ends) in each state: one (n, nstates) array per state array,
    each state's column contiguous (the transpose of a C-ordered (nstates, n) array)."""
    ts = clib.contiguous(ts, np.int64)
    state_columns = [clib.contiguous(s, np.int8) for s in states]
    starts, ends = clib.contiguous(starts, np.int64), clib.contiguous(ends, np.int64)
    outs = [np.zeros((nstates, len(starts))) for _ in state_columns]
    clib.library().ipt_time_in(
        len(ts),
        clib.pointer(ts),
        len(state_columns),
        clib.pointers(state_columns),
        len(starts),
        clib.pointer(starts),
        clib.pointer(ends),
        clib.pointers(outs),
    )
    return [out.T for out in outs]
