"""After a traced run: events.bin -> events.parquet, trace.json -> the summary's trace
(analysis.model.tracesummary), then the breakdown (analysis.model.breakdown). Iterations
whose time window overlaps records the kernel lost (ring buffer full) are left
out of the breakdown, and the summary says how many."""

import dataclasses
import os
from concurrent import futures
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from analysis.errors import MeasureError
from analysis.model import activity, breakdown, decoded, lost, native, tracesummary
from analysis.model.breakdown_pass import BreakdownPass, Late
from analysis.model.streaming import OneBehind, Pieces, PieceStream
from analysis.model.timeline import Events
from analysis.run.progress import Stage
from analysis.store import clib, records, safeio, spool, syscalls
from analysis.store import events as events_mod
from analysis.store.itercolumns import IterationColumns, WindowCursor, metric_code
from analysis.store.jsonfiles import TraceFile, Workload
from analysis.store.parts import ColumnParts
from analysis.store.results import ParquetAppender, trace_file, workload_file
from analysis.store.summaryfile import RunSummary


def read_trace_json(outdir: Path | str) -> TraceFile:
    """trace.json of the traced run in outdir, checked and typed; a missing or bad one is a failed measurement."""
    path = Path(outdir) / "trace.json"
    if not os.path.lexists(path):
        raise MeasureError(f"{path} is missing: the tracer ended before writing it")
    return trace_file(outdir, MeasureError)


PIECES = Pieces()  # the sizes a run's analysis takes


def finish(
    outdir: Path | str,
    iterations: IterationColumns | pd.DataFrame,
    summary: RunSummary,
    stage: Stage = lambda text, done=None: None,
    whole_trace: bool = False,
    sizes: Pieces = PIECES,
    tracer_calls: tuple[int, int] | None = None,
    trace: TraceFile | None = None,
) -> RunSummary:
    """summary with the trace of the traced run in outdir and its breakdown; writes
    events.parquet and breakdown.parquet. iterations: IterationColumns (a run's), or a frame
    (a traced program's). stage(text[, share done]) names each step as it starts (and how
    far it is).
    whole_trace: also the whole trace per thread (model/activity.py: a traced program's).
    sizes: the pieces the events are taken in (Pieces).
    tracer_calls: (tid, t) of a command the tracer started: that thread's records up to the
    return of its first exec after t (the calibrations `ipcbench exec` runs from t, then its
    exec of the command) are the tracer's, left out of the whole-trace view (OwnCalls).
    trace: outdir's trace.json, where the caller has read it already."""
    outdir = Path(outdir)
    trace = trace or read_trace_json(outdir)
    # Arrow's buffers from the C library's malloc, which release_memory() hands back: its own
    # pool (mimalloc) kept about a column's worth (7 B an iteration) through each column read.
    pa.set_memory_pool(pa.system_memory_pool())
    if isinstance(iterations, IterationColumns):
        return _finish(outdir, iterations, summary, stage, whole_trace, sizes, tracer_calls, trace)
    cols = IterationColumns.from_frame(iterations, dir=outdir)
    try:
        return _finish(outdir, cols, summary, stage, whole_trace, sizes, tracer_calls, trace)
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
            done = mine & decoded.successful_returns(frame, self.execs) & (ts > self.since)
            if done.any():
                self.until = int(ts[done].min())
        gone = mine & (ts <= (self.until if self.until is not None else np.iinfo(np.int64).max))
        return frame[~gone] if gone.any() else frame


