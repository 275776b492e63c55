"""Reading and writing the files of a results directory (see docs/DESIGN.md).

Anything wrong with a file a user hands us (missing, truncated, corrupted, an
unknown schema) is a UsageError naming the file; the runner turns it into a
MeasureError when the driver has just written that file itself.
"""
import contextlib
import json
import os
from pathlib import Path

import numpy as np

from analysis.errors import UsageError

# pandas and pyarrow take most of a second to import: only the functions that
# handle tables import them, so that list, --help and errors answer at once.

SCHEMA_VERSION = 1
INCOMPLETE = "INCOMPLETE"

# workloads/iterfile.h
ITER_MAGIC = b"IPTITER1"
ITER_VERSION = 1
ITER_HEADER = np.dtype([("magic", "S8"), ("version", "<u4"), ("rec_size", "<u4"),
                        ("count", "<u8"), ("nmetrics", "<u4"), ("reserved", "<u4", 9)])
ITER_REC = np.dtype([("seq", "<u8"), ("t_start_ns", "<u8"), ("t_end_ns", "<u8"), ("run", "<u4"),
                     ("metric", "<u2"), ("cpu", "<u2"), ("tid", "<u4"), ("iteration", "<u4")])
assert ITER_HEADER.itemsize == 64 and ITER_REC.itemsize == 40

# Column types of iterations.parquet: signed 64-bit times join with events.ts.
ITER_COLUMNS = {"run": np.int32, "iteration": np.int64, "seq": np.int64, "metric": "category",
                "t_start_ns": np.int64, "t_end_ns": np.int64, "latency_ns": np.int64,
                "cpu": np.int16, "tid": np.int32}


def read_json(path):
    path = Path(path)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise UsageError(f"{path} does not exist") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not valid JSON ({e.msg} at line {e.lineno}); the file is truncated or corrupted") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None


def write_json(path, obj):
    """Write obj as JSON via a temporary file and rename, so a reader never sees half of it."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w") as f:
            json.dump(obj, f, indent=2, allow_nan=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_binary_header(path, header, magic, version, rec, kind, error, missing):
    """The header of one of our binary files (iterations.bin, events.bin) checked for
    magic, version and record size -> (header record, file size); any fault is `error`
    with one line (`missing` is said after "does not exist")."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            raw = f.read(header.itemsize)
    except FileNotFoundError:
        raise error(f"{path} does not exist{missing}") from None
    except OSError as e:
        raise error(f"cannot read {path}: {e.strerror}") from None
    if len(raw) < header.itemsize:
        raise error(f"{path} is truncated: {size} bytes, shorter than its header")
    h = np.frombuffer(raw, header)[0]
    if h["magic"] != magic:
        raise error(f"{path} is not {kind} (bad magic)")
    if h["version"] != version or h["rec_size"] != rec.itemsize:
        raise error(f"{path} has version {h['version']} with {h['rec_size']}-byte records; "
                    f"this ipctrace reads version {version} with {rec.itemsize}-byte records")
    return h, size


