"""Columns kept in parts, in row order, while a bounded-memory pass makes them a part at a time:
in memory until they outgrow a number of rows, then in an unnamed temporary file in Arrow's own
file format (uncompressed: written and read back at memory speed, one column of every part
without the others). Read back a column and a range of rows at a time, or a part at a time."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa

from analysis.errors import MeasureError


class ColumnParts:
    """Parts of the same columns, added in row order (add()); once more than spill_rows rows
    are kept, all of them go to a temporary file (no name) in dir, and so does every later part.
    seal() ends the adding; then column() and tables() read them (column() from several
    threads)."""

    def __init__(self, spill_rows: int, dir: Path | str | None = None, prefix: str = "ipctrace-breakdown-"):
        self.spill_rows, self.dir, self.prefix = spill_rows, dir, prefix
        self.parts: list[pa.Table] = []  # those in memory
        self.part_sizes: list[int] = []  # rows of each part, in order
        self.part_rows = 0
        self.names: list[str] | None = None  # the parts' columns
        self.spill: IO[bytes] | None = None  # the temporary file, once the parts outgrow spill_rows
        self.spill_writer: Any = None  # pa.ipc.RecordBatchFileWriter
        self.spill_at: dict[str, tuple[np.dtype, np.ndarray]] = {}  # seal(): where each part's columns are

    def add(self, rows: int, cols: Mapping[str, Any]) -> None:
        """The next part: rows rows of the columns cols (name -> array)."""
        self.names = self.names or list(cols)
        self.parts.append(pa.Table.from_pydict(dict(cols)))
        self.part_sizes.append(rows)
        self.part_rows += rows
        if self.part_rows >= self.spill_rows or self.spill is not None:
            if self.spill is None:
                self.spill = open_spill(self.prefix, self.dir)
                self.spill_writer = pa.ipc.new_file(self.spill, self.parts[0].schema)
            for t in self.parts:
                self.spill_writer.write_table(t)
            self.parts = []

    def seal(self) -> None:
        """No more parts: the spill file is complete and may be read (by several threads)."""
        if self.spill_writer is not None:
            self.spill_writer.close()
            self.spill_writer = None
            assert self.spill is not None
            self.spill.flush()
            self.spill_at = self._data_offsets()

    def _data_offsets(self) -> dict[str, tuple[np.dtype, np.ndarray]]:
        """{name: (dtype, where each part's values start in the spill file)} of the columns of
        numbers without nulls: column() reads them straight into its array, one copy (an Arrow
        buffer's and then the array's took a quarter of the statistics' time). From a mapping of
        the file, whose data pages are not touched: only each part's metadata is read."""
        assert self.spill is not None
        where: dict[str, tuple[np.dtype, list[int]]] = {}
        with pa.memory_map(f"/proc/self/fd/{self.spill.fileno()}") as m:
            base = m.read_buffer(1).address
            reader = pa.ipc.open_file(m)
            for k in range(reader.num_record_batches):
                batch = reader.get_batch(k)
                for name, col in zip(batch.schema.names, batch.columns):
                    plain = pa.types.is_floating(col.type) or pa.types.is_integer(col.type)
                    if plain and col.null_count == 0 and col.offset == 0 and col.buffers()[0] is None:
                        where.setdefault(name, (np.dtype(col.type.to_pandas_dtype()), []))[1].append(
                            col.buffers()[1].address - base
                        )
        nparts = len(self.part_sizes)
        return {name: (dtype, np.array(at, np.int64)) for name, (dtype, at) in where.items() if len(at) == nparts}

    def _spill_reader(self, fields: list[int] | None = None) -> tuple[Any, Any]:
        """A reader of the spill file with a file description of its own (each thread reads at
        its own offset), reading only the columns `fields` (indices; None: all)."""
        assert self.spill is not None
        f = pa.OSFile(f"/proc/self/fd/{self.spill.fileno()}")
        opts = pa.ipc.IpcReadOptions(included_fields=fields) if fields is not None else None
        return f, pa.ipc.open_file(f, options=opts)

    def tables(self) -> Iterator[pa.Table]:
        """Each part as an Arrow table, in order."""
        if self.spill is not None:
            f, reader = self._spill_reader()
            with f:
                for i in range(reader.num_record_batches):
                    yield pa.Table.from_batches([reader.get_batch(i)])
        yield from self.parts

    def column(self, name: str, a: int = 0, b: int | None = None) -> np.ndarray:
        """Rows [a, b) of one column, from the parts whichever way they are kept, reading that
        column of the parts that hold those rows alone."""
        first = np.concatenate(([0], np.cumsum(self.part_sizes))).astype(np.int64)
        b = int(first[-1]) if b is None else min(b, int(first[-1]))
        if b <= a:
            return np.zeros(0, np.float64)
        # the parts k0..k1-1 hold rows [a, b)
        k0, k1 = int(np.searchsorted(first, a, side="right")) - 1, int(np.searchsorted(first, b, side="left"))
        if self.spill is not None and name in self.spill_at:
            dtype, at = self.spill_at[name]
            out = np.empty(b - a, dtype)
            for k in range(k0, k1):
                lo, hi = max(a, int(first[k])), min(b, int(first[k + 1]))
                _pread_into(
                    self.spill.fileno(), out[lo - a : hi - a], int(at[k]) + (lo - int(first[k])) * dtype.itemsize
                )
            return out
        got: np.ndarray | None = None
        assert self.names is not None
        f, reader = self._spill_reader([self.names.index(name)]) if self.spill is not None else (None, None)
        try:
            for k in range(k0, k1):
                part = (reader.get_batch(k).column(0) if reader else self.parts[k].column(name)).to_numpy()
                lo, hi = max(a, int(first[k])), min(b, int(first[k + 1]))
                if got is None:
                    got = np.empty(b - a, part.dtype)
                got[lo - a : hi - a] = part[lo - int(first[k]) : hi - int(first[k])]
        finally:
            if f is not None:
                f.close()
        assert got is not None
        return got

    def close(self) -> None:
        """The spill file goes (it has no name: closing it removes it)."""
        if self.spill is not None:
            self.spill.close()


def open_spill(prefix: str, dir: Path | str | None) -> IO[bytes]:
    """An unnamed temporary file in dir, open for reading and writing."""
    return tempfile.TemporaryFile(prefix=prefix, dir=dir)  # noqa: SIM115 - kept open: the caller owns it


def _pread_into(fd: int, out: np.ndarray, offset: int) -> None:
    """Fill the array `out` with the bytes of file fd from offset on (a positional read: any
    thread, the same file description)."""
    view = out.data.cast("B")  # out: a contiguous array
    while len(view):
        n = os.preadv(fd, [view], offset)
        if n <= 0:
            raise MeasureError("the breakdown's temporary file was cut short while it was read")
        view, offset = view[n:], offset + n
