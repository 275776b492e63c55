"""clib.scan_facts (decode.c ipt_scan_facts): the trace's facts from one pass over records
give what numpy's masks over the same records give, on random records whose threads,
processes, syscalls and switches collide in its small caches."""

import numpy as np
import pytest

from analysis.store import clib, records
from analysis.store import events as events_mod

TYPE = {name: k + 1 for k, name in enumerate(records.TYPES)}  # the records' type field


def random_records(n, seed, tids):
    rng = np.random.default_rng(seed)
    rec = np.zeros(n, events_mod.REC)
    kinds = [TYPE[t] for t in ("sys_enter", "sys_exit", "switch", "func_entry", "wakeup", "irq_entry")]
    rec["type"] = rng.choice(kinds, n)
    rec["cpu"] = rng.integers(0, 300, n)
    rec["tid"] = rng.choice(tids, n)
    rec["pid"] = rec["tid"] // 10
    rec["aux"] = rng.integers(0, 20, n)
    rec["a0"] = rng.choice(tids, n).astype(np.uint64) | (rng.integers(0, 5, n).astype(np.uint64) << 32)
    rec["ts"] = np.arange(n)
    return rec


def with_numpy(rec, cal_tid, cal_nr, copy_ids, pids):
    t = rec["type"]
    calls = np.flatnonzero(
        ((t == TYPE["sys_enter"]) | (t == TYPE["sys_exit"])) & (rec["tid"] == cal_tid) & (rec["aux"] == cal_nr)
    )
    copied = bool(np.isin(rec["aux"][t == TYPE["func_entry"]], copy_ids).any())
    tids = np.unique(rec["tid"][np.isin(rec["pid"], pids) & (rec["tid"] > 0)]).astype(np.int64)
    sw = t == TYPE["switch"]
    pairs = np.unique(((rec["a0"][sw] & 0xFFFFFFFF).astype(np.int64) << 16) | rec["cpu"][sw].astype(np.int64))
    return calls, copied, tids, pairs


@pytest.mark.parametrize(
    "n, seed, tids, cal_tid, cal_nr, pids",
    [
        (0, 0, [1], 1, 3, [0]),
        (5000, 1, [0, 10, 11, 12], 11, 3, [1]),  # tid 0 (idle) is no thread of the processes
        (20000, 2, list(range(1, 400)), 57, 7, [0, 3, 5, 39]),  # more threads than cache slots
        (20000, 3, [10, 11], -1, -1, []),  # no calibration, no processes
        (20000, 4, [64 * k + 1 for k in range(50)], 65, 0, list(range(0, 400, 2))),  # one slot
    ],
)
def test_scan_facts_gives_what_the_masks_give(n, seed, tids, cal_tid, cal_nr, pids):
    rec = random_records(n, seed, tids)
    for copy_ids in (records.COPY_FUNC_IDS, (), (19,)):
        calls, copied, tids_seen, pairs = clib.scan_facts(rec, cal_tid, cal_nr, copy_ids, pids)
        want = with_numpy(rec, cal_tid, cal_nr, list(copy_ids), pids)
        assert np.array_equal(calls, want[0])
        assert copied == want[1]
        assert np.array_equal(np.unique(tids_seen), want[2])
        assert np.array_equal(np.unique(pairs), want[3])