def read_iterations_bin(path, metrics):
    """iterations.bin -> (DataFrame with ITER_COLUMNS, warnings).

    metrics: the names from workload.json, index = the record's metric id.
    A tail beyond the header's count is a write that was cut short: it is
    ignored with a warning, never silently.
    """
    path = Path(path)
    h, size = read_binary_header(path, ITER_HEADER, ITER_MAGIC, ITER_VERSION, ITER_REC, "an iterations file",
                                 UsageError, missing="")
    if h["nmetrics"] != len(metrics):
        raise UsageError(f"{path} has {h['nmetrics']} metrics but workload.json names {len(metrics)}")
    count = int(h["count"])
    body = size - ITER_HEADER.itemsize
    if body < count * ITER_REC.itemsize:
        raise UsageError(f"{path} is truncated: its header counts {count} records, "
                         f"the file holds {body // ITER_REC.itemsize}")
    warnings = []
    if body > count * ITER_REC.itemsize:
        warnings.append(f"iterations.bin: {body - count * ITER_REC.itemsize} bytes after the last "
                        f"complete record (a write was cut short) were ignored")
    import pandas as pd

    rec = np.fromfile(path, ITER_REC, count=count, offset=ITER_HEADER.itemsize)
    if count and rec["metric"].max() >= len(metrics):
        raise UsageError(f"{path} is corrupted: metric id {rec['metric'].max()} out of range")
    if np.any(rec["t_end_ns"] < rec["t_start_ns"]):
        raise UsageError(f"{path} is corrupted: an iteration ends before it starts")
    df = pd.DataFrame({
        "run": rec["run"].astype(np.int32),
        "iteration": rec["iteration"].astype(np.int64),
        "seq": rec["seq"].astype(np.int64),
        "metric": pd.Categorical.from_codes(rec["metric"].astype(np.int64), categories=list(metrics)),
        "t_start_ns": rec["t_start_ns"].astype(np.int64),
        "t_end_ns": rec["t_end_ns"].astype(np.int64),
        "latency_ns": (rec["t_end_ns"] - rec["t_start_ns"]).astype(np.int64),
        "cpu": rec["cpu"].astype(np.int16),
        "tid": rec["tid"].astype(np.int32),
    })
    return df, warnings


@contextlib.contextmanager
def written_alongside(write, *args):
    """Within the block, write(*args) runs in a thread of its own: pyarrow encodes and
    compresses a parquet file without holding the GIL, so the block's numpy work goes on
    meanwhile on another CPU (on one CPU they take turns, as one after the other would).
    The block's end waits for the write, also when the block raised, so that no write
    outlives it; then raises what the write raised."""
    from concurrent import futures     # 25 ms (logging): only where a table is written

    pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ipctrace-write")
    written = pool.submit(write, *args)
    pool.shutdown(wait=False)
    try:
        yield
    finally:
        futures.wait([written])
    written.result()


def write_iterations(path, df):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), Path(path))


def read_checked_parquet(path, columns, absent):
    """A parquet file of a results directory a user names, checked for `columns`; what is
    wrong with it is a one-line UsageError (`absent`: the line when it does not exist)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.exists():
        raise UsageError(absent)
    try:
        df = pq.read_table(path).to_pandas()
    except (pa.ArrowException, OSError) as e:
        raise UsageError(f"{path} is truncated or corrupted ({str(e).splitlines()[0]})") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise UsageError(f"{path} lacks the columns {', '.join(missing)}")
    return df


def read_iterations(resdir):
    """iterations.parquet of a results directory, checked against ITER_COLUMNS."""
    return read_checked_parquet(Path(resdir) / "iterations.parquet", ITER_COLUMNS,
                                f"{resdir} has no iterations.parquet")


def check_results_dir(resdir):
    """A directory that exists and holds a summary.json: the results of one run."""
    resdir = Path(resdir)
    if not resdir.is_dir():
        raise UsageError(f"{resdir} is not a results directory (it does not exist)"
                         if not resdir.exists() else f"{resdir} is not a directory")
    if not (resdir / "summary.json").exists():
        hint = " (the run did not finish: INCOMPLETE)" if (resdir / INCOMPLETE).exists() else ""
        raise UsageError(f"{resdir} has no summary.json{hint}")
    return resdir


def read_summary(resdir):
    resdir = check_results_dir(resdir)
    path = resdir / "summary.json"
    s = read_json(path)
    if not isinstance(s, dict) or "schema_version" not in s:
        raise UsageError(f"{path} is not an ipctrace summary (no schema_version)")
    if s["schema_version"] != SCHEMA_VERSION:
        raise UsageError(f"{path} has schema_version {s['schema_version']!r}; "
                         f"this ipctrace reads schema_version {SCHEMA_VERSION}")
    if not isinstance(s.get("metrics"), dict):
        raise UsageError(f"{path} is corrupted: no metrics")
    return s
