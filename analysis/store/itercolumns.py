"""A run's iterations as columns in an unnamed temporary file, read a whole column or a range of
rows at a time (IterationColumns): the analysis of a long run never holds all of its
iterations' columns at once (51 B an iteration, 2.5 GB at 50 M). KeptRows numbers the
iterations the breakdown keeps; WindowCursor gives the windows of one metric in start order to
a sweep forward in time (the decode of the events, the wake-ups' windows)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# iterations.bin's columns in the frame, in its order, with their types; metric as codes into
# the workload's names.
ITER_COLUMN_TYPES = (
    ("run", np.int32),
    ("iteration", np.int64),
    ("seq", np.int64),
    ("metric", np.int8),
    ("t_start_ns", np.int64),
    ("t_end_ns", np.int64),
    ("latency_ns", np.int64),
    ("cpu", np.int16),
    ("tid", np.int32),
)
TYPES = dict(ITER_COLUMN_TYPES)
BLOCK = 1 << 20  # rows read at a time where a pass goes through all of them


class IterationColumns:
    """The iterations (ITER_COLUMN_TYPES) of a run, column after column in a temporary file
    without a name (in `dir`: beside the results, not in a /tmp that may be memory)."""

    def __init__(self, n: int, metrics: Sequence[str], dir: Path | str | None = None):
        self.n, self.metrics = int(n), [str(m) for m in metrics]
        self.file = tempfile.TemporaryFile(prefix="ipctrace-iterations-", dir=dir)  # noqa: SIM115 - kept open: the object owns it
        self.offsets, end = {}, 0
        for name, dtype in ITER_COLUMN_TYPES:
            self.offsets[name] = end
            end += self.n * np.dtype(dtype).itemsize
        self.file.truncate(end)

    @classmethod
    def from_frame(
        cls, df: pd.DataFrame, dir: Path | str | None = None, metrics: Sequence[str] | None = None
    ) -> IterationColumns:
        """The columns of an iterations frame (a traced program's, a test's); its metric a
        categorical, names, or integer codes into `metrics`. latency_ns is t_end_ns - t_start_ns."""
        import pandas as pd

        m = df.get("metric", None)
        if not len(df):
            categorical = m is not None and isinstance(m.dtype, pd.CategoricalDtype)
            return cls(0, [str(c) for c in m.cat.categories] if categorical else list(metrics or []), dir)
        if isinstance(m.dtype, pd.CategoricalDtype):
            codes, names = m.cat.codes.to_numpy(), [str(c) for c in m.cat.categories]
        elif pd.api.types.is_integer_dtype(m) and metrics is not None:
            codes, names = m.to_numpy(), list(metrics)
        else:
            codes, names = pd.factorize(m)
            names = [str(c) for c in names]
        cols = cls(len(df), names, dir)
        try:
            cols.put("metric", 0, codes)
            starts, ends = df["t_start_ns"].to_numpy(np.int64), df["t_end_ns"].to_numpy(np.int64)
            given = {"t_start_ns": starts, "t_end_ns": ends, "latency_ns": ends - starts, "seq": np.arange(len(df))}
            for name, _ in ITER_COLUMN_TYPES:
                if name != "metric":
                    values = df[name].to_numpy() if name in df and name != "latency_ns" else given.get(name)
                    cols.put(name, 0, np.zeros(len(df)) if values is None else values)
        except BaseException:
            cols.close()
            raise
        return cols

    @classmethod
    def from_parquet(cls, path: Path | str, dir: Path | str | None = None) -> IterationColumns:
        """The columns of an iterations.parquet, read a row group at a time."""
        import pyarrow.parquet as pq

        with open(path, "rb") as f:
            pf = pq.ParquetFile(f)
            cols, at = None, 0
            try:
                for g in range(pf.metadata.num_row_groups):
                    part = pf.read_row_group(g).to_pandas()
                    if cols is None:
                        cols = cls(pf.metadata.num_rows, [str(c) for c in part["metric"].cat.categories], dir)
                    for name, _ in ITER_COLUMN_TYPES:
                        values = part[name].cat.codes.to_numpy() if name == "metric" else part[name].to_numpy()
                        cols.put(name, at, values)
                    at += len(part)
            except BaseException:
                if cols is not None:
                    cols.close()
                raise
        return cols if cols is not None else cls(0, [], dir)

    def __len__(self) -> int:
        return self.n

    def put(self, name: str, a: int, values: np.ndarray) -> None:
        """Rows a.. of a column."""
        data = np.ascontiguousarray(values, TYPES[name])
        view, at = memoryview(data.data).cast("B"), self.offsets[name] + a * data.itemsize
        while len(view):
            done = os.pwrite(self.file.fileno(), view, at)
            view, at = view[done:], at + done

    def column(self, name: str, a: int = 0, b: int | None = None) -> np.ndarray:
        """Rows [a, b) of a column (all of it by default), a new array."""
        b = self.n if b is None else min(b, self.n)
        out = np.empty(max(b - a, 0), TYPES[name])
        view, at = memoryview(out.data).cast("B"), self.offsets[name] + a * out.itemsize
        while len(view):
            got = os.preadv(self.file.fileno(), [view], at)
            if got <= 0:
                raise OSError("the iterations' temporary file ended early")
            view, at = view[got:], at + got
        return out

    def frame(self, a: int = 0, b: int | None = None, rows: np.ndarray | None = None) -> pd.DataFrame:
        """The iterations frame of rows [a, b), or of the ascending row numbers `rows`."""
        import pandas as pd

        if rows is not None:
            a, b = (int(rows[0]), int(rows[-1]) + 1) if len(rows) else (0, 0)
        cols = {name: self.column(name, a, b) for name, _ in ITER_COLUMN_TYPES}
        if rows is not None:
            cols = {name: c[rows - a] for name, c in cols.items()}
        cols["metric"] = pd.Categorical.from_codes(cols["metric"], categories=self.metrics)
        return pd.DataFrame(cols, copy=False)

    def __getitem__(self, name: str) -> pd.Series:
        """A whole column as a Series (metric: categorical), for code written for a frame."""
        import pandas as pd

        values = self.column(name)
        if name == "metric":
            return pd.Series(pd.Categorical.from_codes(values, categories=self.metrics), name=name)
        return pd.Series(values, name=name, copy=False)

    def counts(self) -> np.ndarray:
        """Iterations of each metric (indexed like metrics)."""
        total = np.zeros(len(self.metrics), np.int64)
        for a in range(0, self.n, BLOCK):
            total += np.bincount(self.column("metric", a, a + BLOCK), minlength=len(self.metrics))
        return total

    def close(self) -> None:
        self.file.close()


class KeptRows:
    """The iterations the breakdown keeps (all, or those of a mask), numbered 0..n-1 in their
    order: their columns a range at a time. The mask (1 B an iteration) is all that is held."""

    def __init__(self, cols: IterationColumns, keep: np.ndarray | None = None):
        self.cols, self.keep = cols, keep
        if keep is None:
            self.n = cols.n
        else:
            # kept rows before each block of BLOCK iterations: a kept row's block by a search
            per_block = np.add.reduceat(keep, np.arange(0, max(len(keep), 1), BLOCK)) if len(keep) else [0]
            self.before = np.concatenate(([0], np.cumsum(per_block))).astype(np.int64)
            self.n = int(self.before[-1])

    def rows(self, a: int, b: int) -> np.ndarray:
        """The iteration rows of kept rows [a, b)."""
        b = min(b, self.n)
        if b <= a:
            return np.zeros(0, np.int64)
        if self.keep is None:
            return np.arange(a, b, dtype=np.int64)
        k0 = int(np.searchsorted(self.before, a, side="right")) - 1
        k1 = int(np.searchsorted(self.before, b, side="left"))
        idx = np.flatnonzero(self.keep[k0 * BLOCK : k1 * BLOCK]) + k0 * BLOCK
        return idx[a - self.before[k0] : b - self.before[k0]]

    def column(self, name: str, a: int = 0, b: int | None = None, dtype: np.dtype | None = None) -> np.ndarray:
        """A column of kept rows [a, b) (all by default), as dtype if given."""
        b = self.n if b is None else min(b, self.n)
        if self.keep is None:
            v = self.cols.column(name, a, b)
            return v if dtype is None else v.astype(dtype, copy=False)
        out = np.empty(max(b - a, 0), dtype or TYPES[name])
        filled = 0
        while filled < len(out):
            r = self.rows(a + filled, min(a + filled + BLOCK, b))
            v = self.cols.column(name, int(r[0]), int(r[-1]) + 1)
            out[filled : filled + len(r)] = v[r - r[0]]
            filled += len(r)
        return out

    def frame(self, a: int, b: int) -> pd.DataFrame:
        return self.cols.frame(rows=self.rows(a, b)) if self.keep is not None else self.cols.frame(a, b)


class WindowCursor:
    """The windows (t_start, t_end, run, iteration) of one metric's iterations (all, or the kept
    ones) in start order, for a sweep forward in time: covering(t0, t1) gives the window that
    starts last at or before t0 and every one after it that starts by t1, reading the
    iterations a block at a time as the sweep goes. Where the metric's windows are not in start
    order in the file (several measuring threads), they are sorted once and held (24 B each)."""

    NAMES = ("t_start_ns", "t_end_ns", "run", "iteration")

    def __init__(self, cols: IterationColumns, code: int, keep: np.ndarray | None = None):
        self.cols, self.code, self.keep = cols, code, keep
        self.next, self.held = 0, None
        self.buf = [np.zeros(0, TYPES[n]) for n in self.NAMES]
        last, ordered = None, True
        for a in range(0, cols.n, BLOCK):
            s = self._block(a, ("t_start_ns",))[0]
            if len(s) and ((last is not None and s[0] < last) or (len(s) > 1 and (s[1:] < s[:-1]).any())):
                ordered = False
                break
            if len(s):
                last = s[-1]
        if not ordered:
            parts = [self._block(a, self.NAMES) for a in range(0, cols.n, BLOCK)]
            cat = [np.concatenate([p[k] for p in parts]) for k in range(len(self.NAMES))]
            order = np.argsort(cat[0], kind="stable")
            self.buf, self.next = [c[order] for c in cat], cols.n

    def _block(self, a: int, names: Sequence[str]) -> list[np.ndarray]:
        mine = self.cols.column("metric", a, a + BLOCK) == self.code
        if self.keep is not None:
            mine &= self.keep[a : a + BLOCK]
        whole = mine.all()
        return [c if whole else c[mine] for c in (self.cols.column(n, a, a + BLOCK) for n in names)]

    def covering(self, t0: int, t1: int) -> tuple[np.ndarray, ...]:
        while self.next < self.cols.n and (not len(self.buf[0]) or self.buf[0][-1] <= t1):
            more = self._block(self.next, self.NAMES)
            self.buf = [np.concatenate((b, m)) for b, m in zip(self.buf, more)]
            self.next += BLOCK
        s = self.buf[0]
        i = max(int(np.searchsorted(s, t0, side="right")) - 1, 0)
        j = int(np.searchsorted(s, t1, side="right"))
        self.buf = [b[i:] for b in self.buf]
        return tuple(b[: j - i] for b in self.buf)


def metric_code(cols: IterationColumns, metric: str | None) -> int:
    """The code of metric among the run's, or of the first iteration's metric if it has none
    (as events.windows picks the metric whose windows label the events)."""
    counts = cols.counts()
    if metric is not None and metric in cols.metrics and counts[cols.metrics.index(metric)]:
        return cols.metrics.index(metric)
    return int(cols.column("metric", 0, 1)[0]) if cols.n else 0
