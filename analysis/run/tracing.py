"""After a traced run: events.bin -> events.parquet, trace.json -> the summary's trace
(analysis.model.trace), then the breakdown (analysis.model.breakdown). Iterations
whose time window overlaps records the kernel lost (ring buffer full) are left
out of the breakdown, and the summary says how many."""

import dataclasses
import os
import tempfile
from concurrent import futures
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from analysis.errors import MeasureError
from analysis.model import activity, breakdown, decoded, lost, trace
from analysis.model.summary import RunSummary
from analysis.model.timeline import Events
from analysis.store import clib, records, safeio, spool, syscalls
from analysis.store import events as events_mod
from analysis.store.itercolumns import BLOCK, IterationColumns, WindowCursor, metric_code
from analysis.store.results import ParquetAppender, read_trace, read_workload


def read_trace_json(outdir):
    path = Path(outdir) / "trace.json"
    if not os.path.lexists(path):
        raise MeasureError(f"{path} is missing: the tracer ended before writing it")
    return read_trace(outdir, MeasureError)


@dataclasses.dataclass(frozen=True)
class Pieces:
    """The sizes in which the analysis goes through the events, so that its memory does not
    grow with the run (tests make them small). A piece holds about `events` events (~0.15 GB of
    frames and timelines at its peak), read from events.bin `block` records at a time; records
    more than `lag` places late in the file are put in order apart (events.TimeOrder). Each piece
    repeats `lead` events before its first iteration, and carries each thread's and CPU's last
    switch and each thread's last system call from before them, so that every thread's state
    there is what the whole trace gives it; it holds `trail` events after its last iteration's
    end, for what looks ahead (the next switch on a CPU, a wake-up's switch in). The tests
    compare pieces with the whole trace at once."""

    # A piece is one block's frame, decoded behind the events it repeats (no second copy of it):
    # a block gives block - lag events or more, the records after that wait for the next. A
    # block's arrays (8 MB a column) stay below glibc's mmap threshold, so the next piece reuses
    # the heap's pages (at 5 M iterations: a third of the page faults, 0.99 GiB, not 1.2, 6 %
    # less time than blocks of 2 M records handed back to the system after each piece).
    events: int = 900_000
    block: int = 1 << 20
    lag: int = 1 << 17
    lead: int = 100_000
    trail: int = 50_000
    spill: int = 250_000  # rows of breakdown.parquet's parts kept in memory, then in a temporary file


def finish(
    outdir: Path | str,
    iterations,
    summary: RunSummary,
    stage=lambda text, done=None: None,
    whole_trace: bool = False,
    sizes: Pieces = Pieces(),
    tracer_calls: tuple[int, int] | None = None,
) -> RunSummary:
    """summary with the trace of the traced run in outdir and its breakdown; writes
    events.parquet and breakdown.parquet. iterations: IterationColumns (a run's), or a frame
    (a traced program's). stage(text[, share done]) names each step as it starts (and how
    far it is).
    whole_trace: also the whole trace per thread (model/activity.py: a traced program's).
    sizes: the pieces the events are taken in (Pieces).
    tracer_calls: (tid, t) of a command the tracer started: that thread's records up to the
    return of its first exec after t (the calibrations `ipcbench exec` runs from t, then its
    exec of the command) are the tracer's, left out of the whole-trace view (OwnCalls)."""
    outdir = Path(outdir)
    # Arrow's buffers from the C library's malloc, which release_memory() hands back: its own
    # pool (mimalloc) kept about a column's worth (7 B an iteration) through each column read.
    pa.set_memory_pool(pa.system_memory_pool())
    if isinstance(iterations, IterationColumns):
        return _finish(outdir, iterations, summary, stage, whole_trace, sizes, tracer_calls)
    cols = IterationColumns.from_frame(iterations, dir=outdir)
    try:
        return _finish(outdir, cols, summary, stage, whole_trace, sizes, tracer_calls)
    finally:
        cols.close()


