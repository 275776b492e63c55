"""The bounded-memory breakdown's stream of pieces: the events of a traced run, handed over in
time order a frame at a time (run/analyse_run.py reads and decodes them), gathered into pieces of
about Pieces.events events that breakdown.BreakdownPass breaks down one after the other, each
piece holding the iterations whose windows end inside it and repeating what the next one needs
of the events before it (docs/DESIGN.md, "The analysis in bounded memory", step 3). What it
makes goes to a store.parts.ColumnParts; nothing here reads or writes a file."""

from __future__ import annotations

from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from analysis.model import decoded
from analysis.model.timeline import Events
from analysis.store.itercolumns import BLOCK

if TYPE_CHECKING:
    from analysis.model.breakdown_pass import BreakdownPass
    from analysis.store.itercolumns import KeptRows
    from analysis.store.parts import ColumnParts


@dataclass(frozen=True)
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


def anchors(ev: pd.DataFrame) -> np.ndarray:
    """Rows of ev (in time order): decoded.anchor_rows of its records."""
    return decoded.anchor_rows(
        decoded.of_type(ev, "switch"),
        decoded.of_type(ev, "sys_enter", "sys_exit"),
        ev["tid"].to_numpy(),
        ev["next_tid"].to_numpy(),
        ev["cpu"].to_numpy(),
    )


def rows_around(ev: pd.DataFrame, starts: np.ndarray, ends: np.ndarray, lead: int, trail: int) -> np.ndarray:
    """Rows of ev (in time order) a breakdown of the iterations from starts to ends needs, as a
    piece gives them: each one's events with `lead` before it and `trail` after it, and before
    each stretch of those the anchors of the events left out since the last (so that every
    thread's and CPU's state there is what all of ev gives it)."""
    ts = ev["ts"].to_numpy()
    lo = np.maximum(np.searchsorted(ts, starts, side="left") - lead, 0)
    hi = np.minimum(np.searchsorted(ts, ends, side="right") + trail, len(ts))
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], np.maximum.accumulate(hi[order])
    # stretches: a range that starts past the end of all those before it begins one
    new = np.r_[True, lo[1:] > hi[:-1]] if len(lo) else np.zeros(0, bool)
    firsts, lasts = lo[new], hi[np.r_[np.flatnonzero(new)[1:] - 1, len(hi) - 1]] if len(lo) else hi
    out, done = [], 0
    for a, b in zip(firsts.tolist(), lasts.tolist()):
        if a > done:
            out.append(anchors(ev.iloc[done:a]) + done)
        out.append(np.arange(a, b))
        done = b
    return np.concatenate(out) if out else np.zeros(0, np.int64)


class Reach:
    """Over the kept iterations in order, read a block at a time as the pieces go: the latest
    end among rows [0, j] (a piece holds rows [done, j) whole once its events reach past it)
    and the earliest start among rows [j, n) (where the next piece's iterations begin)."""

    def __init__(self, rows: KeptRows):
        self.rows = rows
        # the earliest start in each block of rows and in every block after it
        mins = [int(rows.column("t_start_ns", a, a + BLOCK).min()) for a in range(0, rows.n, BLOCK)]
        self.after_block = np.minimum.accumulate(np.array(mins[::-1] or [0], np.int64))[::-1]
        self.a = self.b = 0  # rows [a, b) held
        self.starts = self.ends = np.zeros(0, np.int64)
        self.end_before = np.iinfo(np.int64).min  # the latest end of the rows before a

    def _more(self) -> None:
        self.starts = np.concatenate((self.starts, self.rows.column("t_start_ns", self.b, self.b + BLOCK)))
        self.ends = np.concatenate((self.ends, self.rows.column("t_end_ns", self.b, self.b + BLOCK)))
        self.b = min(self.b + BLOCK, self.rows.n)

    def whole_before(self, t: float) -> int:
        """The first row j >= a whose rows [0, j] reach t or later (n if none)."""
        while True:
            reach = np.maximum.accumulate(np.concatenate(([self.end_before], self.ends)))[1:]
            j = int(np.searchsorted(reach, t, side="left"))
            if j < len(reach) or self.b >= self.rows.n:
                return self.a + j
            self._more()

    def earliest_from(self, j: int) -> float:
        """The earliest start among rows [j, n) (j >= a; inf if j = n)."""
        if j >= self.rows.n:
            return np.inf
        while j >= self.b:
            self._more()
        here = int(self.starts[j - self.a :].min())
        k = self.b // BLOCK  # the first block after those held (b is a block's end, or n)
        return float(min(here, self.after_block[k]) if self.b < self.rows.n else here)

    def forget(self, j: int) -> None:
        """Rows before j are done."""
        if j > self.a:
            gone = self.ends[: j - self.a]
            if len(gone):
                self.end_before = max(self.end_before, int(gone.max()))
            self.starts, self.ends = self.starts[j - self.a :], self.ends[j - self.a :]
            self.a = j


