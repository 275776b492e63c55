"""Reading and writing the files of a results directory (see docs/DESIGN.md).

Anything wrong with a file a user hands us (missing, truncated, corrupted, an
unknown schema) is a UsageError naming the file; the runner turns it into a
MeasureError when the driver has just written that file itself.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.errors import UsageError
from analysis.store import clib, jsonfiles, records, safeio, schema, summaryfile
from analysis.store.itercolumns import ITER_COLUMN_TYPES

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from analysis.store.itercolumns import IterationColumns

# pandas and pyarrow take most of a second to import: only the functions that
# handle tables import them, so that list, --help and errors answer at once.

SCHEMA_VERSION = 1
INCOMPLETE = "INCOMPLETE"
# a request `ipctrace watch` kept raw (what the watch found of it, then its events), not yet
# written whole: the commands that read it write it whole first (run/watch.written_whole)
KEPT_RAW = "kept.bin"

# iterations.bin's layout (workloads/iterfile.h, as records.py states it and clib.py checks it)
ITER_HEADER, ITER_REC, ITER_MAGIC, ITER_VERSION = (
    records.ITER_HEADER,
    records.ITER_REC,
    records.ITER_MAGIC,
    records.ITER_VERSION,
)

# Column types of iterations.parquet: those of iterations.bin's columns (signed 64-bit times
# join with events.ts), the metric by its name.
ITER_COLUMNS = {**dict(ITER_COLUMN_TYPES), "metric": "category"}


def read_json(path: Path | str, error: type[Exception] = UsageError) -> Any:
    """A JSON file, read as a regular file only (safeio): any fault is one `error` line."""
    path = Path(path)
    try:
        raw = safeio.read_bytes(path, error=error)
    except FileNotFoundError:
        raise error(f"{path} does not exist") from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as e:
        raise error(
            f"{path} is not valid JSON ({e.msg} at line {e.lineno}); the file is truncated or corrupted"
        ) from None
    except (UnicodeDecodeError, RecursionError) as e:
        raise error(f"{path} is not valid JSON ({type(e).__name__}); the file is corrupted") from None
    except ValueError as e:  # an integer of more than 4300 digits (sys.set_int_max_str_digits)
        raise error(f"{path} is not ipctrace's JSON ({str(e).split(':')[0]}); the file is damaged") from None


def write_json(path: Path | str, obj: Any) -> None:
    """Write obj as JSON via a new file renamed into place, so a reader never sees half of it
    (safeio.created: never through a name someone else planted)."""
    safeio.write_json(path, obj)


def read_binary_header(
    path: Path | str,
    header: np.dtype,
    magic: bytes,
    version: int,
    rec: np.dtype,
    kind: str,
    error: type[Exception],
    missing: str,
    missing_error: type[Exception] | None = None,
) -> tuple[np.void, int]:
    """The header of one of our binary files (iterations.bin, events.bin) checked for
    magic, version and record size -> (header record, file size); any fault is `error`
    with one line (`missing` is said after "does not exist"; a missing file is `missing_error`
    where one is given)."""
    try:
        fd = safeio.open_regular(path, error=error)
    except FileNotFoundError:
        raise (missing_error or error)(f"{path} does not exist{missing}") from None
    try:
        size = os.fstat(fd).st_size
        raw = os.pread(fd, header.itemsize, 0)
    except OSError as e:
        raise error(f"cannot read {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) < header.itemsize:
        raise error(f"{path} is truncated: {size} bytes, shorter than its header")
    h = np.frombuffer(raw, header)[0]
    if h["magic"] != magic:
        raise error(f"{path} is not {kind} (bad magic)")
    if h["version"] != version or h["rec_size"] != rec.itemsize:
        raise error(
            f"{path} has version {h['version']} with {h['rec_size']}-byte records; "
            f"this ipctrace reads version {version} with {rec.itemsize}-byte records"
        )
    return h, size


def read_iterations_bin(path: Path | str, metrics: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """iterations.bin -> (DataFrame with ITER_COLUMNS, warnings): iteration_columns' frame."""
    cols, warnings = iteration_columns(path, metrics)
    try:
        return cols.frame(), warnings
    finally:
        cols.close()


