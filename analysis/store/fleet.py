"""A fleet's runs as a Hive-partitioned Parquet dataset (`ipctrace collect RUNS... --into DIR/`):
the tables of the DuckDB file (store/dataset.py) with the same columns and types, one folder
each, a run's rows of a table in one file under the keys a fleet groups by:

    DIR/dataset.json                                         the format and its version
    DIR/runs/hostname=H/workload=W/run_id=R/part-0.parquet   one row
    DIR/iterations/...  DIR/summaries/...  DIR/breakdown/...  DIR/breakdown_sides/... (traced runs only)

Any engine that reads Hive partitions reads it unchanged: DuckDB's read_parquet('DIR/iterations/
**/*.parquet', hive_partitioning=true), Spark's read.parquet('DIR/iterations'). The keys are also
columns of every file, so both engines take their type from the file (a hostname "2024" stays
text) and every table has them (per host and workload without a join); a key the run lacks is
written "unknown" (the Hive default partition is read as NULL by Spark but as its name by DuckDB).
Values are percent-encoded in the folder names as Hive does; both engines decode them.

Collecting appends: a run's files are new files in its own folders, nothing already written is
rewritten, and a run already in the dataset (the same run id: the same summary.json and
meta.json, wherever it was collected) is skipped. A run's runs file is written last, and a run
whose writing fails has its files so far removed: a run is in the dataset whole or not at all
(a collect killed midway can leave tables of a run without its runs row, which the next
collect writes again); a new dataset that fails before its first run is not left behind. Every file is written under a hidden temporary name and renamed into place,
so a reader never sees half a file; concurrent collects into one directory take turns (a lock
on it)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.errors import UsageError
from analysis.store import dataset, results, safeio

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

FORMAT = "ipctrace-parquet-dataset"
FORMAT_VERSION = 1
MARK = "dataset.json"
# the DuckDB file's tables (store/dataset.py), in the order written: runs last
TABLES = ("iterations", "breakdown", "breakdown_sides", "summaries", "runs")
KEYS = ("hostname", "workload", "run_id")
UNKNOWN = "unknown"
PART = "part-0.parquet"
_SAFE = re.compile(r"[A-Za-z0-9._-]")


def wants_directory(into: Path | str) -> bool:
    """--into names a Parquet dataset (a directory) rather than a DuckDB file: it ends with a
    slash or is a directory already."""
    return str(into).endswith("/") or Path(into).is_dir()


def key_text(value: Any) -> str:  # noqa: ANN401 - a cell of the runs row
    """A key's value as the dataset holds it: its text, UNKNOWN where the run has none."""
    if value is None or (isinstance(value, float) and value != value) or str(value) == "":
        return UNKNOWN
    return str(value)


def folder_name(key: str, text: str) -> str:
    """key=text with the ASCII characters Hive would escape percent-encoded (all but letters,
    digits, '.', '_' and '-'; other text is left as it is, as Spark leaves it)."""
    return f"{key}=" + "".join(c if _SAFE.fullmatch(c) or ord(c) > 127 else f"%{ord(c):02X}" for c in text)


def collect(dirs: Sequence[Path | str], into: Path | str, append: bool = False) -> tuple[int, int]:
    """Write the runs of dirs into the Parquet dataset directory into (anew: a missing or empty
    directory; or added to one with append); returns (runs added, runs already there)."""
    into = Path(into)
    found = dataset.find_runs(dirs)
    if not found:
        raise UsageError("collect: no results directories among the arguments")
    made = _prepare(into, append)
    added = 0
    try:
        with _locked(into):
            _check_mark(into)
            have = runs_in(into)
            for f in found:
                rid, tables = _tables(f)
                if rid in have:
                    continue
                _write_run(into, tables)
                have.add(rid)
                added += 1
    except BaseException:
        if made and not added:
            _unmake(into, made)  # a new dataset that failed before its first run: none at all
        raise
    return added, len(found) - added


def _unmake(into: Path, made: str) -> None:
    """Remove what _prepare made: the mark and the tables' empty folders (the directory too
    when it made it)."""
    for name in TABLES:
        with contextlib.suppress(OSError):
            os.rmdir(into / name)
    with contextlib.suppress(OSError):
        os.unlink(into / MARK)
    if made == "directory":
        with contextlib.suppress(OSError):
            os.rmdir(into)


