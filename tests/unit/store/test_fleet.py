"""`ipctrace collect ... --into DIR/`: a fleet's runs as a Hive-partitioned Parquet dataset
(store/fleet.py), read back by DuckDB with the DuckDB file's columns (Spark reads it in
tests/integration/test_fleet.py)."""

import os
import shutil
from pathlib import Path

import duckdb
import pytest

from analysis.errors import UsageError
from analysis.store import dataset, fleet
from analysis.store.results import read_json, write_json

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "pipe-traced"


@pytest.fixture
def host_run(make_results):
    """host_run(name, latencies, hostname): a results directory whose run says it ran on hostname."""

    def make(name, latencies, hostname):
        d = make_results(name, latencies)
        s = read_json(d / "summary.json")
        s["host"]["hostname"] = hostname
        write_json(d / "summary.json", s)
        return d

    return make


def scan(ds, table):
    return f"read_parquet('{ds}/{table}/**/*.parquet', hive_partitioning=true, union_by_name=true)"


def test_runs_of_two_hosts_are_partitioned_by_host_workload_and_run(host_run, tmp_path):
    a = host_run("a", [1000, 2000, 3000, 4000], "alpha")
    b = host_run("b", [10, 20, 30], "2024")  # a hostname that looks like a number stays text
    ds = tmp_path / "fleet"
    assert fleet.collect([a, b], ds) == (2, 0)
    for rid, host in ((dataset.run_id(a), "alpha"), (dataset.run_id(b), "2024")):
        for table in ("runs", "iterations", "summaries"):
            assert (ds / table / f"hostname={host}" / "workload=pipe" / f"run_id={rid}" / "part-0.parquet").is_file()
    got = duckdb.sql(
        f"SELECT hostname, workload, run_id, median(latency_ns) FROM {scan(ds, 'iterations')} GROUP BY ALL ORDER BY 1"
    ).fetchall()
    assert got == [("2024", "pipe", dataset.run_id(b), 20.0), ("alpha", "pipe", dataset.run_id(a), 2500.0)]
    # the summaries' median beside the iterations', joined by run id across the two tables
    joined = duckdb.sql(
        f"SELECT r.hostname, s.median FROM {scan(ds, 'runs')} r JOIN {scan(ds, 'summaries')} s USING (run_id) "
        "WHERE s.metric = 'rtt' ORDER BY 1"
    ).fetchall()
    assert joined == [("2024", 20.0), ("alpha", 2500.0)]


def test_the_tables_have_the_duckdb_files_columns_and_types(make_results, tmp_path):
    runs = [make_results("a", [1, 2, 3]), FIXTURE]
    db, ds = tmp_path / "all.duckdb", tmp_path / "fleet"
    dataset.collect(runs, db)
    fleet.collect(runs, ds)
    con = duckdb.connect(str(db), read_only=True)
    # every table of the DuckDB file, breakdown_sides among them (the README's queries use it)
    assert set(fleet.TABLES) == {t for (t,) in con.execute("SHOW TABLES").fetchall()} - {"dataset"}
    for table in fleet.TABLES:
        in_file = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE {table})").fetchall())
        in_parquet = dict(
            duckdb.sql(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {scan(ds, table)})").fetchall()
        )
        keys = {k: "VARCHAR" for k in fleet.KEYS}
        # the DuckDB file's JSON columns are text in Parquet
        assert in_parquet == {**{c: "VARCHAR" if t == "JSON" else t for c, t in in_file.items()}, **keys}, table
        count = f"SELECT count(*) FROM {table}"
        assert con.execute(count).fetchone() == duckdb.sql(f"SELECT count(*) FROM {scan(ds, table)}").fetchone()


def test_appending_adds_files_and_rewrites_none(host_run, tmp_path):
    a, b = host_run("a", [1, 2, 3], "alpha"), host_run("b", [4, 5, 6], "beta")
    ds = tmp_path / "fleet"
    fleet.collect([a], ds)
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in ds.rglob("*") if p.is_file()}
    with pytest.raises(UsageError, match="is a dataset already: give another --into, or --append"):
        fleet.collect([b], ds)
    assert fleet.collect([a, b], ds, append=True) == (1, 1)
    after = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in ds.rglob("*") if p.is_file()}
    assert {p: after[p] for p in before} == before
    assert len(after) == len(before) + 3  # b's runs, iterations and summaries
    assert fleet.runs_in(ds) == {dataset.run_id(a), dataset.run_id(b)}
    assert not [p for p in ds.rglob("*") if p.name.endswith(".tmp")]


