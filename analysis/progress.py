"""Progress bar of a measurement, fed by the driver's --progress counter file.

The driver mmaps an 8-byte file and stores the number of timed iterations
completed (over all runs) into it; we read it a few times a second. The bar
is drawn on stderr only when stderr is a terminal.
"""
import os
import sys
import time

WIDTH = 30


class Progress:
    def __init__(self, path, total, label, stream=sys.stderr):
        self.path, self.total, self.label, self.stream = path, max(total, 1), label, stream
        self.start = time.monotonic()
        self.shown = None
        with open(path, "wb") as f:
            f.write(bytes(8))

    def done_count(self):
        try:
            with open(self.path, "rb") as f:
                raw = f.read(8)
        except OSError:
            return 0
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
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
