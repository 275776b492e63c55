"""numpy face of the analysis' C passes over all events (OUTPUT/libipctrace-analysis.so,
built by make): analysis/decode.c turns events.bin's records into columns,
analysis/timeline.c makes the breakdown's step functions and sums. Arrays go in and
come out as numpy arrays; the rules are those of events.py and breakdown.py."""
import ctypes

import numpy as np

from analysis import OUTPUT
from analysis.errors import UsageError

_P = ctypes.c_void_p
_SIZE = ctypes.c_size_t
_SIGNATURES = {
    "ipt_in_time_order": (ctypes.c_int, [_SIZE, _P]),
    "ipt_decode": (_SIZE, [_SIZE, _P, _P, _SIZE, _P, _P, _P, _P] + [_P] * 13),
    "ipt_thread_steps": (ctypes.c_long, [_SIZE, _P, _P, _P, _P, _P, _P, _P, _P, ctypes.c_int32, _SIZE,
                                         _P, _SIZE, ctypes.c_int64, ctypes.c_int64, ctypes.c_double,
                                         ctypes.c_double, _P, _P, _P,
                                         _P, _P, _P, ctypes.POINTER(_SIZE),
                                         _P, _P, ctypes.POINTER(_SIZE),
                                         _P, _P, ctypes.POINTER(_SIZE),
                                         _P, _P, _P, _P, ctypes.POINTER(_SIZE)]),
    "ipt_thread_finish": (_SIZE, [_SIZE, _P, _P, _P, _P, _SIZE, _P, _P, _P, _P, _P, _P]),
    "ipt_merge_steps": (_SIZE, [ctypes.c_int, _P, _P, _P, _P, _P, _P]),
    "ipt_causal": (_SIZE, [ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P, _P,
                           ctypes.c_int, _P, _P, _P, _P,
                           ctypes.c_int, _SIZE, _P, _P, _P,
                           _SIZE, ctypes.c_int, _P, _P, _P, _P, _P, _P, ctypes.POINTER(_SIZE)]),
    "ipt_count_upto": (None, [_SIZE, _P, _SIZE, _P, _P]),
    "ipt_time_in": (None, [_SIZE, _P, ctypes.c_int, _P, _SIZE, _P, _P, _P]),
}
_lib = None


def _library():
    global _lib
    if _lib is None:
        path = OUTPUT / "libipctrace-analysis.so"
        try:
            lib = ctypes.CDLL(str(path))
        except OSError:
            raise UsageError(f"{path} is missing: build it with 'make' (./ipctrace builds it)") from None
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name, None)
            if fn is None:
                raise UsageError(f"{path} has no {name}: it is older than analysis/; rebuild it with 'make'")
            fn.restype, fn.argtypes = restype, argtypes
        _lib = lib
    return _lib


def _c(a, dtype):
    """a as a contiguous array of dtype (a view when it is one already)."""
    return np.ascontiguousarray(a, dtype=dtype)


def _ptr(a):
    return a.ctypes.data_as(_P)


def _ptrs(arrays):
    return (_P * len(arrays))(*[a.ctypes.data for a in arrays])


def in_time_order(rec):
    """Whether the records (events.REC, contiguous) are sorted by ts."""
    return bool(_library().ipt_in_time_order(len(rec), _ptr(rec)))


# decode's columns and their types, in ipt_decode's order.
DECODED = (("ts", np.int64), ("type", np.int8), ("cpu", np.int16), ("pid", np.int32), ("tid", np.int32),
           ("aux", np.int64), ("a0", np.int64), ("next_tid", np.int32), ("next_pid", np.int32),
           ("other_tid", np.int32), ("other_pid", np.int32), ("run", np.int32), ("iteration", np.int64))


def decode(rec, order, starts, ends, runs, iters):
    """({column: array} of the records in time order (order: the indices that sort them,
    None if they are), the count of records of unknown type); see ipt_decode."""
    cols = {name: np.empty(len(rec), dtype) for name, dtype in DECODED}
    if order is not None:
        order = _c(order, np.int64)
    wins = [_c(starts, np.int64), _c(ends, np.int64), _c(runs, np.int32), _c(iters, np.int64)]
    unknown = _library().ipt_decode(len(rec), _ptr(rec), None if order is None else _ptr(order), len(wins[0]),
                                    *map(_ptr, wins), *(_ptr(cols[name]) for name, _ in DECODED))
    return cols, unknown


# Event type names whose codes ipt_thread_steps reads, in the order of its codes[].
STEP_TYPES = ("sys_enter", "sys_exit", "switch", "waking", "wakeup", "wakeup_new")