def iteration_columns(
    path: Path | str, metrics: Sequence[str], dir: Path | str | None = None
) -> tuple[IterationColumns, list[str]]:
    """iterations.bin -> (its columns in a temporary file in dir, warnings), read a block at a
    time: a long run's records are never all in memory.

    metrics: the names from workload.json, index = the record's metric id.
    A tail beyond the header's count is a write that was cut short: it is
    ignored with a warning, never silently.
    """
    from analysis.store.itercolumns import IterationColumns

    path = Path(path)
    h, size = read_binary_header(
        path, ITER_HEADER, ITER_MAGIC, ITER_VERSION, ITER_REC, "an iterations file", UsageError, missing=""
    )
    if h["nmetrics"] != len(metrics):
        raise UsageError(f"{path} has {h['nmetrics']} metrics but workload.json names {len(metrics)}")
    count = int(h["count"])
    body = size - ITER_HEADER.itemsize
    if body < count * ITER_REC.itemsize:
        raise UsageError(
            f"{path} is truncated: its header counts {count} records, the file holds {body // ITER_REC.itemsize}"
        )
    warnings = []
    if body > count * ITER_REC.itemsize:
        warnings.append(
            f"iterations.bin: {body - count * ITER_REC.itemsize} bytes after the last "
            f"complete record (a write was cut short) were ignored"
        )
    cols = IterationColumns(count, metrics, dir)
    block = 1 << 20
    try:
        with safeio.regular(path) as p, open(p, "rb") as f:
            f.seek(ITER_HEADER.itemsize)
            for a in range(0, count, block):
                rec = np.fromfile(f, ITER_REC, count=min(block, count - a))
                if len(rec) != min(block, count - a):
                    raise UsageError(f"{path} changed while it was read")
                if rec["metric"].max() >= len(metrics):
                    raise UsageError(f"{path} is corrupted: metric id {rec['metric'].max()} out of range")
                if np.any(rec["t_end_ns"] < rec["t_start_ns"]):
                    raise UsageError(f"{path} is corrupted: an iteration ends before it starts")
                for name, _ in ITER_COLUMN_TYPES:
                    cols.put(name, a, rec["t_end_ns"] - rec["t_start_ns"] if name == "latency_ns" else rec[name])
    except BaseException:
        cols.close()
        raise
    return cols, warnings


@contextlib.contextmanager
def written_alongside(write: Callable[..., object], *args: Any) -> Iterator[None]:
    """Within the block, write(*args) runs in a thread of its own: pyarrow encodes and
    compresses a parquet file without holding the GIL, so the block's numpy work goes on
    meanwhile on another CPU (on one CPU they take turns, as one after the other would).
    The block's end waits for the write, also when the block raised, so that no write
    outlives it; then raises what the write raised."""
    from concurrent import futures  # 25 ms (logging): only where a table is written

    pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ipctrace-write")
    written = pool.submit(write, *args)
    pool.shutdown(wait=False)
    try:
        yield
    finally:
        # Also after a Ctrl-C: the write ends (its new file renamed or removed) before we go on.
        while True:
            try:
                futures.wait([written])
                break
            except KeyboardInterrupt:
                continue
    written.result()


