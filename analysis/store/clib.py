"""The analysis' C library (OUTPUT/libipctrace-analysis.so, built by make from
analysis/store/decode.c, analysis/store/layout.c and analysis/model/timeline.c): loading it,
checking that it was built from the record definitions, layouts and constants the Python side
reads (records.py's names, flags, dtypes of the binary files and their magics),
the ctypes structures of its passes' arguments built from its own layout table, and its decoder
of events.bin's records into columns. model/native.py is the face of its passes over the events."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import operator
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis import OUTPUT
from analysis.errors import UsageError
from analysis.store import records

if TYPE_CHECKING:
    import numpy.typing as npt

_P = ctypes.c_void_p
_SIZE = ctypes.c_size_t


class _Field(ctypes.Structure):
    """An entry of layout.c's table (struct ipt_field): the one layout Python states itself,
    to read the others."""

    _fields_ = [
        ("layout", ctypes.c_char_p),
        ("name", ctypes.c_char_p),
        ("offset", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("depth", ctypes.c_uint32),
        ("kind", ctypes.c_char),
        ("elem", ctypes.c_uint32),
        ("count", ctypes.c_uint32),
        ("total", ctypes.c_uint32),
    ]


class _Constant(ctypes.Structure):
    """An entry of layout.c's constants (struct ipt_constant)."""

    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_int64), ("text", ctypes.c_char_p)]


# The library's ABI, argument by argument as the C declares them; a string is a pointer to the
# struct of that name (analysis/model/timeline.h), whose ctypes type comes from the layout table.
# fmt: off
_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "ipt_in_time_order": (ctypes.c_int, [_SIZE, _P]),
    "ipt_decode": (_SIZE, ["ipt_records", "ipt_windows", "ipt_decoded"]),
    "ipt_thread_steps": (ctypes.c_long, ["ipt_events", "ipt_step_options", "ipt_thread_out"]),
    "ipt_thread_finish": (_SIZE, ["ipt_finish_in", "ipt_finish_out"]),
    "ipt_release_scratch": (None, []),
    "ipt_merge_steps": (_SIZE, [ctypes.c_int, _P, _P, _P, _P, _P, _P]),
    "ipt_causal": (_SIZE, ["ipt_causal_in", "ipt_causal_options", "ipt_causal_out"]),
    "ipt_count_upto": (None, [_SIZE, _P, _SIZE, _P, _P]),
    "ipt_keyed_sequence": (ctypes.c_long, [_SIZE, _P, _P, _SIZE, _P, _P, _P, _P, _P]),
    "ipt_deliveries": (ctypes.c_long, [ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _P, _SIZE, _P,
                                       _P, _P, _P]),
    "ipt_time_in": (None, [_SIZE, _P, ctypes.c_int, _P, _SIZE, _P, _P, _P]),
    "ipt_scan_facts": (None, ["ipt_scan_in", "ipt_scan_out"]),
    "ipt_lagged_late": (_SIZE, [_SIZE, _P, _SIZE, _P, ctypes.POINTER(ctypes.c_int64),
                                ctypes.POINTER(ctypes.c_int64), _P]),
    "ipt_name": (ctypes.c_char_p, [ctypes.c_int, ctypes.c_int]),
    "ipt_layout": (ctypes.POINTER(_Field), [ctypes.c_int]),
    "ipt_constant": (ctypes.POINTER(_Constant), [ctypes.c_int]),
}
# fmt: on
_lib = None
_layouts: dict[str, Layout] = {}  # the loaded library's, by struct name


