"""Progress bar of a measurement, fed by the driver's --progress counter file.

The driver maps an 8-byte file and stores the number of timed iterations completed
(over all runs) into it. The file, DIR/.progress, is made anew by us (safeio: O_EXCL |
O_NOFOLLOW, given to the invoking user) and kept open: the driver gets our descriptor as
/proc/self/fd/N and we read through it, so whatever a user puts under that name later (a
FIFO, a link) is never opened by anyone. Others may watch the file. The bar is drawn on
stderr only when stderr is a terminal.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # numpy is imported where the live count runs, not at start-up
    import numpy as np
    import pandas as pd

from analysis.store import safeio

WIDTH = 30
NAME = ".progress"


class Progress:
    def __init__(self, dir_fd: int, total: int, label: str, stream: IO[str] = sys.stderr) -> None:
        self.dir_fd: int | None = dir_fd
        self.total, self.label, self.stream = max(total, 1), label, stream
        self.start = time.monotonic()
        self.shown: str | None = None
        try:
            self.fd = safeio.create_at(dir_fd, NAME)
        except FileExistsError:
            # Someone else took the name: the counter goes on unseen, in memory only.
            self.fd, self.dir_fd = os.memfd_create("ipctrace-progress", os.MFD_CLOEXEC), None
        os.write(self.fd, bytes(8))

    @property
    def path(self) -> str:
        """What the driver opens: our descriptor, inherited (subprocess pass_fds)."""
        return safeio.proc_path(self.fd)

    def done_count(self) -> int:
        if self.fd < 0:
            return 0
        raw = os.pread(self.fd, 8, 0)
        return int.from_bytes(raw, "little") if len(raw) == 8 else 0

    def update(self) -> None:
        done = min(self.done_count(), self.total)
        frac = done / self.total
        elapsed = time.monotonic() - self.start
        eta = f"{elapsed / frac - elapsed:4.0f} s left" if 0 < frac < 1 else ""
        filled = int(frac * WIDTH)
        line = f"\r{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {frac:4.0%} {done}/{self.total} {eta}"
        if line != self.shown:
            self.stream.write(line + "\033[K")
            self.stream.flush()
            self.shown = line

    def close(self) -> None:
        if self.shown is not None:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = None
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            if self.dir_fd is not None:
                with contextlib.suppress(OSError):
                    os.unlink(NAME, dir_fd=self.dir_fd)  # the name only: never opened again


def terminal_size(stream: IO[str]) -> tuple[int, int]:
    """(rows, columns) of the terminal stream is; 24 x 80 where it cannot be asked (a stream
    without a descriptor) or does not say (0 x 0: a pseudo-terminal nobody sized, script(1)'s)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return 24, 80
    return size.lines or 24, size.columns or 80


class Stage(Protocol):
    """What names the analysis step under way (Stages, or a function that shows nothing)."""

    def __call__(self, text: str, done: float | None = None) -> None: ...


class Stages:
    """After the measurement, the analysis step under way and how long it has taken, on one
    line of stderr (a terminal only), redrawn twice a second by a thread of its own: a long
    analysis never leaves the screen blank. stages("decoding the kernel events") names the next
    step; used as a context manager, it clears its line at the end."""

    def __init__(self, label: str, show: bool, stream: IO[str] = sys.stderr) -> None:
        self.label, self.show, self.stream = label, show, stream
        self.text, self.start = "", time.monotonic()
        self.done_share: float | None = None
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def __call__(self, text: str, done: float | None = None) -> None:
        """The step under way; done: the share of it done (0..1), drawn as a bar."""
        self.text, self.done_share = text, done
        if self.show:
            self._draw()

    def line(self) -> str:
        bar = ""
        if self.done_share is not None:
            filled = int(min(max(self.done_share, 0.0), 1.0) * WIDTH)
            bar = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done_share:.0%} "
        return f"{self.label}: {bar}{self.text} ({time.monotonic() - self.start:.0f} s)"

    def _draw(self) -> None:
        # within the terminal's width: a line that wraps is not redrawn in place by a \r
        self.stream.write(f"\r{self.line()[: terminal_size(self.stream)[1] - 1]}\033[K")
        self.stream.flush()

    def _redraw(self) -> None:
        while not self.done.wait(0.5):
            self._draw()

    def __enter__(self) -> Stages:
        if self.show:
            self.thread = threading.Thread(target=self._redraw, name="ipctrace-stages", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        if self.thread:
            self.thread.join()
            self.stream.write("\r\033[K")
            self.stream.flush()


# What a run leaves on disk per timed iteration (measured on pipe, 12 kernel records an iteration:
# a traced same-CPU run of 2 M iterations left 166 MB, its untraced twin 44 MB: iterations.parquet
# alone, ~22 B). --keep-raw keeps the raw files: iterations.bin (40 B an iteration) and, traced,
# events.bin (32 B a record). Workloads with more records per iteration (ZeroMQ's I/O threads,
# containers) leave more: an estimate, said as one.
TRACED_BYTES_PER_ITERATION = 90
UNTRACED_BYTES_PER_ITERATION = 22
RAW_ITERATION_BYTES = 40
RAW_EVENT_BYTES_PER_ITERATION = 12 * 32


def disk_estimate(iterations: int, traced: bool, keep_raw: bool = False, twin: bool = False) -> int:
    """Bytes the results of `iterations` timed iterations will take (all runs together)."""
    per = TRACED_BYTES_PER_ITERATION if traced else UNTRACED_BYTES_PER_ITERATION
    if keep_raw:
        per += RAW_ITERATION_BYTES + (RAW_EVENT_BYTES_PER_ITERATION if traced else 0)
    if traced and twin:
        per += UNTRACED_BYTES_PER_ITERATION + (RAW_ITERATION_BYTES if keep_raw else 0)
    return iterations * per


def announce(
    what: str, runs: int, iterations: int, bytes_needed: int, where: Path | str, stream: IO[str] = sys.stderr
) -> None:
    """One line before a sweep or a suite starts: how many runs, about how much disk, and a
    warning (it goes on) when that is more than the free space where it writes."""
    try:
        st = os.statvfs(where)
        free = st.f_bavail * st.f_frsize
    except OSError:
        free = None
    mb = bytes_needed / 1e6
    line = f"ipctrace {what}: {runs} runs, {iterations:,} timed iterations, about {mb:,.0f} MB of results"
    if free is not None:
        line += f" ({free / 1e9:,.1f} GB free)"
    stream.write(line + "\n")
    if free is not None and bytes_needed > free:
        stream.write(
            f"ipctrace: warning: {what} may need more disk space than is free ({mb:,.0f} MB > "
            f"{free / 1e6:,.0f} MB); it goes on\n"
        )
    stream.flush()


def overall(done: int, total: int, started: float) -> str:
    """[####......] 3/12, 2 min: where a sweep or a suite is, before its next run."""
    filled = int(done / max(total, 1) * WIDTH)
    elapsed = time.monotonic() - started
    left = f", ~{elapsed / done * (total - done) / 60:.0f} min left" if done else ""
    return f"[{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{total} done, {elapsed / 60:.0f} min{left}"


# --- the live line of `ipctrace trace` --------------------------------------------------------


class LiveIterations:
    """The iterations of a trace while the tracer writes it: events.bin read from where the last
    step stopped, each new piece analysed with the piece before it as context (round trips by
    model/rtt.py, marked windows by model/marks.py), and counted once, by the piece that holds
    its end. An iteration longer than a piece and its context may go uncounted here: the table
    after the trace is the exact one. Used by the live worker (main below), a process of its own
    at SCHED_IDLE: the analysis gives the CPU up to the traced program (at the next tick at
    worst: run/watch.KEEPER_CPU_PERCENT)."""

    CONTEXT_RECORDS = 50_000  # the previous piece's records kept as context, at most
    MOST_CONTEXT_RECORDS = 500_000  # with a long iteration held back to settle (memory stays bounded)
    PIECE_RECORDS = 1_000_000  # read at most this many records a step (a backlog: more steps)
    LATE_NS = 100_000_000  # a CPU's staged records waited for at most (20 ms seen behind another's)

    def __init__(
        self, events_bin: Path | str, how: str, arch: str, calibration: Path | str | None = None, command: bool = True
    ) -> None:
        self.path, self.how, self.arch, self.calibration = str(events_bin), how, arch, calibration
        self.command = command  # the trace started the program (its first threads' starts are seen)
        self.askers: set[int] = set()  # threads seen asking (their role taken at their start)
        self.answerers: set[int] = set()  # the other side of those
        self.forked: set[int] = set()
        self.first: set[int] | None = None  # the threads of the first piece
        from analysis.store.events import HEADER

        self.offset = HEADER.itemsize
        self.context: np.ndarray | None = None  # records (the store's REC array) read before the new ones
        self.cutoff = -1  # iterations ending at or before this were counted
        self.count = 0
        self.latest: list = []  # (end ts, latency ns) of the iterations of the last second
        self.records: np.ndarray | None = None  # the records advance() read last, with their context

    def _probes(self) -> dict[str, Any] | None:
        """The iteration probes' calibration `ipcbench exec` writes before the command runs; None
        while it is not there yet (its marks must not count)."""
        import json

        if self.calibration is None:
            return {}
        try:
            with open(self.calibration, "rb") as f:
                got = json.loads(f.read() or b"null")
        except (OSError, ValueError):
            return None
        return got.get("probes") or {} if isinstance(got, dict) else None

    def step(self) -> bool:
        """Reads and analyses what the tracer added; whether there was anything."""
        import numpy as np

        got = self.advance()
        if got is None:
            return False
        ev, its = got
        end = its["t_end_ns"].to_numpy(np.int64)
        self.count += len(its)
        lat = its["latency_ns"].to_numpy(np.int64)
        self.latest += list(zip(end.tolist(), lat.tolist()))
        self.latest = [x for x in self.latest if x[0] > self.cutoff - 1_000_000_000]
        return True

    def advance(self, settle_ns: int = 0) -> tuple[pd.DataFrame, pd.DataFrame] | None:
        """(events, iterations) of what the tracer added: the events read with the context
        before them (a frame in time order), and the iterations that ended since the last call,
        up to settle_ns before the newest event (those after it are the next call's, with the
        events that come after them); None while nothing new was written."""
        import numpy as np

        from analysis.model import marks, rtt
        from analysis.store import events as events_mod

        probes = self._probes() if self.how != "rtt" else {}
        if probes is None:
            return None
        try:
            with open(self.path, "rb", buffering=0) as f:
                size = os.fstat(f.fileno()).st_size
                n = min((size - self.offset) // events_mod.REC.itemsize, self.PIECE_RECORDS)
                if n <= 0 and not (settle_ns == 0 and self._context_after_cutoff()):
                    return None
                new = events_mod.read_records_at(f.fileno(), self.offset, n)
        except OSError:
            return None
        self.offset += len(new) * events_mod.REC.itemsize
        if self.context is None:
            recs = new
        elif len(new):
            recs = np.concatenate([self.context, new])
        else:
            recs = self.context
        ev = events_mod.to_frame(recs)
        if self.how == "rtt":
            its = self._round_trips(ev, rtt)
        else:
            its = marks.windows(ev, None, marks.UNNAMED, probes or None)
        end = its["t_end_ns"].to_numpy(np.int64)
        newest = int(ev["ts"].max()) if len(ev) else self.cutoff
        upto = max(self.cutoff, min(newest - settle_ns, self._complete_until(new, newest)))
        fresh = (end > self.cutoff) & (end <= upto)
        self.cutoff = upto
        # the context: the records of the iterations held back to settle, and CONTEXT_RECORDS
        # before them (a piece's few new ones keep those before them; a window is found from
        # the send before it). The last CONTEXT_RECORDS alone lost the held-back iterations
        # once settle_ns held more records (a fast ping-pong: 50 ms, over 50 000).
        held = its["t_start_ns"].to_numpy(np.int64)[end > upto]
        first_held = int(np.argmax(recs["ts"] >= held.min())) if len(held) else len(recs)
        keep = max(0, min(first_held, len(recs)) - self.CONTEXT_RECORDS, len(recs) - self.MOST_CONTEXT_RECORDS)
        self.context = recs[keep:].copy()
        self.records = recs  # this piece's records, the context first (until the next call)
        return ev, its[fresh]

    def _complete_until(self, new: np.ndarray, newest: int) -> int:
        """The time up to which every CPU's records are in the file. Records reach it in
        per-CPU batches (bpf/ipctrace.h: REC_BATCH), so a CPU's newest ones may wait in its
        staged batch while another CPU's later ones are written: up to the earliest of the
        CPUs' last records here, none is missing. A CPU that wrote nothing new is taken as idle;
        one that lags is waited for LATE_NS at most (the context that holds its iterations back
        is bounded). Nothing new read (the tracer quiet or done): all of it."""
        import numpy as np

        if not len(new):
            return newest
        last = np.zeros(int(new["cpu"].max()) + 1, np.uint64)
        np.maximum.at(last, new["cpu"], new["ts"])
        return max(int(last[last > 0].min()), newest - self.LATE_NS)

    def skip(self, n: int) -> tuple[int, int]:
        """The next n records left unread (a watch that fell behind): the next piece is read
        with no context, as the first was. (first, last) ts of those skipped (0, 0: none)."""
        import numpy as np

        from analysis.store import events as events_mod

        size = events_mod.REC.itemsize
        first = last = 0
        if n > 0:
            with contextlib.suppress(OSError, ValueError, IndexError), open(self.path, "rb", buffering=0) as f:
                at = [self.offset, self.offset + (n - 1) * size]
                first, last = (int(np.frombuffer(os.pread(f.fileno(), size, x), events_mod.REC)["ts"][0]) for x in at)
        self.offset += max(n, 0) * size
        self.context, self.records = None, None
        return first, last

    def _context_after_cutoff(self) -> bool:
        """Whether the context holds records after the cutoff: once nothing more comes (settle_ns
        0), the iterations of the last settle_ns the calls before left are taken from it."""
        last = self.context
        return last is not None and len(last) > 0 and int(last["ts"].max()) > self.cutoff

    def _round_trips(self, ev: pd.DataFrame, rtt: ModuleType) -> pd.DataFrame:
        """Which side of a conversation asks shows at its start only (rtt.round_trips' born): a
        thread's role is taken from the first piece where it has round trips, with the threads
        whose start the trace saw (forked in it, or the command's first) taken as born there;
        the other side of those round trips (rtt.partners) answers. Then the round trips of the
        threads that ask are kept, and all of those whose start the trace did not see (as the
        analysis after the trace counts them)."""
        import numpy as np

        from analysis.model import decoded

        self.forked.update(int(x) for x in decoded.forked_tids(ev))
        tids = {int(x) for x in np.unique(ev["tid"].to_numpy())} - {0}
        if self.first is None:
            self.first = tids if self.command else set()
        first = self.first
        undecided = tids - self.askers - self.answerers
        born = {t for t in undecided if t in self.forked or t in first}
        # the threads known to answer are left out of the search (their round trips are not
        # kept): half of its work in a ping-pong
        its = rtt.round_trips(ev, self.arch, tids=sorted(tids - self.answerers), born=born)
        new = {int(x) for x in its["tid"].unique()} & born
        if new:
            self.askers |= new
            theirs = its[its["tid"].isin(new).to_numpy()]
            span = (int(theirs["t_start_ns"].min()), int(theirs["t_end_ns"].max()))
            self.answerers |= set(rtt.partners(ev, sorted(new), tids, within=span)) - self.askers
        keep = {t for t in tids if t in self.askers or not (t in self.forked or t in first)}
        return its[its["tid"].isin(keep - self.answerers).to_numpy()]

    def median_last_second_ns(self) -> float | None:
        import numpy as np

        return float(np.median([x[1] for x in self.latest])) if self.latest else None


def live_main(argv: Sequence[str]) -> int:
    """python -m analysis.run.progress EVENTS_BIN HOW ARCH COMMAND [CALIBRATION]: a JSON line on
    stdout each second ({"iterations": N, "median_ns": M}) until stdin ends. HOW: rtt, markers or
    function; COMMAND: 1 when the trace started the program; CALIBRATION: `ipcbench exec`'s."""
    import json
    import select

    import analysis.model.marks  # noqa: F401 - imported at the usual priority, once
    import analysis.model.rtt  # noqa: F401

    # then behind the traced program on the CPU
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    path, how, arch, command = argv[:4]
    live = LiveIterations(path, how, arch, argv[4] if len(argv) > 4 else None, command == "1")
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], 1.0)
        if ready and not os.read(sys.stdin.fileno(), 4096):
            return 0
        live.step()
        print(json.dumps({"iterations": live.count, "median_ns": live.median_last_second_ns()}), flush=True)


if __name__ == "__main__":
    sys.exit(live_main(sys.argv[1:]))
