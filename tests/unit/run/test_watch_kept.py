"""watch's kept requests: the --max-disk ledger (run/watch.KeptOnDisk: each kept directory
measured once, the oldest by name, its request's time, removed first, those of an earlier watch
counted) and the names in a kept trace.json (every task its records name, the keeper's
threads as the tracer's)."""

import os
from pathlib import Path

import pytest

from analysis.run.watch import KeptOnDisk, dir_bytes


def kept(root: Path, name: str, kib: int) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "explain.txt").write_bytes(b"x" * kib * 1024)
    return d


@pytest.mark.parametrize(
    "earlier, written, limit_dirs, removed",
    [
        ([], ["20261129-100002", "20261129-100001"], 100, []),  # within: none
        ([], ["20261129-100002", "20261129-100001", "20261129-100003"], 2, ["20261129-100001"]),  # over at the third
        (["20261128-235959"], ["20261129-100001"], 1, ["20261128-235959"]),  # an earlier watch's first
        ([], ["20261129-100001"], 0, ["20261129-100001"]),  # a bound below one: each one goes
    ],
)
def test_the_oldest_go_first_until_within(tmp_path, earlier, written, limit_dirs, removed):
    """The bound in kept directories (8 KiB of file and the directory's own block, as du counts
    it), with the block of the directory that holds them."""
    for name in earlier:
        kept(tmp_path, name, 8)
    ledger = KeptOnDisk(tmp_path)
    one = dir_bytes(kept(tmp_path / "measure", "one", 8))
    limit = limit_dirs * one + os.lstat(tmp_path).st_blocks * 512 if limit_dirs else 0
    out = []
    for name in written:
        ledger.add(kept(tmp_path, name, 8))
        out += ledger.oldest_over(limit)
    assert out == removed
    left = sorted(set(earlier + written) - set(removed))
    assert ledger.names == left
    assert ledger.total == sum(dir_bytes(tmp_path / n) for n in left)


def test_a_directory_removed_otherwise_is_forgotten_once(tmp_path):
    ledger = KeptOnDisk(tmp_path)
    a, b = kept(tmp_path, "20261129-100001", 8), kept(tmp_path, "20261129-100002", 8)
    ledger.add(a)
    ledger.add(b)
    ledger.add(b)  # told twice: counted once
    ledger.forget(a)
    ledger.forget(a)
    assert ledger.names == [b.name] and ledger.total == dir_bytes(b)


# --- a kept request's trace.json: every task its records name, the keeper's as the tracer's ----

A, B, WAKER, KEEPER_WRITER, OTHER_KEEPER = 101, 102, 75, 9001, 9002
WINDOW = [
    ("sys_enter", A, 1, 4),
    ("waking", B, 1, WAKER | 7 << 32),  # B woken by WAKER (decode.c's other_tid)
    ("switch", B, 1, KEEPER_WRITER | 8 << 32),  # B leaves its CPU to the keeper's writer
    ("sys_exit", A, 1, 1),
]


def test_a_window_names_who_recorded_who_was_switched_to_and_who_woke():
    import numpy as np

    from analysis.run.watch import window_tids
    from analysis.store import events as events_mod

    window = events_mod.records_of(np.arange(4, dtype=np.uint64) * 10, WINDOW, 0)
    assert window_tids(window) == {A, B, WAKER, KEEPER_WRITER}


@pytest.mark.parametrize(
    "own, tracer, ours",
    [
        ({KEEPER_WRITER, OTHER_KEEPER}, [1, KEEPER_WRITER], {KEEPER_WRITER}),  # only those the window names
        ({OTHER_KEEPER}, [1], set()),  # none named: trace.json as it was
    ],
)
def test_the_keeper_s_threads_the_window_names_are_the_tracer_s(own, tracer, ours):
    import numpy as np

    from analysis.run.watch import window_tids, with_own_threads
    from analysis.store import events as events_mod
    from analysis.store.jsonfiles import TraceFile

    # as the front end names them: every task the window's records name (window_tids)
    window = events_mod.records_of(np.arange(4, dtype=np.uint64) * 10, WINDOW, 0)
    tasks = {str(x): {"comm": "a" if x == A else "", "pid": x} for x in sorted(window_tids(window))}
    tj = TraceFile.from_json({"tids": [A], "tracer": {"pid": 1, "tids": [1]}, "tasks": tasks})
    out = with_own_threads(tj, own)
    assert out.tracer.tids == tracer and set(out.tasks) == set(tj.tasks)
    # named as the keeper's process is
    assert {x for x, task in out.tasks.items() if task is not None and task.pid == os.getpid()} == ours
    assert out.tasks[A].comm == "a" and list(out.to_json()) == list(tj.to_json())


def test_the_tasks_a_window_names_are_the_decoded_ones():
    """window_tids reads the raw columns (decoded.named_tids): the same tasks as the decoded
    frame's tid, next_tid and other_tid, on random records of every type."""
    import numpy as np

    from analysis.run.watch import window_tids
    from analysis.store import events as events_mod
    from analysis.store import records

    rng = np.random.default_rng(3)
    for n in (0, 1, 50, 500):
        recs = np.zeros(n, events_mod.REC)
        recs["tid"] = rng.integers(0, 40, n)
        recs["type"] = rng.integers(1, len(records.TYPES) + 1, n)
        recs["a0"] = rng.integers(0, 1 << 40, n)
        frame = events_mod.to_frame(recs)
        decoded = np.concatenate([frame[c].to_numpy() for c in ("tid", "next_tid", "other_tid")])
        assert window_tids(recs) == {int(x) for x in decoded if x > 0}
