"""Many runs, from this machine or copied from others, as one DuckDB database (`ipctrace
collect`): plain SQL over every run's iterations and breakdown, keyed by a run id. Every column
is a plain identifier (lower case, no dots: no quoting needed); every duration is in ns.

Tables (the README's "Datasets" section shows queries):
- dataset: one row, the format's version (a newer one is refused).
- runs: run_id, label (the directory as given), path, suite and experiment (for a suite's
  runs), sweep and size (for a sweep's), twin_of (an untraced twin: the run_id of the traced
  run it was measured beside), workload, mode, placement, status, traced, the host (hostname,
  kernel, machine, cpu_model, cores, clocksource, hypervisor), start_time (TIMESTAMP, UTC),
  params and summary (summary.json as JSON).
- iterations: run_id, repetition (which of the run's --runs), iteration, seq, metric,
  t_start_ns, t_end_ns, latency_ns, cpu, tid.
- summaries: run_id, metric, unit, derived, n, mean, std, median, p90, p95, p99, p999, min,
  max, the 95 % intervals of the mean and the median (ci95_mean_lo, ...) and runs.
- breakdown (traced runs): run_id, repetition, iteration, seq, metric, latency_ns, the
  components along the critical path (user, entry, syscall, copy, irq, wakeup, runqueue,
  blocked, preempted, steal, residual), copy_bytes, steal_ns and tail.
- breakdown_sides (traced runs): one row per iteration and side (measuring, peer, or a traced
  program's threads, any number of them): run_id, repetition, iteration, metric, side and the
  time the side spent in each component.

The run id is a digest of the run's summary.json and meta.json: the same run collected twice
(or copied to another machine and collected there) is one run."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.errors import UsageError
from analysis.store import results, safeio, schema
from analysis.store.summaryfile import RunSummary

# 2: plain column names (repetition, breakdown_sides), start_time a TIMESTAMP, summaries' unit,
# the untraced twins (twin_of)
FORMAT_VERSION = 2


@dataclass(frozen=True)
class FoundRun:
    """A results directory to collect and where it sits: in a suite (its experiment) or a sweep
    (its size), or on its own."""

    path: Path
    label: str
    suite: str | None = None
    experiment: str | None = None
    sweep: str | None = None
    size: int | None = None
    twin_of: Path | None = None  # an untraced twin: the traced run's directory


def find_runs(dirs: Sequence[Path | str]) -> list[FoundRun]:
    """The runs in dirs: a results directory is one; a sweep's directory gives its sizes, a
    suite's its experiments. A directory that is none of these is a usage error."""
    out = []
    for d in map(Path, dirs):
        label = str(d)
        if (d / "suite.json").exists() and not (d / "summary.json").exists():
            for sub in sorted(p for p in d.iterdir() if p.is_dir() and (p / "summary.json").exists()):
                out.append(FoundRun(sub, f"{label}/{sub.name}", suite=label, experiment=sub.name))
            continue
        summary = results.read_summary(d)
        if summary.get("kind") == "sweep":
            for size, entry in (summary.get("per_size") or {}).items():
                out.append(FoundRun(d / entry["dir"], f"{label}/{entry['dir']}", sweep=label, size=int(size)))
            continue
        out.append(FoundRun(d, label))
    return [twin for f in out for twin in (f, *_twin(f))]


TWIN_DIR = "untraced"  # where `run` puts a traced run's untraced twin (runner.CALIBRATION_DIR)


def _twin(f: FoundRun) -> list[FoundRun]:
    """The untraced twin of a traced run, if it has one: collected beside it."""
    d = f.path / TWIN_DIR
    if not (d / "summary.json").is_file():
        return []
    return [FoundRun(d, f"{f.label}/{TWIN_DIR}", f.suite, f.experiment, f.sweep, f.size, twin_of=f.path)]


def run_id(resdir: Path) -> str:
    h = hashlib.sha256()
    for name in ("summary.json", "meta.json"):
        if (resdir / name).exists():
            h.update(safeio.read_bytes(resdir / name))
    return h.hexdigest()[:16]


