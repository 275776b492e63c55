"""README's SQL runs: every `duckdb FILE "..."` and `duckdb -c "..."` query of the README is
taken from the README itself and run against a database and a Parquet dataset collected here
(a traced run and an untraced one), and the Spark example's columns are the dataset's, so that an
example can never drift from the tool (issue 34: `run` had become `repetition`)."""

import re
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from analysis.store import dataset, fleet

README = Path(__file__).resolve().parents[3] / "README.md"
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "pipe-traced"


def blocks():
    """The README's code blocks."""
    return re.findall(r"```[a-z]*\n(.*?)```", README.read_text(), re.S)


def queries():
    """(database or None for -c, SQL) of every duckdb command in the README's code blocks."""
    out = []
    for b in blocks():
        for m in re.finditer(r'^duckdb (?:-c |(\S+\.duckdb) )"(.*?)"$', b, re.S | re.M):
            out.append((m.group(1), m.group(2)))
    return out


def test_the_readme_has_its_queries():
    dbs = [db for db, _ in queries()]
    assert len(dbs) >= 3 and None in dbs and "all.duckdb" in dbs


@pytest.fixture
def collected(make_results, tmp_path, monkeypatch):
    """all.duckdb, course.duckdb and fleet/ in the current directory, as the README names them."""
    runs = [make_results("untraced", [1000, 2000, 3000]), FIXTURE]
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    for name in ("all.duckdb", "course.duckdb"):
        dataset.collect(runs, work / name)
    fleet.collect(runs, work / "fleet")
    return work


@pytest.mark.parametrize("k", range(len(queries())))
def test_every_readme_query_runs(collected, k):
    db, sql = queries()[k]
    con = duckdb.connect(db or ":memory:", read_only=db is not None)
    try:
        con.execute(sql).fetchall()
    finally:
        con.close()


def test_the_spark_example_reads_columns_the_dataset_has(collected):
    spark = next(b for b in blocks() if "SparkSession" in b)
    columns = {}
    for table in ("iterations", "breakdown"):
        files = list((collected / "fleet" / table).rglob("*.parquet"))
        columns[table] = set().union(*(pq.read_schema(f).names for f in files))
    selected = re.search(r"\.select\(([^)]*)\)", spark).group(1)
    for c in re.findall(r'"([a-z_]+)"', selected):
        assert c in columns["breakdown"], f"the Spark example selects {c!r}: not a column of breakdown"
    joined = re.search(r"\.join\(bd, \[([^\]]*)\]", spark).group(1)
    for c in re.findall(r'"([a-z_]+)"', joined):
        assert c in columns["iterations"] and c in columns["breakdown"], f"the Spark example joins on {c!r}"
    grouped = re.search(r"\.groupBy\(([^)]*)\)", spark).group(1)
    for c in re.findall(r'"([a-z_]+)"', grouped):
        assert c in columns["iterations"], f"the Spark example groups by {c!r}"