class OwnCalls:
    """The tracer's own calls at a command's start, in the command's thread (tid): from its
    first record to the return of its first successful exec after `since` (the entry and probe
    calibrations of `ipcbench exec` from since on, then its exec of the user's command). Taken
    out of each piece of events in time order (keep())."""

    def __init__(self, tid: int, since: int, arch: str):
        self.tid, self.since = int(tid), int(since)
        self.execs = list(syscalls.numbers(arch, ("execve", "execveat")))
        self.until: int | None = None  # the exec's return, once seen

    def keep(self, frame: pd.DataFrame) -> pd.DataFrame:
        if self.until is not None and (not len(frame) or int(frame["ts"].iloc[0]) > self.until):
            return frame
        ts = frame["ts"].to_numpy(np.int64)
        # its own records and the switches to it: its span starts in the user's command
        mine = (frame["tid"].to_numpy() == self.tid) | (frame["next_tid"].to_numpy() == self.tid)
        if self.until is None:
            done = (
                mine
                & (frame["type"].to_numpy() == "sys_exit")
                & np.isin(decoded.column(frame, "nr"), self.execs)
                & (decoded.column(frame, "ret") == 0)
                & (ts > self.since)
            )
            if done.any():
                self.until = int(ts[done].min())
        gone = mine & (ts <= (self.until if self.until is not None else np.iinfo(np.int64).max))
        return frame[~gone] if gone.any() else frame


def _finish(outdir, iterations, summary, stage, whole_trace, sizes, tracer_calls=None):
    tj = read_trace_json(outdir)
    path = outdir / "events.bin"
    header, count, warnings = events_mod.read_events_header(path)
    # a trace without iterations (the whole-trace view alone) has no workload.json
    wl = read_workload(outdir, MeasureError) if len(iterations) else {}
    drops = {**tj.get("drops", {}), "total": int(tj.get("drops", {}).get("total", header["drops"]))}
    left_out = lost.incomplete(iterations, drops)
    keep = ~left_out if left_out.any() else None  # a mask: 1 B an iteration
    nkept = len(iterations) - int(left_out.sum())
    del left_out
    machine = summary.host.get("machine") or "x86_64"
    stage("the kernel events: what the whole trace holds")
    order = events_mod.TimeOrder(sizes.lag)
    facts = trace_facts(path, count, sizes.block, wl, order)
    bp = (
        breakdown.BreakdownPass(iterations, wl, facts, arch=machine, keep=keep, spools=spool.spools_in(outdir))
        if nkept
        else None
    )
    tally = trace.Tally.none()
    # the windows that label the events, read as the events go
    wins = (
        WindowCursor(iterations, metric_code(iterations, summary.primary_metric))
        if len(iterations)
        else [np.zeros(0, np.int64)] * 4
    )
    pieces = _Pieces(bp, sizes, outdir)
    # the whole-trace view of the followed threads, taken as the events go
    everything = activity.ActivityPass(tj.get("tids", []), machine, sizes.lead) if whole_trace else None
    own = OwnCalls(*tracer_calls, machine) if everything is not None and tracer_calls else None
    with safeio.created(outdir / "events.parquet") as events_tmp:
        writer = None
        try:
            for rec, in_order in order.in_time_order(events_mod.record_blocks(path, count, sizes.block)):
                head = pieces.take_head()
                frame = events_mod.decode_in_order(rec, in_order, wins, head)
                del rec, in_order
                new = frame if head is None else frame.iloc[len(head) :]
                tally.add(new)
                # its columns as they are (no copy): a pool of threads a block costs more than it saves
                table = pa.Table.from_pandas(new, preserve_index=False, nthreads=1)
                if writer is None:
                    writer = ParquetAppender(events_tmp, **events_mod.parquet_options(table.column_names))
                writer.write(table)
                del table
                if everything is not None:
                    everything.add(Events(new if own is None else own.keep(new)))
                stage(f"the kernel events and the breakdown ({count:,} events)", tally.records / max(count, 1))
                pieces.add(frame)
                del frame, new, head
            pieces.last()
            if writer is None:
                table = pa.Table.from_pandas(events_mod.decode_in_order(np.zeros(0, events_mod.REC), None, wins))
                writer = ParquetAppender(events_tmp, **events_mod.parquet_options(table.column_names))
                writer.write(table)
        finally:
            try:
                pieces.close()
            finally:
                if writer is not None:
                    writer.close()
    tr = trace.summarize(tj, tally, header["drops"], iterations, warnings)
    summary = dataclasses.replace(
        summary,
        warnings=tr.warnings_first + summary.warnings + tr.warnings_after,
        trace=tr.summary,
    )
    if whole_trace:
        stage("the whole trace per thread")
        summary = dataclasses.replace(summary, activity=everything.finish(tr.summary.tasks))
        del everything
    if bp is None:
        return summary
    clib.release_memory()  # what the pieces and the parquet writer held: the statistics need it
    stage(f"the breakdown's statistics ({nkept:,} iterations)")
    late, info = bp.finish()
    pieces.seal()

    def column(name, a=0, b=None, late=late, pieces=pieces):
        return late.steal_ns(a, b) if name == "steal_ns" else pieces.column(name, a, b)

    try:
        with (
            safeio.created(outdir / "breakdown.parquet") as tmp,
            futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ipctrace-breakdown-write") as pool,
        ):
            # breakdown.parquet is written by a thread of its own while the statistics take the
            # same columns from the pieces' parts, one column of all iterations at a time:
            # Arrow encodes without holding the GIL, so the two share both CPUs.
            written = pool.submit(pieces.write, tmp, late)
            bd = breakdown.summarize_columns(
                column,
                info,
                summary.primary_metric,
                tr.summary.tasks,
                set(tr.summary.tracer.get("tids") or ()),
            )
            written.result()
    finally:
        pieces.close_spill()
    del pieces, bp, late, info
    clib.release_memory()
    return summary.with_breakdown(bd)


