"""`ipctrace watch`: a program traced continuously, its requests analysed as they come, and each
slow one kept explained: as a results directory `explain`, `report` and `collect` take, and as an
OpenTelemetry trace (--otlp) whose child spans are its critical path.

The tracer is started as `trace` starts it (analysis/run/trace.py: the same command line, the
same broker under sudo); it writes events.bin into a live directory, which a step every STEP_S
reads from where the last one stopped (progress.LiveIterations: the new records with the last
ones before them as context, the round trips or marked windows found in them, each counted once
by the step that holds its end and SETTLE_NS of events after it). Of the requests a step finds,
those over the threshold (--slower-than) or among the N slowest of the minute so far
(--slowest N/min) are broken down with their critical path by the same function `explain` uses
(model/breakdown_pass.compute, path=True) over the step's events, sent as spans (render/otlp.py)
and handed to a keeper process (Shelf), which writes each one raw at once (its events around it
and what the step found of it: write_raw), then whole as its CPU share allows, the slowest
first: analysed as `trace` analyses a run (trace.analyse: the same files), its explanation and
a Perfetto window around it (`export --around max`: write_whole); `explain`, `report`, `export`
and `collect` write whole one still raw (written_whole). Every minute a row per metric goes to
a Parquet dataset (count, median, p99, p99.9, the mean components, the records lost).

Memory stays flat: a step reads at most PIECE_RECORDS records, keeps CONTEXT_RECORDS of them,
and the queues (the keeper's, the sender's) are bounded; what does not fit is dropped and
counted. Disk stays flat: the live events.bin is read once, and what was read is handed back to
the file system (FALLOC_FL_PUNCH_HOLE); kept requests over --max-disk go, the oldest first."""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import dataclasses
import functools
import heapq
import json
import os
import platform
import queue
import select
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.errors import UsageError
from analysis.run import privilege, runner
from analysis.run import trace as trace_mod
from analysis.run.progress import LiveIterations
from analysis.store import livenames, safeio
from analysis.store.jsonfiles import Task, TraceFile
from analysis.store.livenames import LiveNames
from analysis.store.results import KEPT_RAW as RAW

if TYPE_CHECKING:  # the analysis is imported when the watching starts
    import pandas as pd

    from analysis.model.breakdown_types import BreakdownFacts
    from analysis.model.decoded import Enters, Events, RecordsAround, Switches
    from analysis.model.spans import Request
    from analysis.render.otlp import Counts

DEBUG = bool(os.environ.get("IPCTRACE_WATCH_DEBUG"))
STEP_S = 0.5  # how often the live events are read
SETTLE_NS = 50_000_000  # a request is taken once this much of the trace follows its end
LEAD_NS = 20_000_000  # the events before a request its pieces are looked for in
KEPT_LEAD_NS = 1_000_000  # the events before a request a kept directory holds (with decoded.RecordsAround's anchors)
TRAIL_NS = 5_000_000  # and after it
# requests waiting for the keeper, at most: a step's slow ones, those of the ~1.5 s a request
# waits for the tracer's names of its tasks (NAMES_WAIT_S), and of the keeper's waits for a CPU
# (SCHED_IDLE); an hour's soak with 64 had bursts of 18 slow requests in a second, and left 22
# of 11 512 out. At most ~170 KB each (5 400 records at a full-speed ping-pong's rate)
KEEP_QUEUE = 128
# the keeper writes a request raw while it owes its CPU share no more than this: more than one
# request written whole owes (~0.1-0.3 s of CPU at 10 %), so that only raw requests coming
# faster than the share allows (~75 a second at 10 %) wait
RAW_SLACK_S = 5.0
# the keeper's process: this module by its name, so that what the watch pickles (Kept, Unkeep)
# is of its classes (run as __main__, `python -m`, an Unkeep was taken for a Kept)
KEEPER_ARGS = ("-c", "import sys; from analysis.run.watch import keeper_main; sys.exit(keeper_main())")
KEEP_DRAIN_S = 10.0  # at the end, how long the keeper may go on with those waiting
PIECE_RECORDS = 300_000  # records a step reads at most: a backlog is read in pieces of this size
# A watch further behind than this skips ahead (to one piece behind), the records it leaves
# unread counted and said: the backlog on disk, and the catching up at the end, stay bounded
# (at 235 000 records a second, a TCP ping-pong across CPUs, 17 s of it: 128 MiB)
BEHIND_MAX_RECORDS = 4_000_000
TICK_S = 1.0  # the steps of one tick at most: the wait loop's signals and --duration are seen
COMPONENT_SAMPLE = 256  # requests of a step broken down for the minute's mean components, at most
SAMPLE_BLOCKS = 4  # in this many runs of requests back to back, spread over the step
# the events a step's breakdown reads before and after each request it breaks down (with each
# thread's and CPU's last switch and system call before them: model/streaming.rows_around)
BREAKDOWN_LEAD_RECORDS = 2_000
BREAKDOWN_TRAIL_RECORDS = 1_000
MINUTE_NS = 60_000_000_000
DEFAULT_SLOWEST = 10  # per minute, when neither --slower-than nor --slowest is given
PUNCH_HOLE, KEEP_SIZE = 0x02, 0x01  # fallocate(2)'s FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
PUNCH_BYTES = 1 << 20  # bytes a fallocate call hands back at most
# --keep-cpu's default: the keeper's CPU time while the program runs, at most this per cent
# of one CPU (CpuShare: what it may write whole waits for what it owes). SCHED_IDLE alone does not keep
# it off the service's CPUs. Under EEVDF a woken task whose lag is negative is not picked
# before a SCHED_IDLE thread that slept and woke (or just started), and on a PREEMPT_NONE
# kernel it waits for the next tick (4 ms at HZ=250). On a 2-CPU machine, a 20 s TCP
# ping-pong across both CPUs with a 2 ms spin every 100th answer had 1.5 ms round trips
# without a spin: 28 with a watch that keeps nothing; 61 and 108 with a keeper always at
# work; 46 and 60 at 25 %; 37 at 10 %. Three such threads of a C program, not ipctrace's, made
# 13 of 50 000 round trips of a pinned pipe ping-pong take over 1 ms; one busy loop, none.
KEEPER_CPU_PERCENT = 10.0


@dataclasses.dataclass(frozen=True)
class Options:
    slower_than_ns: int = 0  # --slower-than (0: not given)
    slowest_per_min: int = 0  # --slowest N/min (0: not given)
    keep: Path | None = None  # --keep DIR
    max_disk: int = 0  # --max-disk bytes (0: no bound)
    otlp: str | None = None  # --otlp URL
    quiet: bool = False
    keep_cpu: float = KEEPER_CPU_PERCENT / 100  # --keep-cpu: the keeper's share of one CPU


@dataclasses.dataclass
class Tally:
    """What the watch did, for its last line and watch.json."""

    requests: int = 0
    slow: int = 0  # over the threshold, or among the minute's slowest
    explained: int = 0
    kept: int = 0
    keep_dropped: int = 0  # not kept: the keeper was behind (its queue full)
    keep_failed: int = 0  # not kept: writing it failed, or the keeper did (keeper_failed says why)
    whole: int = 0  # of those kept, written whole by the keeper (the others when first opened)
    whole_failed: int = 0  # of those kept, failed to be written whole (left raw)
    disk_dropped: int = 0  # kept, then removed for --max-disk (the oldest first)
    minutes: int = 0
    behind_records: int = 0  # left unread: the watch was more than BEHIND_MAX_RECORDS behind
    behind_ns: int = 0  # the time of the trace they covered
    last_keep_error: str = ""
    keeper_failed: str = ""  # the keeper itself failed: what it said (the watch then exits 1)


@dataclasses.dataclass(frozen=True)
class StepEvents:
    """A step's events as a request's pieces read them: every record's time, thread and CPU in
    time order, and the decoded model's sys_enter and switch tables."""

    ts: np.ndarray
    tid: np.ndarray
    cpu: np.ndarray
    enters: Enters
    switches: Switches

    @classmethod
    def of(cls, ev: Events) -> StepEvents:
        from analysis.model import decoded

        return cls(ev.ts, ev.tid, ev.cpu, decoded.enters(ev), decoded.switches(ev))


def component_sample(n: int, size: int = COMPONENT_SAMPLE, blocks: int = SAMPLE_BLOCKS) -> np.ndarray:
    """Which of a step's n requests are broken down for the minute's mean components: all of
    them, or `blocks` runs of requests back to back spread evenly over the step, `size` in all
    (runs, not requests spread apart: a breakdown reads the events around what it breaks down)."""
    if n <= size:
        return np.arange(n, dtype=np.int64)
    per = size // blocks
    firsts = np.linspace(0, n - per, blocks).astype(np.int64)
    return np.unique((firsts[:, None] + np.arange(per)).ravel())


