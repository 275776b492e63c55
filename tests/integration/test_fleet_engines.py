"""`ipctrace collect ... --into DIR/` read by the engines a fleet runs: the same Parquet files,
unchanged, give DuckDB and Spark (pyspark in local mode) the same per-run medians and the same
mean wake-up per host and workload."""

import shutil
from pathlib import Path

import duckdb
import pytest

from analysis.cli import main
from analysis.store import dataset
from analysis.store.results import read_json, write_json

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pipe-traced"

# Spark runs on the JVM: the one thing the project's set-up does not install (tools/bootstrap
# installs pyspark with the test tools; Java comes from the machine).
needs_java = pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java (a JRE 17+ on PATH)")


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    s = (
        SparkSession.builder.master("local[1]")
        .appName("ipctrace-fleet-test")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def on_host(make_results, name, latencies, hostname):
    d = make_results(name, latencies)
    s = read_json(d / "summary.json")
    s["host"]["hostname"] = hostname
    write_json(d / "summary.json", s)
    return d


def duck(ds, sql):
    """sql with {t} naming each table of the dataset as DuckDB reads it."""
    scan = lambda t: f"read_parquet('{ds}/{t}/**/*.parquet', hive_partitioning=true, union_by_name=true)"  # noqa: E731
    return duckdb.sql(sql.format(iterations=scan("iterations"), breakdown=scan("breakdown"))).fetchall()


@needs_java
@pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")
def test_duckdb_and_spark_read_the_same_dataset_alike(spark, make_results, tmp_path, capsys):
    from pyspark.sql import functions as F

    a = on_host(make_results, "a", [1000, 2000, 3000, 4000], "alpha")
    b = on_host(make_results, "b", [10, 20, 30, 40, 50], "2024")  # a hostname that looks like a number
    into = f"{tmp_path / 'fleet'}/"
    assert main.main(["collect", str(a), str(b), str(FIXTURE), "--into", into]) == 0
    assert capsys.readouterr().out.strip() == f"{into}: 3 runs collected"
    ds = tmp_path / "fleet"

    def spark_medians():
        df = spark.read.parquet(str(ds / "iterations"))
        rows = df.groupBy("hostname", "run_id").agg(F.percentile("latency_ns", 0.5).alias("m")).collect()
        return {(r["hostname"], r["run_id"]): r["m"] for r in rows}

    duck_medians = {
        (h, r): m for h, r, m in duck(ds, "SELECT hostname, run_id, median(latency_ns) FROM {iterations} GROUP BY ALL")
    }
    assert len(duck_medians) == 3
    assert spark_medians() == pytest.approx(duck_medians, rel=1e-12)
    assert duck_medians[("alpha", dataset.run_id(a))] == 2500.0 and duck_medians[("2024", dataset.run_id(b))] == 30.0

    # the traced run's mean wake-up per host and workload, by both engines
    bd = spark.read.option("mergeSchema", "true").parquet(str(ds / "breakdown"))
    got = {
        (r["hostname"], r["workload"]): r["w"]
        for r in bd.groupBy("hostname", "workload").agg(F.avg("wakeup").alias("w")).collect()
    }
    want = {(h, w): m for h, w, m in duck(ds, "SELECT hostname, workload, avg(wakeup) FROM {breakdown} GROUP BY ALL")}
    assert len(want) == 1 and got == pytest.approx(want, rel=1e-12)

    # a later collect adds a run: the old files stay as they were and Spark sees four runs
    c = on_host(make_results, "c", [7, 8, 9], "alpha")
    old = {p: p.stat().st_mtime_ns for p in ds.rglob("*.parquet")}
    assert main.main(["collect", str(a), str(c), "--into", str(ds), "--append"]) == 0
    assert capsys.readouterr().out.strip() == f"{ds}: 1 runs collected, 1 already in it"
    assert {p: p.stat().st_mtime_ns for p in old} == old
    medians = spark_medians()
    assert len(medians) == 4 and medians[("alpha", dataset.run_id(c))] == 8.0
    assert spark.read.parquet(str(ds / "runs")).schema["hostname"].dataType.simpleString() == "string"


def test_a_collect_into_a_directory_that_is_not_a_dataset_is_one_line(make_results, tmp_path, capsys):
    a = make_results("a", [1, 2, 3])
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("x")
    assert main.main(["collect", str(a), "--into", str(tmp_path / "mine")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "is a directory with files in it" in err
    assert main.main(["collect", str(a), "--into", f"{tmp_path / 'new'}/"]) == 0
    assert main.main(["collect", str(a), "--into", str(tmp_path / "new")]) == 2  # a directory without the slash too
    assert "is a dataset already" in capsys.readouterr().err
