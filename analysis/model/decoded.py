"""The decoded model of a trace: its records as store/decode.c decoded them (events.parquet's
columns), read by what each field holds, and the tables made from them: system calls (one
rule pairs a sys_enter with its sys_exit), switches, wake-ups, the marks of a program's
iterations.

A record has two raw fields whose meaning depends on its type (bpf/ipctrace.h): this module
is the one place above store/ that knows which holds what. The breakdown, explain, the
whole-trace view, --rtt, the marks and the Perfetto exports read `Events.nr`, `.ret`,
`.prev_state`, `.in_hardirq`, ... with decode.c's next_tid and other_tid (`column(frame,
field)` of a frame), and the tables `calls()`, `switches()`, `wakeups()` and `marks()`; the C
timeline (native.thread_steps) takes the raw columns from `step_columns()`, and decodes each
record itself. Events is made once per piece of the trace (the breakdown's pass, the
whole-trace view and explain read the same object); its named fields are views of the raw
columns, or decoded once and kept. No other module above store/ tests a record's type: they ask
this one (Events.of, .at, .mask, .kind_at; of_type and the tables of a frame;
tests/unit/test_record_types.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from analysis.store import records
from analysis.store.records import NR_REPLACED  # timeline.h's, checked by store/layout.c

if TYPE_CHECKING:
    import numpy.typing as npt

RAW = ("aux", "a0")  # the stored columns of a record's two fields

# Which raw field holds each value, by the record types it is read of (bpf/ipctrace.h).
FIELDS = {
    "nr": "aux",  # sys_enter, sys_exit: the system call's number
    "arg": "a0",  # sys_enter: its first argument
    "ret": "a0",  # sys_exit: its return value (signed)
    "prev_state": "aux",  # switch: the previous task's state (0: runnable, so preempted)
    "wake_flags": "aux",  # waking, wakeup, wakeup_new: the target CPU | WAKE_IN_HARDIRQ
    "to_cpu": "aux",  # migrate: the destination CPU
    "from_cpu": "a0",  # migrate: the CPU it left
    "irq": "aux",  # irq_entry, irq_exit: the irq number
    "vector": "aux",  # softirq_entry/exit, vector_entry/exit: the vector
    "address": "a0",  # page_fault: the faulting address
    "func": "aux",  # func_entry, func_exit: the routine (records.FUNCS[func - 1])
    "steal_cpu": "aux",  # steal: the CPU
    "steal_ns": "a0",  # steal: ns the hypervisor took the CPU since the CPU's previous steal record
    "mark": "aux",  # mark: MARK_BEGIN or MARK_END
    "mark_name": "a0",  # mark: the address of the metric's name in the program (0: none)
    "task": "a0",  # switch: the next task; waking, wakeup, wakeup_new, fork: the other (tid | pid << 32)
}


def _decoded(field: str, raw: np.ndarray) -> np.ndarray:
    """The value `field` from its raw column (a view where it is the column itself)."""
    if field == "target_cpu":
        return raw & records.WAKE_CPU_MASK
    if field == "in_hardirq":
        return (raw & records.WAKE_IN_HARDIRQ) != 0
    return raw


# Values decoded from a raw field: their field.
DERIVED = {"target_cpu": "wake_flags", "in_hardirq": "wake_flags"}
# The record types whose task field names another task than the record's (decode.c's has_other_task).
OTHER_TASK = ("waking", "wakeup", "wakeup_new", "fork")


def stored(field: str) -> str:
    """The stored column (of events.parquet) that holds `field`: for reading a few columns."""
    return FIELDS[DERIVED.get(field, field)]


def column(frame: pd.DataFrame, field: str, dtype: npt.DTypeLike | None = None) -> np.ndarray:
    """`field` (FIELDS, DERIVED, or other_tid) of every row of an events frame."""
    if field == "other_tid":  # decode.c's column; unpacked here for a frame without it
        if "other_tid" in frame:
            return frame["other_tid"].to_numpy(dtype)
        return (frame[stored("task")].to_numpy(np.int64) & 0xFFFFFFFF).astype(dtype or np.int64)
    raw = frame[stored(field)].to_numpy(np.int64 if field in DERIVED else dtype)
    return _decoded(field, raw)


class Events:
    """The columns of events.parquet that the breakdown, explain and the views read, as numpy
    arrays in time order; each record's fields by what they hold (the properties)."""

    TYPES = records.TYPES
    COLUMNS = ("type", "ts", "aux", "a0", "tid", "cpu", "pid", "next_tid", "other_tid")

    def __init__(self, events: pd.DataFrame):
        t = events["type"]
        if not isinstance(t.dtype, pd.CategoricalDtype):
            t = t.astype("category")
        cats = [str(c) for c in t.cat.categories]
        codes = t.cat.codes.to_numpy()
        # Code of each known type name; types absent from this trace get -2, matching nothing.
        remap = {name: (cats.index(name) if name in cats else -2) for name in self.TYPES}
        self.code = remap
        self.type = codes
        # The stored integer types (tids are int32): views, not 64-bit copies of 10 M rows.
        self.ts = events["ts"].to_numpy(np.int64)
        self.aux = events["aux"].to_numpy(np.int64)
        self.a0 = events["a0"].to_numpy(np.int64)
        self.tid, self.cpu, self.pid = (events[c].to_numpy() for c in ("tid", "cpu", "pid"))
        # decode.c's: a switch's next task; a wake-up's waker, a fork's child (-1 elsewhere)
        self.next_tid = self._unpacked(events, "next_tid", ("switch",))
        self.other_tid = self._unpacked(events, "other_tid", OTHER_TASK)
        if len(self.ts) and np.any(self.ts[1:] < self.ts[:-1]):
            order = np.argsort(self.ts, kind="stable")
            for name in self.COLUMNS:
                setattr(self, name, getattr(self, name)[order])
        self._index: dict[tuple[str, ...], np.ndarray] = {}
        self._fields: dict[str, np.ndarray] = {}
        self._steal: dict[int, tuple[np.ndarray, np.ndarray]] | None = None
        self._names: dict[int, str] | None = None  # kind_at's: name by code

    def _unpacked(self, events: pd.DataFrame, name: str, types: tuple[str, ...]) -> np.ndarray:
        """A task unpacked from the task field, as decode.c does where the frame lacks it."""
        if name in events:
            return events[name].to_numpy()
        has = np.isin(self.type, [self.code[t] for t in types if self.code[t] >= 0])
        return np.where(has, self.a0 & 0xFFFFFFFF, -1).astype(np.int32)

    def _empty_like(self) -> Events:
        out = object.__new__(type(self))
        out.code = self.code
        out._index, out._fields = {}, {}
        out._steal = None
        out._names = None
        return out

    def take(self, rows: npt.ArrayLike) -> Events:
        """These events at the given rows (ascending, so still in time order): a thread's own
        records and the switches to it make the same thread_timeline as all of them do."""
        sub = self._empty_like()
        for name in self.COLUMNS:
            setattr(sub, name, getattr(self, name)[rows])
        return sub

    @classmethod
    def joined(cls, first: Events, then: Events) -> Events:
        """The events of `first`, then those of `then` (none earlier), both on the same type codes."""
        if first.code != then.code:
            raise ValueError("Events.joined: the two have different type codes")
        out = first._empty_like()
        for name in cls.COLUMNS:
            setattr(out, name, np.concatenate((getattr(first, name), getattr(then, name))))
        return out

    def _of_types(self, typ: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
        """Mask over typ (codes): which are of the given types. A comparison per type, which
        numpy vectorises (np.isin is slower for up to half a dozen codes)."""
        codes = sorted({self.code[n] for n in names if self.code[n] >= 0})
        if len(codes) == 1:  # the common case, one comparison (at() is called per thread and piece)
            return typ == codes[0]
        out = np.zeros(len(typ), bool)
        for code in codes:
            out |= typ == code
        return out

    def of(self, *names: str) -> np.ndarray:
        """Row indices of the records of the given types (cached)."""
        key = tuple(sorted(names))
        if key not in self._index:
            self._index[key] = np.flatnonzero(self._of_types(self.type, names))
        return self._index[key]

    def mask(self, *names: str) -> np.ndarray:
        """Mask of the records of the given types (of's rows as a mask)."""
        out = np.zeros(len(self.type), bool)
        out[self.of(*names)] = True
        return out

    def at(self, rows: np.ndarray, *names: str) -> np.ndarray:
        """Mask over rows (indices): which of the records there are of the given types."""
        return self._of_types(self.type[rows], names)

    def thread_type_keys(self, rows: np.ndarray) -> np.ndarray:
        """One int64 key per row of its (thread, type): to find a thread's last record of each type."""
        return self.tid[rows].astype(np.int64) * 256 + self.type[rows].astype(np.int64) + 1

    def kind_at(self, row: int) -> str | None:
        """The type of the record at row by its name (None: a code no type has)."""
        if self._names is None:
            self._names = {code: name for name, code in self.code.items() if code >= 0}
        return self._names.get(int(self.type[row]))

    def steal_spans(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """{cpu: (starts, ends)} of the hypervisor's steal there, sorted and disjoint (cached).
        A steal record says how much the CPU's count grew since the CPU's last record (steal_ns),
        not when: its span is placed just before it, [ts - steal_ns, ts) (the count is read at
        each switch and interrupt exit, so the steal lies between the record and the read
        before). A growth larger than the time since the CPU's previous record (the guest
        updates its copy of the clock only now and then) reaches back over that record's span:
        the earlier span is then moved back to end where the later one starts, so every ns
        counts once."""
        if self._steal is None:
            i = self.of("steal")
            self._steal = {}
            if len(i):
                end, length, cpu = self.ts[i], np.maximum(self.steal_ns[i], 0), self.steal_cpu[i]
                for c in np.unique(cpu).tolist():
                    m = cpu == c
                    self._steal[int(c)] = _packed(end[m], length[m])
        return self._steal

    def step_columns(
        self,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ts, type, tid, next_tid, cpu and the two raw fields): what the C timeline
        (native.thread_steps) reads, which decodes each record itself."""
        return self.ts, self.type, self.tid, self.next_tid, self.cpu, self.aux, self.a0

    def _field(self, field: str) -> np.ndarray:
        got = self._fields.get(field)
        if got is None:
            got = self._fields[field] = _decoded(field, getattr(self, stored(field)))
        return got

    # Each a column over all rows, meaningful at the rows of the types FIELDS names.
    nr = property(lambda self: self._field("nr"), doc="sys_enter, sys_exit: the system call's number")
    arg = property(lambda self: self._field("arg"), doc="sys_enter: the first argument")
    ret = property(lambda self: self._field("ret"), doc="sys_exit: the return value")
    prev_state = property(lambda self: self._field("prev_state"), doc="switch: 0 if the task left runnable")
    target_cpu = property(lambda self: self._field("target_cpu"), doc="wake-ups: the CPU the wakee is queued on")
    in_hardirq = property(
        lambda self: self._field("in_hardirq"), doc="wake-ups: the waker's CPU was in a hard interrupt"
    )
    to_cpu = property(lambda self: self._field("to_cpu"), doc="migrate: the destination CPU")
    from_cpu = property(lambda self: self._field("from_cpu"), doc="migrate: the CPU left")
    irq = property(lambda self: self._field("irq"), doc="irq_entry, irq_exit: the irq number")
    vector = property(lambda self: self._field("vector"), doc="softirq and x86 vector records: the vector")
    address = property(lambda self: self._field("address"), doc="page_fault: the address")
    func = property(lambda self: self._field("func"), doc="func_entry, func_exit: the routine's id")
    steal_cpu = property(lambda self: self._field("steal_cpu"), doc="steal: the CPU")
    steal_ns = property(lambda self: self._field("steal_ns"), doc="steal: ns taken since the CPU's last one")


# Type codes as in the events' own categories (records.TYPES): every piece on the same codes.
TYPE_CODES = {name: k for k, name in enumerate(records.TYPES)}


def on_type_codes(ev: Events) -> Events:
    """ev with its type column on TYPE_CODES (events of a frame whose categories are other ones)."""
    if ev.code == TYPE_CODES:
        return ev
    out = ev.take(np.arange(len(ev.ts)))
    out.type = np.full(len(ev.ts), -1, np.int8)
    for name, code in ev.code.items():
        if code >= 0:
            out.type[ev.type == code] = TYPE_CODES[name]
    out.code = dict(TYPE_CODES)
    return out


def _packed(ts: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spans of the given lengths, each ending at its record's time ts (ascending) or, where
    the next one reaches back over it, where that one starts: (starts, ends), disjoint, their
    lengths kept. end[k] = min(ts[k], start[k + 1]); with S[k] the sum of length[k:], that is
    min over j >= k of (ts[j] + S[j + 1]), less S[k + 1]."""
    s_after = np.append(np.cumsum(length[::-1])[::-1], 0)[1:]  # S[k + 1]
    end = np.minimum.accumulate((ts + s_after)[::-1])[::-1] - s_after
    return end - length, end


# --- system calls ---------------------------------------------------------------------------


def sys_rows(ev: Events, tids: npt.ArrayLike | None = None) -> np.ndarray:
    """The rows of the sys_enter and sys_exit records (of the threads tids, or all), by
    thread and then time: what call_pairs takes."""
    i = ev.of("sys_enter", "sys_exit")
    if tids is not None:
        i = i[np.isin(ev.tid[i], tids)]
    return i[np.argsort(ev.tid[i], kind="stable")]


def call_pairs(ev: Events, rows: np.ndarray) -> np.ndarray:
    """The one rule that makes system calls of records. rows: sys_enter and sys_exit rows,
    each thread's in time order (sys_rows). The positions k where rows[k] is a sys_enter and
    rows[k + 1] its sys_exit: the thread's next such record, of the same number. A thread is
    in one system call at a time (they do not nest), so an enter followed by anything else
    was cut (its exit lost, or after the trace's end) and an exit after anything but its
    enter lost its enter: neither is a call. An exit numbered NR_REPLACED is its enter's."""
    enter = ev.type[rows] == ev.code["sys_enter"]
    nr, tid = ev.nr[rows], ev.tid[rows]
    same = (nr[:-1] == nr[1:]) | (nr[1:] == NR_REPLACED)
    return np.flatnonzero(enter[:-1] & ~enter[1:] & same & (tid[:-1] == tid[1:]))


@dataclass(frozen=True)
class Calls:
    """Completed system calls (call_pairs), by thread and then time."""

    tid: np.ndarray
    pid: np.ndarray
    enter: np.ndarray  # ts of sys_enter
    exit: np.ndarray  # ts of sys_exit
    cpu: np.ndarray  # CPU at entry
    nr: np.ndarray
    arg: np.ndarray  # first argument
    ret: np.ndarray
    unmatched: int  # sys records in no call (cut at the trace's ends, or a record lost)

    def of_thread(self, tid: int) -> Calls:
        """The calls of one thread."""
        a, b = np.searchsorted(self.tid, tid, "left"), np.searchsorted(self.tid, tid, "right")
        return Calls(**{f: getattr(self, f)[a:b] for f in _CALL_COLUMNS}, unmatched=0)


_CALL_COLUMNS = ("tid", "pid", "enter", "exit", "cpu", "nr", "arg", "ret")


def calls(ev: Events, tids: npt.ArrayLike | None = None) -> Calls:
    """The system calls of the threads tids (all: None), by thread and then time."""
    rows = sys_rows(ev, tids)
    k = call_pairs(ev, rows)
    a, b = rows[k], rows[k + 1]
    return Calls(
        tid=ev.tid[a].astype(np.int64),
        pid=ev.pid[a].astype(np.int64),
        enter=ev.ts[a],
        exit=ev.ts[b],
        cpu=ev.cpu[a].astype(np.int64),
        nr=ev.nr[a],
        arg=ev.arg[a],
        ret=ev.ret[b],
        unmatched=len(rows) - 2 * len(k),
    )


@dataclass(frozen=True)
class Enters:
    """sys_enter records by thread and then time: the call a thread is in, or was in last (its
    exit may be still to come, which calls() leaves out)."""

    tid: np.ndarray
    ts: np.ndarray
    nr: np.ndarray

    def of_thread(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(times, numbers) of one thread's sys_enter records."""
        a, b = np.searchsorted(self.tid, tid, "left"), np.searchsorted(self.tid, tid, "right")
        return self.ts[a:b], self.nr[a:b]


def enters(ev: Events) -> Enters:
    """The sys_enter records of ev, by thread and then time."""
    i = ev.of("sys_enter")
    i = i[np.argsort(ev.tid[i], kind="stable")]
    return Enters(tid=ev.tid[i], ts=ev.ts[i], nr=ev.nr[i])


# --- switches and wake-ups ------------------------------------------------------------------


@dataclass(frozen=True)
class Switches:
    """Context switches (switch records) in time order."""

    ts: np.ndarray
    cpu: np.ndarray
    prev_tid: np.ndarray  # the task switched out
    next_tid: np.ndarray  # the task switched in (0: idle)
    prev_state: np.ndarray  # the task switched out: 0 runnable (preempted), else asleep


def switches(ev: Events) -> Switches:
    """The switches of ev."""
    i = ev.of("switch")
    return Switches(
        ts=ev.ts[i],
        cpu=ev.cpu[i].astype(np.int64),
        prev_tid=ev.tid[i].astype(np.int64),
        next_tid=ev.next_tid[i].astype(np.int64),
        prev_state=ev.prev_state[i],
    )


WAKE_TYPES = ("waking", "wakeup", "wakeup_new")


@dataclass(frozen=True)
class Wakeups:
    """Wake-up records in time order: sched_waking (on the waker's CPU, where a wake-up starts),
    sched_wakeup and sched_wakeup_new (the wakee queued on its target CPU)."""

    ts: np.ndarray
    wakee: np.ndarray
    waker: np.ndarray  # the task that woke it (in a hard interrupt: the one interrupted)
    target_cpu: np.ndarray
    in_hardirq: np.ndarray  # the waker's CPU was in a hard interrupt or vector handler


def wakeups(ev: Events, kinds: tuple[str, ...] = WAKE_TYPES) -> Wakeups:
    """The wake-up records of the types kinds."""
    i = ev.of(*kinds)
    return Wakeups(
        ts=ev.ts[i],
        wakee=ev.tid[i].astype(np.int64),
        waker=ev.other_tid[i].astype(np.int64),
        target_cpu=ev.target_cpu[i],
        in_hardirq=ev.in_hardirq[i],
    )


# --- marks ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Marks:
    """Mark records (a program's iteration probes) by thread and then time."""

    tid: np.ndarray
    ts: np.ndarray
    cpu: np.ndarray
    kind: np.ndarray  # records' MARK_BEGIN (1) or MARK_END (2)
    name: np.ndarray  # the address of the metric's name in the program (0: none)


def marks(frame: pd.DataFrame, rows: np.ndarray) -> Marks:
    """The marks at rows (a mask) of an events frame."""
    m = frame.loc[rows, ["tid", "ts", stored("mark"), stored("mark_name"), "cpu"]]
    m = m.sort_values(["tid", "ts"], kind="stable")
    return Marks(
        tid=m["tid"].to_numpy(),
        ts=m["ts"].to_numpy(np.int64),
        cpu=m["cpu"].to_numpy(),
        kind=column(m, "mark"),
        name=column(m, "mark_name", np.int64),
    )


# --- tables of an events frame (one piece, or the whole trace), read by run/ and render/ -------


def of_type(frame: pd.DataFrame, *names: str) -> np.ndarray:
    """Mask (a new array) of the records of an events frame, or of a table of some of its
    columns, whose type is one of names: a categorical's codes compared as integers."""
    typ = frame["type"]
    out = np.zeros(len(typ), bool)
    if isinstance(typ.dtype, pd.CategoricalDtype):
        categories = [str(c) for c in typ.cat.categories]
        codes = typ.cat.codes.to_numpy()
        for name in names:
            if name in categories:
                out |= codes == categories.index(name)
        return out
    for name in names:
        out |= (typ == name).to_numpy()
    return out


def forked_tids(frame: pd.DataFrame) -> np.ndarray:
    """The threads the fork records of an events frame started (their tids)."""
    return column(frame, "other_tid")[(frame["type"] == "fork").to_numpy()]


def fork_parents(frame: pd.DataFrame) -> dict[int, int]:
    """{child pid: parent pid} of the fork records of an events frame (a thread's fork names its
    process: the child's tgid is the task field's high half)."""
    fork = (frame["type"] == "fork").to_numpy()
    return dict(zip((column(frame, "task", np.int64)[fork] >> 32).tolist(), frame["pid"].to_numpy()[fork].tolist()))


def process_exits(frame: pd.DataFrame) -> np.ndarray:
    """Mask of the exit records of an events frame that end a process (its main thread's)."""
    return (frame["type"] == "exit").to_numpy() & (frame["tid"].to_numpy() == frame["pid"].to_numpy())


def calling_tids(frame: pd.DataFrame) -> np.ndarray:
    """The threads with sys_enter records in an events frame (sorted): those that made system
    calls, which only followed threads record."""
    return np.unique(frame["tid"].to_numpy()[(frame["type"] == "sys_enter").to_numpy()])


def successful_returns(frame: pd.DataFrame, numbers: npt.ArrayLike) -> np.ndarray:
    """Mask of the sys_exit records of an events frame that return 0 from a system call of the
    given numbers."""
    return (
        (frame["type"] == "sys_exit").to_numpy() & np.isin(column(frame, "nr"), numbers) & (column(frame, "ret") == 0)
    )


def syscall_tids(frame: pd.DataFrame) -> set[int]:
    """The threads with system call records in an events frame (the tracer records only the
    followed threads' calls; a switch record names whatever task the CPU ran)."""
    t = frame["type"]
    if isinstance(t.dtype, pd.CategoricalDtype):  # the codes: comparing the names took 180 ns a record
        names = [str(c) for c in t.cat.categories]
        calls = np.isin(t.cat.codes.to_numpy(), [names.index(x) for x in ("sys_enter", "sys_exit") if x in names])
    else:
        typ = t.to_numpy()
        calls = (typ == "sys_enter") | (typ == "sys_exit")
    return set(np.unique(frame["tid"].to_numpy()[calls]).tolist())


def type_counts(frame: pd.DataFrame) -> np.ndarray:
    """Records of each type (records.TYPES order) in an events frame."""
    t = frame["type"]
    codes = t.cat.codes.to_numpy() if isinstance(t.dtype, pd.CategoricalDtype) else None
    if codes is None or list(t.cat.categories) != list(records.TYPES):
        counts = t.astype(str).value_counts()
        return np.array([int(counts.get(name, 0)) for name in records.TYPES], np.int64)
    return np.bincount(codes[codes >= 0], minlength=len(records.TYPES))[: len(records.TYPES)]


def last_of_each(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Of rows with their keys, the last row of each key (in no particular order). Backwards,
    factorize numbers the keys as they first come (by hashing, not np.unique's sort): where
    its running maximum rises, a key's last row."""
    codes, _ = pd.factorize(keys[::-1])
    return rows[::-1][np.flatnonzero(np.diff(np.maximum.accumulate(codes), prepend=-1) > 0)]


def anchor_kinds(
    switch: np.ndarray, call: np.ndarray, tid: np.ndarray, next_tid: np.ndarray, cpu: np.ndarray
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The kinds of record whose last one of each key anchors a state, of records (switch,
    call: which are switches, which sys_enter or sys_exit; tid, next_tid, cpu: their columns),
    as (rows, their keys): a thread's switch out, a thread's switch in, a CPU's switch, a
    thread's system call. The one definition of anchor_rows and RecordsAround."""
    sw, sc = np.flatnonzero(switch), np.flatnonzero(call)
    return [(sw, tid[sw]), (sw, next_tid[sw]), (sw, cpu[sw]), (sc, tid[sc])]


def anchor_rows(
    switch: np.ndarray, call: np.ndarray, tid: np.ndarray, next_tid: np.ndarray, cpu: np.ndarray
) -> np.ndarray:
    """Of records in time order (anchor_kinds' columns), the rows of the last switch of each
    thread (out or in) and of each CPU, and of each thread's last system call: after them,
    every thread's and CPU's state is what all the records give it (model/streaming's pieces),
    sorted."""
    kinds = anchor_kinds(switch, call, tid, next_tid, cpu)
    rows = [last_of_each(key, at) for at, key in kinds if len(at)]
    return np.unique(np.concatenate(rows)) if rows else np.zeros(0, np.int64)


def named_tids(recs: np.ndarray) -> set[int]:
    """The tasks records (REC) name: those recording, switched to, waking or woken, forked (the
    tid, next_tid and other_tid decode.c gives them), from the raw columns (to_frame of a kept
    window took the step 1.1 ms a request)."""
    code = records.TYPE_CODE
    other = np.isin(recs["type"], [code[t] for t in ("switch", "waking", "wakeup", "wakeup_new", "fork")])
    lo = (recs["a0"][other] & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    got = np.sort(np.concatenate((recs["tid"].astype(np.int64), lo.astype(np.int64))))
    got = got[np.r_[True, got[1:] != got[:-1]] & (got > 0)] if len(got) else got
    return set(got.tolist())


class RecordsAround:
    """Of records (REC, in the file's order), for a request, those from lead_ns before its start
    to trail_ns after its end (what run/watch keeps of a request), and of those before, their
    anchor_rows (in time order): the kept request's analysis finds every thread's state at its start as the step
    did, from a window of a few thousand records, not the tens of thousands of a lead long
    enough to hold them (a ping-pong at full speed writes ~1 M records a second). For many
    requests of the same records, each in O(log n): the records put in time order once, and,
    for each kind of anchor (a thread's switch out or in, a CPU's switch, a thread's system
    call), their places in that order grouped by key, so that the last one of each key before a
    time is one binary search (recomputed for each request, the anchors took 18 ms of a step's
    CPU per kept request of a 350k-record piece)."""

    def __init__(self, recs: np.ndarray) -> None:
        self.recs = recs
        ts = recs["ts"].view(np.int64)
        self.order = np.argsort(ts, kind="stable")  # the file's order is per CPU
        self.ts = ts[self.order]
        typ = recs["type"][self.order]
        code = records.TYPE_CODE
        kinds = anchor_kinds(
            typ == code["switch"],
            (typ == code["sys_enter"]) | (typ == code["sys_exit"]),
            recs["tid"][self.order],
            recs["a0"][self.order] & 0xFFFFFFFF,  # a switch's next_tid (decode.c)
            recs["cpu"][self.order],
        )
        self.n = len(ts) + 1
        # per kind: (key group * n + place in time order), sorted; where each group begins
        self.kinds: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for at, key in kinds:
            if not len(at):
                continue
            _, group = np.unique(key, return_inverse=True)
            placed = np.sort(group.astype(np.int64) * self.n + at)
            bases = np.arange(int(group.max()) + 1, dtype=np.int64) * self.n
            self.kinds.append((placed, bases, np.searchsorted(placed, bases)))

    def around(self, start: int, end: int, lead_ns: int, trail_ns: int) -> np.ndarray:
        """The records of the request from start to end, with lead_ns and trail_ns around it."""
        first = int(np.searchsorted(self.ts, start - lead_ns, side="left"))  # the records before: [0, first)
        last = int(np.searchsorted(self.ts, end + trail_ns, side="right"))
        anchors = [np.zeros(0, np.int64)]
        for placed, bases, begins in self.kinds:
            j = np.searchsorted(placed, bases + first, side="left") - 1  # each key's last before first
            anchors.append(placed[j[j >= begins]] % self.n)
        # the anchors are before first: none is inside; one may anchor several kinds
        before = np.unique(np.concatenate(anchors))
        return self.recs[np.sort(np.concatenate((self.order[first:last], self.order[before])))]
