"""streaming.Reach: the latest end among rows [0, j] and the earliest start among rows [j, n),
read a block at a time as the pieces go forward, are those of the whole columns (np.maximum
and np.minimum accumulated), for windows in order and out of it, kept or not."""

import numpy as np
import pytest

from analysis.model import streaming
from analysis.store import itercolumns
from analysis.store.itercolumns import IterationColumns, KeptRows
from tests.unit.store.test_itercolumns import frame


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("masked", [False, True])
def test_reach_is_the_accumulated_max_and_min(tmp_path, monkeypatch, ordered, masked):
    monkeypatch.setattr(itercolumns, "BLOCK", 7)
    monkeypatch.setattr(streaming, "BLOCK", 7)
    df = frame(80, seed=11, ordered=ordered)
    keep = np.random.default_rng(2).random(80) < 0.8 if masked else None
    rows = KeptRows(IterationColumns.from_frame(df, dir=tmp_path), keep)
    sel = np.arange(80) if keep is None else np.flatnonzero(keep)
    starts, ends = df["t_start_ns"].to_numpy()[sel], df["t_end_ns"].to_numpy()[sel]
    ends_so_far = np.maximum.accumulate(ends)
    starts_after = np.minimum.accumulate(starts[::-1])[::-1]
    reach = streaming.Reach(rows)
    done = 0
    for safe in np.linspace(starts.min(), ends.max() + 10, 13).astype(np.int64):
        j = reach.whole_before(int(safe))
        want = int(np.searchsorted(ends_so_far, safe, side="left"))
        assert j == max(want, done)
        if j > done:
            assert reach.earliest_from(j) == (float(starts_after[j]) if j < len(sel) else np.inf)
            reach.forget(j)
            done = j
