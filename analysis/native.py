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
    "ipt_thread_steps": (ctypes.c_long, [_SIZE, _P, _P, _P, _P, _P, _P, ctypes.c_int32,
                                         _SIZE, _P, _P, _P, _P, _P, ctypes.POINTER(_SIZE)]),
    "ipt_thread_finish": (_SIZE, [_SIZE, _P, _P, _P, _P]),
    "ipt_merge_steps": (_SIZE, [ctypes.c_int, _P, _P, _P, _P, _P, _P]),
    "ipt_critical": (None, [ctypes.c_int, _SIZE, _P, _P, _P, _P]),
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


def thread_steps(ts, typ, tid, next_tid, aux, codes, want):
    """(grid, mode, run, wake_on, wake_delay) of thread `want` from all events (sorted by
    time; typ: type codes, codes: {type name: code}); see ipt_thread_steps."""
    lib = _library()
    n = len(ts)
    ts, typ, aux = _c(ts, np.int64), _c(typ, np.int8), _c(aux, np.int64)
    tid, next_tid = _c(tid, np.int32), _c(next_tid, np.int32)
    code = np.array([codes.get(name, -2) for name in STEP_TYPES], np.int32)
    # Room for every event: only the thread's part is ever written, and only the pages
    # written are backed by memory.
    cap = n
    grid = np.empty(cap, np.int64)
    mode, run = np.empty(cap, np.int8), np.empty(cap, np.int8)
    wake_on, wake_delay = np.empty(cap, np.int64), np.empty(cap, np.int64)
    nwake = _SIZE(0)
    g = lib.ipt_thread_steps(n, _ptr(ts), _ptr(typ), _ptr(tid), _ptr(next_tid), _ptr(aux), _ptr(code), int(want),
                             cap, _ptr(grid), _ptr(mode), _ptr(run), _ptr(wake_on), _ptr(wake_delay),
                             ctypes.byref(nwake))
    if g < 0:
        raise MemoryError("ipt_thread_steps")
    w = nwake.value
    return grid[:g], mode[:g], run[:g], wake_on[:w], wake_delay[:w]


def thread_finish(grid, mode, run, overlay=None):
    """(ts, state) where the thread's state changes; grid and mode are overwritten."""
    if overlay is not None:
        overlay = _c(overlay, np.int8)
    m = _library().ipt_thread_finish(len(grid), _ptr(grid), _ptr(mode), _ptr(run),
                                     None if overlay is None else _ptr(overlay))
    return grid[:m], mode[:m]


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


def critical(states, rank):
    """(crit, who) over the threads' states on one grid; see ipt_critical."""
    states = [_c(s, np.int8) for s in states]
    rank = _c(rank, np.int8)
    if any(len(s) and (s.min() < 0 or s.max() >= len(rank)) for s in states):
        raise ValueError(f"critical: states outside 0..{len(rank) - 1}")
    u = len(states[0])
    crit, who = np.empty(u, np.int8), np.empty(u, np.int8)
    _library().ipt_critical(len(states), u, _ptrs(states), _ptr(rank), _ptr(crit), _ptr(who))
    return crit, who


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