def library() -> ctypes.CDLL:
    global _lib, _layouts
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
            fn.restype, fn.argtypes = restype, [_P if isinstance(a, str) else a for a in argtypes]
        if c_tables(lib) != records.TABLES:
            raise UsageError(
                f"{path} was built from other record types or states than analysis/store/records.py "
                "names; rebuild it with 'make'"
            )
        tables = c_layouts(lib), c_constants(lib)
        if differs := layout_differences(*tables):
            raise UsageError(
                f"{path} was built from other layouts or constants than analysis/ reads ({differs[0]}); "
                "rebuild it with 'make', or make analysis/store/records.py say what the C headers do"
            )
        for name, (_, argtypes) in _SIGNATURES.items():  # the structs' own pointer types
            if any(isinstance(a, str) for a in argtypes):
                getattr(lib, name).argtypes = [
                    ctypes.POINTER(_structure(tables[0][a])) if isinstance(a, str) else a for a in argtypes
                ]
        _lib, _layouts = lib, tables[0]
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


@dataclass(frozen=True)
class Field:
    """A field of a C struct as layout.c's table gives it: bytes [offset, offset + size);
    depth 0 a value (count > 1: an array of them), 1 a pointer to values, 2 a pointer to
    pointers to values; the value's kind ('i', 'u', 'f', 'S' char, 'R' struct rec) and size
    (elem)."""

    name: str
    offset: int
    size: int
    depth: int
    kind: str
    elem: int
    count: int

    def value_dtype(self) -> np.dtype:
        return np.dtype(f"S{self.count}" if self.kind == "S" else f"<{self.kind}{self.elem}")


@dataclass(frozen=True)
class Layout:
    """A C struct (its name without 'struct'), its size and its fields in order."""

    name: str
    size: int
    fields: tuple[Field, ...]

    def dtype(self) -> np.dtype:
        """The numpy dtype of a record of this layout (its fields values or arrays of them)."""
        formats: list[Any] = []
        for f in self.fields:
            assert f.depth == 0, f"{self.name}.{f.name} is a pointer: no record field"
            dt = f.value_dtype()
            formats.append(dt if f.count == 1 or f.kind == "S" else (dt, (f.count,)))
        return np.dtype(
            {
                "names": [f.name for f in self.fields],
                "formats": formats,
                "offsets": [f.offset for f in self.fields],
                "itemsize": self.size,
            }
        )


def c_layouts(lib: ctypes.CDLL | None = None) -> dict[str, Layout]:
    """The C side's layouts (layout.c's ipt_layout), by struct name."""
    lib = lib or library()
    fields: dict[str, list[Field]] = {}
    sizes: dict[str, int] = {}
    i = 0
    while p := lib.ipt_layout(i):
        e = p.contents
        name = e.layout.decode().removeprefix("struct ")
        fields.setdefault(name, []).append(
            Field(e.name.decode(), e.offset, e.size, e.depth, e.kind.decode(), e.elem, e.count)
        )
        sizes[name] = e.total
        i += 1
    return {name: Layout(name, sizes[name], tuple(f)) for name, f in fields.items()}


def c_constants(lib: ctypes.CDLL | None = None) -> dict[str, int | bytes]:
    """The C side's constants (layout.c's ipt_constant): a number, or a magic's bytes."""
    lib = lib or library()
    out: dict[str, int | bytes] = {}
    i = 0
    while p := lib.ipt_constant(i):
        e = p.contents
        out[e.name.decode()] = e.text if e.text is not None else e.value
        i += 1
    return out


def _first_difference(py: np.dtype, c: np.dtype) -> str:
    """Where two record dtypes first differ, in words: a field's name, place or type, or the size."""
    assert py.fields is not None and c.fields is not None
    for i, (a, b) in enumerate(zip(py.names or (), c.names or ())):
        (ta, oa), (tb, ob) = py.fields[a][:2], c.fields[b][:2]
        if (a, oa, ta) != (b, ob, tb):
            return f"has {a} ({ta.str}) at byte {oa} as its field {i}, the header {b} ({tb.str}) at byte {ob}"
    if len(py.names or ()) != len(c.names or ()):
        return f"has {len(py.names or ())} fields, the header {len(c.names or ())}"
    return f"is {py.itemsize} bytes, the header's {c.itemsize}"