def clock_offset_ns() -> int:
    """Wall-clock ns minus CLOCK_MONOTONIC ns, read once (the tightest of a few reads)."""
    best = None
    for _ in range(5):
        a = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        w = time.time_ns()
        b = time.clock_gettime_ns(time.CLOCK_MONOTONIC)
        if best is None or b - a < best[0]:
            best = (b - a, w - (a + b) // 2)
    assert best is not None
    return best[1]


def punch(fd: int, offset: int, length: int) -> bool:
    """The file's bytes [offset, offset + length) handed back to the file system (they read as
    zeros; the size stays), PUNCH_BYTES a call; whether it could."""
    libc = ctypes.CDLL(None, use_errno=True)
    end = offset + length
    while offset < end:
        # a call at a time, as the watch's reads: one over 3 MB held a CPU for 0.2-0.34 ms
        k = min(PUNCH_BYTES, end - offset)
        if libc.fallocate(fd, PUNCH_HOLE | KEEP_SIZE, ctypes.c_long(offset), ctypes.c_long(k)) != 0:
            return False
        offset += k
    return True


def aligned_span(start: int, end: int, block: int = PUNCH_BYTES) -> tuple[int, int]:
    """[start, end) shrunk to whole blocks of the file (offsets multiples of block): a punch
    that starts or ends inside a file system block zeroes that part and keeps the block. Spans
    of 1 MiB from the header's end (64 B in) kept a 4 KiB block of each MiB: a soak's live file
    grew by ~140 KiB a second (32 MB/s of records)."""
    return -(-start // block) * block, end // block * block


def hand_back(path: str | Path, start: int, end: int) -> int:
    """The file's whole PUNCH_BYTES blocks within [start, end) handed back to the file system
    (start: where the last one ended); where the next starts (start again if none was)."""
    a, b = aligned_span(start, end)
    if b - a < PUNCH_BYTES:
        return start
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return start
    try:
        return b if punch(fd, a, b - a) else start
    finally:
        os.close(fd)


def _comm(tid: int) -> str | None:
    try:
        with open(f"/proc/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None


class Threads:
    """The name and process of each thread a request passed through: from /proc when a request
    first names it; for one /proc no longer shows then, the name it had when a piece first
    held it (see), else the tracer's as it named it in the kernel (live: the loader's
    tasks.bin, a tick behind), else trace.json's at the end (learn)."""

    REMEMBERED = 1 << 16  # threads, then forgotten (read again when named again)

    def __init__(self, live: LiveNames | None = None) -> None:
        self._names: dict[int, str] = {}  # read when a request first named the thread, or learnt
        self._early: dict[int, str] = {}  # read when a piece first held it
        self._pids: dict[int, int] = {}
        self.live = live

    def name(self, tid: int) -> str:
        if tid not in self._names:
            got = _comm(tid)
            if got is None:  # ended: what it was called before, not kept, or the tracer's
                return self._early.get(tid) or self._traced(tid)[0]
            self._names[tid] = got
        return self._names[tid]

    def _traced(self, tid: int) -> tuple[str, int]:
        got = self.live.get(tid) if self.live is not None and tid > 0 else None
        return got or ("", 0)

    def pid(self, tid: int) -> int:
        if tid not in self._pids:
            try:
                with open(f"/proc/{tid}/status") as f:
                    self._pids[tid] = next((int(x.split()[1]) for x in f if x.startswith("Tgid:")), tid)
            except (OSError, ValueError):
                return self._traced(tid)[1] or tid  # ended: the tracer's, when it has told
        return self._pids[tid]

    def see(self, tids: Iterable[int]) -> None:
        """The names and processes of tids first held by a piece, read now: its requests are
        explained a step later, when a short-lived thread may have ended. Not taken as the
        name while the thread lives (a command's thread is renamed by its exec)."""
        if len(self._early) + len(self._names) > self.REMEMBERED:
            # a service that starts a thread per request: memory stays flat over hours
            self._early.clear()
            self._names.clear()
            self._pids.clear()
        for tid in tids:
            if tid > 0 and tid not in self._early and tid not in self._names:
                self._early[tid] = _comm(tid) or ""
                self.pid(tid)

    def learn(self, tid: int, comm: str | None, pid: int | None) -> None:
        """What the tracer recorded of tid, where /proc told nothing."""
        if not self._names.get(tid) and comm:
            self._names[tid] = comm
        if self._pids.get(tid, tid) == tid and pid:
            self._pids[tid] = pid


def dir_bytes(path: Path) -> int:
    """The disk a directory takes as du counts it: its files' blocks and its own (a kept
    request's directory is a 4 KiB block: 6 % of a raw one)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in (root, *(os.path.join(root, f) for f in files)):
            with contextlib.suppress(OSError):
                total += os.lstat(name).st_blocks * 512
    return total


class KeptOnDisk:
    """The kept directories and their bytes, oldest first (a name begins with its request's
    time): each measured once, when written, so that bounding the disk after each kept request
    costs no walk of them all (that walk, at 1 200 directories, took the steps half a CPU)."""

    def __init__(self, requests_dir: Path):
        self.lock = threading.Lock()
        self.dir = requests_dir
        self.names: list[str] = []  # sorted: the oldest first
        self.bytes: dict[str, int] = {}
        self.total = 0
        # those of an earlier watch into the same DIR count too: measured once, now
        for p in requests_dir.iterdir():
            if p.is_dir():
                self.add(p)

    def add(self, where: Path) -> None:
        size = dir_bytes(where)
        with self.lock:
            if where.name in self.bytes:
                return
            bisect.insort(self.names, where.name)
            self.bytes[where.name] = size
            self.total += size

    def forget(self, where: Path) -> None:
        with self.lock:
            size = self.bytes.pop(where.name, None)
            if size is not None:
                self.names.remove(where.name)
                self.total -= size

    def oldest_over(self, limit: int) -> list[str]:
        """The oldest names whose removal brings the total within limit (forgotten here), with
        the blocks of the directory that holds them (its list of names)."""
        out = []
        try:
            own = os.lstat(self.dir).st_blocks * 512
        except OSError:
            own = 0
        with self.lock:
            while self.total + own > limit and self.names:
                name = self.names.pop(0)
                self.total -= self.bytes.pop(name)
                out.append(name)
        return out


class Slowest:
    """The N slowest requests of each minute (by their end): whether a request is one of them
    so far, and the requests a later, slower one pushed out (their kept directories go)."""

    def __init__(self, n: int):
        self.n = n
        self.minute: int | None = None
        self.heap: list[tuple[int, int, Any]] = []  # (latency, seq, item)
        self.seq = 0

    def offer(self, minute: int, latency_ns: int) -> bool:
        """Whether a request of the minute (its end's) this slow would be among its slowest
        so far (a minute that is over takes none)."""
        if self.minute is None or minute > self.minute:
            return True
        return minute == self.minute and (len(self.heap) < self.n or latency_ns > self.heap[0][0])

    def add(self, minute: int, latency_ns: int, item: Any) -> Any | None:
        """item among the slowest of its minute (offer() said so); the one it pushed out, if any."""
        if self.minute is None or minute > self.minute:
            self.minute, self.heap = minute, []
        self.seq += 1
        heapq.heappush(self.heap, (latency_ns, self.seq, item))
        return heapq.heappop(self.heap)[2] if len(self.heap) > self.n else None


class Minutes:
    """The per-minute summary rows, one Parquet file a minute in the fleet layout of
    `collect --into DIR/` (store/fleet.py): DIR/dataset.json, DIR/minutes/hostname=H/
    workload=W/run_id=R/part-NNNNNN.parquet, a row per metric."""

    TABLE = "minutes"

    def __init__(self, into: Path | None, workload: str, run_id: str, host: str):
        self.into, self.workload, self.run_id, self.host = into, workload, run_id, host
        self.minute: int | None = None
        self.lat: list[np.ndarray] = []
        self.comp: dict[str, float] = {}
        self.comp_n = 0
        self.drops0 = 0
        self.unread = 0  # records of the minute the watch left unread (it was behind)
        self.rows: list[dict[str, Any]] = []  # the last rows written (for the tests, the last line)
        self.count = 0  # the minutes written
        if into is not None:
            from analysis.store import fleet

            if not os.path.lexists(into / fleet.MARK):
                safeio.write_json(
                    into / fleet.MARK, {"format": fleet.FORMAT, "version": fleet.FORMAT_VERSION, "tables": [self.TABLE]}
                )

    def add(
        self, ends: np.ndarray, lat: np.ndarray, comp_ends: np.ndarray, comps: dict[str, np.ndarray], drops: int
    ) -> None:
        """A step's requests (their ends, latencies), the components of a sample of them (its
        ends) and the records lost so far: each in the row of the minute it ended in (one that
        ended in a minute already written, in the minute being counted)."""
        if not len(ends):
            return
        floor = -1 if self.minute is None else self.minute
        minute, cminute = np.maximum(ends // MINUTE_NS, floor), np.maximum(comp_ends // MINUTE_NS, floor)
        for m in np.unique(minute).tolist():
            if self.minute is None:
                self.minute, self.drops0 = m, drops
            elif m != self.minute:
                self.flush(drops)
                self.minute = m
            self.lat.append(lat[minute == m])
            mine = cminute == m
            for c, v in comps.items():
                self.comp[c] = self.comp.get(c, 0.0) + float(np.sum(v[mine]))
            self.comp_n += int(np.count_nonzero(mine))

    def left_unread(self, n: int) -> None:
        """n records skipped (the watch was behind): counted in the row of the minute being counted."""
        self.unread += n

    def flush(self, drops: int) -> dict[str, Any] | None:
        if self.minute is None or not self.lat:
            return None
        from analysis.model import breakdown as bd

        lat = np.concatenate(self.lat)
        row: dict[str, Any] = {
            "hostname": self.host,
            "workload": self.workload,
            "run_id": self.run_id,
            "metric": "rtt",
            "minute_start_ns": self.minute * MINUTE_NS,
            "count": len(lat),
            "median_ns": float(np.median(lat)),
            "p99_ns": float(np.percentile(lat, 99)),
            "p999_ns": float(np.percentile(lat, 99.9)),
            "max_ns": int(lat.max()),
            "components_of": self.comp_n,  # the requests the mean components are of (a sample)
            "drops": max(drops - self.drops0, 0),
            # records the watch left unread, behind: the minute's requests are more than count
            "unread_records": self.unread,
            # the tracer counts missed switches for the whole trace (trace.json): not per minute
            "switches_missed": None,
        }
        for c in bd.COMPONENTS:
            row[f"mean_{c}_ns"] = self.comp.get(c, 0.0) / self.comp_n if self.comp_n else None
        self.rows = (self.rows + [row])[-10:]
        self.count += 1
        if self.into is not None:
            self._write(row)
        self.lat, self.comp, self.comp_n, self.drops0, self.unread = [], {}, 0, drops, 0
        return row

    def _write(self, row: dict[str, Any]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from analysis.store import fleet

        assert self.into is not None
        folder = self.into.joinpath(self.TABLE, *(fleet.folder_name(k, fleet.key_text(row[k])) for k in fleet.KEYS))
        safeio.makedirs(folder)
        with safeio.created(folder / f"part-{row['minute_start_ns'] // MINUTE_NS:012d}.parquet") as p:
            pq.write_table(pa.Table.from_pylist([row]), p)


class Watcher:
    """The steps while the tracer runs (tick(), from trace._run's wait loop) and after it (close())."""

    def __init__(self, t: trace_mod.Target, o: Options, live_dir: Path, requests_dir: Path | None, minutes: Minutes):
        self.t, self.o, self.live_dir, self.requests_dir, self.minutes = t, o, live_dir, requests_dir, minutes
        self.arch = platform.machine()
        self.live = LiveIterations(
            live_dir / "events.bin", t.iterations_from or "rtt", self.arch, None, bool(t.command)
        )
        self.live.PIECE_RECORDS = PIECE_RECORDS
        if DEBUG:
            import faulthandler
            import signal

            faulthandler.register(signal.SIGUSR1, all_threads=True)
        self.offset_ns = clock_offset_ns()
        self.tally = Tally()
        self.host = socket.gethostname()
        self.threads = Threads(LiveNames(live_dir / livenames.NAME))
        self.slowest = Slowest(o.slowest_per_min) if o.slowest_per_min else None
        self.next_step = time.monotonic() + STEP_S
        self.sender: Any = None
        self.keeper: Keeper | None = None
        if requests_dir is not None:
            self.keeper = Keeper(self)
        self.started = False
        self.punched = 0  # events.bin's bytes handed back so far
        self.seq = 0
        self.pending_slowest: list = []  # (request, kept dir or None, not kept as) of the minute, sent when it ends
        self.error: BaseException | None = None
        self.closed = False
        self.tracer_pid = 0  # the loader's process (trace._run tells)
        self.step_tracer_tids: list[int] | None = None  # tracer_tids(), read once a step
        self.around: RecordsAround | None = None  # the step's records indexed for kept windows

    def tracer_started(self, pid: int) -> None:
        self.tracer_pid = pid

    def tracer_tids(self) -> list[int]:
        """The threads of the watch itself: the loader's, this front end's and the keeper's (what
        they take of a CPU is the watch's probe effect, and a kept request's explain says so)."""
        procs = [self.tracer_pid, os.getpid(), self.keeper.proc.pid if self.keeper else 0]
        return sorted({tid for pid in procs if pid > 0 for tid in threads_of(pid)})

    def _step_tracer_tids(self) -> list[int]:
        if self.step_tracer_tids is None:
            self.step_tracer_tids = self.tracer_tids()
        return self.step_tracer_tids

    def start(self) -> None:
        """The sender, the keeper and what the steps use, at the first tick: once the tracer is
        started (it attaches meanwhile), and before the first request, so that the memory of
        the first seconds is what the watch stays at."""
        if self.started:
            return
        self.started = True
        # From here on (the tracer and the traced program started) the steps and every thread
        # they start yield to any other task that wakes (at the next tick at worst: KEEPER_CPU_PERCENT).
        for tid in own_threads():
            yield_cpu(tid)
        if self.o.otlp:
            from opentelemetry.exporter.otlp.proto.http import trace_exporter  # noqa: F401
            from opentelemetry.sdk import trace as sdk_trace  # noqa: F401

            from analysis.render import otlp

            self.sender = otlp.Sender(self.o.otlp)
        if self.keeper is not None:
            self.keeper.begin()
        from analysis.model import breakdown, explain, rtt  # noqa: F401

    # --- the steps ----------------------------------------------------------------------------

    def tick(self) -> None:
        self.start()
        if time.monotonic() < self.next_step or self.error is not None:
            return
        try:
            t0 = time.monotonic()
            while self.step() and time.monotonic() - t0 < TICK_S:
                pass
            if DEBUG:
                print(f"watch: step {time.monotonic() - t0:.2f} s, at {self.live.offset:,}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - said once at the end; the tracing goes on
            self.error = e
        self.next_step = time.monotonic() + STEP_S

    def step(self, settle_ns: int = SETTLE_NS) -> bool:
        """One piece of the live events analysed, its requests up to settle_ns before its newest
        event (0 once the tracer ended: every record is there); whether there was one (a backlog:
        more)."""
        import pandas as pd

        self._skip_if_behind()
        self.step_tracer_tids = None
        self.around = None
        got = self.live.advance(settle_ns)
        self._hand_back()
        if got is None:
            return False
        ev, its = got
        self.threads.see(set().union(*(pd.unique(ev[c].to_numpy()).tolist() for c in ("tid", "next_tid", "other_tid"))))
        full = self.live.offset  # a full piece read: more may wait
        if len(its):
            self._requests(ev, its)
            if self.keeper is not None:
                self.keeper.flush()  # the step's requests at once: the keeper wakes once a step
        return bool(self.live.PIECE_RECORDS and (full - self.punched) and self._more_waiting())

    def _more_waiting(self) -> bool:
        try:
            return os.stat(self.live.path).st_size - self.live.offset > (1 << 20)
        except OSError:
            return False

    def _skip_if_behind(self) -> None:
        """More than BEHIND_MAX_RECORDS unread: all but the last piece of them left unread,
        counted (the minute's row and the last line say so)."""
        from analysis.store import events as events_mod

        try:
            size = os.stat(self.live.path).st_size
        except OSError:
            return
        behind = (size - self.live.offset) // events_mod.REC.itemsize
        if behind <= BEHIND_MAX_RECORDS:
            return
        n = behind - PIECE_RECORDS
        first, last = self.live.skip(n)
        self.tally.behind_records += n
        self.tally.behind_ns += max(last - first, 0)
        self.minutes.left_unread(n)

    def _hand_back(self) -> None:
        """events.bin's records before the context handed back to the file system."""
        from analysis.store import events as events_mod

        ctx = 0 if self.live.context is None else len(self.live.context)
        self.punched = hand_back(
            self.live.path,
            max(self.punched, events_mod.HEADER.itemsize),
            self.live.offset - ctx * events_mod.REC.itemsize,
        )

    def _workload(self, ev: pd.DataFrame, its: pd.DataFrame) -> dict[str, Any]:
        from analysis.model import decoded, rtt

        measuring = sorted(int(x) for x in its["tid"].unique())
        # the threads followed: those with system call records (the tracer records only theirs;
        # a switch record names whatever task the CPU ran)
        followed = decoded.syscall_tids(ev)
        # the wake-ups of the step's round trips only, as trace --rtt takes them (a shell's
        # finished $(...) subshells are no side of the conversation)
        span = (int(its["t_start_ns"].min()), int(its["t_end_ns"].max()))
        peers = rtt.partners(ev, measuring, followed, within=span)
        roles = [("measuring", int(x)) for x in measuring] + [("peer", int(x)) for x in peers]
        threads = [{"role": r, "pid": self.threads.pid(x), "tid": x, "cpu": -1} for r, x in roles]
        tf = TraceFile(tasks={x: Task(comm=self.threads.name(x)) for _, x in roles})
        return trace_mod.workload_doc(self.t, tf, its, threads, None, {}, "running", 0)

    def _requests(self, ev: pd.DataFrame, its: pd.DataFrame) -> None:
        from analysis.model import breakdown as bd
        from analysis.model import decoded, entrycal, streaming, tracefacts
        from analysis.model.explain import path_of
        from analysis.store.jsonfiles import Workload

        its = its.reset_index(drop=True)
        n = len(its)
        its["iteration"] = np.arange(self.tally.requests, self.tally.requests + n, dtype=np.int64)
        its["seq"] = its["iteration"]
        self.tally.requests += n
        lat = its["latency_ns"].to_numpy(np.int64)
        starts, ends = its["t_start_ns"].to_numpy(np.int64), its["t_end_ns"].to_numpy(np.int64)
        if self.slowest is not None:
            # of each minute, the step's N slowest at most: only they can be among its slowest
            minute = ends // MINUTE_NS
            chosen = []
            for m in np.unique(minute):
                mine = np.flatnonzero(minute == m)
                top = mine[np.argsort(-lat[mine], kind="stable")[: self.slowest.n]]
                chosen += [k for k in top if self.slowest.offer(int(m), int(lat[k]))]
        else:
            chosen = list(np.flatnonzero(lat > self.o.slower_than_ns))
        chosen = sorted(int(k) for k in chosen)
        # the minute's mean components: over every request, or over a sample of a step's
        # (the breakdown of every request would cost the tracing a CPU)
        sample = component_sample(n)
        # One breakdown a step, of the sample and the slow requests together, with the critical
        # paths where there are slow ones: a request's row is its own, whichever others go with
        # it, and the threads' timelines are taken once (two breakdowns took twice the CPU: 68 ms
        # against 29-34 ms for 256 + 12 requests of a TCP ping-pong's step). It reads only the
        # events around them, as a piece of the streaming analysis gives them (the step's
        # timelines of all its events were a third of its CPU).
        at = np.union1d(sample, np.asarray(chosen, np.int64)).astype(np.int64)
        rows = streaming.rows_around(ev, starts[at], ends[at], BREAKDOWN_LEAD_RECORDS, BREAKDOWN_TRAIL_RECORDS)
        part = ev if 2 * len(rows) > len(ev) else ev.iloc[rows].reset_index(drop=True)
        wl = self._workload(part, its)
        typed = Workload.from_json(wl)
        step = decoded.Events(part)  # decoded once a step: the breakdown and the requests read it
        # what the breakdown needs of all the step's events (the CPUs each thread ran on: their steal;
        # the entry path: a watch has no calibration calls)
        facts = tracefacts.whole_of(ev, entrycal.entry_costs(step, typed), typed)
        frame, info = bd.compute(
            its.iloc[at].reset_index(drop=True), step, typed, None, arch=self.arch, path=bool(chosen), facts=facts
        )
        of_sample = np.searchsorted(at, sample)
        comps = {c: frame[c].to_numpy(np.float64)[of_sample] for c in bd.COMPONENTS}
        self.minutes.add(ends, lat, ends[sample], comps, self._drops())
        if not chosen:
            return
        self.tally.slow += len(chosen)
        sel = its.iloc[chosen].reset_index(drop=True)
        in_frame = np.searchsorted(at, chosen)  # each slow request's row of frame
        cols = StepEvents.of(step)
        rows = sel.to_dict("records")
        slow_comps = frame[list(bd.COMPONENTS)].iloc[in_frame].to_dict("records")
        slow_rows: list[dict[str, Any]] | None = None
        # the slowest first: a keeper that is behind keeps the step's slowest (--slowest takes
        # them in time order, minute by minute)
        order = (
            range(len(sel)) if self.slowest is not None else np.argsort(-sel["latency_ns"].to_numpy(), kind="stable")
        )
        for k in (int(x) for x in order):
            f = int(in_frame[k])
            # the entry of info.path of the asking thread, its segments of this row
            everyone, seg = next(
                (x for x in info.path if len(x[1].w) and (np.asarray(x[1].w) == f).any()), info.path[0]
            )
            path = path_of(everyone, seg, int(rows[k]["t_start_ns"]), f)
            req = self._request(cols, rows[k], slow_comps[k], path, bool(info.critical_path))
            self.tally.explained += 1
            if self.requests_dir is not None and slow_rows is None:  # the breakdown's rows, once a step
                slow_rows = frame.iloc[in_frame].to_dict("records")
            explained = functools.partial(Explained.of, slow_rows[k] if slow_rows else {}, info, everyone, path)
            kept, not_kept = self._keep(rows[k], wl, req, explained)
            req = dataclasses.replace(req, kept=str(kept) if kept else "")
            if self.slowest is not None:
                self._slowest(req, kept, not_kept)
            elif self.sender is not None:
                self.sender.put(req)

    def _slowest(self, req: Request, kept: Path | None, not_kept: str) -> None:
        """--slowest: the minute's slowest are sent once its minute is over; one pushed out
        meanwhile is neither sent nor kept, nor counted (its directory goes, written or not; the
        tally not_kept names, if it was counted as not kept, is taken back)."""
        assert self.slowest is not None
        minute = req.end_ns // MINUTE_NS
        if self.pending_slowest and self.pending_slowest[0][0].end_ns // MINUTE_NS != minute:
            self._send_slowest()
        out = self.slowest.add(minute, req.end_ns - req.start_ns, (req, kept, not_kept))
        self.pending_slowest = [x[2] for x in self.slowest.heap]
        if out is None:
            return
        self.tally.slow -= 1
        if out[1] is None:
            if out[2]:
                setattr(self.tally, out[2], getattr(self.tally, out[2]) - 1)
        elif self.keeper is not None:
            self.keeper.unkeep(Path(out[1]))

    def _send_slowest(self) -> None:
        if self.sender is not None:
            for req, *_ in sorted(self.pending_slowest, key=lambda x: x[0].start_ns):
                self.sender.put(req)
        self.pending_slowest = []

    def _header_bytes(self) -> bytes | None:
        from analysis.store import events as events_mod

        try:
            with open(self.live.path, "rb", buffering=0) as f:
                head = f.read(events_mod.HEADER.itemsize)
        except OSError:
            return None
        return head if len(head) == events_mod.HEADER.itemsize else None

    def _drops(self) -> int:
        from analysis.store import events as events_mod

        try:
            with open(self.live.path, "rb", buffering=0) as f:
                head = f.read(events_mod.HEADER.itemsize)
        except OSError:
            return 0
        if len(head) < events_mod.HEADER.itemsize:
            return 0
        return int(np.frombuffer(head, events_mod.HEADER)[0]["drops"])

    def _request(
        self,
        cols: StepEvents,
        row: dict[str, Any],
        comps: dict[str, float],
        path: list[tuple[int, int, int, str, int]],
        closed: bool,
    ) -> Request:
        """The spans' request of row, from its critical path (explain.path_of's) and components."""
        from analysis.model import breakdown as bd
        from analysis.model import spans
        from analysis.store import syscalls

        s, e = int(row["t_start_ns"]), int(row["t_end_ns"])
        ts, tid, cpu, sw = cols.ts, cols.tid, cols.cpu, cols.switches
        lo, hi = np.searchsorted(ts, [s - LEAD_NS, e + TRAIL_NS])
        slo, shi = np.searchsorted(sw.ts, [s - LEAD_NS, e + TRAIL_NS])  # the switches of that span
        pieces = []
        for a, b, who, component, holder in path:
            at, until = s + a, s + b
            call = ""
            mine = slice(lo, hi)
            if component in ("syscall", "copy", "entry"):
                # the call the thread was in: its last sys_enter before the segment ends
                ets, enr = cols.enters.of_thread(who)
                j = int(np.searchsorted(ets, until, side="left")) - 1
                if j >= 0:
                    call = syscalls.name(self.arch, int(enr[j]))
            if component in spans.WAITING or component == "wakeup":
                # the CPU it waited for: where it was switched in next
                w = np.flatnonzero((sw.next_tid[slo:shi] == who) & (sw.ts[slo:shi] >= at))
                where = int(sw.cpu[slo + w[0]]) if len(w) else -1
            else:
                w = np.flatnonzero((tid[mine] == who) & (ts[mine] <= until))
                where = int(cpu[lo + w[-1]]) if len(w) else -1
            hold = ""
            if holder > 0:
                hold = f"{self.threads.name(holder) or 'task'} ({holder})"
            pieces.append(spans.Piece(a, b, who, self.threads.name(who), component, call, where, hold))
        asker = int(row["tid"])
        return spans.Request(
            how=self.t.iterations_from or "rtt",
            name=self.t.functions[0].rpartition(":")[2] if self.t.functions else "",
            service=self.service(asker),
            host=self.host,
            pid=self.threads.pid(asker),
            tid=asker,
            thread_name=self.threads.name(asker),
            start_ns=s,
            end_ns=e,
            clock_offset_ns=self.offset_ns,
            path=pieces,
            components={c: float(comps[c]) for c in bd.COMPONENTS},
            closed=closed,
            iteration=int(row["iteration"]),
        )

    def service(self, tid: int) -> str:
        """service.name: the traced program's name (the command's, or the process's)."""
        if self.t.command:
            return Path(self.t.command[0]).name
        return self.threads.name(self.threads.pid(tid)) or self.t.name

    # --- keeping ------------------------------------------------------------------------------

    def _keep(
        self,
        row: dict[str, Any],
        wl: dict[str, Any],
        req: Request,
        explained: Callable[[], Explained],
    ) -> tuple[Path | None, str]:
        """The request handed to the keeper (its events around it copied now, and what the step's
        breakdown found of it: explained(), called only if it is kept); where it will be, or
        None and the tally that counted it as not kept ("" if none did). Its
        trace.json names, as the tracer's names every task a record named, the tasks of the
        records around it, and the watch's own threads as the tracer's."""
        if self.requests_dir is None:
            return None, ""

        s, e = req.start_ns, req.end_ns
        # the records themselves: the context and the new ones, in the file's order
        recs = self.live.records  # the records of this step, with the context before them
        if recs is None:
            return None, ""
        assert self.keeper is not None
        if self.tally.keeper_failed:
            self.tally.keep_failed += 1
            return None, "keep_failed"
        if not self.keeper.reserve():  # before the copy: a keeper behind costs the step nothing
            self.tally.keep_dropped += 1
            return None, "keep_dropped"
        from analysis.model import decoded

        if self.around is None:  # indexed once a step: its slow requests may be many
            self.around = decoded.RecordsAround(recs)
        window = self.around.around(s, e, KEPT_LEAD_NS, TRAIL_NS)
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime((s + self.offset_ns) / 1e9))
        frac = ((s + self.offset_ns) // 1000) % 1_000_000
        self.seq += 1
        name = f"{stamp}.{frac:06d}-{req.tid}-{(e - s) / 1e6:.3f}ms-{self.seq}"
        where = self.requests_dir / name
        tids = sorted({int(th["tid"]) for th in wl["threads"]})
        named = sorted({*tids, *window_tids(window)})
        tj = TraceFile.from_json(
            {
                "drops": {"total": 0},
                "tids": tids,
                "pids": sorted({int(th["pid"]) for th in wl["threads"]}),
                "tracer": {"pid": self.tracer_pid or None, "tids": self._step_tracer_tids()},
                "tasks": {str(x): {"comm": self.threads.name(x), "pid": self.threads.pid(x)} for x in named},
                "clock": "CLOCK_MONOTONIC",
                "status": "watch",
            }
        )
        self.keeper.put(Kept(where, window, row, wl, tj, req, explained()))
        return where, ""

    def _names_from_tracer(self) -> None:
        """The names and processes of the threads /proc no longer shows (ended before a step
        read them: a short program, or the requests of the last step), from the tasks the
        tracer recorded in the kernel and wrote to trace.json as it ended."""
        from analysis.store.results import trace_file

        try:
            tasks = trace_file(self.live_dir).tasks
        except UsageError:  # none written (a tracer that failed): the names stay unknown
            return
        for tid, task in tasks.items():
            if task is not None:
                self.threads.learn(tid, task.comm, task.pid)

    def close(self) -> None:
        """The events left read and analysed, the minute's row written, the queues given a
        bounded moment (once: trace._run calls it as the tracer ends)."""
        if self.closed:
            return
        self.closed = True
        self.start()
        for tid in own_threads():
            unyield_cpu(tid)
        if self.keeper is not None:
            for tid in threads_of(self.keeper.proc.pid):  # its reader of the pipe too
                unyield_cpu(tid)
            self.keeper.program_ended()
        self._names_from_tracer()
        with contextlib.suppress(Exception):
            # the tracer has ended: the requests of the last SETTLE_NS too (they were lost: the
            # last 50 ms of every watch, ~300 round trips of a 150 us ping-pong)
            for _ in range(1000):
                if not self.step(settle_ns=0):
                    break
        if self.slowest is not None:
            self._send_slowest()
        self.minutes.flush(self._drops())
        if self.keeper is not None:
            self.keeper.close(KEEP_DRAIN_S)


@dataclasses.dataclass
class Kept:
    """A request for the keeper: where its directory goes, its records, its row of iterations,
    workload.json and trace.json of it, and its spans' request (model/spans.Request)."""

    where: Path
    window: np.ndarray
    row: dict[str, Any]  # its row of iterations: t_start_ns, t_end_ns, tid, cpu, metric...
    wl: dict[str, Any]
    tj: TraceFile  # its keys as written to trace.json
    req: Any
    explained: Explained


@dataclasses.dataclass
class Explained:
    """What the step's breakdown found of a kept request, for its explain.txt (explain.explanation
    takes it as it takes compute()'s): the threads its critical path names (role, tid), the path
    (explain.path_of's), its row of breakdown columns, and of the step's BreakdownFacts the
    fields an explanation reads (the threads' timelines are made again of the kept events: the
    chain of `ipctrace explain` on the kept directory reads those)."""

    everyone: list[tuple[str, int]]
    path: list[tuple[int, int, int, str, int]]
    row: dict[str, Any]
    roles: list[str]
    copy_measured: bool
    entry: dict[str, Any]
    critical_path: bool
    timelines: dict[int, Any] = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, row: dict[str, Any], info: BreakdownFacts, everyone: Any, path: list) -> Explained:
        """Of a row of the step's breakdown frame and info (compute(path=True)'s)."""
        return cls(
            everyone=[(str(r), int(t)) for r, t in everyone],
            path=path,
            row={c: v.item() if hasattr(v, "item") else v for c, v in row.items()},
            roles=list(info.roles),
            copy_measured=bool(info.copy_measured),
            entry=dict(info.entry),
            critical_path=bool(info.critical_path),
        )


@dataclasses.dataclass(frozen=True)
class Unkeep:
    """For the keeper: the request kept in `where` is no longer kept (--slowest pushed it out)."""

    where: Path


class Keeper:
    """The results directories of kept requests, written by a process of its own under SCHED_IDLE
    and within Options.keep_cpu of one CPU while the program runs (KEEPER_CPU_PERCENT says why
    both), which never holds the steps' interpreter's lock: requests go to it pickled over a
    pipe by a thread of ours (a full pipe never stops a step), at most KEEP_QUEUE at a time (a
    request that finds them all taken is not kept, and counted). It writes each request raw at
    once (its events and what the step found of it), and whole (analysed, explained, its
    Perfetto window) as its CPU share allows, the slowest first; it bounds --max-disk itself
    (so that nothing is removed while it writes it), and answers a JSON line for each."""

    def __init__(self, w: Watcher):
        import subprocess

        from analysis import HOME

        self.w = w
        self.q: queue.Queue[list[Kept | Unkeep] | None] = queue.Queue()
        self.batch: list[Kept | Unkeep] = []  # the step's, sent by flush()
        self.inflight = 0
        self.pending: set[str] = set()  # the directories asked for, not yet written raw
        self.unkept: set[str] = set()  # the directories unkept, not yet said removed
        self.lock = threading.Lock()
        # started with the watch, before the tracer: it loads its modules meanwhile
        # the keeper keeps within its CPU budget until this pipe's write end is closed (the
        # program ended: program_ended(), or the watch itself did)
        self.ended_r, self.ended_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, *KEEPER_ARGS],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                cwd=HOME,
                process_group=0,  # a terminal's Ctrl-C is for the watch, which ends the keeper itself
                pass_fds=(self.ended_r,),
            )
        except BaseException:
            os.close(self.ended_w)
            raise
        finally:
            os.close(self.ended_r)
        yield_cpu(self.proc.pid)  # at once: its imports take seconds of CPU while the service runs

    def begin(self) -> None:
        """Its configuration sent (the live file's header is there once the tracer started),
        and the threads that feed it and read its answers started."""
        import pickle

        w = self.w
        config = {
            "target": dataclasses.asdict(w.t),
            "header": w._header_bytes(),
            "offset_ns": w.offset_ns,
            "names": str(w.live_dir / livenames.NAME),
            "cpu_share": w.o.keep_cpu,
            "ended_fd": self.ended_r,
            "requests_dir": str(w.requests_dir),
            "max_disk": w.o.max_disk,
        }
        assert self.proc.stdin is not None
        pickle.dump(config, self.proc.stdin)
        self.proc.stdin.flush()
        self.feeder = threading.Thread(target=self._feed, name="ipctrace-keeper-feed", daemon=True)
        self.reader = threading.Thread(target=self._read, name="ipctrace-keeper-read", daemon=True)
        self.feeder.start()
        self.reader.start()

    def unkeep(self, where: Path) -> None:
        """A request no longer kept (--slowest: a slower one pushed it out): the keeper removes
        its directory, written or not (after its Kept: the batch and the pipe keep their order;
        close() removes those it did not say it removed)."""
        with self.lock:
            self.unkept.add(str(where))
        self.batch.append(Unkeep(where))

    def reserve(self) -> bool:
        """A place for one request (put() it next), if fewer than KEEP_QUEUE are waiting."""
        with self.lock:
            if self.inflight >= KEEP_QUEUE:
                return False
            self.inflight += 1
            return True

    def put(self, k: Kept) -> None:
        with self.lock:
            self.pending.add(str(k.where))
        self.batch.append(k)

    def flush(self) -> None:
        """What the step put and unkept, to the keeper in one piece."""
        if self.batch:
            self.q.put(self.batch)
            self.batch = []

    def _feed(self) -> None:
        import pickle

        assert self.proc.stdin is not None
        while True:
            k = self.q.get()
            try:
                pickle.dump(k, self.proc.stdin)
                self.proc.stdin.flush()
            except (OSError, ValueError):
                return
            if k is None:
                return

    def _answered(self, where: str) -> bool:
        """where no longer waits to be written raw; whether it did."""
        with self.lock:
            if where not in self.pending:
                return False
            self.pending.discard(where)
            self.inflight -= 1
            return True

    def _read(self) -> None:
        assert self.proc.stdout is not None
        tally = self.w.tally
        for line in self.proc.stdout:
            try:
                got = json.loads(line)
            except ValueError:
                continue
            what, where = str(got.get("what")), str(got.get("where"))
            if what == "kept":  # written raw
                self._answered(where)
                tally.kept += 1
            elif what == "whole":
                tally.whole += 1
            elif what == "removed":  # for --max-disk, the oldest first
                tally.disk_dropped += 1
            elif what == "unkept":  # --slowest pushed it out: never counted again
                with self.lock:
                    self.unkept.discard(where)
                if not self._answered(where):
                    tally.kept -= 1
                    tally.whole -= bool(got.get("whole"))
            elif what == "failed":  # not written raw: not kept
                self._answered(where)
                tally.keep_failed += 1
                tally.last_keep_error = str(got.get("error"))
            elif what == "whole_failed":  # kept raw; explain DIR says why
                tally.whole_failed += 1
                tally.last_keep_error = str(got.get("error"))
            elif what == "keeper_failed":  # it ends: what waits is not kept (close() counts it)
                tally.keeper_failed = str(got.get("error"))

    def program_ended(self) -> None:
        """The keeper's CPU budget lifted: what waits is written at once (the service is gone).
        Also under sudo, where the watch cannot give it the normal policy back."""
        if self.ended_w >= 0:
            os.close(self.ended_w)
            self.ended_w = -1

    def close(self, drain_s: float) -> None:
        """Those waiting are written raw, and those kept raw whole, for at most drain_s more;
        then the keeper is ended: the directories of those not written raw are removed (not
        kept, counted), those written raw stay (written whole when first opened)."""
        self.program_ended()
        self.flush()
        deadline = time.monotonic() + drain_s
        while self.pending and time.monotonic() < deadline and self.proc.poll() is None:
            time.sleep(0.05)
        self.q.put(None)  # the keeper ends once what it kept raw is written whole
        self.feeder.join(1)
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.kill()  # ours: what it was writing raw is removed below; whole, is left raw
        self.proc.wait()
        self.reader.join(5)
        tally = self.w.tally
        if self.proc.returncode > 0 and not tally.keeper_failed:  # ended with no word (killed by another)
            tally.keeper_failed = f"the keeper exited with status {self.proc.returncode}"
        with self.lock:
            left, self.pending = self.pending, set()
            unkept, self.unkept = self.unkept, set()
            self.inflight = 0
        # pushed out by --slowest and not said removed (a keeper ended first): removed here, and
        # no longer counted, as the keeper's "unkept" would have had it
        for where in sorted(unkept):
            if where in left:
                left.discard(where)
            elif os.path.isdir(where):
                tally.kept -= 1
                tally.whole -= os.path.exists(os.path.join(where, "summary.json"))
            shutil.rmtree(where, ignore_errors=True)
        for where in sorted(left):
            shutil.rmtree(where, ignore_errors=True)
        if tally.keeper_failed:
            tally.keep_failed += len(left)
        else:
            tally.keep_dropped += len(left)
        # what a keeper ended halfway through a whole write left beyond --max-disk (a 900 s
        # soak's 44 KiB over 200 MiB): measured once more, the oldest removed
        if self.w.o.max_disk and self.w.requests_dir is not None:
            for name in KeptOnDisk(self.w.requests_dir).oldest_over(self.w.o.max_disk):
                if _remove(self.w.requests_dir / name):
                    self.w.tally.disk_dropped += 1


def yield_cpu(pid: int = 0) -> None:
    """A thread (0: the calling one; a process's first thread) and the threads and processes it
    starts under SCHED_IDLE: another task that wakes on its CPU preempts it at once, or at the
    next tick where EEVDF finds the woken one not yet eligible (KEEPER_CPU_PERCENT). At nice 10
    the steps and the keeper held the CPU a traced request's thread was woken on for ~1.3 ms at
    a time (a 2-CPU machine, the service on both CPUs): a watch made slow requests it reported."""
    try:
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
    except OSError:  # a kernel without SCHED_IDLE: the lowest nice value
        os.setpriority(os.PRIO_PROCESS, pid, 19)


def own_threads() -> list[int]:
    """The tids of this process's threads but the one that passes the program's stderr on (the
    program must not wait on a full pipe while the machine is busy). The others include threads
    started before the steps yield, which a policy set by the calling thread does not reach:
    jemalloc's background thread, which hands freed memory back to the kernel (where, on a
    PREEMPT_NONE kernel, a woken request's thread waits until it leaves)."""
    relay = {t.native_id for t in threading.enumerate() if t.name == trace_mod.RELAY_THREAD}
    return [t for t in threads_of(os.getpid()) if t not in relay] or [0]


def threads_of(pid: int) -> list[int]:
    """The tids of a process's threads (none once it is gone)."""
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


def unyield_cpu(pid: int = 0) -> None:
    """Back to the normal policy once the traced program ended (a busy machine would starve the
    last steps and the keeper's drain under SCHED_IDLE); only root may: a user's watch stays
    idle, and what the keeper cannot write in time is counted as not kept."""
    with contextlib.suppress(OSError):
        os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))