def test_a_run_whose_runs_file_is_missing_is_written_again(host_run, tmp_path):
    a = host_run("a", [1, 2, 3], "alpha")
    ds = tmp_path / "fleet"
    fleet.collect([a], ds)
    rid = dataset.run_id(a)
    (ds / "runs" / "hostname=alpha" / "workload=pipe" / f"run_id={rid}" / "part-0.parquet").unlink()
    assert fleet.collect([a], ds, append=True) == (1, 0)
    assert duckdb.sql(f"SELECT count(*) FROM {scan(ds, 'iterations')}").fetchone() == (3,)


def test_odd_hostnames_are_encoded_in_folders_and_read_back_whole(host_run, tmp_path):
    a = host_run("a", [1, 2, 3], "a b/c=d%")
    ds = tmp_path / "fleet"
    fleet.collect([a], ds)
    assert (ds / "runs" / "hostname=a%20b%2Fc%3Dd%25").is_dir()
    assert duckdb.sql(f"SELECT DISTINCT hostname FROM {scan(ds, 'iterations')}").fetchall() == [("a b/c=d%",)]


def test_what_is_not_a_dataset_directory_is_refused(make_results, tmp_path):
    a = make_results("a", [1, 2, 3])
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(UsageError, match="is a directory with files in it"):
        fleet.collect([a], other)
    with pytest.raises(UsageError, match="is not an ipctrace Parquet dataset: nothing to --append to"):
        fleet.collect([a], other, append=True)
    with pytest.raises(UsageError, match="does not exist: nothing to --append to"):
        fleet.collect([a], tmp_path / "none", append=True)
    assert sorted(os.listdir(other)) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert fleet.collect([a], empty) == (1, 0)  # an empty directory is a new dataset


def test_a_newer_format_and_a_planted_link_are_refused(make_results, tmp_path):
    a, b = make_results("a", [1, 2, 3]), make_results("b", [4, 5, 6])
    ds = tmp_path / "fleet"
    fleet.collect([a], ds)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.rmtree(ds / "summaries")
    (ds / "summaries").symlink_to(elsewhere)
    with pytest.raises(UsageError, match="summaries is a symbolic link"):
        fleet.collect([b], ds, append=True)
    assert list(elsewhere.iterdir()) == []
    mark = read_json(ds / fleet.MARK)
    write_json(ds / fleet.MARK, {**mark, "version": fleet.FORMAT_VERSION + 1})
    with pytest.raises(UsageError, match="newer than this ipctrace writes"):
        fleet.collect([b], ds, append=True)


def test_a_bad_run_leaves_no_dataset_and_no_half_run(make_results, tmp_path):
    a = make_results("a", [1, 2, 3])
    bad = make_results("bad", [4, 5, 6])
    (bad / "iterations.parquet").write_bytes(b"not parquet")
    ds = tmp_path / "fleet"
    with pytest.raises(UsageError):
        fleet.collect([bad, a], ds)
    assert not ds.exists()
    fleet.collect([a], ds)
    with pytest.raises(UsageError):
        fleet.collect([bad], ds, append=True)
    assert fleet.runs_in(ds) == {dataset.run_id(a)}
    assert sorted(p.relative_to(ds).parts[0] for p in ds.rglob("*.parquet")) == ["iterations", "runs", "summaries"]


def test_a_run_whose_writing_fails_midway_is_taken_out_whole(host_run, tmp_path):
    a, b = host_run("a", [1, 2, 3], "alpha"), host_run("b", [4, 5, 6], "beta")
    ds = tmp_path / "fleet"
    fleet.collect([a], ds)
    (ds / "summaries" / "hostname=beta").write_text("in the way")  # b's iterations go in, its summaries cannot
    with pytest.raises(UsageError, match="is not a directory of the dataset"):
        fleet.collect([b], ds, append=True)
    assert not list((ds / "iterations").glob("hostname=beta/*/*/*.parquet"))
    assert fleet.runs_in(ds) == {dataset.run_id(a)}


def test_a_run_without_sides_is_collected_without_breakdown_sides(tmp_path):
    """A merged directory's breakdown has parts and no side columns (ipctrace merge): collected
    into a dataset, it has a breakdown and no breakdown_sides file (issue 34: it failed)."""
    import shutil

    import pyarrow.parquet as pq

    d = tmp_path / "m"
    shutil.copytree(FIXTURE, d)
    bd = pq.read_table(d / "breakdown.parquet")
    keep = [c for c in bd.column_names if "." not in c]
    pq.write_table(bd.select(keep), d / "breakdown.parquet")
    fleet.collect([d], tmp_path / "fleet")
    assert list((tmp_path / "fleet" / "breakdown").rglob("*.parquet"))
    assert not list((tmp_path / "fleet" / "breakdown_sides").rglob("*.parquet"))