class ParquetAppender:
    """A parquet file written table by table by a thread of its own (pyarrow encodes and
    compresses without holding the GIL, so the caller's work goes on meanwhile on another CPU);
    at most `depth` tables wait, so that memory stays bounded. close() waits for the writes and
    raises what they raised; the schema is the first table's."""

    def __init__(self, where: Any, depth: int = 2, row_group_size: int | None = None, **options: Any):
        import queue
        import threading

        self.where, self.options, self.row_group_size = where, options, row_group_size
        self.queue: queue.Queue[Any] = queue.Queue(maxsize=depth)  # tables, then None: the end
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._drain, name="ipctrace-write", daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        import pyarrow.parquet as pq

        writer = None
        try:
            while (table := self.queue.get()) is not None:
                if self.error is None:
                    try:
                        if writer is None:
                            writer = pq.ParquetWriter(self.where, table.schema, **self.options)
                        writer.write_table(table, row_group_size=self.row_group_size)
                    except BaseException as e:  # handed to the caller's close()
                        self.error = e
        finally:
            if writer is not None:
                try:
                    writer.close()
                except BaseException as e:
                    self.error = self.error or e

    def write(self, table: pa.Table) -> None:
        if self.error is not None:
            raise self.error
        self.queue.put(table)

    def close(self) -> None:
        self.queue.put(None)
        while self.thread.is_alive():
            self.thread.join(0.2)  # Ctrl-C meanwhile: the write still ends before we go on
        if self.error is not None:
            raise self.error


def write_iterations(path: Path | str, iterations: pd.DataFrame | IterationColumns) -> None:
    """iterations.parquet of a frame, or of iteration columns a block at a time (the same file:
    row groups of pyarrow's default size, a block's rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from analysis.store.itercolumns import BLOCK, IterationColumns

    if not isinstance(iterations, IterationColumns):
        write_parquet(pa.Table.from_pandas(iterations, preserve_index=False), path)
        return
    with safeio.created(path) as p:
        writer = None
        try:
            for a in range(0, max(len(iterations), 1), BLOCK):
                table = pa.Table.from_pandas(iterations.frame(a, a + BLOCK), preserve_index=False)
                if writer is None:
                    writer = pq.ParquetWriter(p, table.schema)
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()


def write_parquet(table: pa.Table, path: Path | str, **kw: Any) -> None:
    """pq.write_table(table, path, **kw) through a new file renamed into place (safeio)."""
    import pyarrow.parquet as pq

    with safeio.created(path) as p:
        pq.write_table(table, p, **kw)


def read_parquet(
    path: Path | str, columns: list[str] | None = None, error: type[Exception] = UsageError
) -> pd.DataFrame:
    """A parquet file read as a regular file only (safeio); a damaged one is one `error` line.
    FileNotFoundError passes through."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    try:
        with safeio.regular(path, error=error) as p:
            return pq.read_table(p, columns=columns).to_pandas()
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError, ValueError, TypeError, KeyError) as e:
        text = (str(e).splitlines() or [type(e).__name__])[0]
        raise error(f"{path} is truncated or corrupted ({text})") from None


def read_checked_parquet(path: Path | str, columns: Iterable[str], absent: str) -> pd.DataFrame:
    """A parquet file of a results directory a user names, checked for `columns`; what is
    wrong with it is a one-line UsageError (`absent`: the line when it does not exist)."""
    try:
        df = read_parquet(path)
    except FileNotFoundError:
        raise UsageError(absent) from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise UsageError(f"{path} lacks the columns {', '.join(missing)}")
    return df


def read_iterations(resdir: Path | str, summary: dict[str, Any] | None = None) -> pd.DataFrame:
    """iterations.parquet of a results directory, checked (schema.check_iterations): its columns'
    types, its latencies, and against the directory's summary.json (read here unless given)
    its metrics and their counts."""
    path = Path(resdir) / "iterations.parquet"
    df = read_checked_parquet(path, ITER_COLUMNS, f"{resdir} has no iterations.parquet")
    if summary is None and os.path.lexists(Path(resdir) / "summary.json"):
        summary = read_summary(resdir)
    return schema.check_iterations(df, path, summary)


def read_breakdown(resdir: Path | str, columns: list[str] | None = None) -> pd.DataFrame | None:
    """breakdown.parquet of a results directory (None when it has none), checked: its
    components are numbers, its metrics summary.json's."""
    path = Path(resdir) / "breakdown.parquet"
    try:
        df = read_parquet(path, columns=columns)
    except FileNotFoundError:
        return None
    known = "metric" in df.columns and os.path.lexists(Path(resdir) / "summary.json")
    return schema.check_breakdown(df, path, columns, read_summary(resdir) if known else None)