def _prepare(into: Path, append: bool) -> str | None:
    """A new dataset directory made (with its mark), or the existing one checked for append;
    returns what it made: "directory", "mark" (in an empty directory) or None."""
    if os.path.islink(into):
        raise UsageError(f"{into} is a symbolic link: give the dataset directory itself")
    if os.path.lexists(into) and not into.is_dir():
        raise UsageError(f"{into} exists and is not a directory: give another --into")
    marked = os.path.lexists(into / MARK)
    if append:
        if not marked:
            what = "does not exist" if not os.path.lexists(into) else "is not an ipctrace Parquet dataset"
            raise UsageError(f"{into} {what}: nothing to --append to")
        return None
    if marked:
        raise UsageError(f"{into} is a dataset already: give another --into, or --append to add to it")
    if os.path.lexists(into) and any(os.scandir(into)):
        raise UsageError(f"{into} is a directory with files in it: give a new or empty directory for the dataset")
    made = "mark" if os.path.lexists(into) else "directory"
    safeio.makedirs(into)
    safeio.write_json(into / MARK, {"format": FORMAT, "version": FORMAT_VERSION, "tables": list(TABLES)})
    return made


def _check_mark(into: Path) -> None:
    mark = results.read_json(into / MARK)
    if not isinstance(mark, dict) or mark.get("format") != FORMAT or not isinstance(mark.get("version"), int):
        raise UsageError(f"{into / MARK} is not an ipctrace Parquet dataset's mark")
    if mark["version"] > FORMAT_VERSION:
        raise UsageError(
            f"{into} is a dataset of format {mark['version']}, newer than this ipctrace writes ({FORMAT_VERSION})"
        )


@contextlib.contextmanager
def _locked(into: Path) -> Iterator[None]:
    """The dataset directory locked (flock on its descriptor) while a collect writes into it."""
    fd = safeio.open_dir(into)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def runs_in(into: Path | str) -> set[str]:
    """The run ids whose runs file is in the dataset (those completely written)."""
    out = set()
    for path in Path(into, "runs").glob(f"*=*/*=*/run_id=*/{PART}"):
        out.add(path.parent.name.removeprefix("run_id="))
    return out


def _tables(found: dataset.FoundRun) -> tuple[str, dict[str, pa.Table]]:
    """One run's tables as Arrow tables with the DuckDB file's columns and types (the declared
    ones of runs and summaries, so that a column one run leaves empty keeps its type), the keys
    filled in every table."""
    import duckdb
    import pyarrow as pa

    rid, frames = dataset._tables(found)
    row = frames["runs"].iloc[0]
    keys = {k: key_text(row.get(k)) for k in KEYS}
    con = duckdb.connect(":memory:", config={"enable_external_access": False})
    try:
        con.execute(dataset.RUNS_DDL)
        con.execute(dataset.SUMMARIES_DDL)
        out = {}
        for name in ("runs", "summaries"):
            dataset._insert(con, name, frames[name])
            out[name] = con.execute(f"SELECT * FROM {name}").fetch_arrow_table()
    finally:
        con.close()
    for name in ("iterations", "breakdown", "breakdown_sides"):
        if frames.get(name) is not None:  # a merge's breakdown has no sides: no breakdown_sides
            out[name] = pa.Table.from_pandas(_strings(frames[name]), preserve_index=False)
    return rid, {name: _with_keys(t, keys) for name, t in out.items()}


def _strings(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns as plain Arrow strings (pandas' own string type would be large_string)."""
    import pandas as pd

    return df.astype({c: object for c in df.columns if isinstance(df[c].dtype, pd.StringDtype)})


def _with_keys(table: pa.Table, keys: dict[str, str]) -> pa.Table:
    """table with each key a column of its value (replacing the column of that name)."""
    import pyarrow as pa

    for k, v in keys.items():
        col = pa.array([v] * table.num_rows, pa.string())
        if k in table.column_names:
            table = table.set_column(table.column_names.index(k), k, col)
        else:
            table = table.append_column(k, col)
    return table


def _folder(into: Path, table: str, keys: dict[str, str]) -> Path:
    return into.joinpath(table, *(folder_name(k, keys[k]) for k in KEYS))


def _write_run(into: Path, tables: dict[str, pa.Table]) -> None:
    import pyarrow.parquet as pq

    runs = tables["runs"]
    keys = {k: runs.column(k)[0].as_py() for k in KEYS}
    written = []
    try:
        for name in TABLES:
            if name not in tables:
                continue
            folder = _folder(into, name, keys)
            _makedirs_within(into, folder)
            with safeio.created(folder / PART) as p:
                pq.write_table(tables[name], p)
            written.append(folder / PART)
    except BaseException:
        # a run is in the dataset whole or not at all: its tables written so far go again
        for path in written:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise


def _makedirs_within(top: Path, folder: Path) -> None:
    """mkdir -p folder under top, refusing a symbolic link on the way (one planted in the
    dataset would send the files elsewhere)."""
    at = top
    for part in folder.relative_to(top).parts:
        at = at / part
        if os.path.islink(at):
            raise UsageError(f"{at} is a symbolic link: the dataset's folders must be its own")
        if not os.path.lexists(at):
            try:
                safeio.mkdir(at)
            except FileExistsError:
                if os.path.islink(at) or not at.is_dir():
                    raise UsageError(f"{at} is not a directory of the dataset") from None
        elif not at.is_dir():
            raise UsageError(f"{at} is not a directory of the dataset")
