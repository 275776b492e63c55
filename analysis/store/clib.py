"""The analysis' C library (OUTPUT/libipctrace-analysis.so, built by make from
analysis/store/decode.c and analysis/model/timeline.c): loading it, checking that it was
built from the record definitions records.py names, and its decoder of events.bin's
records into columns. model/native.py is the face of its passes over the events."""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from analysis import OUTPUT
from analysis.errors import UsageError
from analysis.store import records

if TYPE_CHECKING:
    import numpy.typing as npt

_P = ctypes.c_void_p
_SIZE = ctypes.c_size_t
# The library's ABI, argument by argument as the C declares them.
# fmt: off
_SIGNATURES = {
    "ipt_in_time_order": (ctypes.c_int, [_SIZE, _P]),
    "ipt_decode": (_SIZE, [_SIZE, _P, _P, _SIZE, _P, _P, _P, _P] + [_P] * 13),
    "ipt_thread_steps": (ctypes.c_long, [_SIZE, _P, _P, _P, _P, _P, _P, _P, _P, ctypes.c_int32, _SIZE,
                                         _P, _SIZE, ctypes.c_int64, ctypes.c_int64, ctypes.c_double,
                                         ctypes.c_double, _P, _P, _P,
                                         _P, _P, _P, ctypes.POINTER(_SIZE),
                                         _P, _P, ctypes.POINTER(_SIZE),
                                         _P, _P, ctypes.POINTER(_SIZE),
                                         _P, _P, _P, _P, ctypes.POINTER(_SIZE),
                                         _P, _P, ctypes.POINTER(_SIZE),
                                         _P, _P, _P, _P, ctypes.POINTER(_SIZE)]),
    "ipt_thread_finish": (_SIZE, [_SIZE, _P, _P, _P, _P, _SIZE, _P, _P, _P, _P, _P, _P]),
    "ipt_merge_steps": (_SIZE, [ctypes.c_int, _P, _P, _P, _P, _P, _P]),
    "ipt_causal": (_SIZE, [ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P,
                           ctypes.c_int, _P, _P, _P, _P,
                           ctypes.c_int, ctypes.c_int, _SIZE, _P, _P, _P,
                           _SIZE, ctypes.c_int, _P, _P, _P, _P, _P, _P, ctypes.POINTER(_SIZE)]),
    "ipt_count_upto": (None, [_SIZE, _P, _SIZE, _P, _P]),
    "ipt_time_in": (None, [_SIZE, _P, ctypes.c_int, _P, _SIZE, _P, _P, _P]),
    "ipt_scan_facts": (None, [_SIZE, _P, ctypes.c_int64, ctypes.c_int64, _SIZE, _P, _SIZE, _P,
                              _P, ctypes.POINTER(_SIZE), ctypes.POINTER(ctypes.c_int),
                              _P, ctypes.POINTER(_SIZE), _P, ctypes.POINTER(_SIZE)]),
    "ipt_lagged_late": (_SIZE, [_SIZE, _P, _SIZE, _P, ctypes.POINTER(ctypes.c_int64),
                                ctypes.POINTER(ctypes.c_int64), _P]),
    "ipt_name": (ctypes.c_char_p, [ctypes.c_int, ctypes.c_int]),
}
# fmt: on
_lib = None


def library() -> ctypes.CDLL:
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
        if c_tables(lib) != records.TABLES:
            raise UsageError(
                f"{path} was built from other record types or states than analysis/store/records.py "
                "names; rebuild it with 'make'"
            )
        _lib = lib
    return _lib


def c_tables(lib: ctypes.CDLL | None = None) -> tuple[tuple[str, ...], ...]:
    """The C side's name tables (ipt_name), as records.TABLES lays them out."""
    lib = lib or library()

    def table(t: int) -> tuple[str, ...]:
        names, i = [], 0
        while (name := lib.ipt_name(t, i)) is not None:
            names.append(name.decode())
            i += 1
        return tuple(names)

    return tuple(table(t) for t in range(len(records.TABLES)))


def contiguous(a: npt.ArrayLike, dtype: npt.DTypeLike) -> np.ndarray:
    """a as a contiguous array of dtype (a view when it is one already)."""
    return np.ascontiguousarray(a, dtype=dtype)


def pointer(a: np.ndarray) -> ctypes.c_void_p:
    return a.ctypes.data_as(_P)


def pointers(arrays: Sequence[np.ndarray]) -> ctypes.Array[ctypes.c_void_p]:
    return (_P * len(arrays))(*[a.ctypes.data for a in arrays])