def breakdown_columns(resdir: Path | str) -> list[str] | None:
    """The column names of breakdown.parquet (None when there is none), from its schema alone."""
    import pyarrow.parquet as pq

    path = Path(resdir) / "breakdown.parquet"
    try:
        with safeio.regular(path) as p:
            return list(pq.read_schema(p).names)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise UsageError(f"{path} is truncated or corrupted ({e})") from None


class ParquetColumns:
    """column(name[, a, b]) of a parquet file: one column, all rows or rows [a, b), as one array
    filled a row group at a time (no second copy of it beside the first)."""

    def __init__(self, pf: pq.ParquetFile):
        self.pf = pf
        sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups)]
        self.first = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)  # each group's first row

    def __call__(self, name: str, a: int = 0, b: int | None = None) -> np.ndarray:
        import pyarrow as pa

        n = int(self.first[-1])
        b = n if b is None else min(b, n)
        out, at = None, a
        g = int(np.searchsorted(self.first, a, side="right")) - 1
        while at < b:
            # one thread: what Arrow allocates is freed by the thread that allocated it, and reused
            part = self.pf.read_row_group(g, columns=[name], use_threads=False).column(0).to_numpy()
            lo, hi = at - int(self.first[g]), min(b - int(self.first[g]), len(part))
            if out is None:
                out = np.empty(b - a, part.dtype)
            out[at - a : at - a + hi - lo] = part[lo:hi]
            at += hi - lo
            g += 1

        if out is None:
            out = self.pf.read(columns=[name]).column(0).to_numpy()[:0]
        # The row groups' buffers go back to the system, not to Arrow's pool: kept there, a long
        # run's column (8 B an iteration) would stay resident beside the array made of it.
        pa.default_memory_pool().release_unused()
        return out


