"""The events a breakdown of some iterations reads from a larger frame
(model/streaming.rows_around): each iteration's with a lead and a trail, ranges that meet merged,
and before each stretch the anchors of what is left out (the last switch of each thread and CPU,
each thread's last system call), so that the states there are those of the whole frame."""

import numpy as np
import pytest

from analysis.model.streaming import rows_around
from analysis.store import events as events_mod

A, B = 100, 200
# 10 events a repetition at ts 0, 10, 20, ...: A and B call and switch
PATTERN = [
    ("sys_enter", A, 1, 4),
    ("switch", A, 1, B | B << 32),
    ("sys_enter", B, 0, 3),
    ("sys_exit", B, 0, 1),
    ("switch", B, 1, A | A << 32),
    ("sys_exit", A, 1, 1),
    ("sys_enter", A, 0, 3),
    ("switch", A, 1, B | B << 32),
    ("sys_exit", B, 1, 1),
    ("sys_enter", B, 1, 4),
]


@pytest.fixture(scope="module")
def frame():
    return events_mod.to_frame(events_mod.records_of(np.arange(200, dtype=np.uint64) * 10, PATTERN, 0))


@pytest.mark.parametrize(
    "spans, lead, trail, ranges",
    [
        # one iteration from ts 500 to 590: rows 50..59, 3 before, 2 after
        ([(500, 590)], 3, 2, [(47, 62)]),
        # two that meet once lead and trail are added: one stretch
        ([(500, 590), (640, 650)], 3, 2, [(47, 67)]),
        # two apart, given out of order: two stretches
        ([(1500, 1510), (500, 590)], 0, 0, [(50, 60), (150, 152)]),
        # at the frame's edges: clipped
        ([(0, 10), (1980, 1990)], 5, 5, [(0, 7), (193, 200)]),
    ],
)
def test_rows_around(frame, spans, lead, trail, ranges):
    starts, ends = (np.array(x, np.int64) for x in zip(*spans))
    rows = rows_around(frame, starts, ends, lead, trail)
    assert np.all(np.diff(rows) > 0)  # in time order, none twice
    inside = np.concatenate([np.arange(a, b) for a, b in ranges])
    assert np.isin(inside, rows).all()
    outside = np.setdiff1d(rows, inside)
    # what else is there is the anchors of a stretch left out: before the range after it, at
    # most the last switch of each thread and the CPU's and each thread's last system call
    for a, _ in ranges:
        mine = outside[(outside < a) & (outside >= max([b for _, b in ranges if b <= a], default=0))]
        assert len(mine) <= 5
        if a > 10:  # a whole repetition left out before it: every anchor there
            assert len(mine) >= 3


def test_the_anchors_are_the_last_of_each(frame):
    """Left out before row 150: A's and B's last system call and switch there are in."""
    rows = rows_around(frame, np.array([1500]), np.array([1510]), 0, 0)
    before = rows[rows < 150]
    # the repetition before (rows 140..149): B's sys_enter (149) and A's (146) are the threads'
    # last system calls, A's switch to B (147) the last switch of A, of B (switched in) and of
    # the CPU, B's switch to A (144) the last of B switched out and of A switched in
    assert set(before.tolist()) == {144, 146, 147, 149}