def _pread_into(fd, out, offset):
    """Fill the array `out` with the bytes of file fd from offset on (a positional read: any
    thread, the same file description)."""
    view = memoryview(out).cast("B")
    while len(view):
        n = os.preadv(fd, [view], offset)
        if n <= 0:
            raise MeasureError("the breakdown's temporary file was cut short while it was read")
        view, offset = view[n:], offset + n


def trace_facts(path, count, block, workload, order) -> breakdown.TraceFacts:
    """What every piece of the breakdown needs from the whole trace (breakdown.TraceFacts), from
    one read of events.bin: the entry calibration's traced calls (the thread and syscall it
    names), whether a copy routine was probed, the threads of the workload's processes; the
    same read finds the records out of time order (order: events.TimeOrder)."""
    cal = workload.get("entry_calibration") or {}
    cal_tid, cal_nr = int(cal.get("tid") or -1), int(cal.get("syscall_nr") if "syscall_nr" in cal else -1)
    pids = sorted({int(t["pid"]) for t in workload.get("threads") or [] if t.get("pid")})
    calls, tids = [], []
    copy_measured = False
    cpus = {}
    for b in events_mod.record_blocks(path, count, block, reuse=True):
        order.observe(b)
        # One pass in C: numpy's masks over the records' strided fields took seconds a run.
        at, copied, mine, pairs = clib.scan_facts(b, cal_tid, cal_nr, records.COPY_FUNC_IDS, pids)
        if len(at):
            calls.append(b[at])
        copy_measured = copy_measured or copied
        tids.append(pd.unique(mine))
        breakdown.in_cpus(pairs >> 16, pairs & 0xFFFF, cpus)
    sub = np.concatenate(calls) if calls else np.zeros(0, events_mod.REC)
    ev = Events(events_mod.to_frame(sub))
    return breakdown.TraceFacts(
        entry=breakdown.entry_costs(ev, workload),
        copy_measured=copy_measured,
        seen_tids=np.unique(np.concatenate(tids)).astype(np.int64) if tids else np.zeros(0, np.int64),
        in_cpus=cpus,
    )


