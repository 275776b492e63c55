"""`ipctrace collect`: results directories into one DuckDB database (store/dataset.py), read
back by SQL and by compare."""

import duckdb
import pytest

from analysis.errors import UsageError
from analysis.store import dataset


def test_runs_iterations_and_summaries_are_tables(make_results, tmp_path):
    a = make_results("a", [1000, 2000, 3000, 4000])
    b = make_results("b", [10, 20, 30])
    db = tmp_path / "all.duckdb"
    assert dataset.collect([a, b], db) == (2, 0)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT label, workload, placement FROM runs ORDER BY label").fetchall() == [
        (str(a), "pipe", "cross-cpu"),
        (str(b), "pipe", "cross-cpu"),
    ]
    # the medians of 1000..4000 and of 10, 20, 30, by SQL over the summaries and the iterations
    got = con.execute(
        "SELECT r.label, s.median, (SELECT median(latency_ns) FROM iterations i WHERE i.run_id = r.run_id) "
        "FROM runs r JOIN summaries s USING (run_id) WHERE s.metric = 'rtt' ORDER BY r.label"
    ).fetchall()
    assert got == [(str(a), 2500.0, 2500.0), (str(b), 20.0, 20.0)]
    assert dataset.is_dataset(db) and not dataset.is_dataset(a / "summary.json")


def test_append_adds_only_new_runs_and_a_file_is_never_overwritten(make_results, tmp_path):
    a, b = make_results("a", [1, 2, 3]), make_results("b", [4, 5, 6])
    db = tmp_path / "all.duckdb"
    dataset.collect([a], db)
    with pytest.raises(UsageError, match="exists: give another --into, or --append"):
        dataset.collect([b], db)
    assert dataset.collect([a, b], db, append=True) == (1, 1)
    assert [label for label, *_ in dataset.read_runs(db)] == [
        f"{a} [{dataset.run_id(a)[:8]}]",
        f"{b} [{dataset.run_id(b)[:8]}]",
    ]


def test_a_bad_directory_leaves_no_file(make_results, tmp_path):
    a = make_results("a", [1, 2, 3])
    bad = make_results("bad", [4, 5, 6])
    (bad / "iterations.parquet").write_bytes(b"not parquet")
    db = tmp_path / "all.duckdb"
    with pytest.raises(UsageError):
        dataset.collect([a, bad], db)
    assert not db.exists() and list(tmp_path.glob("*.tmp")) == [] and list(tmp_path.glob(".*.tmp")) == []


def test_a_newer_format_and_a_foreign_database_are_refused(make_results, tmp_path):
    db = tmp_path / "all.duckdb"
    dataset.collect([make_results("a", [1, 2, 3])], db)
    con = duckdb.connect(str(db))
    con.execute("UPDATE dataset SET version = ?", [dataset.FORMAT_VERSION + 1])
    con.close()
    with pytest.raises(UsageError, match="newer than this ipctrace reads"):
        list(dataset.read_runs(db))
    other = tmp_path / "other.duckdb"
    duckdb.connect(str(other)).execute("CREATE TABLE t (x INT)").close()
    with pytest.raises(UsageError, match="not an ipctrace dataset"):
        list(dataset.read_runs(other))


def test_run_ids_choose_runs(make_results, tmp_path):
    a, b = make_results("a", [1, 2, 3]), make_results("b", [4, 5, 6])
    db = tmp_path / "all.duckdb"
    dataset.collect([a, b], db)
    rid = dataset.run_id(b)
    assert [s["metrics"]["rtt"]["median"] for _, s, _, _ in dataset.read_runs(db, [rid[:6]])] == [5]
    with pytest.raises(UsageError, match="no run id starts with 'zz'"):
        list(dataset.read_runs(db, ["zz"]))
