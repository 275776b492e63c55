"""tasks.bin, written by `ipctrace-loader --live-names` (loaders/livenames.h) while a watch
traces: each task the programs named, again whenever its name changed, as the tracer's tasks
map holds it (trace.json's "tasks" comes only at the end). Read as it grows."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

# struct live_name: tid, pid, comm[16]
RECORD = np.dtype([("tid", "<u4"), ("pid", "<u4"), ("comm", "S16")])
NAME = "tasks.bin"


class LiveNames:
    """The names of a live tasks.bin, read a whole record at a time as the loader appends them."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.offset = 0
        self.names: dict[int, tuple[str, int]] = {}  # tid -> (comm, pid)

    def read(self) -> None:
        """The records appended since the last read (none while the file is not there)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return
        try:
            size = os.fstat(fd).st_size
            whole = (size - self.offset) // RECORD.itemsize * RECORD.itemsize
            if whole <= 0:
                return
            data = os.pread(fd, whole, self.offset)
        finally:
            os.close(fd)
        got = np.frombuffer(data[: len(data) // RECORD.itemsize * RECORD.itemsize], RECORD)
        self.offset += len(got) * RECORD.itemsize
        for tid, pid, comm in zip(got["tid"].tolist(), got["pid"].tolist(), got["comm"].tolist(), strict=True):
            self.names[int(tid)] = (comm.decode("utf-8", "replace"), int(pid))

    def get(self, tid: int) -> tuple[str, int] | None:
        """(comm, pid) of tid, read again from the file if not known yet."""
        if tid not in self.names:
            self.read()
        return self.names.get(tid)
