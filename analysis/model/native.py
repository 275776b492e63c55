"""numpy face of the analysis' C passes over the events (analysis/model/timeline.c, in
the library store/clib.py loads): each thread's state step function, their union with
the critical path over it, the time each window spends in each state. Arrays go in and
come out as numpy arrays; the rules are those of breakdown.py."""

from __future__ import annotations

import ctypes
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
    {type name: code}); see ipt_thread_steps. copy_call < 0: no copy estimate."""
    lib = clib.library()
    n = len(ts)
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
    code = np.array([codes.get(name, -2) for name in records.STEP_TYPES], np.int32)
    data_kind = clib.contiguous(data_kind, np.uint8)
    # Room for every event: only the thread's part is ever written, and only the pages
    # written are backed by memory.
    cap = n
    r = ThreadSteps()
    r.grid = np.empty(cap, np.int64)
    r.mode, r.run = np.empty(cap, np.int8), np.empty(cap, np.int8)
    r.wake_on, r.wake_delay, r.wake_rq = (np.empty(cap, np.int64) for _ in range(3))
    r.sleep_end, r.sleep_waker = np.empty(cap, np.int64), np.empty(cap, np.int64)
    r.in_ts, r.in_cpu = np.empty(cap, np.int64), np.empty(cap, np.int16)
    r.call_enter, r.call_exit, r.call_nr, r.call_ret = (np.empty(cap, np.int64) for _ in range(4))
    r.woke_ts, r.woke_waker = np.empty(cap, np.int64), np.empty(cap, np.int64)
    r.carve_at, r.carve_len = np.empty(2 * cap, np.int64), np.empty(2 * cap, np.int64)
    r.carve_state, r.carve_from = np.empty(2 * cap, np.int8), np.empty(2 * cap, np.int8)
    nwake, nsleep, nin, ncall, nwoke, ncarve = (_SIZE(0) for _ in range(6))
    g = lib.ipt_thread_steps(
        n,
        clib.pointer(ts),
        clib.pointer(typ),
        clib.pointer(tid),
        clib.pointer(next_tid),
        clib.pointer(cpu),
        clib.pointer(aux),
        clib.pointer(a0),
        clib.pointer(code),
        int(want),
        cap,
        clib.pointer(data_kind),
        len(data_kind),
        int(entry_in),
        int(entry_out),
        float(copy_call),
        float(copy_byte),
        clib.pointer(r.grid),
        clib.pointer(r.mode),
        clib.pointer(r.run),
        clib.pointer(r.wake_on),
        clib.pointer(r.wake_delay),
        clib.pointer(r.wake_rq),
        ctypes.byref(nwake),
        clib.pointer(r.sleep_end),
        clib.pointer(r.sleep_waker),
        ctypes.byref(nsleep),
        clib.pointer(r.in_ts),
        clib.pointer(r.in_cpu),
        ctypes.byref(nin),
        clib.pointer(r.call_enter),
        clib.pointer(r.call_exit),
        clib.pointer(r.call_nr),
        clib.pointer(r.call_ret),
        ctypes.byref(ncall),
        clib.pointer(r.woke_ts),
        clib.pointer(r.woke_waker),
        ctypes.byref(nwoke),
        clib.pointer(r.carve_at),
        clib.pointer(r.carve_len),
        clib.pointer(r.carve_state),
        clib.pointer(r.carve_from),
        ctypes.byref(ncarve),
    )
    if g < 0:
        raise MemoryError("ipt_thread_steps")
    r.grid, r.mode, r.run = r.grid[:g], r.mode[:g], r.run[:g]
    for name, count in (
        ("wake_on", nwake),
        ("wake_delay", nwake),
        ("wake_rq", nwake),
        ("sleep_end", nsleep),
        ("sleep_waker", nsleep),
        ("in_ts", nin),
        ("in_cpu", nin),
        ("call_enter", ncall),
        ("call_exit", ncall),
        ("call_nr", ncall),
        ("call_ret", ncall),
        ("woke_ts", nwoke),
        ("woke_waker", nwoke),
        ("carve_at", ncarve),
        ("carve_len", ncarve),
        ("carve_state", ncarve),
        ("carve_from", ncarve),
    ):
        setattr(r, name, getattr(r, name)[: count.value])
    return r


def thread_finish(steps: ThreadSteps, overlay: npt.ArrayLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ts, state) where the thread's state changes, from ThreadSteps and the overlays."""
    if overlay is not None:
        overlay = clib.contiguous(overlay, np.int8)
    g = len(steps.grid)
    cap = 3 * g
    out_ts, out_st = np.empty(cap, np.int64), np.empty(cap, np.int8)
    m = clib.library().ipt_thread_finish(
        g,
        clib.pointer(steps.grid),
        clib.pointer(steps.mode),
        clib.pointer(steps.run),
        None if overlay is None else clib.pointer(overlay),
        len(steps.carve_at),
        clib.pointer(steps.carve_at),
        clib.pointer(steps.carve_len),
        clib.pointer(steps.carve_state),
        clib.pointer(steps.carve_from),
        clib.pointer(out_ts),
        clib.pointer(out_st),
    )
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
    lens = [(_SIZE * k)(*[len(a) for a in col]) for col in (cols[0], cols[2], cols[4], cols[6])]
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
    lost = _SIZE(0)
    want = cap > 0
    m = clib.library().ipt_causal(
        k,
        clib.pointers(cols[0]),
        clib.pointers(cols[1]),
        lens[0],
        clib.pointers(cols[2]),
        clib.pointers(cols[3]),
        lens[1],
        clib.pointers(cols[4]),
        clib.pointers(cols[5]),
        lens[2],
        clib.pointers(cols[6]),
        clib.pointers(cols[7]),
        lens[3],
        len(off) - 1,
        clib.pointer(off),
        clib.pointer(occ_ts),
        clib.pointer(occ_who),
        clib.pointer(occ_tid),
        int(nsides),
        int(edge_states),
        n,
        clib.pointer(starts),
        clib.pointer(ends),
        clib.pointer(out),
        cap,
        int(holders_only),
        *(clib.pointer(a) if want else None for a in (seg.w, seg.a, seg.b, seg.thread, seg.state, seg.holder)),
        ctypes.byref(lost),
    )
    for name in ("w", "a", "b", "thread", "state", "holder"):
        setattr(seg, name, getattr(seg, name)[:m])
    seg.lost = lost.value
    return out.T, seg