def _run_row(found: FoundRun, rid: str, summary: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    host = summary.get("host") or {}
    params = summary.get("params") or {}
    return {
        "run_id": rid,
        "label": found.label,
        "path": str(found.path),
        "suite": found.suite,
        "experiment": found.experiment,
        "sweep": found.sweep,
        "size": found.size if found.size is not None else params.get("size"),
        "twin_of": run_id(found.twin_of) if found.twin_of else None,
        "workload": summary.get("workload"),
        "mode": summary.get("mode"),
        "placement": summary.get("placement"),
        "status": summary.get("status"),
        "traced": bool(summary.get("trace")) or results.is_merged(summary),
        "hostname": host.get("hostname"),
        "kernel": host.get("kernel"),
        "machine": host.get("machine"),
        "cpu_model": host.get("cpu_model"),
        "cores": host.get("cores"),
        "clocksource": host.get("clocksource"),
        "hypervisor": host.get("hypervisor"),
        "start_time": _utc(meta.get("start_time")),
        "params": json.dumps(params, sort_keys=True),
        "summary": json.dumps(summary),
    }


def _utc(text: str | None) -> Any:  # noqa: ANN401 - a pandas Timestamp or None
    """meta.json's ISO 8601 start time as a UTC timestamp without zone (the column's type)."""
    if not text:
        return None
    try:
        t = pd.Timestamp(text)
    except ValueError:
        return None
    return (t.tz_convert("UTC") if t.tzinfo else t).tz_localize(None)


STAT_COLUMNS = ("n", "mean", "std", "median", "p90", "p95", "p99", "p999", "min", "max")

# Declared, not inferred: a column no run of the first batch fills would take the type NULL.
RUNS_DDL = """CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY, label VARCHAR, path VARCHAR, suite VARCHAR, experiment VARCHAR,
    sweep VARCHAR, size BIGINT, twin_of VARCHAR, workload VARCHAR, mode VARCHAR, placement VARCHAR,
    status VARCHAR, traced BOOLEAN, hostname VARCHAR, kernel VARCHAR, machine VARCHAR,
    cpu_model VARCHAR, cores INTEGER, clocksource VARCHAR, hypervisor VARCHAR, start_time TIMESTAMP,
    params JSON, summary JSON)"""
SUMMARIES_DDL = """CREATE TABLE summaries (
    run_id VARCHAR, metric VARCHAR, unit VARCHAR, derived BOOLEAN, n BIGINT, mean DOUBLE,
    std DOUBLE, median DOUBLE, p90 DOUBLE, p95 DOUBLE, p99 DOUBLE, p999 DOUBLE, min DOUBLE,
    max DOUBLE, ci95_mean_lo DOUBLE, ci95_mean_hi DOUBLE, ci95_median_lo DOUBLE,
    ci95_median_hi DOUBLE, runs INTEGER)"""


def _summary_rows(rid: str, summary: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for metric, m in (summary.get("metrics") or {}).items():
        ci_mean = m.get("ci95_mean") or [None, None]
        ci_median = m.get("ci95_median") or [None, None]
        rows.append(
            {
                "run_id": rid,
                "metric": metric,
                "unit": m.get("unit") or "ns",
                "derived": bool(m.get("derived")),
                **{k: m.get(k) for k in STAT_COLUMNS},
                "ci95_mean_lo": ci_mean[0],
                "ci95_mean_hi": ci_mean[1],
                "ci95_median_lo": ci_median[0],
                "ci95_median_hi": ci_median[1],
                "runs": m.get("runs"),
            }
        )
    return rows


def _tables(found: FoundRun) -> tuple[str, dict[str, pd.DataFrame]]:
    """One run's rows of every table, read through the checked readers."""
    summary = results.read_summary(found.path)
    meta_path = found.path / "meta.json"
    meta = results.read_json(meta_path) if meta_path.exists() else {}
    rid = run_id(found.path)
    iters = results.read_iterations(found.path).assign(metric=lambda df: df["metric"].astype(str))
    bd = results.read_breakdown(found.path)
    tables = {
        "runs": pd.DataFrame([_run_row(found, rid, summary, meta)]),
        "iterations": plain_columns(iters.assign(run_id=rid)),
        "summaries": pd.DataFrame(_summary_rows(rid, summary)),
    }
    if bd is not None:
        bd = bd.assign(run_id=rid, metric=bd["metric"].astype(str), tail=bd["tail"].astype(str))
        tables["breakdown"], tables["breakdown_sides"] = split_sides(bd)
    return rid, tables


# The Parquet files' names that the dataset gives another: "run" there is a repetition of a
# results directory, which the dataset calls a run (run_id).
RENAMED = {"run": "repetition"}
SIDE_KEYS = ("run_id", "run", "iteration", "metric")


def plain_name(name: str) -> str:
    """A column name SQL takes unquoted: lower case letters, digits and underscores."""
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in RENAMED.get(name, name).lower())
    return out if out and not out[0].isdigit() else f"_{out}"


def plain_columns(df: pd.DataFrame) -> pd.DataFrame:
    return df.rename(columns=plain_name)


def split_sides(bd: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """breakdown.parquet's frame -> (the per-iteration totals, one row per iteration and side).
    The Parquet file has a column per side and component ("peer.wakeup"); a table has a side
    column instead, so that runs with any number of sides share one table."""
    sided = [c for c in bd.columns if "." in c]
    sides = list(dict.fromkeys(c.split(".", 1)[0] for c in sided))
    parts = []
    for side in sides:
        own = [c for c in sided if c.split(".", 1)[0] == side]
        part = bd[[*SIDE_KEYS, *own]].rename(columns={c: c.split(".", 1)[1] for c in own})
        # a side's columns are NaN in the iterations it took no part in
        part = part.dropna(how="all", subset=[c.split(".", 1)[1] for c in own])
        parts.append(part.assign(side=side))
    per_side = plain_columns(pd.concat(parts, ignore_index=True)) if parts else None
    return plain_columns(bd.drop(columns=sided)), per_side


def _wide_columns(df: pd.DataFrame) -> pd.DataFrame:
    """A table's frame with the Parquet files' names again (what compare reads)."""
    return df.rename(columns={v: k for k, v in RENAMED.items()})


def _connect(path: str, read_only: bool = False, shown: Path | str | None = None) -> Any:  # noqa: ANN401
    """A connection to the DuckDB file path (shown: the name its messages give it, the user's
    file of which path is a private copy)."""
    import duckdb

    path, opened = str(shown or path), path

    # A dataset is data, not code: nothing in it (a view calling read_text, an ATTACH) may
    # reach a file other than itself, whoever made it.
    try:
        con = duckdb.connect(opened, read_only=read_only, config={"enable_external_access": False})
    except duckdb.Error as e:
        raise UsageError(f"{path} is not an ipctrace dataset (DuckDB: {str(e).splitlines()[0]})") from None
    try:
        odd = con.execute(
            "SELECT table_name, table_type FROM information_schema.tables WHERE table_type <> 'BASE TABLE'"
        ).fetchall()
    except duckdb.Error as e:
        con.close()
        raise UsageError(f"{path} is not an ipctrace dataset (DuckDB: {str(e).splitlines()[0]})") from None
    if odd:
        con.close()
        name, kind = odd[0]
        raise UsageError(f"{path} is not an ipctrace dataset: {name} is a {kind.lower()}, not a table of data")
    return con


# The kind of each column of the tables of data (schema.check_columns's kinds) -> the DuckDB
# types that hold it; runs' and summaries' are those of their DDL.
DUCKDB_KINDS = {
    "int": {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"},
    "str": {"VARCHAR", "JSON"},
    "bool": {"BOOLEAN"},
}
DUCKDB_KINDS["num"] = DUCKDB_KINDS["int"] | {"FLOAT", "DOUBLE"}
KIND_WORDS = {"int": "whole numbers", "str": "text", "bool": "true or false", "num": "numbers"}


def _kind_word(kinds: set[str]) -> str:
    return next((KIND_WORDS[k] for k, ks in DUCKDB_KINDS.items() if ks == kinds), " or ".join(sorted(kinds)))


def _expected_columns(version: int) -> dict[str, dict[str, set[str]]]:
    """{table: {column: the DuckDB types it may have}} of a dataset: dataset, runs and summaries
    as their DDL makes them, iterations and breakdown (when there is one) as collect fills them."""
    import duckdb

    con = duckdb.connect(":memory:")
    try:
        con.execute(RUNS_DDL)
        con.execute(SUMMARIES_DDL)
        declared = con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns").fetchall()
    finally:
        con.close()
    out: dict[str, dict[str, set[str]]] = {"dataset": {"version": DUCKDB_KINDS["int"]}}
    for table, column, kind in declared:  # the family of its type: JSON or VARCHAR, any whole number...
        out.setdefault(table, {})[column] = next((ks for ks in DUCKDB_KINDS.values() if kind in ks), {kind})
    name = plain_name if version >= 2 else str  # format 1 kept the Parquet files' names
    out["iterations"] = {"run_id": DUCKDB_KINDS["str"]} | {
        name(c): DUCKDB_KINDS[k] for c, k in schema.ITERATIONS_COLUMNS.items()
    }
    out["breakdown"] = {"run_id": DUCKDB_KINDS["str"]} | {
        name(c): DUCKDB_KINDS[k] for c, k in schema.BREAKDOWN_COLUMNS.items()
    }
    if version >= 2:  # a side's rows
        out["breakdown_sides"] = {"run_id": DUCKDB_KINDS["str"], "side": DUCKDB_KINDS["str"]} | {
            name(c): DUCKDB_KINDS[k] for c, k in schema.BREAKDOWN_COLUMNS.items() if c != "latency_ns"
        }
    return out


def _check_dataset(con: Any, path: Path | str) -> tuple[int, list[tuple[str, str, dict[str, Any]]]]:  # noqa: ANN401
    """The dataset's format (refused when newer), its tables and their columns' types, and its
    runs: [(run id, label, summary)], each summary checked as summary.json is. What is missing,
    ill-typed or damaged is one UsageError naming path."""
    not_ours = f"{path} is not an ipctrace dataset"
    found: dict[str, dict[str, str]] = {}
    for table, column, kind in con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_catalog = current_database() AND table_schema = 'main'"
    ).fetchall():
        found.setdefault(table, {})[column] = kind
    if "dataset" not in found:
        raise UsageError(f"{not_ours} (no dataset table)")
    if found["dataset"].get("version") not in DUCKDB_KINDS["int"]:
        raise UsageError(
            f"{path}: table dataset, column version: expected whole numbers, found "
            f"{found['dataset'].get('version', 'none')}; the dataset is damaged or not ipctrace's"
        )
    versions = con.execute("SELECT version FROM dataset").fetchall()
    if len(versions) != 1 or versions[0][0] is None:
        found_what = "null" if len(versions) == 1 else f"{len(versions)} rows"
        raise UsageError(f"{path}: table dataset: expected one version, found {found_what}; it is damaged")
    version = versions[0][0]
    if version > FORMAT_VERSION:
        raise UsageError(f"{path} is a dataset of format {version}, newer than this ipctrace reads ({FORMAT_VERSION})")
    for table, columns in _expected_columns(version).items():
        if table not in found:
            if table.startswith("breakdown"):  # none of its runs was traced
                continue
            raise UsageError(f"{not_ours} (no {table} table): it is damaged")
        for column, kinds in columns.items():
            if column not in found[table]:
                raise UsageError(f"{path}: table {table} lacks the column {column}; the dataset is damaged")
            if found[table][column] not in kinds:
                raise UsageError(
                    f"{path}: table {table}, column {column}: expected {_kind_word(kinds)}, "
                    f"found {found[table][column]}; the dataset is damaged or not ipctrace's"
                )
        if table.startswith("breakdown"):  # its components, open-ended names: numbers
            for column, kind in found[table].items():
                if column not in (*columns, *schema.BREAKDOWN_TEXT, "side") and kind not in DUCKDB_KINDS["num"]:
                    raise UsageError(
                        f"{path}: table breakdown, column {column}: expected numbers, found {kind}; "
                        f"the dataset is damaged or not ipctrace's"
                    )
    runs = []
    for rid, label, text in con.execute("SELECT run_id, label, summary FROM runs").fetchall():
        where = f"{path} (run {rid!s:.16}'s summary)"
        if rid is None or text is None:
            raise UsageError(f"{path}: table runs: a run without {'an id' if rid is None else 'a summary'}; damaged")
        try:
            summary = json.loads(text)
        except (ValueError, RecursionError):
            raise UsageError(f"{where} is not valid JSON; the dataset is damaged") from None
        runs.append((rid, label if label is not None else rid, results.check_summary(summary, where)))
    return version, runs


def _rows(
    con: Any,  # noqa: ANN401 - a duckdb connection
    path: Path | str,
    runs: list[tuple[str, str, dict[str, Any]]],
) -> Iterator[tuple[str, str, dict[str, Any], pd.DataFrame, pd.DataFrame | None]]:
    """(run id, label, summary, iterations, breakdown or None) of runs, the rows checked as a
    results directory's files are (schema.check_iterations against the run's summary,
    schema.check_breakdown): one run's rows in memory at a time."""
    has_bd = bool(
        con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'breakdown' AND table_schema = 'main'"
        ).fetchone()[0]
    )
    for rid, label, summary in runs:
        where = f"{path} (run {rid[:16]}'s"
        it = _wide_columns(con.execute("SELECT * EXCLUDE (run_id) FROM iterations WHERE run_id = ?", [rid]).df())
        schema.check_iterations(it, f"{where} iterations)", summary)
        bd = (
            _wide_columns(con.execute("SELECT * EXCLUDE (run_id) FROM breakdown WHERE run_id = ?", [rid]).df())
            if has_bd
            else None
        )
        if bd is not None and len(bd):
            schema.check_breakdown(bd, f"{where} breakdown)", summary=summary)
        yield rid, label, summary, it, (bd if bd is not None and len(bd) else None)


def _read_through(con: Any) -> None:  # noqa: ANN401 - a duckdb connection
    """Every block of the dataset's tables read once (each column's largest value), so that a
    damaged block is found before rows are added to the file, not copied on with them."""
    tables = con.execute(
        "SELECT table_name, list(column_name) FROM information_schema.columns "
        "WHERE table_catalog = current_database() AND table_schema = 'main' GROUP BY table_name"
    ).fetchall()
    for table, columns in tables:
        quoted = ", ".join("max(" + '"' + c.replace('"', '""') + '")' for c in columns)
        con.execute(f'SELECT {quoted} FROM "{table}"').fetchall()


@contextlib.contextmanager
def _read_as_data(path: Path | str) -> Iterator[None]:
    """DuckDB's errors of reading a damaged file (a zeroed block: a checksum that does not
    match) as one UsageError naming path."""
    import duckdb

    try:
        yield
    except duckdb.Error as e:
        raise UsageError(f"{path} is damaged (DuckDB: {str(e).splitlines()[0][:200]})") from None


def collect(dirs: Sequence[Path | str], into: Path | str, append: bool = False) -> tuple[int, int]:
    """Write the runs of dirs into the dataset file into (anew, or added to it with append);
    returns (runs added, runs already there). The file is written under a temporary name and
    renamed at the end: an interrupted collect leaves the old file (or none)."""
    into = Path(into)
    found = find_runs(dirs)
    if not found:
        raise UsageError("collect: no results directories among the arguments")
    # One collect at a time into a directory: a second waits for the first to finish, then
    # finds its file there (refused without --append, added to with it); none is lost.
    try:
        lock = os.open(into.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise UsageError(f"--into {into}: cannot open its directory: {safeio.why(e)}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _collect(found, into, append)
    finally:
        os.close(lock)


def _collect(found: list[FoundRun], into: Path, append: bool) -> tuple[int, int]:
    if os.path.lexists(into) and not append:
        raise UsageError(f"{into} exists: give another --into, or --append to add to it")
    if append and not os.path.lexists(into):
        raise UsageError(f"{into} does not exist: nothing to --append to")
    # DuckDB writes its file in a private directory; its bytes then go to `into` the way
    # every file of ours is written (a new file beside it, never through a link, renamed).
    with tempfile.TemporaryDirectory(prefix="ipctrace-collect-") as private:
        work = Path(private) / "dataset.duckdb"
        if append:
            work.write_bytes(safeio.read_bytes(into))
        con = _connect(str(work), shown=into if append else None)
        try:
            # what goes wrong with a file we made anew is no damage of the user's
            with _read_as_data(into) if append else contextlib.nullcontext():
                if append:
                    version, runs = _check_dataset(con, into)
                    if version < FORMAT_VERSION:
                        # its tables have the older columns: runs added now would not fit them
                        raise UsageError(
                            f"{into} is a dataset of the older format {FORMAT_VERSION - 1}: collect its runs anew "
                            "into a new file (--into) to add to them"
                        )
                    _read_through(con)
                    for _ in _rows(con, into, runs):  # damage is refused, not added to
                        pass
                    have = {rid for rid, _, _ in runs}
                else:
                    con.execute("CREATE TABLE dataset AS SELECT ? AS version", [FORMAT_VERSION])
                    con.execute(RUNS_DDL)
                    con.execute(SUMMARIES_DDL)
                    have = set()
                added = 0
                for f in found:
                    rid, tables = _tables(f)
                    if rid in have:
                        continue
                    for name, df in tables.items():
                        if df is not None and len(df.columns):
                            _insert(con, name, df)
                    have.add(rid)
                    added += 1
                con.execute("CHECKPOINT")
        finally:
            con.close()
        safeio.write_bytes(into, work.read_bytes())
    return added, len(found) - added


def _insert(con: Any, table: str, df: pd.DataFrame) -> None:  # noqa: ANN401 - a duckdb connection
    con.register("incoming", df)
    try:
        exists = con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [table]).fetchone()[
            0
        ]
        if exists:
            # a run of another kind or age may bring a column the table lacks (a breakdown
            # without steal_ns): the table grows it, NULL for the runs before
            have = {r[0] for r in con.execute(f"DESCRIBE {table}").fetchall()}
            for name, kind, *_ in con.execute("DESCRIBE incoming").fetchall():
                if name not in have:
                    con.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
        else:
            con.execute(f"CREATE TABLE {table} AS SELECT * FROM incoming")
    finally:
        con.unregister("incoming")


def is_dataset(path: Path | str) -> bool:
    """A DuckDB file (by its magic bytes), not a results directory."""
    p = Path(path)
    if not p.is_file():
        return False
    with open(p, "rb") as f:
        return f.read(12)[8:12] == b"DUCK"


def read_runs(
    path: Path | str, ids: Sequence[str] | None = None
) -> Iterator[tuple[str, RunSummary, pd.DataFrame, pd.DataFrame | None]]:
    """(label, summary (typed), iterations, breakdown or None) of the dataset's runs: those of ids
    in that order (a prefix of a run id is enough), else all in the order collected. A summary
    that is not of this version is one UsageError naming its run."""
    con = _connect(str(path), read_only=True)
    try:
        with _read_as_data(path):
            _, runs = _check_dataset(con, path)
            if ids:
                chosen = []
                for want in ids:
                    hit = [r for r in runs if r[0].startswith(want)]
                    if len(hit) != 1:
                        raise UsageError(f"{path}: {'no' if not hit else 'more than one'} run id starts with {want!r}")
                    chosen.append(hit[0])
                runs = chosen
            for rid, label, summary, it, bd in _rows(con, path, runs):
                named = f"{label} [{rid[:8]}]"
                try:
                    typed = RunSummary.from_json(summary)
                except ValueError as e:
                    raise UsageError(f"{path}: run {named}: {e}") from None
                yield named, typed, it, bd
    finally:
        con.close()