def _anchors(ev):
    """Rows of ev: the last switch of each thread (out or in) and of each CPU, the last
    sys_enter or sys_exit of each thread."""
    t = ev["type"].cat.codes.to_numpy()
    code = {name: k for k, name in enumerate(records.TYPES)}
    rows = []
    sw = np.flatnonzero(t == code["switch"])
    sc = np.flatnonzero((t == code["sys_enter"]) | (t == code["sys_exit"]))
    for idx, keys in (
        (sw, ev["tid"].to_numpy()[sw]),
        (sw, ev["next_tid"].to_numpy()[sw]),
        (sw, ev["cpu"].to_numpy()[sw]),
        (sc, ev["tid"].to_numpy()[sc]),
    ):
        if len(idx):
            # the last row of each key: np.unique on the reversed keys gives each one's first
            _, first = np.unique(keys[::-1], return_index=True)
            rows.append(idx[::-1][first])
    return np.unique(np.concatenate(rows)) if rows else np.zeros(0, np.int64)


class _Reach:
    """Over the kept iterations in order, read a block at a time as the pieces go: the latest
    end among rows [0, j] (a piece holds rows [done, j) whole once its events reach past it)
    and the earliest start among rows [j, n) (where the next piece's iterations begin)."""

    def __init__(self, rows):
        self.rows = rows
        # the earliest start in each block of rows and in every block after it
        mins = [int(rows.column("t_start_ns", a, a + BLOCK).min()) for a in range(0, rows.n, BLOCK)]
        self.after_block = np.minimum.accumulate(np.array(mins[::-1] or [0], np.int64))[::-1]
        self.a = self.b = 0  # rows [a, b) held
        self.starts = self.ends = np.zeros(0, np.int64)
        self.end_before = np.iinfo(np.int64).min  # the latest end of the rows before a

    def _more(self):
        self.starts = np.concatenate((self.starts, self.rows.column("t_start_ns", self.b, self.b + BLOCK)))
        self.ends = np.concatenate((self.ends, self.rows.column("t_end_ns", self.b, self.b + BLOCK)))
        self.b = min(self.b + BLOCK, self.rows.n)

    def whole_before(self, t):
        """The first row j >= a whose rows [0, j] reach t or later (n if none)."""
        while True:
            reach = np.maximum.accumulate(np.concatenate(([self.end_before], self.ends)))[1:]
            j = int(np.searchsorted(reach, t, side="left"))
            if j < len(reach) or self.b >= self.rows.n:
                return self.a + j
            self._more()

    def earliest_from(self, j):
        """The earliest start among rows [j, n) (j >= a; inf if j = n)."""
        if j >= self.rows.n:
            return np.inf
        while j >= self.b:
            self._more()
        here = int(self.starts[j - self.a :].min())
        k = self.b // BLOCK  # the first block after those held (b is a block's end, or n)
        return float(min(here, self.after_block[k]) if self.b < self.rows.n else here)

    def forget(self, j):
        """Rows before j are done."""
        if j > self.a:
            gone = self.ends[: j - self.a]
            if len(gone):
                self.end_before = max(self.end_before, int(gone.max()))
            self.starts, self.ends = self.starts[j - self.a :], self.ends[j - self.a :]
            self.a = j


