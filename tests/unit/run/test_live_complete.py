"""The time up to which a piece of the live events holds every CPU's records
(run/progress.LiveIterations._complete_until). Records reach events.bin in per-CPU batches, so
a CPU's newest ones may still wait in its staged batch while another CPU's later ones are
written: a live count that took the newest time as complete missed the iterations whose last
records came in the next piece (4-6 of a 5 000-iteration marked trace in 30 000-record pieces)."""

import numpy as np
import pytest

from analysis.run.progress import LiveIterations
from analysis.store.events import REC

MS = 1_000_000


def piece(*cpu_ts):
    rec = np.zeros(len(cpu_ts), REC)
    rec["cpu"] = [c for c, _ in cpu_ts]
    rec["ts"] = [t for _, t in cpu_ts]
    return rec


@pytest.mark.parametrize(
    "new, newest, until",
    [
        # CPU 1's last batch ended at 5 ms while CPU 0 wrote up to 9 ms: 5 ms
        (piece((0, 1 * MS), (0, 2 * MS), (1, 4 * MS), (1, 5 * MS), (0, 9 * MS)), 9 * MS, 5 * MS),
        # the order in the file does not matter, the last time each CPU reached does
        (piece((1, 5 * MS), (0, 9 * MS), (1, 3 * MS)), 9 * MS, 5 * MS),
        # one CPU: all of it
        (piece((3, 1 * MS), (3, 7 * MS)), 7 * MS, 7 * MS),
        # a CPU far behind is waited for LATE_NS at most (100 ms)
        (piece((0, 1_000 * MS), (1, 10 * MS)), 1_000 * MS, 900 * MS),
        # nothing new (the tracer quiet or done): everything read is complete
        (piece(), 9 * MS, 9 * MS),
    ],
)
def test_complete_until(new, newest, until):
    live = LiveIterations("events.bin", "rtt", "x86_64")
    assert live._complete_until(new, newest) == until
