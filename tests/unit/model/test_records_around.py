"""The records a kept request's directory holds (model/decoded.records_around, what run/watch
keeps of a request): those of a short lead before it to a trail after it, and of those before, the last switch of each thread and CPU and
each thread's last system call, so that its analysis finds the threads' states at the start as
the step did. Records in the file's order: per CPU in time order, the CPUs' batches interleaved."""

import numpy as np

from analysis.model.decoded import records_around
from analysis.store import events as events_mod

A, B = 100, 200


def test_kept_records_hold_the_window_and_the_anchors_before_it():
    # CPU 0: A calls and is switched out for B, every 10 ns from 0; CPU 1: B's calls, from 5
    cpu0 = events_mod.records_of(
        np.arange(0, 400, 10, dtype=np.uint64),
        [("sys_enter", A, 1, 4), ("switch", A, 1, B | B << 32), ("sys_exit", A, 1, 1), ("switch", B, 1, A | A << 32)],
        0,
    )
    cpu1 = events_mod.records_of(
        np.arange(5, 400, 10, dtype=np.uint64), [("sys_enter", B, 0, 3), ("sys_exit", B, 0, 1)], 1
    )
    # the file: CPU 1's batch of 20 after CPU 0's batch of 20, and so on
    recs = np.concatenate([cpu0[:20], cpu1[:20], cpu0[20:], cpu1[20:]])
    got = records_around(recs, start=300, end=320, lead_ns=20, trail_ns=10)
    ts = got["ts"].astype(np.int64)
    window = (ts >= 280) & (ts <= 330)
    assert window.sum() == ((recs["ts"] >= 280) & (recs["ts"] <= 330)).sum() == 11
    # before 280: A's last call (sys_exit at 260), B's (sys_exit at 275, CPU 1), A's last switch
    # out (250) and in (270, B to A: also B's last switch out and CPU 0's)
    assert sorted(ts[~window].tolist()) == [250, 260, 270, 275]
    # in the file's order still (CPU 1's records of the window after CPU 0's that come before)
    assert got["cpu"].tolist() == [r["cpu"] for r in recs if int(r["ts"]) in set(ts.tolist())]
