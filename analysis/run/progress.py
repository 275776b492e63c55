"""Progress bar of a measurement, fed by the driver's --progress counter file.

The driver maps an 8-byte file and stores the number of timed iterations completed
(over all runs) into it. The file, DIR/.progress, is made anew by us (safeio: O_EXCL |
O_NOFOLLOW, given to the invoking user) and kept open: the driver gets our descriptor as
/proc/self/fd/N and we read through it, so whatever a user puts under that name later (a
FIFO, a link) is never opened by anyone. Others may watch the file. The bar is drawn on
stderr only when stderr is a terminal.
"""

import contextlib
import os
import sys
import threading
import time

from analysis.store import safeio

WIDTH = 30
NAME = ".progress"


class Progress:
    def __init__(self, dir_fd, total, label, stream=sys.stderr):
        self.dir_fd, self.total, self.label, self.stream = dir_fd, max(total, 1), label, stream
        self.start = time.monotonic()
        self.shown = None
        try:
            self.fd = safeio.create_at(dir_fd, NAME)
        except FileExistsError:
            # Someone else took the name: the counter goes on unseen, in memory only.
            self.fd, self.dir_fd = os.memfd_create("ipctrace-progress", os.MFD_CLOEXEC), None
        os.write(self.fd, bytes(8))

    @property
    def path(self):
        """What the driver opens: our descriptor, inherited (subprocess pass_fds)."""
        return safeio.proc_path(self.fd)

    def done_count(self):
        if self.fd < 0:
            return 0
        raw = os.pread(self.fd, 8, 0)
        return int.from_bytes(raw, "little") if len(raw) == 8 else 0

    def update(self):
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

    def close(self):
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


class Stages:
    """After the measurement, the analysis step under way and how long it has taken, on one
    line of stderr (a terminal only), redrawn twice a second by a thread of its own: a long
    analysis never leaves the screen blank. stages("decoding the kernel events") names the next
    step; used as a context manager, it clears its line at the end."""

    def __init__(self, label, show, stream=sys.stderr):
        self.label, self.show, self.stream = label, show, stream
        self.text, self.done_share, self.start = "", None, time.monotonic()
        self.done = threading.Event()
        self.thread = None

    def __call__(self, text, done=None):
        """The step under way; done: the share of it done (0..1), drawn as a bar."""
        self.text, self.done_share = text, done
        if self.show:
            self._draw()

    def line(self):
        bar = ""
        if self.done_share is not None:
            filled = int(min(max(self.done_share, 0.0), 1.0) * WIDTH)
            bar = f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done_share:.0%} "
        return f"{self.label}: {bar}{self.text} ({time.monotonic() - self.start:.0f} s)"

    def _draw(self):
        self.stream.write(f"\r{self.line()}\033[K")
        self.stream.flush()

    def _redraw(self):
        while not self.done.wait(0.5):
            self._draw()

    def __enter__(self):
        if self.show:
            self.thread = threading.Thread(target=self._redraw, name="ipctrace-stages", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc):
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


def announce(what: str, runs: int, iterations: int, bytes_needed: int, where, stream=sys.stderr) -> None:
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