def count_upto(ts: npt.ArrayLike, x: npt.ArrayLike) -> np.ndarray:
    """np.searchsorted(ts, x, side="right"), fast for x in ascending order: each search
    starts where the last one ended."""
    ts, x = clib.contiguous(ts, np.int64), clib.contiguous(x, np.int64)
    out = np.empty(len(x), np.int64)
    clib.library().ipt_count_upto(len(ts), clib.pointer(ts), len(x), clib.pointer(x), clib.pointer(out))
    return out


def time_in(
    ts: npt.ArrayLike, states: Sequence[npt.ArrayLike], starts: npt.ArrayLike, ends: npt.ArrayLike, nstates: int
) -> list[np.ndarray]:
    """ns of each window [starts, ends) in each state: one (n, nstates) array per state array,
    each state's column contiguous (the transpose of a C-ordered (nstates, n) array)."""
    ts = clib.contiguous(ts, np.int64)
    states = [clib.contiguous(s, np.int8) for s in states]
    starts, ends = clib.contiguous(starts, np.int64), clib.contiguous(ends, np.int64)
    outs = [np.zeros((nstates, len(starts))) for _ in states]
    clib.library().ipt_time_in(
        len(ts),
        clib.pointer(ts),
        len(states),
        clib.pointers(states),
        len(starts),
        clib.pointer(starts),
        clib.pointer(ends),
        clib.pointers(outs),
    )
    return [out.T for out in outs]
