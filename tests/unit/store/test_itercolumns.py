"""store/itercolumns: a run's iterations in a temporary file give back the frame they came from,
a column or a range at a time; KeptRows numbers the kept ones as a mask's flatnonzero does;
WindowCursor gives a forward sweep the windows that label its times as all windows at once
do. Blocks made small so that every case crosses their edges."""

import numpy as np
import pandas as pd
import pytest

from analysis.store import events as events_mod
from analysis.store import itercolumns
from analysis.store.itercolumns import IterationColumns, KeptRows, WindowCursor


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(itercolumns, "BLOCK", 7)


def frame(n, seed=0, metrics=("rtt", "lock"), ordered=True):
    rng = np.random.default_rng(seed)
    starts = np.cumsum(rng.integers(5, 50, n)) if ordered else rng.integers(0, 50 * n, n)
    lat = rng.integers(1, 40, n)
    return pd.DataFrame(
        {
            "run": rng.integers(0, 3, n).astype(np.int32),
            "iteration": np.arange(n),
            "seq": np.arange(n) + 100,
            "metric": pd.Categorical.from_codes(rng.integers(0, len(metrics), n), list(metrics)),
            "t_start_ns": starts,
            "t_end_ns": starts + lat,
            "latency_ns": lat,
            "cpu": rng.integers(0, 2, n).astype(np.int16),
            "tid": rng.integers(10, 12, n).astype(np.int32),
        }
    )


@pytest.mark.parametrize("n", [0, 1, 7, 8, 50])
def test_the_frame_comes_back(tmp_path, n):
    df = frame(n)
    cols = IterationColumns.from_frame(df, dir=tmp_path)
    assert len(cols) == n and cols.metrics == ["rtt", "lock"]
    pd.testing.assert_frame_equal(cols.frame(), df, check_dtype=False)
    for a, b in [(0, n), (3, 9), (n - 1, n + 5)]:
        pd.testing.assert_frame_equal(
            cols.frame(max(a, 0), b).reset_index(drop=True),
            df.iloc[max(a, 0) : b].reset_index(drop=True),
            check_dtype=False,
        )
    assert cols.counts().tolist() == [int((df["metric"] == m).sum()) for m in ("rtt", "lock")]
    assert list(cols["metric"].astype(str)) == list(df["metric"].astype(str))
    assert not list(tmp_path.iterdir())  # the file has no name
    cols.close()


def test_parquet_and_frame_give_the_same_columns(tmp_path):
    df = frame(30, seed=3)
    df.to_parquet(tmp_path / "iterations.parquet", row_group_size=8)
    a = IterationColumns.from_parquet(tmp_path / "iterations.parquet")
    pd.testing.assert_frame_equal(a.frame(), df, check_dtype=False)


MASKS = {
    "all": None,
    "none": np.zeros(30, bool),
    "every other": np.arange(30) % 2 == 0,
    "a block's edge": (np.arange(30) >= 6) & (np.arange(30) <= 15),
    "random": np.random.default_rng(5).random(30) < 0.6,
}


@pytest.mark.parametrize("name", list(MASKS))
def test_kept_rows_are_the_masks_rows(tmp_path, name):
    keep = MASKS[name]
    df = frame(30, seed=1)
    rows = KeptRows(IterationColumns.from_frame(df, dir=tmp_path), keep)
    want = np.arange(30) if keep is None else np.flatnonzero(keep)
    assert rows.n == len(want)
    for a, b in [(0, rows.n), (2, 5), (6, 14), (rows.n - 1, rows.n + 3)]:
        a = max(a, 0)
        assert rows.rows(a, b).tolist() == want[a:b].tolist()
        assert rows.column("t_start_ns", a, b).tolist() == df["t_start_ns"].to_numpy()[want[a:b]].tolist()
    assert rows.column("latency_ns").tolist() == df["latency_ns"].to_numpy()[want].tolist()


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("keep", [None, "random"])
def test_a_sweep_labels_as_all_windows_at_once(tmp_path, ordered, keep):
    df = frame(60, seed=2, ordered=ordered)
    mask = None if keep is None else np.random.default_rng(9).random(60) < 0.7
    cols = IterationColumns.from_frame(df, dir=tmp_path)
    mine = (df["metric"] == "rtt").to_numpy() & (True if mask is None else mask)
    # all windows at once, as events.windows gives them
    s, e, r, it = events_mod.windows(df[mine], "rtt")
    times = np.sort(np.random.default_rng(4).integers(0, int(df["t_end_ns"].max()) + 20, 400))
    cursor = WindowCursor(cols, 0, mask)
    for block in np.array_split(times, 37):
        if not len(block):
            continue
        ws, we, wr, wi = cursor.covering(int(block[0]), int(block[-1]))
        for t in block:
            j = np.searchsorted(s, t, side="right") - 1
            want = int(it[j]) if j >= 0 and t <= e[j] else -1
            k = np.searchsorted(ws, t, side="right") - 1
            got = int(wi[k]) if k >= 0 and t <= we[k] else -1
            assert got == want, t
