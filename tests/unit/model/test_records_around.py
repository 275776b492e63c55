"""The records a kept request's directory holds (model/decoded.RecordsAround, what run/watch
keeps of a request): those of a short lead before it to a trail after it, and of those before, the last switch of each thread and CPU and
each thread's last system call, so that its analysis finds the threads' states at the start as
the step did. Records in the file's order: per CPU in time order, the CPUs' batches interleaved."""

import numpy as np

from analysis.model.decoded import RecordsAround, anchor_rows
from analysis.store import events as events_mod
from analysis.store import records as records_mod

A, B = 100, 200
SWITCH, WAKING = records_mod.TYPE_CODE["switch"], records_mod.TYPE_CODE["waking"]
CALLS = {records_mod.TYPE_CODE["sys_enter"], records_mod.TYPE_CODE["sys_exit"]}


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
    got = RecordsAround(recs).around(start=300, end=320, lead_ns=20, trail_ns=10)
    ts = got["ts"].astype(np.int64)
    window = (ts >= 280) & (ts <= 330)
    assert window.sum() == ((recs["ts"] >= 280) & (recs["ts"] <= 330)).sum() == 11
    # before 280: A's last call (sys_exit at 260), B's (sys_exit at 275, CPU 1), A's last switch
    # out (250) and in (270, B to A: also B's last switch out and CPU 0's)
    assert sorted(ts[~window].tolist()) == [250, 260, 270, 275]
    # in the file's order still (CPU 1's records of the window after CPU 0's that come before)
    assert got["cpu"].tolist() == [r["cpu"] for r in recs if int(r["ts"]) in set(ts.tolist())]


def _by_definition(recs, start, end, lead_ns, trail_ns):
    """RecordsAround as its docstring says it, record by record: those inside, and before them
    the last switch of each thread (out, or in), of each CPU, and each thread's last call."""
    ts = recs["ts"].astype(np.int64)
    keep = set(np.flatnonzero((ts >= start - lead_ns) & (ts <= end + trail_ns)).tolist())
    last: dict[tuple, tuple[int, int]] = {}  # key -> (time, index): the latest, the file's last of a tie
    for i in np.flatnonzero(ts < start - lead_ns).tolist():
        t = int(recs["type"][i])
        keys = []
        if t == SWITCH:
            keys = [("out", int(recs["tid"][i])), ("in", int(recs["a0"][i]) & 0xFFFFFFFF), ("cpu", int(recs["cpu"][i]))]
        elif t in CALLS:
            keys = [("call", int(recs["tid"][i]))]
        for k in keys:
            if k not in last or (ts[i], i) >= last[k]:
                last[k] = (int(ts[i]), i)
    keep |= {i for _, i in last.values()}
    return recs[sorted(keep)]


def _random_records(rng, n, threads):
    """n records of switches, calls and wake-ups of threads 1..threads on 2 CPUs, at random
    times in [0, 10 000) in no order (the CPUs' batches)."""
    recs = np.zeros(n, events_mod.REC)
    recs["ts"] = rng.integers(0, 10_000, n).astype(np.uint64)
    recs["tid"] = rng.integers(1, threads + 1, n)
    recs["cpu"] = rng.integers(0, 2, n)
    recs["type"] = rng.choice([SWITCH, *CALLS, WAKING], n)
    recs["a0"] = rng.integers(1, threads + 1, n)
    return recs


def test_the_index_of_many_requests_gives_what_the_definition_gives():
    """RecordsAround (the watch's: one index a step, a binary search a request) against the
    definition on random records: 3 threads, 2 CPUs, times out of order (the CPUs' batches)."""
    rng = np.random.default_rng(7)
    for _ in range(20):
        recs = _random_records(rng, int(rng.integers(0, 400)), threads=3)
        index = RecordsAround(recs)
        for start in rng.integers(0, 10_000, 4).tolist():
            want = _by_definition(recs, start, start + 300, 500, 700)
            assert index.around(start, start + 300, 500, 700).tobytes() == want.tobytes()
            assert RecordsAround(recs).around(start, start + 300, 500, 700).tobytes() == want.tobytes()


def test_the_index_anchors_what_anchor_rows_anchors():
    """RecordsAround's records before a request are decoded.anchor_rows of all the records
    before it in time order (the pieces' anchors): one definition (anchor_kinds), two ways."""
    rng = np.random.default_rng(11)
    for _ in range(20):
        recs = _random_records(rng, int(rng.integers(1, 400)), threads=4)
        order = np.argsort(recs["ts"].astype(np.int64), kind="stable")
        ordered = recs[order]
        ts, typ = ordered["ts"].astype(np.int64), ordered["type"]
        for start in rng.integers(0, 10_000, 4).tolist():
            first = int(np.searchsorted(ts, start - 500, side="left"))
            last = int(np.searchsorted(ts, start + 300 + 700, side="right"))
            before = anchor_rows(
                typ[:first] == SWITCH,
                np.isin(typ[:first], list(CALLS)),
                ordered["tid"][:first],
                ordered["a0"][:first] & 0xFFFFFFFF,
                ordered["cpu"][:first],
            )
            want = recs[np.sort(order[np.r_[before, np.arange(first, last)].astype(np.int64)])]
            got = RecordsAround(recs).around(start, start + 300, 500, 700)
            assert got.tobytes() == want.tobytes()
