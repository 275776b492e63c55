"""store.parts.ColumnParts: the columns of numbers (what the breakdown's pieces make) read back, a range of rows or a part at a time, are
those added, whether the parts stayed in memory or went to the spill file (and the file goes
when closed)."""

import numpy as np
import pytest

from analysis.store.parts import ColumnParts

SIZES = [5, 1, 9, 3, 7]


def added(spill_rows, tmp_path):
    rng = np.random.default_rng(4)
    parts = ColumnParts(spill_rows, tmp_path)
    cols = []
    for n in SIZES:
        c = {"x": rng.normal(size=n), "k": rng.integers(0, 1 << 40, n)}
        parts.add(n, c)
        cols.append(c)
    parts.seal()
    return parts, {name: np.concatenate([c[name] for c in cols]) for name in ("x", "k")}


@pytest.mark.parametrize("spill_rows", [1000, 10, 1], ids=["memory", "spilled-later", "spilled"])
def test_columns_read_back_are_those_added(tmp_path, spill_rows):
    parts, want = added(spill_rows, tmp_path)
    try:
        assert (parts.spill is not None) == (spill_rows < sum(SIZES))
        n = sum(SIZES)
        for a, b in [(0, None), (0, n), (3, 4), (4, 17), (6, 6), (20, 40), (0, 1)]:
            for name in ("x", "k"):
                got = parts.column(name, a, b)
                assert got.tolist() == want[name][a:b].tolist(), (name, a, b)
        tables = list(parts.tables())
        assert [t.num_rows for t in tables] == SIZES
        assert np.concatenate([t.column("k").to_numpy() for t in tables]).tolist() == want["k"].tolist()
    finally:
        parts.close()
    assert not list(tmp_path.iterdir())  # the spill file had no name
