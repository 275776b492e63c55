"""Progress bar of a measurement, fed by the driver's --progress counter.

The counter is an 8-byte anonymous file (memfd) that only this process and the driver
hold: the driver gets it as /proc/self/fd/N, maps it and stores the number of timed
iterations completed (over all runs) into it; we read it a few times a second through our
descriptor. Nothing of it lives in the results directory, where a user could replace it
(a FIFO there would block whoever opens it). The bar is drawn on stderr only when stderr
is a terminal.
"""
import os
import sys
import time

WIDTH = 30


class Progress:
    def __init__(self, total, label, stream=sys.stderr):
        self.total, self.label, self.stream = max(total, 1), label, stream
        self.start = time.monotonic()
        self.shown = None
        self.fd = os.memfd_create("ipctrace-progress", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, 8)

    @property
    def path(self):
        """What the driver opens: our descriptor, inherited (subprocess pass_fds)."""
        return f"/proc/self/fd/{self.fd}"

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