class ThreadSteps:
    """What ipt_thread_steps finds of one thread: grid, mode, run (its state before the
    overlays and carves); per sleep-ending wake-up sleep_end and sleep_waker (tid, -1 when
    a hard interrupt woke it); per wake-up wake_on, wake_delay, wake_rq; its switches in
    (in_ts, in_cpu); the carves (carve_at, carve_len, carve_state, carve_from)."""


def thread_steps(ts, typ, tid, next_tid, cpu, aux, a0, codes, want, data_kind, entry_in, entry_out,
                 copy_call, copy_byte):
    """ThreadSteps of thread `want` from all events (sorted by time; typ: type codes, codes:
    {type name: code}); see ipt_thread_steps. copy_call < 0: no copy estimate."""
    lib = _library()
    n = len(ts)
    ts, typ, aux, a0 = _c(ts, np.int64), _c(typ, np.int8), _c(aux, np.int64), _c(a0, np.int64)
    tid, next_tid, cpu = _c(tid, np.int32), _c(next_tid, np.int32), _c(cpu, np.int16)
    code = np.array([codes.get(name, -2) for name in STEP_TYPES], np.int32)
    data_kind = _c(data_kind, np.uint8)
    # Room for every event: only the thread's part is ever written, and only the pages
    # written are backed by memory.
    cap = n
    r = ThreadSteps()
    r.grid = np.empty(cap, np.int64)
    r.mode, r.run = np.empty(cap, np.int8), np.empty(cap, np.int8)
    r.wake_on, r.wake_delay, r.wake_rq = (np.empty(cap, np.int64) for _ in range(3))
    r.sleep_end, r.sleep_waker = np.empty(cap, np.int64), np.empty(cap, np.int64)
    r.in_ts, r.in_cpu = np.empty(cap, np.int64), np.empty(cap, np.int16)
    r.carve_at, r.carve_len = np.empty(2 * cap, np.int64), np.empty(2 * cap, np.int64)
    r.carve_state, r.carve_from = np.empty(2 * cap, np.int8), np.empty(2 * cap, np.int8)
    nwake, nsleep, nin, ncarve = _SIZE(0), _SIZE(0), _SIZE(0), _SIZE(0)
    g = lib.ipt_thread_steps(n, _ptr(ts), _ptr(typ), _ptr(tid), _ptr(next_tid), _ptr(cpu), _ptr(aux), _ptr(a0),
                             _ptr(code), int(want), cap, _ptr(data_kind), len(data_kind), int(entry_in),
                             int(entry_out), float(copy_call), float(copy_byte),
                             _ptr(r.grid), _ptr(r.mode), _ptr(r.run),
                             _ptr(r.wake_on), _ptr(r.wake_delay), _ptr(r.wake_rq), ctypes.byref(nwake),
                             _ptr(r.sleep_end), _ptr(r.sleep_waker), ctypes.byref(nsleep),
                             _ptr(r.in_ts), _ptr(r.in_cpu), ctypes.byref(nin),
                             _ptr(r.carve_at), _ptr(r.carve_len), _ptr(r.carve_state), _ptr(r.carve_from),
                             ctypes.byref(ncarve))
    if g < 0:
        raise MemoryError("ipt_thread_steps")
    r.grid, r.mode, r.run = r.grid[:g], r.mode[:g], r.run[:g]
    for name, count in (("wake_on", nwake), ("wake_delay", nwake), ("wake_rq", nwake), ("sleep_end", nsleep),
                        ("sleep_waker", nsleep), ("in_ts", nin), ("in_cpu", nin), ("carve_at", ncarve),
                        ("carve_len", ncarve), ("carve_state", ncarve), ("carve_from", ncarve)):
        setattr(r, name, getattr(r, name)[:count.value])
    return r


def thread_finish(steps, overlay=None):
    """(ts, state) where the thread's state changes, from ThreadSteps and the overlays."""
    if overlay is not None:
        overlay = _c(overlay, np.int8)
    g = len(steps.grid)
    cap = 3 * g
    out_ts, out_st = np.empty(cap, np.int64), np.empty(cap, np.int8)
    m = _library().ipt_thread_finish(g, _ptr(steps.grid), _ptr(steps.mode), _ptr(steps.run),
                                     None if overlay is None else _ptr(overlay), len(steps.carve_at),
                                     _ptr(steps.carve_at), _ptr(steps.carve_len), _ptr(steps.carve_state),
                                     _ptr(steps.carve_from), _ptr(out_ts), _ptr(out_st))
    return out_ts[:m].copy(), out_st[:m].copy()