def in_time_order(rec: np.ndarray) -> bool:
    """Whether the records (events.REC, contiguous) are sorted by ts."""
    return bool(library().ipt_in_time_order(len(rec), pointer(rec)))


# decode's columns and their types, in ipt_decode's order.
DECODED = (
    ("ts", np.int64),
    ("type", np.int8),
    ("cpu", np.int16),
    ("pid", np.int32),
    ("tid", np.int32),
    ("aux", np.int64),
    ("a0", np.int64),
    ("next_tid", np.int32),
    ("next_pid", np.int32),
    ("other_tid", np.int32),
    ("other_pid", np.int32),
    ("run", np.int32),
    ("iteration", np.int64),
)


def decode(
    rec: np.ndarray,
    order: npt.ArrayLike | None,
    starts: npt.ArrayLike,
    ends: npt.ArrayLike,
    runs: npt.ArrayLike,
    iters: npt.ArrayLike,
    before: int = 0,
) -> tuple[dict[str, np.ndarray], int]:
    """({column: array} of the records in time order (order: the indices of those to take, in
    time order; None: all, as they are), the count of records of unknown type); see ipt_decode.
    before: rows left unwritten at the start of each column, for the caller to fill."""
    n = len(rec) if order is None else len(order)  # order may take some of the records only
    cols = {name: np.empty(before + n, dtype) for name, dtype in DECODED}
    if order is not None:
        order = contiguous(order, np.int64)
    wins = [
        contiguous(starts, np.int64),
        contiguous(ends, np.int64),
        contiguous(runs, np.int32),
        contiguous(iters, np.int64),
    ]
    unknown = library().ipt_decode(
        n,
        pointer(rec),
        None if order is None else pointer(order),
        len(wins[0]),
        *map(pointer, wins),
        *(pointer(cols[name][before:]) for name, _ in DECODED),
    )
    return cols, unknown


def scan_facts(
    rec: np.ndarray, cal_tid: int, cal_nr: int, copy_ids: Sequence[int], pids: Sequence[int]
) -> tuple[np.ndarray, bool, np.ndarray, np.ndarray]:
    """(indices of thread cal_tid's sys_enter/sys_exit of syscall cal_nr, whether a copy
    routine was entered, tids of the records of processes pids (repeats possible), switched-in
    tid << 16 | CPU of the switches (repeats possible)) of contiguous records; see
    ipt_scan_facts."""
    n = len(rec)
    copy_ids = np.ascontiguousarray(copy_ids, np.int64)
    pids = np.ascontiguousarray(pids, np.int64)
    calls, tids, pairs = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    ncalls, ntids, npairs, seen = _SIZE(0), _SIZE(0), _SIZE(0), ctypes.c_int(0)
    library().ipt_scan_facts(
        n, pointer(rec), cal_tid, cal_nr, len(copy_ids), pointer(copy_ids), len(pids), pointer(pids),
        pointer(calls), ctypes.byref(ncalls), ctypes.byref(seen),
        pointer(tids), ctypes.byref(ntids), pointer(pairs), ctypes.byref(npairs),
    )  # fmt: skip
    return calls[: ncalls.value], bool(seen.value), tids[: ntids.value], pairs[: npairs.value]


def lagged_late(rec: np.ndarray, tail: np.ndarray, before: int) -> tuple[np.ndarray, int, int]:
    """(the indices of the late records of a block of contiguous records, the latest time
    before the last len(tail) records after it, the cut); tail (int64, the times of the last
    records before the block, oldest first) moves on by the block, in place. See
    ipt_lagged_late."""
    late = np.empty(len(rec), np.int64)
    b, cut = ctypes.c_int64(before), ctypes.c_int64(0)
    k = library().ipt_lagged_late(
        len(rec), pointer(rec), len(tail), pointer(tail), ctypes.byref(b), ctypes.byref(cut), pointer(late)
    )
    return late[:k], b.value, cut.value


def release_memory() -> None:
    """Give the memory freed since back to the system: glibc keeps freed arrays in its heap
    (those below its mmap threshold, which it raises as large arrays come and go) and Arrow
    keeps its own pool, so a long run's passes one column after another would each leave
    their column's worth resident (seen: 11 B an iteration a column statistics)."""
    if "pyarrow" in sys.modules:
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its own allocator's rules
        ctypes.CDLL(None).malloc_trim(0)
