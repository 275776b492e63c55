"""One side's wake-ups kept in time order until the breakdown's finish() matches them with the
windows of each metric: spilled to a store.spool.RecordSpool, so that none is in memory."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from analysis.store.spool import SpoolMaker


class WakeUps:
    """One side's wake-ups (time on CPU, delay, run-queue delay) in time order, spilled to a
    store.spool.RecordSpool: 24 B each on disk, none in memory."""

    RECORD = np.dtype([("on", "<i8"), ("delay", "<i8"), ("rq", "<i8")])

    def __init__(self, spools: SpoolMaker):
        self.spool = spools(self.RECORD, "ipctrace-wakeups-")

    def add(self, on: np.ndarray, delay: np.ndarray, rq: np.ndarray) -> None:
        rec = np.empty(len(on), self.RECORD)
        rec["on"], rec["delay"], rec["rq"] = on, delay, rq
        self.spool.add(rec)

    def blocks(self, size: int = 1 << 20) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        for rec in self.spool.blocks(size):
            yield rec["on"], rec["delay"], rec["rq"]

    def close(self) -> None:
        self.spool.close()