def keeper_main() -> int:
    """The keeper's process (KEEPER_ARGS): the requests on stdin (pickled: a config, then a Kept
    or an Unkeep each, None at the end) kept in their results directories (Shelf); a JSON line
    on stdout for each thing done."""
    import pickle

    yield_cpu()
    # what write_whole uses, loaded now: the keeper's memory is what it stays at before the
    # first request (the watch's memory is judged from its first seconds on)
    import pyarrow.parquet  # noqa: F401

    from analysis.model import explain  # noqa: F401
    from analysis.render import explain as render_explain  # noqa: F401
    from analysis.render import perfetto_proto  # noqa: F401
    from analysis.store import rundir  # noqa: F401

    started = StartedThreads()
    stdin = sys.stdin.buffer
    try:
        config = pickle.load(stdin)
    except EOFError:  # the watch ended before the tracer started
        return 0
    try:
        return keep(config, stdin, started)
    except Exception as e:  # noqa: BLE001 - said to the watch, which counts what it did not keep
        _say(what="keeper_failed", error=f"{type(e).__name__}: {e}")
        _said()
        os._exit(1)  # its reader of stdin blocks an orderly exit


def keep(config: dict[str, Any], stdin: Any, started: StartedThreads) -> int:
    """The keeper's turns: what came taken, then the work its CPU share allows (Shelf.work)."""
    import pickle

    t = trace_mod.Target(**config["target"])
    inbox: queue.Queue[Any] = queue.Queue()
    gone = object()  # the watch went without its None (killed): what is raw stays raw

    def unpickled() -> None:
        while True:
            try:
                item = pickle.load(stdin)
            except (EOFError, OSError, pickle.UnpicklingError):
                item = gone
            inbox.put(item)
            if item is None or item is gone:
                return

    threading.Thread(target=unpickled, name="ipctrace-keeper-in", daemon=True).start()
    shelf = Shelf(
        lambda k: write_raw(k, t, config["header"], config["offset_ns"]),
        lambda where: write_whole(where, wait=False),
        LiveNames(config["names"]),
        Path(config["requests_dir"]),
        int(config["max_disk"]),
        started.tids,
        _say,
    )
    share = CpuShare(config["cpu_share"])
    ended_fd = config["ended_fd"]
    ending = False
    while not (ending and shelf.done()):
        if not share.lifted and select.select([ended_fd], [], [], 0)[0]:
            share.lifted = True  # the program ended: no more pauses
        timeout = shelf.timeout(share, time.monotonic())
        items: list[Any] = []
        try:
            items.append(inbox.get(timeout=timeout))
            while True:
                items.append(inbox.get_nowait())
        except queue.Empty:
            pass
        for item in [x for got in items for x in (got if isinstance(got, list) else [got])]:
            if item is gone:
                return 0
            if item is None:
                ending = share.lifted = True
            elif isinstance(item, Unkeep):
                shelf.unkeep(item.where)
            else:
                shelf.take(item, time.monotonic())
        cpu, began = time.process_time(), time.monotonic()
        shelf.work(share, began, ending)
        _said()
        share.spend(time.process_time() - cpu, began)
    return 0


