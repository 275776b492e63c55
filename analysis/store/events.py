"""events.bin (written by .output/ipctrace-loader) -> DataFrame -> events.parquet.

The record layout is `struct rec` of bpf/ipctrace.h: 32 bytes, read as one numpy
structured dtype (records.REC, checked against the header's when the C library loads),
decoded into columns in one pass by analysis/store/decode.c. Each event is placed in the
timed iteration of the measuring thread whose window [t_start_ns, t_end_ns] contains its
timestamp; -1 when it falls in none (warm-up, set-up, gaps).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pandas as pd

from analysis.errors import MeasureError, UsageError
from analysis.store import clib, records, safeio, schema
from analysis.store.itercolumns import WindowCursor
from analysis.store.results import read_binary_header, write_parquet

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.parquet as pq

# events.bin's layout (bpf/ipctrace.h, as records.py states it and clib.py checks it)
HEADER, REC, MAGIC, VERSION = records.EVENTS_HEADER, records.REC, records.EVENTS_MAGIC, records.EVENTS_VERSION


def records_of(ts: np.ndarray, pattern: Sequence[tuple[str, int, int, int]], cpu: int) -> np.ndarray:
    """Records (REC) as the tracer writes them, at times ts, of a pattern of (type name, tid,
    aux, a0) repeated (len(ts) a multiple of its length): pid = tid, all on one CPU; aux and
    a0 as bpf/ipctrace.h lays them out per type."""
    code = records.TYPE_CODE
    n = len(ts) // len(pattern)
    rec = np.zeros(len(ts), REC)
    rec["ts"] = ts
    rec["type"] = np.tile(np.array([code[p[0]] for p in pattern], np.uint16), n)
    rec["tid"] = np.tile(np.array([p[1] for p in pattern], np.uint32), n)
    rec["pid"] = rec["tid"]
    rec["aux"] = np.tile(np.array([p[2] for p in pattern], np.uint32), n)
    rec["a0"] = np.tile(np.array([p[3] for p in pattern], np.uint64), n)
    rec["cpu"] = cpu
    return rec


COLUMNS = (
    "ts",
    "type",
    "cpu",
    "pid",
    "tid",
    "aux",
    "a0",
    "next_tid",
    "next_pid",
    "other_tid",
    "other_pid",
    "run",
    "iteration",
)


def read_events_header(path: Path | str) -> tuple[dict[str, int], int, list[str]]:
    """events.bin's header checked: (its fields as a dict, the count of whole records to read,
    warnings)."""
    path = Path(path)
    h, size = read_binary_header(
        path,
        HEADER,
        MAGIC,
        VERSION,
        REC,
        "an events file",
        UsageError,  # a damaged results file, as iterations.bin's
        missing=": the tracer wrote no events",
        missing_error=MeasureError,
    )
    header = {k: int(h[k]) for k in ("count", "drops", "ncpus", "floor")}
    body = size - HEADER.itemsize
    whole = body // REC.itemsize
    warnings = []
    count = header["count"]
    if count == 0 and whole:
        # The header is completed when the tracer ends; a killed tracer leaves it at 0.
        warnings.append(f"events.bin was not finished (the tracer did not end normally); {whole} records read")
        count = whole
    elif whole < count:
        raise UsageError(f"{path} is truncated: its header counts {count} records, the file holds {whole}")
    elif whole > count:
        warnings.append(f"events.bin: {whole - count} records after the counted ones were ignored")
    if body % REC.itemsize:
        warnings.append(f"events.bin: {body % REC.itemsize} bytes of a cut-short record were ignored")
    return header, count, warnings


def read_events_bin(path: Path | str) -> tuple[np.ndarray, dict[str, int], list[str]]:
    """events.bin -> (structured array of records, a read-only mapping of the file; header
    fields as a dict; warnings)."""
    header, count, warnings = read_events_header(path)
    if count == 0:
        return np.zeros(0, REC), header, warnings
    # Mapped, not read: the columns are gathered straight from the page cache, without a
    # copy of the whole file (384 MB for 12 M records) that would be touched once.
    # Read-only: the file is the tracer's record and must not change under the mapping.
    with safeio.regular(path, error=UsageError) as p:
        try:
            rec = np.memmap(p, REC, mode="r", offset=HEADER.itemsize, shape=(count,))
        except (OSError, ValueError) as e:
            raise MeasureError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    return np.asarray(rec), header, warnings


# Bytes a read or write of records asks for at once. On a PREEMPT_NONE kernel a system call is
# not preempted: a task woken on the caller's CPU waits for its end, even behind a SCHED_IDLE
# caller (the watch, the live line). A watch's pread of 3.2 MB held the CPU of a traced
# request's thread for 0.5-2.2 ms; one of 256 KiB takes about 0.1 ms.
IO_BYTES = 256 << 10


def read_records_at(fd: int, offset: int, n: int) -> np.ndarray:
    """Up to n records of the file at offset (fewer where it ends), IO_BYTES a call."""
    out = np.empty(max(n, 0), REC)
    view, got = out.data.cast("B"), 0
    while got < len(view) and (k := os.preadv(fd, [view[got : got + IO_BYTES]], offset + got)):
        got += k
    return out[: got // REC.itemsize]


def write_chunked(fd: int, data: bytes | memoryview) -> None:
    """All of data written to fd, IO_BYTES a call (IO_BYTES says why)."""
    view, done = memoryview(data).cast("B"), 0
    while done < len(view):
        done += os.write(fd, view[done : done + IO_BYTES])


def _read_records(f: Any, path: Path | str, into: np.ndarray, done: int, count: int) -> None:
    """Fill the records of `into` from f (done of count records read before them)."""
    try:
        view, got = into.data.cast("B"), 0
        while got < len(view) and (k := f.readinto(view[got : got + IO_BYTES])):
            got += k
    except OSError as e:
        raise MeasureError(f"cannot read {path}: {e.strerror or e}") from None
    if got < len(view):
        raise UsageError(f"{path} was cut short while it was read ({done + got // REC.itemsize} of {count} records)")


def record_blocks(path: Path | str, count: int, block: int, reuse: bool = False) -> Iterator[np.ndarray]:
    """The first count records of events.bin read block records at a time (read, not mapped:
    a mapping's pages count as the process' memory as long as it lives). reuse: every block is
    read into the same array (for a caller done with each before the next: a fresh array's
    pages cost the kernel a fault and a page of zeros each)."""
    with safeio.regular(path, error=UsageError) as p, open(p, "rb", buffering=0) as f:
        f.seek(HEADER.itemsize)
        left = count
        buf = np.empty(min(block, count), REC) if reuse else None
        while left:
            want = min(block, left)
            b = buf[:want] if buf is not None else np.empty(want, REC)
            _read_records(f, path, b, count - left, count)
            left -= want
            yield b


class RecordReader:
    """The first count records of events.bin, block records at a time, each block read straight
    behind records the caller puts in front of it (read_behind): TimeOrder's records carried
    over from the block before, without a second copy of the block behind them."""

    def __init__(self, path: Path | str, count: int, block: int):
        self.path, self.count, self.block = path, count, block

    def __enter__(self) -> RecordReader:
        self.file = os.fdopen(safeio.open_regular(self.path, error=UsageError), "rb", buffering=0)
        self.file.seek(HEADER.itemsize)
        self.left = self.count
        return self

    def __exit__(self, *exc: Any) -> None:
        self.file.close()

    def read_behind(self, front: np.ndarray) -> np.ndarray | None:
        """One array of front's records followed by the next block's (None: no records left)."""
        if not self.left:
            return None
        want = min(self.block, self.left)
        out = np.empty(len(front) + want, REC)
        out[: len(front)] = front
        _read_records(self.file, self.path, out[len(front) :], self.count - self.left, self.count)
        self.left -= want
        return out


class _LaggedMax:
    """Block by block, the records earlier than the latest time `lag` or more records before
    them, and how far every later record that is not one of them reaches (clib.lagged_late)."""

    def __init__(self, lag: int):
        if lag < 1:
            raise ValueError("TimeOrder's lag is one record or more")
        self.lag = lag
        self.before = np.iinfo(np.int64).min  # the latest time before the last lag records
        # the times of the last lag records (none yet: the earliest time there is)
        self.tail = np.full(lag, np.iinfo(np.int64).min)

    def add(self, block: np.ndarray) -> tuple[np.ndarray, int]:
        """(the indices of the block's records below the latest time up to lag records before
        each; the latest time up to lag - 1 records before the block's end, i.e. at or before
        the lag-th record from now)."""
        late, self.before, cut = clib.lagged_late(np.ascontiguousarray(block, REC), self.tail, self.before)
        return late, cut


class TimeOrder:
    """events.bin's records put in time order a block at a time, the same order as one stable
    sort of them all, in memory that does not grow with the file.

    The tracer writes records nearly in order, but a CPU's batch can reach the file long after
    its time (an idle CPU's interrupts: 120 ms, 460 000 records late, seen). A record is a
    straggler if it is earlier than a record at least `lag` records before it in the file. One
    pass, observe(), finds them (few: kept, sorted, in memory). Then in_time_order() gives out
    the others in order a block at a time: every later record that is no straggler is at least
    as late as the latest one lag records back, so everything up to that time can go, with the
    stragglers that belong there. Too many stragglers mean a damaged file (UsageError)."""

    MAX_STRAGGLERS = 1 << 22  # 128 MB of records

    def __init__(self, lag: int, what: str = "events.bin"):
        self.lag, self.what = lag, what
        self.seen = _LaggedMax(lag)
        self.pos = 0
        self.late: list[np.ndarray] = []  # the stragglers of each block
        self.late_pos: list[np.ndarray] = []  # and their places in the file
        self.nlate = 0

    def observe(self, block: np.ndarray) -> None:
        """The blocks in file order."""
        late, _ = self.seen.add(block)
        if len(late):
            self.late.append(block[late])
            self.late_pos.append(late + self.pos)
            self.nlate += len(late)
            if self.nlate > self.MAX_STRAGGLERS:
                raise UsageError(
                    f"{self.what}: more than {self.MAX_STRAGGLERS:,} records out of time order by over "
                    f"{self.lag:,} records: the file is damaged"
                )
        self.pos += len(block)

    def in_time_order(
        self, blocks: Iterable[np.ndarray] | RecordReader
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """The records of the same blocks again, a piece at a time, each piece as (records,
        the indices that put them in time order, or None where they are): the pieces follow
        each other in time. blocks: the blocks, or a RecordReader that reads each block straight
        behind the records carried over from the one before (the same pieces, no second copy of
        the block)."""
        if self.late:
            late = np.concatenate(self.late)
            late_pos = np.concatenate(self.late_pos)
            by_time = np.lexsort((late_pos, late["ts"].view(np.int64)))
            late, late_pos = np.take(late, by_time), late_pos[by_time]
        else:
            late, late_pos = np.zeros(0, REC), np.zeros(0, np.int64)
        late_ts = late["ts"].view(np.int64)
        skip = np.sort(late_pos)
        seen = _LaggedMax(self.lag)
        # What a block left for later (ts > cut), in file order, with its positions.
        carry, carry_pos = np.zeros(0, REC), np.zeros(0, np.int64)
        pos, li = 0, 0
        done = np.iinfo(np.int64).min
        reader: RecordReader | None
        each: Iterator[np.ndarray]
        if isinstance(blocks, RecordReader):
            reader, each = blocks, iter(())
        else:
            reader, each = None, iter(blocks)
        while True:
            if reader is not None:
                # the carried records, then the block read behind them: one array, one copy
                behind = reader.read_behind(carry)
                if behind is None:
                    break
                block = behind[len(carry) :]
            else:
                behind = None
                given = next(each, None)
                if given is None:
                    break
                block = given
            n = len(block)
            if not n:
                continue
            ts = np.ascontiguousarray(block["ts"]).view(np.int64)
            _, cut = seen.add(block)
            if pos + n >= self.pos:
                cut = np.iinfo(np.int64).max  # the last block: everything goes
            a, b = np.searchsorted(skip, [pos, pos + n])
            go = ts <= cut
            go[skip[a:b] - pos] = False  # the stragglers come in at their time
            c_go = carry["ts"] <= cut
            lj = int(np.searchsorted(late_ts, cut, side="right"))
            # One copy of the block, behind what an earlier one left; the order picks what goes.
            if behind is not None:
                merged = np.concatenate((behind, late[li:lj])) if lj > li else behind
            else:
                merged = np.concatenate((carry, block, late[li:lj])) if len(carry) or lj > li else block
            nc = len(carry)
            pick = np.concatenate((np.flatnonzero(c_go), nc + np.flatnonzero(go), nc + n + np.arange(lj - li)))
            mts = merged["ts"].view(np.int64)[pick]
            order: np.ndarray | None
            if lj > li:
                # Equal times in file order: the stragglers come from later places in it.
                mpos = np.concatenate((carry_pos[c_go], pos + np.flatnonzero(go), late_pos[li:lj]))
                order = pick[np.lexsort((mpos, mts))]
            elif len(mts) > 1 and not (mts[1:] >= mts[:-1]).all():
                # carry and block are in file order: a stable sort keeps it among equal times.
                order = pick[np.argsort(mts, kind="stable")]
            else:
                order = None if len(pick) == len(merged) else pick
            li = lj
            stay = ~go
            stay[skip[a:b] - pos] = False
            carry = np.concatenate((carry[~c_go], block[stay]))
            carry_pos = np.concatenate((carry_pos[~c_go], pos + np.flatnonzero(stay)))
            pos += n
            if len(pick):
                first = int(merged["ts"][order[0]] if order is not None else merged["ts"][0])
                if first < done:
                    raise UsageError(f"{self.what}: records out of time order past what the reader can mend")
                done = int(merged["ts"][order[-1]] if order is not None else merged["ts"][-1])
                yield merged, order
        rest = late[li:]
        if len(carry) or len(rest):
            out = np.concatenate((carry, rest))
            opos = np.concatenate((carry_pos, late_pos[li:]))
            yield out, np.lexsort((opos, out["ts"].view(np.int64)))


def windows(
    iterations: pd.DataFrame, metric: str | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t_start, t_end, run, iteration) of one metric's iterations (the first one's if
    metric is None or absent), sorted by t_start. Where all iterations are of that metric and
    in order (one measuring thread), the columns themselves: no copy of a long run's."""
    m = iterations["metric"]
    # A categorical column is compared by its codes, not as 1 M strings.
    codes, names = (
        (m.cat.codes.to_numpy(), [str(c) for c in m.cat.categories])
        if isinstance(m.dtype, pd.CategoricalDtype)
        else pd.factorize(m.astype(str))
    )
    names = list(names)
    want = names.index(str(metric)) if metric is not None and str(metric) in names else -1
    if want < 0 or not (codes == want).any():
        want = codes[0]
    mine = codes == want
    cols = [iterations[c].to_numpy(t) for c, t in (("t_start_ns", np.int64), ("t_end_ns", np.int64))]
    cols += [iterations["run"].to_numpy(np.int32), iterations["iteration"].to_numpy(np.int64)]
    if not mine.all():
        cols = [c[mine] for c in cols]
    start = cols[0]
    if len(start) > 1 and not (start[1:] >= start[:-1]).all():
        order = np.argsort(start, kind="stable")
        cols = [c[order] for c in cols]
    return tuple(cols)


def decode_in_order(
    rec: np.ndarray,
    order: np.ndarray | None,
    wins: Sequence[np.ndarray] | WindowCursor,
    head: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Records taken in the given order (None: as they are), which is time order -> events
    DataFrame (COLUMNS), labelled with the windows (windows(): all of the run's, or a
    WindowCursor that reads them as the records go; only those that can hold these records
    are passed on). head: events (COLUMNS) that come first in the frame, before the records
    (one frame made at once, not a second copy by a concatenation)."""
    rec = np.ascontiguousarray(rec, REC)
    if not len(rec):
        return _frame(rec, order, [np.zeros(0, np.int64)] * 4 if isinstance(wins, WindowCursor) else wins, head)
    lo = int(rec["ts"][order[0]] if order is not None else rec["ts"][0])
    hi = int(rec["ts"][order[-1]] if order is not None else rec["ts"][-1])
    if isinstance(wins, WindowCursor):
        return _frame(rec, order, wins.covering(lo, hi), head)
    if len(wins[0]):
        a = max(int(np.searchsorted(wins[0], lo, side="right")) - 1, 0)
        b = int(np.searchsorted(wins[0], hi, side="right"))
        return _frame(rec, order, [w[a:b] for w in wins], head)
    return _frame(rec, order, wins, head)


def to_frame(rec: np.ndarray, iterations: pd.DataFrame | None = None, metric: str | None = None) -> pd.DataFrame:
    """Records -> events DataFrame (COLUMNS), sorted by time.

    One pass (decode.c) writes each column in its stored type, unpacks the other task of
    a0 (tid | pid << 32: next_tid/next_pid of a switch, other_tid/other_pid of a wake-up
    or fork, -1 elsewhere) and labels each event with the timed iteration of the
    measuring thread whose window holds it: the last window that starts at or before it,
    if it has not ended by then; -1 when none does (warm-up, set-up, gaps). The frame
    takes the arrays as they are (no consolidating copy)."""
    rec = np.ascontiguousarray(rec, REC)
    # Records come per CPU in batches: long sorted runs, which a stable sort (timsort) merges.
    order = None if clib.in_time_order(rec) else np.argsort(rec["ts"].view(np.int64), kind="stable")
    return _frame(rec, order, run_windows(iterations, metric))


def run_windows(iterations: pd.DataFrame | None, metric: str | None) -> list[np.ndarray]:
    """windows() of the iterations, none if there are none."""
    if iterations is not None and len(iterations):
        return list(windows(iterations, metric))
    return [np.zeros(0, np.int64)] * 4


def _frame(
    rec: np.ndarray, order: np.ndarray | None, wins: Sequence[np.ndarray], head: pd.DataFrame | None = None
) -> pd.DataFrame:
    before = 0 if head is None else len(head)
    starts, ends, runs, iters = wins
    cols, unknown = clib.decode(rec, order, starts, ends, runs, iters, before=before)
    if head is not None and before:
        for name in COLUMNS:
            cols[name][:before] = head[name].cat.codes if name == "type" else head[name]
    if unknown:
        code = rec["type"]
        bad = sorted(set(code[(code < 1) | (code > len(records.TYPES))].tolist()))
        raise UsageError(
            f"events.bin holds records of unknown type {bad}: it was written by a different version of the tracer"
        )
    cols["type"] = pd.Categorical.from_codes(cols["type"], categories=list(records.TYPES))
    return pd.DataFrame({name: cols[name] for name in COLUMNS}, copy=False)


def load(
    path: Path | str, iterations: pd.DataFrame | None = None, metric: str | None = None
) -> tuple[pd.DataFrame, dict[str, int], list[str]]:
    """events.bin -> (events DataFrame, header dict, warnings)."""
    rec, header, warnings = read_events_bin(path)
    return to_frame(rec, iterations, metric), header, warnings


# Columns with about one value per record: a dictionary would be tried and dropped for each
# page. Time and iteration rise steadily, so they are stored as deltas (a third of the size).
DELTA_COLUMNS = ("ts", "iteration")
PLAIN_COLUMNS = ("a0",)
STATS_COLUMNS = ("ts", "run", "iteration")

# Rows per row group. Readers skip whole row groups by the min/max of `ts` (explain, export
# --window, DuckDB or pyarrow with filters): 128 Ki rows (~3 MB stored, ~11k pipe round
# trips) make skipping worthwhile, while each group stays large enough to compress well.
ROW_GROUP_ROWS = 131072


def parquet_options(column_names: Sequence[str], row_group_size: int = ROW_GROUP_ROWS) -> dict[str, Any]:
    """Keyword arguments of pq.write_table / pq.ParquetWriter for an events table with these
    columns (ParquetWriter takes all but row_group_size, which goes to each write_table)."""
    wide = DELTA_COLUMNS + PLAIN_COLUMNS
    return {
        "use_dictionary": [c for c in column_names if c not in wide],
        # min/max where they let a reader skip row groups (columns that rise through the file);
        # every group holds every thread, CPU and type: their statistics cost 15 % of the writing
        "write_statistics": [c for c in STATS_COLUMNS if c in column_names],
        "column_encoding": {c: "DELTA_BINARY_PACKED" for c in DELTA_COLUMNS if c in column_names},
        "row_group_size": row_group_size,
    }


def write_table(path: Path | str, table: pa.Table, row_group_size: int = ROW_GROUP_ROWS) -> None:
    """events.parquet from the events as an Arrow table (pa.Table.from_pandas of to_frame's)."""
    write_parquet(table, path, **parquet_options(table.column_names, row_group_size))


@dataclass(frozen=True)
class RowGroups:
    """events.parquet's row groups as its footer tells them, read once with the file: the rows
    of each and its least and greatest ts (None: no statistics written). Data, so that model/
    can say which row groups it needs without holding the file."""

    rows: tuple[int, ...]
    ts_min: tuple[int | None, ...]
    ts_max: tuple[int | None, ...]

    @property
    def count(self) -> int:
        return len(self.rows)

    def meeting(self, spans: Iterable[tuple[int, int]]) -> list[int]:
        """The row groups whose ts range meets one of the spans [t0, t1] (ns, both ends
        included); a group without statistics always does."""
        spans = [(int(a), int(b)) for a, b in spans]
        found = []
        for g, (lo, hi) in enumerate(zip(self.ts_min, self.ts_max)):
            if lo is None or hi is None or any(a <= hi and lo <= b for a, b in spans):
                found.append(g)
        return found


@dataclass(frozen=True)
class ColumnsRead:
    """A request of model/ (leadin) to its caller: these columns of these row groups (all if
    None), in file order, as an Arrow table."""

    columns: tuple[str, ...]
    groups: tuple[int, ...] | None = None


@dataclass(frozen=True)
class EventsRead:
    """A request of model/ (leadin, explain) to its caller: all the events of these row groups
    (all of the file if None), in file order, as the checked events DataFrame."""

    groups: tuple[int, ...] | None = None


Read = ColumnsRead | EventsRead
T = TypeVar("T")


def answer(walk: Generator[Read, Any, T], f: EventsFile) -> T:
    """What walk (a generator of model/ that asks for parts of events.parquet, e.g.
    leadin.lead_in) returns, each of its requests read from f and sent back to it. A row group
    asked for with all its columns is read once however often it is asked for (kept here as
    Arrow until the walk ends); all of the file is read in one read."""
    import pyarrow as pa

    cache: dict[int, pa.Table] = {}

    def reply(request: Read) -> Any:
        if isinstance(request, ColumnsRead):
            return f.table(request.groups, columns=request.columns)
        if request.groups is None:
            return f.read()
        groups = sorted(set(request.groups))
        for g in groups:
            if g not in cache:
                cache[g] = f.table([g])
        if not groups:
            return f.frame(f.table([]))
        return f.frame(pa.concat_tables([cache[g] for g in groups]))

    try:
        request = next(walk)
        while True:
            request = walk.send(reply(request))
    except StopIteration as done:
        return done.value


class EventsFile:
    """events.parquet opened once as a regular file (safeio: a planted link is refused), to
    read all of it or only the row groups whose time range meets some spans. Files written
    before row groups were sized (one group) are read whole, as before."""

    def __init__(self, resdir: Path | str):
        import pyarrow.parquet as pq

        self.path = Path(resdir) / "events.parquet"
        try:
            fd = safeio.open_regular(self.path)
        except FileNotFoundError:
            raise UsageError(f"{resdir} has no events.parquet (run it traced, without --no-trace)") from None
        # pyarrow reads from this descriptor: the file checked is the file read.
        self._handle = os.fdopen(fd, "rb")
        try:
            with self._errors():
                self._file = pq.ParquetFile(self._handle)
                meta = self._file.metadata
                names = self._file.schema_arrow.names
                self.groups = meta.num_row_groups
                self.rows = [meta.row_group(g).num_rows for g in range(self.groups)]
                self.ts_min, self.ts_max = self._ts_ranges(meta, names.index("ts") if "ts" in names else -1)
                self.row_groups = RowGroups(tuple(self.rows), tuple(self.ts_min), tuple(self.ts_max))
            missing = [c for c in COLUMNS if c not in names]
            if missing:
                raise UsageError(f"{self.path} lacks the columns {', '.join(missing)}")
        except BaseException:
            self.close()
            raise
        self.read_groups: set[int] = set()  # the row groups read with all their columns

    def _ts_ranges(self, meta: pq.FileMetaData, col: int) -> tuple[list[int | None], list[int | None]]:
        """Each row group's least and greatest ts from its statistics (None: none written)."""
        lo: list[int | None] = []
        hi: list[int | None] = []
        for g in range(self.groups):
            st = meta.row_group(g).column(col).statistics if col >= 0 else None
            if st is not None and st.has_min_max:
                lo.append(int(st.min))
                hi.append(int(st.max))
            else:
                lo.append(None)
                hi.append(None)
        return lo, hi

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> EventsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        import pyarrow as pa

        try:
            yield
        except (pa.ArrowException, OSError, ValueError, TypeError, KeyError) as e:
            text = (str(e).splitlines() or [type(e).__name__])[0]
            raise UsageError(f"{self.path} is truncated or corrupted ({text})") from None

    def groups_meeting(self, spans: Iterable[tuple[int, int]]) -> list[int]:
        """The row groups whose ts range meets one of the spans [t0, t1] (ns, both ends
        included); a group without statistics always does."""
        return self.row_groups.meeting(spans)

    def table(self, groups: Iterable[int] | None = None, columns: Iterable[str] | None = None) -> pa.Table:
        """These row groups (all if None), in file order, as an Arrow table of COLUMNS (or of
        `columns`); row groups read with all columns are counted in read_groups."""
        groups = range(self.groups) if groups is None else sorted(set(groups))
        with self._errors():
            t = self._file.read_row_groups(list(groups), columns=list(COLUMNS if columns is None else columns))
        if columns is None:
            self.read_groups.update(groups)
        return t

    def frame(self, table: pa.Table) -> pd.DataFrame:
        """An events table read from this file (table(), or several concatenated) as the
        checked events DataFrame."""
        with self._errors():
            df = table.to_pandas()
        return schema.check_events(df, self.path, records.TYPES)

    def read(self, groups: Iterable[int] | None = None) -> pd.DataFrame:
        """These row groups (all if None) as the checked events DataFrame."""
        return self.frame(self.table(groups))


def read_parquet(resdir: Path | str, spans: Iterable[tuple[int, int]] | None = None) -> pd.DataFrame:
    """events.parquet of a results directory a user names: what is wrong with it is a UsageError.
    spans: only the row groups whose time range meets one of these [t0, t1] (ns), whole: the
    events outside the spans that share a row group with them come too."""
    with EventsFile(resdir) as f:
        return f.read(None if spans is None else f.groups_meeting(spans))