def merge_steps(parts):
    """The sorted union of the change points of several (ts, value, before) step functions
    (each ts sorted) and each function's value there."""
    ts = [_c(p[0], np.int64) for p in parts]
    val = [_c(p[1], np.int8) for p in parts]
    total = sum(len(t) for t in ts)
    out_ts = np.empty(total, np.int64)
    out_val = [np.empty(total, np.int8) for _ in parts]
    u = _library().ipt_merge_steps(len(parts), _ptrs(ts), _ptrs(val), (_SIZE * len(ts))(*map(len, ts)),
                                   _ptr(np.array([p[2] for p in parts], np.int8)), _ptr(out_ts), _ptrs(out_val))
    return out_ts[:u], [v[:u] for v in out_val]


class Segments:
    """Critical-path segments of ipt_causal: window index w, [a, b), thread index, state,
    holder (tid of the task outside the workload that held the CPU, -1 if none); lost: those
    that did not fit."""


def causal(threads, occupancy, nsides, starts, ends, nstates, segments=0, holders_only=False):
    """ns of each window in each state on the causal critical path ((n, nstates), each
    column contiguous) and, with segments > 0, up to that many Segments (holders_only: only
    those where a task outside the workload held the CPU). threads: per
    thread (ts, state, sleep_end, sleep_waker index, in_ts, in_cpu); occupancy: (offsets
    per CPU, ts, who index, tid) of what ran on each CPU. See ipt_causal."""
    k = len(threads)
    cols = [[_c(t[i], dt) for t in threads] for i, dt in
            enumerate((np.int64, np.int8, np.int64, np.int32, np.int64, np.int16))]
    lens = [(_SIZE * k)(*[len(a) for a in col]) for col in (cols[0], cols[2], cols[4])]
    off, occ_ts, occ_who, occ_tid = (_c(occupancy[0], np.uint64), _c(occupancy[1], np.int64),
                                     _c(occupancy[2], np.int32), _c(occupancy[3], np.int32))
    starts, ends = _c(starts, np.int64), _c(ends, np.int64)
    n = len(starts)
    out = np.zeros((nstates, n))
    seg = Segments()
    cap = int(segments)
    seg.w, seg.a, seg.b = np.empty(cap, np.int32), np.empty(cap, np.int64), np.empty(cap, np.int64)
    seg.thread, seg.state, seg.holder = np.empty(cap, np.int8), np.empty(cap, np.int8), np.empty(cap, np.int64)
    lost = _SIZE(0)
    want = cap > 0
    m = _library().ipt_causal(k, _ptrs(cols[0]), _ptrs(cols[1]), lens[0], _ptrs(cols[2]), _ptrs(cols[3]), lens[1],
                              _ptrs(cols[4]), _ptrs(cols[5]), lens[2],
                              len(off) - 1, _ptr(off), _ptr(occ_ts), _ptr(occ_who), _ptr(occ_tid),
                              int(nsides), n, _ptr(starts), _ptr(ends), _ptr(out),
                              cap, int(holders_only), *(_ptr(a) if want else None for a in (seg.w, seg.a, seg.b, seg.thread, seg.state,
                                                                        seg.holder)),
                              ctypes.byref(lost))
    for name in ("w", "a", "b", "thread", "state", "holder"):
        setattr(seg, name, getattr(seg, name)[:m])
    seg.lost = lost.value
    return out.T, seg


def count_upto(ts, x):
    """np.searchsorted(ts, x, side="right"), fast for x in ascending order: each search
    starts where the last one ended."""
    ts, x = _c(ts, np.int64), _c(x, np.int64)
    out = np.empty(len(x), np.int64)
    _library().ipt_count_upto(len(ts), _ptr(ts), len(x), _ptr(x), _ptr(out))
    return out


def time_in(ts, states, starts, ends, nstates):
    """ns of each window [starts, ends) in each state: one (n, nstates) array per state array,
    each state's column contiguous (the transpose of a C-ordered (nstates, n) array)."""
    ts = _c(ts, np.int64)
    states = [_c(s, np.int8) for s in states]
    starts, ends = _c(starts, np.int64), _c(ends, np.int64)
    outs = [np.zeros((nstates, len(starts))) for _ in states]
    _library().ipt_time_in(len(ts), _ptr(ts), len(states), _ptrs(states), len(starts), _ptr(starts), _ptr(ends),
                           _ptrs(outs))
    return [out.T for out in outs]