def _finish(
    outdir: Path,
    iterations: IterationColumns,
    summary: RunSummary,
    stage: Stage,
    whole_trace: bool,
    sizes: Pieces,
    tracer_calls: tuple[int, int] | None,
    tj: TraceFile,
) -> RunSummary:
    path = outdir / "events.bin"
    header, count, warnings = events_mod.read_events_header(path)
    # a trace without iterations (the whole-trace view alone) has no workload.json
    wl = workload_file(outdir, MeasureError) if len(iterations) else Workload(workload="", metrics=[], threads=[])
    left_out = lost.incomplete(iterations, dataclasses.replace(tj.drops, total=tj.drops.total_or(header["drops"])))
    keep = ~left_out if left_out.any() else None  # a mask: 1 B an iteration
    nkept = len(iterations) - int(left_out.sum())
    del left_out
    # the syscall numbers are the traced machine's (trace.json), which need not be this one: an
    # arm64 guest's trace is analysed on an x86-64 host (tools/vmtest --arch arm64)
    machine = tj.machine or summary.host.machine or "x86_64"
    if machine != summary.host.machine:
        summary = dataclasses.replace(summary, host=dataclasses.replace(summary.host, machine=machine))
    stage("the kernel events: what the whole trace holds")
    order = events_mod.TimeOrder(sizes.lag)
    facts = trace_facts(path, count, sizes.block, wl, order)
    bp = (
        breakdown.BreakdownPass(iterations, wl, facts, arch=machine, keep=keep, spools=spool.spools_in(outdir))
        if nkept
        else None
    )
    tally = tracesummary.Tally.none()
    # the windows that label the events, read as the events go
    wins = (
        WindowCursor(iterations, metric_code(iterations, summary.primary_metric))
        if len(iterations)
        else [np.zeros(0, np.int64)] * 4
    )
    parts = ColumnParts(sizes.spill, outdir)
    pieces = PieceStream(bp, sizes, parts)
    # the whole-trace view of the followed threads, taken as the events go
    everything = activity.ActivityPass(tj.tids, machine, sizes.lead) if whole_trace else None
    own = OwnCalls(tracer_calls[0], tracer_calls[1], machine) if everything is not None and tracer_calls else None
    with (
        safeio.created(outdir / "events.parquet") as events_tmp,
        events_mod.RecordReader(path, count, sizes.block) as reader,
        OneBehind("ipctrace-activity") as activity_worker,
    ):
        writer = None
        try:
            # each block read straight behind the records the one before left for later
            for rec, in_order in order.in_time_order(reader):
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
                    # beside the next block's decoding and the breakdown's pieces: both CPUs busy
                    activity_worker.submit(everything.add, Events(new if own is None else own.keep(new)))
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
    tr = tracesummary.summarize(tj, tally, header["drops"], iterations, warnings)
    summary = dataclasses.replace(
        summary,
        warnings=tr.warnings_first + summary.warnings + tr.warnings_after,
        trace=tr.summary,
    )
    if everything is not None:
        stage("the whole trace per thread")
        summary = dataclasses.replace(summary, activity=everything.finish(tj.tasks))
        del everything
    native.release_scratch()  # the C passes' arrays, kept from piece to piece
    if bp is None:
        return summary
    clib.release_memory()  # what the pieces and the parquet writer held: the statistics need it
    stage(f"the breakdown's statistics ({nkept:,} iterations)")
    late, info = bp.finish()
    parts.seal()

    def column(
        name: str, a: int = 0, b: int | None = None, late: Late = late, parts: ColumnParts = parts
    ) -> np.ndarray:
        return late.steal_ns(a, b) if name == "steal_ns" else parts.column(name, a, b)

    try:
        with (
            safeio.created(outdir / "breakdown.parquet") as tmp,
            futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ipctrace-breakdown-write") as pool,
        ):
            # breakdown.parquet is written by a thread of its own while the statistics take the
            # same columns from the pieces' parts, one column of all iterations at a time:
            # Arrow encodes without holding the GIL, so the two share both CPUs.
            written = pool.submit(write_breakdown, tmp, bp, parts, late)
            bd = breakdown.summarize_columns(
                column,
                info,
                summary.primary_metric,
                tj.tasks,
                set(tj.tracer.tids),
            )
            written.result()
    finally:
        parts.close()
    del pieces, parts, bp, late, info
    clib.release_memory()
    return summary.with_breakdown(bd)


def trace_facts(
    path: Path, count: int, block: int, workload: Workload, order: events_mod.TimeOrder
) -> breakdown.TraceFacts:
    """What every piece of the breakdown needs from the whole trace (breakdown.TraceFacts), from
    one read of events.bin: the entry calibration's traced calls (the thread and syscall it
    names), whether a copy routine was probed, the threads of the workload's processes; the
    same read finds the records out of time order (order: events.TimeOrder)."""
    cal = workload.entry_calibration or {}
    cal_tid, cal_nr = int(cal.get("tid") or -1), int(cal["syscall_nr"]) if "syscall_nr" in cal else -1
    pids = sorted({t.pid for t in workload.threads if t.pid})
    calls, tids = [], []
    copy_measured = False
    cpus: dict[int, set[int]] = {}
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


def write_breakdown(path: Path | str, bp: BreakdownPass, parts: ColumnParts, late: Late) -> None:
    """breakdown.parquet: each part (parts: store.parts.ColumnParts, the pieces' columns) with
    the columns of its iterations and finish()'s (late)."""
    writer = None
    a = 0
    try:
        for part in parts.tables():
            b = a + part.num_rows
            cols = {name: part.column(name).to_numpy() for name in part.column_names}
            frame = breakdown.frame_of(bp.rows.frame(a, b), bp, cols, late.columns(a, b))
            if writer is None:
                writer = ParquetAppender(path)
            writer.write(pa.Table.from_pandas(frame, preserve_index=False, nthreads=1))
            a = b
    finally:
        if writer is not None:
            writer.close()
