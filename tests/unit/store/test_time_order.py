"""events.TimeOrder: records put in time order a block at a time give the order of one stable
sort of all of them, whatever the blocks, the lag and the disorder; a file out of order beyond
mending is a UsageError (a damaged results file, exit 2)."""

import numpy as np
import pytest

from analysis.errors import UsageError
from analysis.store import events as events_mod


def records(ts):
    rec = np.zeros(len(ts), events_mod.REC)
    rec["ts"] = ts
    rec["pid"] = np.arange(len(ts))  # the file position, to check the order of equal times
    return rec


def in_pieces(rec, block, lag):
    order = events_mod.TimeOrder(lag)
    blocks = [rec[i : i + block] for i in range(0, len(rec), block)]
    for b in blocks:
        order.observe(b)
    out = [r if o is None else r[o] for r, o in order.in_time_order(blocks)]
    return np.concatenate(out) if out else np.zeros(0, events_mod.REC)


def batches(n, cpus, batch, seed):
    """Times of n records written per CPU in batches, each when it is full, as the tracer does."""
    rng = np.random.default_rng(seed)
    ts = np.cumsum(rng.integers(1, 50, n))
    cpu = rng.integers(0, cpus, n)
    own = [ts[cpu == c] for c in range(cpus)]
    chunks = [t[i : i + batch] for t in own for i in range(0, len(t), batch)]
    chunks.sort(key=lambda c: c[-1])
    return np.concatenate(chunks)


def one_late(n, where, to):
    ts = np.arange(n) * 10
    return np.insert(np.delete(ts, where), to - 1, ts[where])


CASES = {
    "in order": np.arange(5000) * 3,
    "equal times": np.repeat(np.arange(500), 10),
    "per-CPU batches": batches(6000, 4, 64, 1),
    "one record 3000 places late": one_late(5000, 100, 3100),
    "a batch far late": np.concatenate((np.arange(0, 1000), np.arange(1200, 4000), np.arange(1000, 1200))),
    "late records equal to others": np.concatenate((np.arange(2000) // 3, [5, 5, 5], np.arange(2000, 3000) // 3)),
    "empty": np.zeros(0, np.int64),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("block, lag", [(1000, 100), (333, 1000), (64, 7), (10**6, 1 << 17)])
def test_pieces_are_one_stable_sort(name, block, lag):
    rec = records(CASES[name])
    got = in_pieces(rec, block, lag)
    want = rec[np.argsort(rec["ts"], kind="stable")]
    assert np.array_equal(got["ts"], want["ts"]) and np.array_equal(got["pid"], want["pid"])


def test_too_many_stragglers_is_a_damaged_file(monkeypatch):
    monkeypatch.setattr(events_mod.TimeOrder, "MAX_STRAGGLERS", 10)
    rng = np.random.default_rng(5)
    with pytest.raises(UsageError, match="damaged"):
        in_pieces(records(rng.integers(0, 10**9, 5000)), 500, 50)


@pytest.mark.parametrize("lag, sizes", [(1, [5, 0, 3]), (4, [2, 2, 9]), (50, [7, 300, 1, 64]), (3, [0, 1, 1, 1, 1])])
def test_lagged_late_is_the_running_maximum_lag_records_back(lag, sizes):
    # the straggler rule worked out with numpy over the whole file at once
    rng = np.random.default_rng(lag)
    ts = np.cumsum(rng.integers(-40, 60, sum(sizes)))
    before_all = np.concatenate((np.full(lag, np.iinfo(np.int64).min), ts))
    reach = np.maximum.accumulate(before_all)  # reach[i]: the latest time lag or more records before record i
    seen, at = events_mod._LaggedMax(lag), 0
    for n in sizes:
        late, cut = seen.add(records(ts[at : at + n]))
        want = np.flatnonzero(ts[at : at + n] < reach[at : at + n])
        assert late.tolist() == want.tolist()
        assert cut == reach[at + n]
        at += n


def test_a_lag_below_one_record_is_refused():
    with pytest.raises(ValueError):
        events_mod.TimeOrder(0)


def read_behind(rec, block, lag, tmp_path):
    """in_pieces, with the blocks read from an events.bin by a RecordReader, each behind the
    records carried over (what analyse_run does)."""
    path = tmp_path / "events.bin"
    with open(path, "wb") as f:
        f.write(bytes(events_mod.HEADER.itemsize))
        f.write(rec.tobytes())
    order = events_mod.TimeOrder(lag)
    for b in events_mod.record_blocks(path, len(rec), block):
        order.observe(b)
    with events_mod.RecordReader(path, len(rec), block) as reader:
        out = [r if o is None else r[o] for r, o in order.in_time_order(reader)]
    return np.concatenate(out) if out else np.zeros(0, events_mod.REC)


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("block, lag", [(1000, 100), (333, 1000), (64, 7), (10**6, 1 << 17)])
def test_blocks_read_behind_the_carried_records_are_the_same_pieces(name, block, lag, tmp_path):
    rec = records(CASES[name])
    got = read_behind(rec, block, lag, tmp_path)
    assert np.array_equal(got, in_pieces(rec, block, lag))
    want = rec[np.argsort(rec["ts"], kind="stable")]
    assert np.array_equal(got["ts"], want["ts"]) and np.array_equal(got["pid"], want["pid"])


@pytest.mark.parametrize("seed", range(6))
def test_blocks_read_behind_random_disorder(seed, tmp_path):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 4000))
    ts = batches(n, int(rng.integers(1, 6)), int(rng.integers(1, 200)), seed)
    lag, block = int(rng.integers(1, 500)), int(rng.integers(1, 1500))
    rec = records(ts)
    assert np.array_equal(read_behind(rec, block, lag, tmp_path), in_pieces(rec, block, lag))


def test_a_file_cut_short_is_a_usage_error(tmp_path):
    path = tmp_path / "events.bin"
    with open(path, "wb") as f:
        f.write(bytes(events_mod.HEADER.itemsize))
        f.write(records(np.arange(100)).tobytes())
    with events_mod.RecordReader(path, 150, 64) as reader, pytest.raises(UsageError, match="cut short"):
        while reader.read_behind(np.zeros(0, events_mod.REC)) is not None:
            pass
