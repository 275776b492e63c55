"""Records spilled to a temporary file without a name while a pass runs, read back in the
order written: what a bounded-memory pass keeps of the whole run lives on disk, not in memory.
model/ hands the records over; the file is made and read here."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np


class RecordSpool:
    """Records of one numpy dtype appended, then read back from the first in blocks: a
    temporary file without a name in dir (the system's temporary directory if None), removed
    when closed."""

    def __init__(self, dtype: np.dtype, prefix: str = "ipctrace-spool-", dir: Path | str | None = None):
        self.dtype = np.dtype(dtype)
        self.file = tempfile.TemporaryFile(prefix=prefix, dir=dir)  # noqa: SIM115 - kept open: the object owns it

    def add(self, rec: np.ndarray) -> None:
        self.file.write(np.ascontiguousarray(rec, self.dtype).tobytes())

    def blocks(self, size: int = 1 << 20) -> Iterator[np.ndarray]:
        """The records written, from the first, at most size at a time."""
        self.file.flush()
        self.file.seek(0)
        while len(rec := np.fromfile(self.file, self.dtype, count=size)):
            yield rec

    def close(self) -> None:
        self.file.close()


SpoolMaker = Callable[[np.dtype, str], RecordSpool]


def spools_in(dir: Path | str | None) -> SpoolMaker:
    """A maker of RecordSpools (dtype, prefix) whose files go in dir (beside the results)."""

    def make(dtype: np.dtype, prefix: str) -> RecordSpool:
        return RecordSpool(dtype, prefix, dir)

    return make