class BreakdownColumns:
    """breakdown.parquet a column at a time, for readers that take one after another (the
    report's heat map and folded stacks): bd[name] reads that column (checked) as a Series,
    bd.columns names them all, len(bd) counts the rows. A long run's whole breakdown (40
    columns, 320 B an iteration) is never in memory."""

    def __init__(self, resdir: Path | str, columns: list[str]):
        self.resdir, self.columns = resdir, columns
        self._metric = None

    def __getitem__(self, name: str) -> pd.Series:
        if name == "metric" and self._metric is not None:
            return self._metric
        # what the reader freed of the column before goes back first: glibc would keep it
        # resident beside this one (a long run's column is 8 B an iteration)
        clib.release_memory()
        if name in schema.BREAKDOWN_TEXT:
            bd = read_breakdown(self.resdir, columns=[name])
            assert bd is not None  # the columns were listed from its file
            col = bd[name]
        else:
            col = self._numbers(name)
        if name == "metric":
            self._metric = col
        return col

    def _numbers(self, name: str) -> pd.Series:
        """A column of numbers read a row group at a time into one array (checked)."""
        import pandas as pd
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(self.resdir) / "breakdown.parquet"
        try:
            with safeio.regular(path) as p, open(p, "rb") as f:
                values = ParquetColumns(pq.ParquetFile(f))(name)
        except FileNotFoundError:
            raise UsageError(f"{self.resdir} has no breakdown.parquet") from None
        except (pa.ArrowException, OSError, ValueError, TypeError, KeyError) as e:
            text = (str(e).splitlines() or [type(e).__name__])[0]
            raise UsageError(f"{path} is truncated or corrupted ({text})") from None
        return schema.check_breakdown(pd.DataFrame({name: values}, copy=False), path, [name])[name]

    def __len__(self) -> int:
        return len(self["metric"])

    def zero(self, name: str) -> bool:
        """Whether every value of a column of numbers is 0 or NaN, by the file's statistics
        alone (each row group's min and max, which leave NaN out): a column to sum need not
        be read then."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = Path(self.resdir) / "breakdown.parquet"
        try:
            with safeio.regular(path) as p, open(p, "rb") as f:
                meta = pq.ParquetFile(f).metadata
        except (FileNotFoundError, pa.ArrowException, OSError, ValueError):
            return False  # reading the column says what is wrong
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        if name not in names or not meta.num_row_groups:
            return False
        col = names.index(name)
        for g in range(meta.num_row_groups):
            st = meta.row_group(g).column(col).statistics
            if st is None or not st.has_min_max or st.null_count or st.min != 0 or st.max != 0:
                return False
        return True


def read_workload(resdir: Path | str, error: type[Exception] = UsageError) -> dict[str, Any]:
    """workload.json of a results directory, checked (schema.WORKLOAD)."""
    path = Path(resdir) / "workload.json"
    return _checked(read_json(path, error), schema.WORKLOAD, path, error)


def read_trace(resdir: Path | str, error: type[Exception] = UsageError) -> dict[str, Any]:
    """trace.json of a traced run, checked (schema.TRACE)."""
    path = Path(resdir) / "trace.json"
    return _checked(read_json(path, error), schema.TRACE, path, error)


def read_meta(resdir: Path | str) -> dict[str, Any]:
    """meta.json of a results directory, checked; {} when it has none."""
    path = Path(resdir) / "meta.json"
    if not os.path.lexists(path):
        return {}
    return schema.check(read_json(path), schema.META, path)


def workload_file(resdir: Path | str, error: type[Exception] = UsageError) -> jsonfiles.Workload:
    """workload.json of a results directory, checked and typed (error: what a bad one raises)."""
    return jsonfiles.Workload.from_json(read_workload(resdir, error))


def trace_file(resdir: Path | str, error: type[Exception] = UsageError) -> jsonfiles.TraceFile:
    """trace.json of a traced run, checked and typed (error: what a bad one raises)."""
    return jsonfiles.TraceFile.from_json(read_trace(resdir, error))


def meta_file(resdir: Path | str) -> jsonfiles.Meta:
    """meta.json of a results directory, checked and typed; every field None when it has none."""
    return jsonfiles.Meta.from_json(read_meta(resdir))


def samples_file(resdir: Path | str) -> jsonfiles.Samples:
    """samples.json of a sampled run (ipctrace run --sample-hz), checked and typed."""
    path = Path(resdir) / "samples.json"
    return jsonfiles.Samples.from_json(schema.check(read_json(path), schema.SAMPLES, path))


def merge_file(resdir: Path | str) -> jsonfiles.MergeFile:
    """merge.json of a merged directory (ipctrace merge), checked and typed."""
    path = Path(resdir) / "merge.json"
    return jsonfiles.MergeFile.from_json(schema.check(read_json(path), schema.MERGE, path))


def suite_file(resdir: Path | str) -> jsonfiles.SuiteFile:
    """suite.json of a suite's directory, checked and typed."""
    path = Path(resdir) / "suite.json"
    return jsonfiles.SuiteFile.from_json(schema.check(read_json(path), schema.SUITE, path))


def summary_file(resdir: Path | str) -> summaryfile.RunSummary | summaryfile.SweepSummary:
    """summary.json of a results directory, checked (read_summary) and typed: a run's, or a
    sweep's."""
    return typed_summary(read_summary(resdir), resdir)


def run_summary_file(resdir: Path | str) -> summaryfile.RunSummary:
    """summary.json of one run (not a sweep's: UsageError naming it)."""
    s = summary_file(resdir)
    if isinstance(s, summaryfile.SweepSummary):
        raise UsageError(f"{resdir} is a sweep, not a run: name one of its sizes (size-N)")
    return s