def layout_differences(layouts: dict[str, Layout], constants: dict[str, int | bytes]) -> list[str]:
    """Where the Python side (records.py's LAYOUTS and CONSTANTS, and the ctypes structures
    built from the table) and the C side's tables disagree, one phrase each; [] when they agree."""
    out = []
    for name, dtype in records.LAYOUTS.items():
        if name not in layouts:
            out.append(f"records.py mirrors struct {name}, which the library does not export")
        elif dtype != layouts[name].dtype():
            out.append(f"records.py's struct {name} {_first_difference(dtype, layouts[name].dtype())}")
    for name, value in constants.items():
        if name not in records.CONSTANTS:
            out.append(f"the library exports {name}, which records.py does not mirror")
        elif records.CONSTANTS[name] != value:
            out.append(f"records.py's {name} is {records.CONSTANTS[name]!r}, the header's {value!r}")
    out += [f"records.py mirrors {name}, which the library does not export"
            for name in records.CONSTANTS if name not in constants]  # fmt: skip
    for layout in layouts.values():
        cls = _structure(layout)
        if ctypes.sizeof(cls) != layout.size or any(
            getattr(cls, f.name).offset != f.offset or getattr(cls, f.name).size != f.size for f in layout.fields
        ):
            out.append(f"the ctypes structure of struct {layout.name} does not lay it out as the C does")
    return out


_CTYPES = {
    ("i", 1): ctypes.c_int8,
    ("i", 2): ctypes.c_int16,
    ("i", 4): ctypes.c_int32,
    ("i", 8): ctypes.c_int64,
    ("u", 1): ctypes.c_uint8,
    ("u", 2): ctypes.c_uint16,
    ("u", 4): ctypes.c_uint32,
    ("u", 8): ctypes.c_uint64,
    ("f", 4): ctypes.c_float,
    ("f", 8): ctypes.c_double,
    ("S", 1): ctypes.c_char,
}


@functools.cache
def _structure(layout: Layout) -> type[ctypes.Structure]:
    """The ctypes structure of a layout (pointers as void *), built from the table."""
    fields: list[tuple[str, Any]] = []
    for f in layout.fields:
        t: Any = _P if f.depth else _CTYPES[f.kind, f.elem]
        fields.append((f.name, t * f.count if f.count > 1 else t))
    return type(layout.name, (ctypes.Structure,), {"_fields_": fields})


@functools.cache
def _plan(layout: Layout) -> tuple[type[ctypes.Structure], dict[str, tuple[int, str, np.dtype | None]]]:
    """A layout's ctypes structure and, per field, (depth, kind, the dtype of the arrays a
    pointer field takes: R is struct rec, records.REC, which the load checked)."""
    plan = {
        f.name: (f.depth, f.kind, None if f.depth == 0 else records.REC if f.kind == "R" else f.value_dtype())
        for f in layout.fields
    }
    return _structure(layout), plan


def pointer_fields(name: str) -> dict[str, np.dtype]:
    """The pointer fields of the C struct `name` and the dtype of the arrays they take."""
    library()
    return {
        field: want for field, (depth, _, want) in _plan(_layouts[name])[1].items() if depth == 1 and want is not None
    }


def struct(name: str, **values: Any) -> ctypes.Structure:
    """An instance of the C struct `name` (analysis/model/timeline.h) with every field set by
    name, for the library's functions: numbers as they are; a pointer field takes a contiguous
    numpy array of the type the C reads (None: NULL); a pointer to pointers a sequence of
    them. A field left out, one the struct lacks or an array of another type is a TypeError
    (two arguments swapped cannot pass unseen). The instance keeps what it points to alive."""
    library()
    cls, plan = _plan(_layouts[name])
    if plan.keys() != values.keys():
        raise TypeError(
            f"struct {name}: missing {sorted(plan.keys() - values.keys())}, unknown {sorted(values.keys() - plan.keys())}"
        )
    obj = cls()
    keep: list[Any] = []
    for field, (depth, kind, want) in plan.items():
        v = values[field]
        if depth == 0:
            setattr(obj, field, float(v) if kind == "f" else operator.index(v))
        elif v is not None:
            arrays = [v] if depth == 1 else list(v)
            for a in arrays:
                if not isinstance(a, np.ndarray) or a.dtype != want or not a.flags.c_contiguous:
                    what = f"{a.dtype} array" if isinstance(a, np.ndarray) else type(a).__name__
                    raise TypeError(f"struct {name}.{field}: a {what}, the C reads contiguous {want}")
            keep += arrays
            if depth == 1:
                setattr(obj, field, v.ctypes.data)
            else:
                table = (_P * len(arrays))(*[a.ctypes.data for a in arrays])
                keep.append(table)
                setattr(obj, field, ctypes.addressof(table))
    obj._keep = keep
    return obj


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