class OneBehind:
    """Calls run in a thread of their own, one at a time and in the order submitted, while the
    caller goes on: submit waits for the call before it (so at most one piece or block is held
    for it), wait for the last one; each call's `then` runs in the caller's thread with its
    result when it is waited for; either raises what a call raised. Leaving the with-block
    waits too (on an error without raising the call's), so that no call outlives the analysis."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.pool: futures.ThreadPoolExecutor | None = None
        self.pending: tuple[futures.Future[Any], Callable[[Any], None] | None] | None = None

    def submit(self, fn: Callable[..., Any], *args: Any, then: Callable[[Any], None] | None = None) -> None:
        self.wait()
        if self.pool is None:
            self.pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=self.name)
        self.pending = (self.pool.submit(fn, *args), then)

    def wait(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            got = pending[0].result()
            if pending[1] is not None:
                pending[1](got)

    def close(self, failed: bool = False) -> None:
        """Wait for the last call (failed: the caller is ending on an error of its own; then
        without its result or its error) and end the thread."""
        try:
            if not failed:
                self.wait()
            elif self.pending is not None:
                futures.wait([self.pending[0]])
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True)

    def __enter__(self) -> OneBehind:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        self.close(failed=kind is not None)


class PieceStream:
    """The events, handed over in time order a frame at a time, gathered into pieces (see
    Pieces) that a BreakdownPass breaks down, each in a worker thread while the next is read;
    the parts of breakdown.parquet that the pieces make go to parts (store.parts.ColumnParts),
    in the iterations' order."""

    def __init__(self, bp: BreakdownPass | None, sizes: Pieces, parts: ColumnParts):
        self.bp, self.sizes, self.parts = bp, sizes, parts
        self.frames: list[pd.DataFrame] = []
        self.count = 0
        self.head: pd.DataFrame | None = (
            None  # the events the next piece repeats, until the next block is decoded behind them
        )
        self.done = 0  # the iterations (the pass's rows) done
        self.own = -np.inf  # what a piece finds before this time belongs to an earlier one
        self.reach = Reach(bp.rows) if bp is not None else None
        # A piece's breakdown runs in a thread of its own while the next piece's events are read,
        # put in order and decoded: its C passes and numpy work do not hold the GIL, so the two
        # share both CPUs. One piece at a time: the pass keeps its findings in order.
        self.worker = OneBehind("ipctrace-breakdown")

    def take_head(self) -> pd.DataFrame | None:
        """The events the next piece repeats (None: none), for the next block's frame to start
        with: taken once."""
        head, self.head = self.head, None
        return head

    def add(self, frame: pd.DataFrame) -> None:
        """The next frame of events in time order (with take_head()'s events first, if taken)."""
        if self.bp is None:
            return
        self.frames.append(frame)
        self.count += len(frame)
        if self.count >= self.sizes.events:
            self._piece(final=False)

    def last(self) -> None:
        if self.bp is not None:
            self._piece(final=True)

    def _submit(self, rows: np.ndarray, ev: pd.DataFrame, own: tuple[float, float]) -> None:
        """Break down rows over ev in the worker, after the piece before them is kept."""
        assert self.bp is not None
        # The columns taken out of the frame here: the worker touches numpy arrays only.
        self.worker.submit(
            self.bp.add, rows, Events(ev), own, then=lambda components: self.parts.add(len(rows), components)
        )

    def wait(self) -> None:
        """Keep the components of the piece in the worker, once it is done (and raise what it
        raised)."""
        self.worker.wait()

    def close(self) -> None:
        """Keep the last piece's components; also when an error ends the analysis (then without
        them), so that no piece outlives it."""
        self.worker.close()

    def _piece(self, final: bool) -> None:
        assert self.bp is not None and self.reach is not None
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
            keep = np.concatenate((anchors(ev.iloc[:start]), np.arange(start, len(ev))))
            ev = ev.iloc[keep].reset_index(drop=True)
        self.frames, self.count, self.head = [], len(ev), ev