class _Pieces:
    """The events gathered into pieces for the breakdown (see Pieces), and the parts of
    breakdown.parquet that the pieces made, in the iterations' order."""

    def __init__(self, bp, sizes, tmpdir=None):
        self.bp, self.sizes, self.tmpdir = bp, sizes, tmpdir
        self.frames, self.count = [], 0
        self.head = None  # the events the next piece repeats, until the next block is decoded behind them
        self.done = 0  # the iterations (the pass's rows) done
        self.own = -np.inf  # what a piece finds before this time belongs to an earlier one
        self.reach = _Reach(bp.rows) if bp is not None else None
        self.parts, self.part_rows = [], 0
        self.part_sizes, self.names = [], None  # rows of each part, in order; the parts' columns
        self.spill = None  # a temporary file (no name) once the parts outgrow sizes.spill
        self.spill_writer = None
        self.spill_at = {}  # seal(): where the spill file holds each part's columns
        # A piece's breakdown runs in a thread of its own while the next piece's events are read,
        # put in order and decoded: its C passes and numpy work do not hold the GIL, so the two
        # share both CPUs. One piece at a time: the pass keeps its findings in order.
        self.worker = None
        self.pending = None  # (rows, the future of their components)

    def take_head(self):
        """The events the next piece repeats (None: none), for the next block's frame to start
        with: taken once."""
        head, self.head = self.head, None
        return head

    def add(self, frame):
        """The next frame of events in time order (with take_head()'s events first, if taken)."""
        if self.bp is None:
            return
        self.frames.append(frame)
        self.count += len(frame)
        if self.count >= self.sizes.events:
            self._piece(final=False)

    def last(self):
        if self.bp is not None:
            self._piece(final=True)

    def _submit(self, rows, ev, own):
        """Break down rows over ev in the worker, after the piece before them is kept."""
        self.wait()
        if self.worker is None:
            self.worker = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ipctrace-breakdown")
        # The columns taken out of the frame here: the worker touches numpy arrays only.
        self.pending = (rows, self.worker.submit(self.bp.add, rows, Events(ev), own))

    def wait(self):
        """Keep the components of the piece in the worker, once it is done (and raise what it
        raised); also when an error ends the analysis, so that no piece outlives it."""
        if self.pending is not None:
            rows, done = self.pending
            self.pending = None
            self._keep(rows, done.result())

    def close(self):
        try:
            self.wait()
        finally:
            if self.worker is not None:
                self.worker.shutdown(wait=True)

    def _piece(self, final):
        if self.head is not None:  # no block came after them
            self.frames.insert(0, self.take_head())
        ev = self.frames[0] if len(self.frames) == 1 else pd.concat(self.frames, ignore_index=True)
        self.frames = []
        ts = ev["ts"].to_numpy()
        n = self.bp.n
        if final:
            j, cut = n, np.inf
        else:
            trail = self.sizes.trail
            safe = ts[len(ts) - trail] if len(ts) > trail else ts[0] if len(ts) else 0
            # Rows [done, j) are whole in this piece once the latest end among them is in it; the
            # next piece must start before the earliest start among the rows after them.
            j = self.reach.whole_before(safe)
            cut = min(self.reach.earliest_from(j), float(safe))
        if j > self.done:
            self._submit(np.arange(self.done, j), ev, (self.own, cut))
            self.done, self.own = j, cut
            self.reach.forget(j)
        if final:
            self.close()
            return
        # What the next piece needs: `lead` events before the point from which this one's finds stop,
        # and before them each thread's and each CPU's last switch and each thread's last system
        # call: a thread that runs on or sleeps on without a switch keeps the state they give it.
        start = max(int(np.searchsorted(ts, self.own, side="left")) - self.sizes.lead, 0) if self.done else 0
        if start:
            keep = np.concatenate((_anchors(ev.iloc[:start]), np.arange(start, len(ev))))
            ev = ev.iloc[keep].reset_index(drop=True)
        self.frames, self.count, self.head = [], len(ev), ev

    def _keep(self, rows, cols):
        self.names = self.names or list(cols)
        self.parts.append(pa.Table.from_pydict(cols))
        self.part_sizes.append(len(rows))
        self.part_rows += len(rows)
        if self.part_rows >= self.sizes.spill or self.spill is not None:
            # Arrow's own file format, uncompressed: written and read back at memory speed, a
            # column of every part without the others (column()).
            if self.spill is None:
                self.spill = tempfile.TemporaryFile(prefix="ipctrace-breakdown-", dir=self.tmpdir)  # noqa: SIM115 - kept open: the object owns it
                self.spill_writer = pa.ipc.new_file(self.spill, self.parts[0].schema)
            for t in self.parts:
                self.spill_writer.write_table(t)
            self.parts = []

    def seal(self):
        """No more parts: the spill file is complete and may be read (by several threads)."""
        if self.spill_writer is not None:
            self.spill_writer.close()
            self.spill_writer = None
            self.spill.flush()
            self.spill_at = self._data_offsets()

    def _data_offsets(self):
        """{name: (dtype, where each part's values start in the spill file)} of the columns of
        numbers without nulls: column() reads them straight into its array, one copy (an Arrow
        buffer's and then the array's took a quarter of the statistics' time). From a mapping of
        the file, whose data pages are not touched: only each part's metadata is read."""
        where = {}
        with pa.memory_map(f"/proc/self/fd/{self.spill.fileno()}") as m:
            base = m.read_buffer(1).address
            reader = pa.ipc.open_file(m)
            for k in range(reader.num_record_batches):
                batch = reader.get_batch(k)
                for name, col in zip(batch.schema.names, batch.columns):
                    plain = pa.types.is_floating(col.type) or pa.types.is_integer(col.type)
                    if plain and col.null_count == 0 and col.offset == 0 and col.buffers()[0] is None:
                        where.setdefault(name, (np.dtype(col.type.to_pandas_dtype()), []))[1].append(
                            col.buffers()[1].address - base
                        )
        nparts = len(self.part_sizes)
        return {name: (dtype, np.array(at, np.int64)) for name, (dtype, at) in where.items() if len(at) == nparts}

    def _spill_reader(self, fields=None):
        """A reader of the spill file with a file description of its own (each thread reads at
        its own offset), reading only the columns `fields` (indices; None: all)."""
        f = pa.OSFile(f"/proc/self/fd/{self.spill.fileno()}")
        opts = pa.ipc.IpcReadOptions(included_fields=fields) if fields is not None else None
        return f, pa.ipc.open_file(f, options=opts)

    def _tables(self):
        if self.spill is not None:
            f, reader = self._spill_reader()
            with f:
                for i in range(reader.num_record_batches):
                    yield pa.Table.from_batches([reader.get_batch(i)])
        yield from self.parts

    def column(self, name, a=0, b=None):
        """Rows [a, b) of one of the pass's columns (add()'s: the components), from the parts
        whichever way they are kept, reading that column of the parts that hold those rows
        alone: breakdown.parquet's column before the file is written."""
        first = np.concatenate(([0], np.cumsum(self.part_sizes))).astype(np.int64)
        b = int(first[-1]) if b is None else min(b, int(first[-1]))
        if b <= a:
            return np.zeros(0, np.float64)
        # the parts k0..k1-1 hold rows [a, b)
        k0, k1 = int(np.searchsorted(first, a, side="right")) - 1, int(np.searchsorted(first, b, side="left"))
        if self.spill is not None and name in self.spill_at:
            dtype, at = self.spill_at[name]
            out = np.empty(b - a, dtype)
            for k in range(k0, k1):
                lo, hi = max(a, int(first[k])), min(b, int(first[k + 1]))
                _pread_into(
                    self.spill.fileno(), out[lo - a : hi - a], int(at[k]) + (lo - int(first[k])) * dtype.itemsize
                )
            return out
        out = None
        f, reader = self._spill_reader([self.names.index(name)]) if self.spill is not None else (None, None)
        try:
            for k in range(k0, k1):
                part = (reader.get_batch(k).column(0) if reader else self.parts[k].column(name)).to_numpy()
                lo, hi = max(a, int(first[k])), min(b, int(first[k + 1]))
                if out is None:
                    out = np.empty(b - a, part.dtype)
                out[lo - a : hi - a] = part[lo - int(first[k]) : hi - int(first[k])]
        finally:
            if f is not None:
                f.close()
        return out

    def write(self, path, late):
        """breakdown.parquet: each part with the columns of its iterations and finish()'s."""
        writer = None
        a = 0
        try:
            for part in self._tables():
                b = a + part.num_rows
                cols = {name: part.column(name).to_numpy() for name in part.column_names}
                frame = breakdown.frame_of(self.bp.rows.frame(a, b), self.bp, cols, late.columns(a, b))
                if writer is None:
                    writer = ParquetAppender(path)
                writer.write(pa.Table.from_pandas(frame, preserve_index=False, nthreads=1))
                a = b
        finally:
            if writer is not None:
                writer.close()

    def close_spill(self):
        if self.spill is not None:
            self.spill.close()