def _say(**said: Any) -> None:
    """A line to the watch (sent by _said(): the lines of a turn at once, a wake-up of the watch's
    reader a turn); none to say it to (the watch was killed): the keeper ends."""
    try:
        print(json.dumps(said))
    except (BrokenPipeError, ValueError):
        os._exit(0)


def _said() -> None:
    try:
        sys.stdout.flush()
    except (BrokenPipeError, ValueError):
        os._exit(0)


class CpuShare:
    """When the keeper may next work on what can wait, so that its CPU time stays within `share`
    of one CPU: each piece of work of cpu_s seconds (spend()) moves that moment cpu_s / share on
    from where it was, or from when the piece began if later. Lifted (share 1, or the program
    ended): at once."""

    def __init__(self, share: float, clock: Any = time):
        self.share, self.clock = share, clock
        self.next_at = 0.0
        self.lifted = share >= 1

    def spend(self, cpu_s: float, began: float) -> None:
        if not self.lifted and cpu_s > 0:
            self.next_at = max(self.next_at, began) + cpu_s / self.share

    def owed_s(self) -> float:
        """How long until the next piece may start (0: now)."""
        return 0.0 if self.lifted else max(0.0, self.next_at - self.clock.monotonic())


NAMES_WAIT_S = 1.5  # the loader writes tasks.bin once a second