def typed_summary(d: dict[str, Any], resdir: Path | str) -> summaryfile.RunSummary | summaryfile.SweepSummary:
    """A checked summary (read_summary's) of resdir as its type; what does not fit the type is
    one UsageError."""
    try:
        if d.get("kind") == "sweep":
            return summaryfile.SweepSummary.from_json(d)
        return summaryfile.RunSummary.from_json(d)
    except ValueError as e:
        raise UsageError(f"{Path(resdir) / 'summary.json'}: {e}") from None


def _checked(value: Any, spec: schema.Spec, path: Path, error: type[Exception]) -> Any:
    try:
        return schema.check(value, spec, path)
    except UsageError as e:
        raise error(str(e)) from None


def check_results_dir(resdir: Path | str) -> Path:
    """A directory that exists and holds the summary.json of a finished run: one that
    still holds INCOMPLETE, or whose meta.json says "running", is refused (a run is writing
    it, or was killed before it finished: its files may disagree)."""
    resdir = Path(resdir)
    if not resdir.is_dir():
        raise UsageError(
            f"{resdir} is not a results directory (it does not exist)"
            if not resdir.exists()
            else f"{resdir} is not a directory"
        )
    if os.path.lexists(resdir / INCOMPLETE):
        meta = read_meta(resdir)
        state = f"meta.json says {meta['status']!r}" if meta.get("status") else "no run finished it"
        raise UsageError(
            f"{resdir} is incomplete: the run did not finish (INCOMPLETE is there; {state}): "
            f"a run is still writing it, or it failed or was killed"
        )
    if not os.path.lexists(resdir / "summary.json"):
        if os.path.lexists(resdir / KEPT_RAW):
            raise UsageError(
                f"{resdir} is a request ipctrace watch kept raw: ipctrace explain {resdir} writes it whole"
            )
        raise UsageError(f"{resdir} has no summary.json")
    if read_meta(resdir).get("status") == "running":
        raise UsageError(f"{resdir} is incomplete: the run did not finish (its meta.json says it is running)")
    return resdir


def read_summary(resdir: Path | str) -> dict[str, Any]:
    resdir = check_results_dir(resdir)
    path = resdir / "summary.json"
    return check_summary(read_json(path), path)


def check_summary(s: Any, path: Path | str) -> dict[str, Any]:
    """A summary (summary.json's, or a dataset's runs.summary) against schema.SUMMARY, a sweep's
    against schema.SWEEP too: what is wrong is one UsageError naming path."""
    if not isinstance(s, dict) or "schema_version" not in s:
        raise UsageError(f"{path} is not an ipctrace summary (no schema_version)")
    if s["schema_version"] != SCHEMA_VERSION:
        raise UsageError(
            f"{path} has schema_version {s['schema_version']!r:.40}; "
            f"this ipctrace reads schema_version {SCHEMA_VERSION}"
        )
    if not isinstance(s.get("metrics"), dict):
        raise UsageError(f"{path} is corrupted: no metrics")
    schema.check(s, schema.SUMMARY, path)
    if s.get("kind") is not None:
        schema.check(s, schema.SWEEP, path)
    if s.get("primary_metric") is not None and s["primary_metric"] not in s["metrics"]:
        raise UsageError(
            f"{path}: field primary_metric: {s['primary_metric']!r} is none of its metrics; "
            f"the file is damaged or not ipctrace's"
        )
    return s


def was_traced(summary: dict[str, Any] | summaryfile.RunSummary) -> bool:
    """Whether summary.json says its run was traced (a merge of two traces is: its breakdown is
    the traced round trips' parts)."""
    if isinstance(summary, summaryfile.RunSummary):
        return summary.trace is not None or bool(summary.params.get("traced")) or bool(summary.extra.get("merge"))
    return bool(summary.get("trace")) or bool((summary.get("params") or {}).get("traced")) or is_merged(summary)


def is_merged(summary: dict[str, Any]) -> bool:
    """Whether summary.json is a merged directory's (ipctrace merge: extra.merge)."""
    return bool((summary.get("extra") or {}).get("merge"))