def decoded_columns() -> tuple[tuple[str, np.dtype], ...]:
    """ipt_decode's columns and their types, in its order (struct ipt_decoded)."""
    library()
    return tuple((f.name, f.value_dtype()) for f in _layouts["ipt_decoded"].fields)


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
    taken = None if order is None else contiguous(order, np.int64)
    n = len(rec) if taken is None else len(taken)  # order may take some of the records only
    cols = {name: np.empty(before + n, dtype) for name, dtype in decoded_columns()}
    records = struct("ipt_records", n=n, rec=rec, order=taken)
    start = contiguous(starts, np.int64)
    windows = struct(
        "ipt_windows",
        n=len(start),
        start=start,
        end=contiguous(ends, np.int64),
        run=contiguous(runs, np.int32),
        iter=contiguous(iters, np.int64),
    )
    out = struct("ipt_decoded", **{name: col[before:] for name, col in cols.items()})
    unknown = library().ipt_decode(ctypes.byref(records), ctypes.byref(windows), ctypes.byref(out))
    return cols, unknown


def scan_facts(
    rec: np.ndarray, cal_tid: int, cal_nr: int, copy_ids: Sequence[int], pids: Sequence[int]
) -> tuple[np.ndarray, bool, np.ndarray, np.ndarray]:
    """(indices of thread cal_tid's sys_enter/sys_exit of syscall cal_nr, whether a copy
    routine was entered, tids of the records of processes pids (repeats possible), switched-in
    tid << 16 | CPU of the switches (repeats possible)) of contiguous records; see
    ipt_scan_facts."""
    n = len(rec)
    copy_id_column = np.ascontiguousarray(copy_ids, np.int64)
    pid_column = np.ascontiguousarray(pids, np.int64)
    calls, tids, pairs = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    inputs = struct(
        "ipt_scan_in",
        n=n,
        rec=rec,
        cal_tid=cal_tid,
        cal_nr=cal_nr,
        ncopy=len(copy_id_column),
        copy_ids=copy_id_column,
        npids=len(pid_column),
        pids=pid_column,
    )
    out = struct("ipt_scan_out", calls=calls, ncalls=0, tids=tids, ntids=0, pairs=pairs, npairs=0, copy_seen=0)
    library().ipt_scan_facts(ctypes.byref(inputs), ctypes.byref(out))
    return calls[: out.ncalls], bool(out.copy_seen), tids[: out.ntids], pairs[: out.npairs]


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


RELEASE_MIN_ROWS = 100_000  # below this, the columns freed are too small to hand back


def release_memory_of(rows: int) -> None:
    """release_memory() after columns of rows values went, where they are worth it: it walks
    the heap (ms in a large process), and a few thousand values' columns leave little behind
    (`ipctrace watch`'s keeper analyses one request at a time)."""
    if rows >= RELEASE_MIN_ROWS:
        release_memory()


def release_memory() -> None:
    """Give the memory freed since back to the system: glibc keeps freed arrays in its heap
    (those below its mmap threshold, which it raises as large arrays come and go) and Arrow
    keeps its own pool, so a long run's passes one column after another would each leave
    their column's worth resident (seen: 11 B an iteration a column statistics)."""
    if "pyarrow" in sys.modules:
        sys.modules["pyarrow"].default_memory_pool().release_unused()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: its own allocator's rules
        ctypes.CDLL(None).malloc_trim(0)