class Shelf:
    """The keeper's requests: each written raw (write_raw) once the tracer named its tasks (or
    NAMES_WAIT_S after it came), before anything else while it owes its CPU share at most
    RAW_SLACK_S; then those kept raw written whole (write_whole), the slowest first, one at a
    time as its CPU share allows; the kept directories within max_disk (0: no bound), the
    oldest removed first (KeptOnDisk). raw(k), whole(where): write_raw and write_whole, bound;
    say(what=..., where=..., ...): a line to the watch."""

    def __init__(
        self,
        raw: Callable[[Kept], None],
        whole: Callable[[Path], bool],
        names: LiveNames,
        requests_dir: Path,
        max_disk: int,
        own: Callable[[], set[int]],
        say: Callable[..., None],
    ):
        self.write_raw, self.write_whole, self.names = raw, whole, names
        self.max_disk, self.own, self.say = max_disk, own, say
        self.on_disk = KeptOnDisk(requests_dir) if max_disk else None
        self.waiting: list[tuple[float, Kept]] = []  # (when it came, the request), in order
        self.raw: dict[Path, int] = {}  # kept raw: its latency (ns)

    def take(self, k: Kept, now: float) -> None:
        self.waiting.append((now, k))

    def done(self) -> bool:
        return not self.waiting and not self.raw

    def timeout(self, share: CpuShare, now: float) -> float | None:
        """How long the keeper may wait for more requests before it has work (None: for ever)."""
        owed = share.owed_s()
        if self.waiting:
            if owed > RAW_SLACK_S:
                return owed - RAW_SLACK_S
            # the tracer writes its names once a second: a look every half second
            return max(0.0, min(0.5, self.waiting[0][0] + NAMES_WAIT_S - now))
        if self.raw:
            return min(owed, 0.5)  # 0.5: the end of the program (no more pauses) is seen
        return None

    def work(self, share: CpuShare, now: float, ending: bool) -> None:
        """Those due written raw, or, with none waiting, one written whole if the share allows."""
        if self.waiting and share.owed_s() <= RAW_SLACK_S:
            still = []
            for came, k in self.waiting:
                tj = named_by_tracer(with_own_threads(k.tj, self.own()), self.names, wait_s=0)
                if not ending and now - came < NAMES_WAIT_S and any(not x or not x.comm for x in tj.tasks.values()):
                    still.append((came, k))
                    continue
                self._raw(dataclasses.replace(k, tj=tj))
            self.waiting = still
            if still:
                return
        if self.raw and not self.waiting and share.owed_s() == 0:
            where = max(self.raw, key=lambda p: self.raw[p])
            del self.raw[where]
            self._whole(where)

    def _raw(self, k: Kept) -> None:
        try:
            self.write_raw(k)
        except Exception as e:  # noqa: BLE001 - said to the watch, which counts it
            shutil.rmtree(k.where, ignore_errors=True)
            self.say(what="failed", where=str(k.where), error=f"{type(e).__name__}: {e}")
            return
        self.raw[k.where] = k.req.end_ns - k.req.start_ns
        self.say(what="kept", where=str(k.where))
        self._bound(k.where)

    def _whole(self, where: Path) -> None:
        try:
            if not self.write_whole(where):
                return  # gone, or being written whole by `ipctrace explain` (or whole already)
        except Exception as e:  # noqa: BLE001 - said to the watch; left raw: explain DIR says why
            self.say(what="whole_failed", where=str(where), error=f"{type(e).__name__}: {e}")
            return
        self.say(what="whole", where=str(where))
        self._bound(where, again=True)

    def _bound(self, written: Path, again: bool = False) -> None:
        """written counted (again: measured again), and the oldest removed while over max_disk."""
        if self.on_disk is None:
            return
        if again:
            self.on_disk.forget(written)
        self.on_disk.add(written)
        for name in self.on_disk.oldest_over(self.max_disk):
            p = written.parent / name
            self.raw.pop(p, None)
            if _remove(p):
                self.say(what="removed", where=str(p))

    def unkeep(self, where: Path) -> None:
        """--slowest pushed it out: dropped if waiting, removed if written (raw or whole)."""
        waited = [k for _, k in self.waiting if k.where == where]
        self.waiting = [(c, k) for c, k in self.waiting if k.where != where]
        whole = not waited and where not in self.raw
        self.raw.pop(where, None)
        if self.on_disk is not None:
            self.on_disk.forget(where)
        shutil.rmtree(where, ignore_errors=True)
        self.say(what="unkept", where=str(where), whole=whole)


def _remove(p: Path) -> bool:
    try:
        shutil.rmtree(p)
    except OSError:
        return False
    return True


def named_by_tracer(tj: TraceFile, names: LiveNames, wait_s: float = NAMES_WAIT_S) -> TraceFile:
    """tj with the tasks the watch could not name (ended before it read /proc) named as the
    tracer named them in the kernel: tasks.bin, waited for up to wait_s (its next tick)."""
    unnamed = [tid for tid, task in tj.tasks.items() if task is None or not task.comm]
    if not unnamed:
        return tj
    deadline = time.monotonic() + wait_s
    while True:
        got = {tid: names.get(tid) for tid in unnamed}
        if all(got.values()) or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    tasks = dict(tj.tasks)
    for tid, g in got.items():
        before = tasks[tid]
        if g is not None:
            tasks[tid] = Task(comm=g[0], pid=g[1] or (before.pid if before is not None else None))
    return dataclasses.replace(tj, tasks=tasks)


def window_tids(window: np.ndarray) -> set[int]:
    """The tasks a window's records name: those recording, switched to, waking or forked."""
    from analysis.model import decoded

    return decoded.named_tids(window)


class StartedThreads:
    """The tids of the threads the keeper starts: its writers live for one kept request, gone
    from /proc when a later request's events name them (they took its CPU: the watch's probe
    effect, said by name). Thread.start wrapped, in the keeper's process only."""

    MOST = 4096

    def __init__(self) -> None:
        import collections

        self.started: collections.deque[int] = collections.deque(maxlen=self.MOST)
        start = threading.Thread.start

        def started(thread: threading.Thread) -> None:
            start(thread)  # returns once the thread runs: its native_id is known
            if thread.native_id:
                self.started.append(thread.native_id)

        threading.Thread.start = started  # type: ignore[method-assign,assignment]

    def tids(self) -> set[int]:
        """Those started and those running now (this process's own)."""
        return {*self.started, *own_threads(), os.getpid()}


def with_own_threads(tj: TraceFile, own: set[int]) -> TraceFile:
    """tj with those of own (the keeper's threads) that the window's records name (tj names
    them all: the front end's _keep) as the tracer's, named as /proc names them (the process's
    name)."""
    mine = sorted(own & set(tj.tasks))
    if not mine:
        return tj
    doc = tj.to_json()
    tracer = doc.get("tracer") or {}
    doc["tracer"] = {**tracer, "tids": sorted({*(tracer.get("tids") or []), *mine})}
    comm = _comm(os.getpid()) or "python"
    doc["tasks"] = {**(doc.get("tasks") or {}), **{str(x): {"comm": comm, "pid": os.getpid()} for x in mine}}
    return TraceFile.from_json(doc)


def write_raw(k: Kept, t: trace_mod.Target, header: bytes | None, offset_ns: int) -> None:
    """The request kept raw, at once: a directory of one file, kept.bin, written in place (no
    temporary names: an hour's ~11 000 raw requests renamed five files each, and the kernel's
    reclaim of the names, kvfree_rcu, preempted the service; one file, not two: each file made
    is an inode allocated, which on an ext4 without a journal, as this VM's, looks past every
    inode freed in the last minutes: ~190 us a file, not 27, after 3 000 were removed, in one
    system call a woken thread waits behind). Its first line is JSON: the request's trace.json
    and watch.json, what the step found of it (its row of iterations, workload.json, the
    breakdown's row and critical path) and the target; then its events as events.bin holds
    them. All write_whole needs."""
    from analysis.store import events as events_mod

    where, req = k.where, k.req
    head = np.frombuffer(header, events_mod.HEADER).copy() if header else np.zeros(1, events_mod.HEADER)
    head[0]["magic"], head[0]["version"] = events_mod.MAGIC, events_mod.VERSION
    head[0]["rec_size"], head[0]["count"], head[0]["drops"] = events_mod.REC.itemsize, len(k.window), 0
    if not header:
        head[0]["ncpus"] = os.cpu_count() or 1
    row = k.row
    x = dataclasses.asdict(k.explained)
    x.pop("timelines", None)
    wall = req.start_ns + offset_ns
    doc = {
        "format": "ipctrace-kept-request",
        "target": dataclasses.asdict(t),
        "iteration": {
            "t_start_ns": int(row["t_start_ns"]),
            "t_end_ns": int(row["t_end_ns"]),
            "tid": int(row["tid"]),
            "cpu": int(row["cpu"]),
            "metric": str(row["metric"]),
        },
        "workload": k.wl,
        "explained": x,
        "trace": k.tj.to_json(),
        "watch": {
            "request": {"tid": req.tid, "pid": req.pid, "start_ns": req.start_ns, "end_ns": req.end_ns},
            "clock_offset_ns": offset_ns,
            "wall_start": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall // 1_000_000_000))
            + f".{(wall // 1000) % 1_000_000:06d}Z",
            "service": req.service,
        },
    }
    os.mkdir(where)
    dfd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fd = os.open(RAW, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        try:
            # json.dumps escapes every newline in a string: the first one ends the document
            parts: list[bytes | memoryview] = [
                (json.dumps(doc, default=_plain) + "\n").encode(),
                head.tobytes(),
                np.ascontiguousarray(k.window).data,
            ]
            for part in parts:
                events_mod.write_chunked(fd, part)
        finally:
            os.close(fd)
    finally:
        os.close(dfd)


def _kept_material(
    where: Path,
) -> tuple[trace_mod.Target, pd.DataFrame, dict[str, Any], Explained, TraceFile, dict[str, Any], bytes]:
    """kept.bin of a kept request (write_raw's), checked: (target, its row of iterations,
    workload.json, what the step found of it, trace.json, watch.json, the bytes of its
    events.bin)."""
    from analysis.model import rtt

    path = where / RAW
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    head, newline, events_bin = blob.partition(b"\n")
    try:
        doc = json.loads(head)
        if not newline or not isinstance(doc, dict) or doc.get("format") != "ipctrace-kept-request":
            raise ValueError("not a kept request")
        target = dict(doc["target"])
        target["syscalls"] = {int(n): str(v) for n, v in (target.get("syscalls") or {}).items()}
        t = trace_mod.Target(**target)
        it = doc["iteration"]
        row = rtt.as_iterations(
            np.array([int(it["t_start_ns"])]),
            np.array([int(it["t_end_ns"])]),
            np.array([int(it["tid"])]),
            np.array([int(it["cpu"])]),
            np.zeros(1, np.int64),
            [str(it["metric"])],
        )
        x = doc["explained"]
        explained = Explained(
            everyone=[(str(r), int(tid)) for r, tid in x["everyone"]],
            path=[(int(a), int(b), int(who), str(c), int(h)) for a, b, who, c, h in x["path"]],
            row=dict(x["row"]),
            roles=[str(r) for r in x["roles"]],
            copy_measured=bool(x["copy_measured"]),
            entry=dict(x["entry"]),
            critical_path=bool(x["critical_path"]),
        )
        wl = doc["workload"]
        if not isinstance(wl, dict) or not isinstance(wl.get("threads"), list):
            raise ValueError("no workload")
        tj = TraceFile.from_json(doc["trace"])
        watch_doc = doc["watch"]
        if not isinstance(watch_doc, dict):
            raise ValueError("no watch.json")
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageError(f"{path} is not a kept request ipctrace watch wrote ({type(e).__name__}: {e})") from None
    return t, row, wl, explained, tj, watch_doc, events_bin


def written_whole(where: Path | str) -> bool:
    """A kept request written whole if it is still raw (the keeper had not come to it): for
    `ipctrace explain`, `report`, `export` and `collect` of it. Whether it was raw."""
    where = Path(where)
    if not os.path.lexists(where / RAW):
        return False
    sys.stderr.write(f"ipctrace: {where}: a request the watch kept raw; writing it whole first\n")
    write_whole(where, wait=True)
    return True


def write_whole(where: Path, wait: bool) -> bool:
    """A kept request written raw (write_raw) made a results directory as `trace` writes one, of
    its events, with its explanation (explain.txt, critical_path.json) from the step's breakdown
    of it, and a Perfetto window around it; kept.bin and events.bin go last. With the
    directory locked (wait: for a writer that has it; else False at once, as when it is gone
    or whole already). Whether it wrote it."""
    import fcntl

    import pandas as pd

    from analysis.model import explain as explain_mod
    from analysis.model import timeline
    from analysis.render.explain import render
    from analysis.run import export
    from analysis.run.progress import Stages
    from analysis.store import events as events_mod
    from analysis.store.jsonfiles import Workload
    from analysis.store.results import read_breakdown, run_summary_file, write_json
    from analysis.store.rundir import TAIL_COLUMNS

    try:
        fd = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        if not os.path.lexists(where / RAW):
            return False
        for name in os.listdir(fd):  # what a writer that was killed left
            if name.startswith(".") and name.endswith(".tmp"):
                os.unlink(name, dir_fd=fd)
        t, one, wl_doc, x, tj, watch_doc, events_bin = _kept_material(where)
        write_json(where / "trace.json", tj.to_json())
        write_json(where / "watch.json", watch_doc)
        safeio.write_bytes(where / "events.bin", events_bin)
        window, _, _ = events_mod.read_events_bin(where / "events.bin")
        found: tuple[Any, ...] = (one, wl_doc["threads"], None, {"sides": None, "exits": []})
        trace_mod.analyse(where, t, tj, "complete", 0, Stages("", False), found_iterations=found, whole_trace=False)
        write_json(
            where / "meta.json",
            {
                "command": ["ipctrace", "watch"],
                "version": runner.version(),
                "start_time": runner.now_iso(),
                "clock_source": "CLOCK_MONOTONIC",
                "traced": True,
                "status": "complete",
            },
        )
        # the explanation and the Perfetto window from the step's breakdown of the request (not
        # made again) and the events kept; of what was just written only the summary and the
        # breakdown's tail and steal columns are read back
        summary = run_summary_file(where)
        wl = Workload.from_json(wl_doc)
        row = one.iloc[0]
        events = events_mod.to_frame(window, one, str(row["metric"]))
        kept = read_breakdown(where, columns=[*TAIL_COLUMNS, "steal_ns"])
        assert kept is not None  # its analysis above wrote it
        # the steal of the CPUs the workload ran on in the kept events (the step's counts the
        # CPUs of all its requests' threads: twice as much where they ran on both)
        figures = dict(x.row, steal_ns=float(kept["steal_ns"].iloc[0]))
        e = explain_mod.explanation(
            summary, wl, row, "iteration 0", timeline.Events(events), x.everyone, x.path, figures, x, kept
        )
        safeio.write_text(where / "explain.txt", render(e) + "\n")
        doc = dataclasses.asdict(e)
        doc["chain"] = [{"at_ns": at, "who": who, "what": what} for at, who, what in e.chain]
        safeio.write_text(where / "critical_path.json", json.dumps(doc, indent=1, default=_plain) + "\n")
        bd_row = pd.DataFrame([{"run": 0, "seq": 0, **{c: x.row[c] for c in explain_mod.bd.COMPONENTS}}])
        export.perfetto_proto_of(where, summary, one, events, wl, tj.drops, bd_row, around="max")
        os.unlink(RAW, dir_fd=fd)
        os.unlink("events.bin", dir_fd=fd)
        return True
    finally:
        os.close(fd)


def _plain(v: Any) -> object:
    return v.item() if hasattr(v, "item") else str(v)


def watch(t: trace_mod.Target, o: Options, stdout_fd: int) -> int:
    """Watches t until it ends, --duration passes, or a Ctrl-C / SIGTERM; says one line at the
    end; returns the exit status (128 + the signal that stopped it, 1 if its analysis or its
    keeper failed, else 0)."""
    if not os.access(trace_mod.LOADER, os.X_OK):
        raise UsageError(f"tracing is not built ({trace_mod.LOADER} is missing): run make")
    if not privilege.has_root():
        raise UsageError("watch loads eBPF programs: run it as root (sudo ./ipctrace watch ...)")
    privilege.check_bounds(0, t.duration_s)
    t = trace_mod.check_target(t)
    by_fd, names, binary_fds = trace_mod.open_binaries(t)
    requests_dir = None
    if o.keep is not None:
        safeio.makedirs(o.keep)
        requests_dir = o.keep / "requests"
        safeio.makedirs(requests_dir)
        live_path = Path(tempfile.mkdtemp(prefix=".live-", dir=o.keep))
    else:
        live_path = Path(tempfile.mkdtemp(prefix="ipctrace-watch-"))
    os.rmdir(live_path)
    rd = runner.open_outdir(live_path)
    started = time.monotonic()
    watcher = None
    try:
        entry_fd = os.memfd_create("ipctrace-entry", 0) if t.command and os.access(trace_mod.DRIVER, os.X_OK) else None
        # the tracer names the tasks it records as it goes: a kept request's short-lived ones too
        cmd = trace_mod.loader_command(by_fd, rd.path, 0, 0, entry_fd, live_names=True)
        run_id = f"watch-{socket.gethostname()}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        minutes = Minutes(o.keep, f"watch {t.name}", run_id, socket.gethostname())
        watcher = Watcher(t, o, rd.path, requests_dir, minutes)
        if not o.quiet:
            what = " ".join(t.command) if t.command else ", ".join(f"pid {p}" for p in t.pids)
            sys.stderr.write(f"ipctrace: watching {what} (Ctrl-C stops and keeps what was kept)\n")
        fds = (rd.fd, *binary_fds) if entry_fd is None else (rd.fd, entry_fd, *binary_fds)
        rc, signum, by_duration, said = trace_mod._run(cmd, stdout_fd, fds, bool(t.command), t.duration_s, watcher)
        watcher.close()
        counts = watcher.sender.close() if watcher.sender is not None else None
        tally = watcher.tally
        tally.minutes = minutes.count
        line = _last_line(t, o, rc, signum, by_duration, said, tally, counts, time.monotonic() - started, watcher)
        sys.stderr.write(line + "\n")
        if o.keep is not None:
            safeio.write_json(
                o.keep / f"{run_id}.json",
                {
                    "command": t.command,
                    "pids": t.pids,
                    "tally": dataclasses.asdict(tally),
                    "otlp": dataclasses.asdict(counts) if counts else None,
                    "clock_offset_ns": watcher.offset_ns,
                    "exit_code": rc,
                    "error": repr(watcher.error) if watcher.error else None,
                },
            )
        # the last line said it all: a Ctrl-C or SIGTERM is the exit status alone (128 + signal);
        # an analysis or a keeper that failed, 1 (what they did not do is lost)
        if signum:
            return 128 + signum
        return 1 if watcher.error is not None or tally.keeper_failed else 0
    finally:
        rd.close()
        for fd in binary_fds:
            os.close(fd)
        shutil.rmtree(live_path, ignore_errors=True)


def _last_line(
    t: trace_mod.Target,
    o: Options,
    rc: int,
    signum: int,
    by_duration: bool,
    said: list[str],
    tally: Tally,
    counts: Counts | None,
    elapsed: float,
    watcher: Watcher,
) -> str:
    """The one line at the end: why it ended, what was seen, kept and sent, and what was lost."""
    if signum:
        why = f"stopped by {'SIGINT' if signum == 2 else 'SIGTERM' if signum == 15 else f'signal {signum}'}"
    elif by_duration:
        why = f"stopped after --duration {t.duration_s:g} s"
    elif t.command:
        why = f"{t.name} exited with status {rc}"
    else:
        why = "the traced processes ended" + (f" ({said[-1]})" if said else "")
    what = "round trips" if (t.iterations_from or "rtt") == "rtt" else "iterations"
    thr = (
        f"slower than {o.slower_than_ns / 1e6:g} ms"
        if o.slower_than_ns
        else f"among the {o.slowest_per_min} slowest a minute"
    )
    parts = [f"ipctrace watch: {why} after {elapsed:.0f} s: {tally.requests:,} {what}, {tally.slow:,} {thr}"]
    if o.keep is not None:
        kept = f"{tally.kept:,} kept in {o.keep}"
        lost = []
        raw = tally.kept - tally.whole
        if raw > 0:
            # written raw at once, whole as the keeper's CPU share allowed: the rest when opened
            lost.append(f"{tally.whole:,} written whole, {raw:,} raw: ipctrace explain DIR writes one whole")
        if tally.whole_failed:
            lost.append(f"{tally.whole_failed:,} of them not written whole ({tally.last_keep_error})")
        if tally.disk_dropped:
            lost.append(f"{tally.disk_dropped:,} of them removed for --max-disk, the oldest first")
        if tally.keep_dropped:
            lost.append(f"{tally.keep_dropped:,} not kept: the keeper was behind")
        if tally.keep_failed:
            why = f"the keeper failed: {tally.keeper_failed}" if tally.keeper_failed else tally.last_keep_error
            lost.append(f"{tally.keep_failed:,} failed ({why})")
        elif tally.keeper_failed:
            lost.append(f"the keeper failed: {tally.keeper_failed}")
        parts.append(kept + (f" ({'; '.join(lost)})" if lost else ""))
    if counts is not None:
        sent = f"{counts.sent:,} sent to {o.otlp}"
        if counts.dropped:
            sent += (
                f" ({counts.dropped:,} dropped: {counts.dropped_full:,} queue full, {counts.dropped_failed:,} refused"
            )
            sent += f" or timed out{': ' + counts.last_error if counts.last_error else ''})"
        parts.append(sent)
    drops = watcher._drops()
    if drops:
        parts.append(f"{drops:,} kernel records lost")
    if tally.behind_records:
        parts.append(
            f"{tally.behind_records:,} records ({tally.behind_ns / 1e9:.1f} s of the trace) left unread: the "
            f"analysis was more than {BEHIND_MAX_RECORDS:,} records behind (its {what} not counted)"
        )
    if watcher.error is not None:
        parts.append(f"the analysis stopped early: {type(watcher.error).__name__}: {watcher.error}")
    return "; ".join(parts)
