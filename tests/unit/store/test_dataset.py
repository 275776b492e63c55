"""`ipctrace collect`: results directories into one DuckDB database (store/dataset.py), read
back by SQL and by compare."""

import json
import re
import shutil
from pathlib import Path

import duckdb
import pandas as pd
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
    assert [s.metrics["rtt"].median for _, s, _, _ in dataset.read_runs(db, [rid[:6]])] == [5]
    with pytest.raises(UsageError, match="no run id starts with 'zz'"):
        list(dataset.read_runs(db, ["zz"]))


FIXTURE = Path(__file__).parents[2] / "fixtures" / "pipe-traced"


def _columns(con):
    return con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns").fetchall()


def test_every_column_is_plain_and_start_time_a_timestamp(tmp_path):
    """Plain SQL, no quoting: no dotted column, start_time a TIMESTAMP, the summaries' unit
    stated, the components queryable by name, per side in breakdown_sides (issue 28, point 11)."""
    db = tmp_path / "d.duckdb"
    dataset.collect([FIXTURE], db)
    con = duckdb.connect(str(db), read_only=True)
    cols = _columns(con)
    assert [c for _, c, _ in cols if not re.fullmatch(r"[a-z_][a-z0-9_]*", c)] == []
    assert {t: d for t, c, d in cols if c == "start_time"} == {"runs": "TIMESTAMP"}
    assert con.execute("SELECT DISTINCT unit FROM summaries").fetchall() == [("ns",)]
    assert con.execute("SELECT start_time FROM runs").fetchone()[0].year >= 2025
    bd = pd.read_parquet(FIXTURE / "breakdown.parquet")
    rtt = bd[bd["metric"] == "rtt"]
    (user, peer_wakeup) = con.execute(
        "SELECT (SELECT avg(user) FROM breakdown WHERE metric = 'rtt'), "
        "(SELECT avg(wakeup) FROM breakdown_sides WHERE side = 'peer' AND metric = 'rtt')"
    ).fetchone()
    assert user == pytest.approx(rtt["user"].mean())
    assert peer_wakeup == pytest.approx(rtt["peer.wakeup"].mean())
    assert con.execute("SELECT count(DISTINCT repetition) FROM iterations").fetchone()[0] >= 1


def test_a_trace_with_three_sides_collects_beside_a_two_sided_run(tmp_path):
    three = tmp_path / "three"
    shutil.copytree(FIXTURE, three)
    bd = pd.read_parquet(three / "breakdown.parquet")
    for c in [c for c in bd.columns if c.startswith("peer.")]:
        bd["peer2." + c.split(".", 1)[1]] = bd[c] / 2
    bd.to_parquet(three / "breakdown.parquet")
    summary = json.loads((three / "summary.json").read_text())
    summary["workload"] = "three sides"  # another run id than the fixture's
    (three / "summary.json").write_text(json.dumps(summary))
    db = tmp_path / "d.duckdb"
    assert dataset.collect([FIXTURE, three], db) == (2, 0)
    with duckdb.connect(str(db), read_only=True) as con:
        sides = con.execute("SELECT side, count(*) FROM breakdown_sides GROUP BY side ORDER BY side").fetchall()
    assert [s for s, _ in sides] == ["measuring", "peer", "peer2"]
    # read back for compare with the Parquet files' names
    (_, _, it, b), _ = list(dataset.read_runs(db))
    assert "run" in it.columns and "run" in b.columns


def test_the_untraced_twin_is_collected_beside_its_traced_run(tmp_path):
    traced = tmp_path / "t"
    shutil.copytree(FIXTURE, traced)
    twin = traced / "untraced"
    twin.mkdir()
    for name in ("iterations.parquet", "workload.json", "meta.json"):
        shutil.copy(FIXTURE / name, twin / name)
    s = json.loads((FIXTURE / "summary.json").read_text())
    s.pop("trace", None), s.pop("breakdown", None)
    (twin / "summary.json").write_text(json.dumps(s))
    db = tmp_path / "d.duckdb"
    assert dataset.collect([traced], db) == (2, 0)
    con = duckdb.connect(str(db), read_only=True)
    got = con.execute(
        "SELECT u.label, u.traced FROM runs t JOIN runs u ON u.twin_of = t.run_id WHERE t.label = ?", [str(traced)]
    ).fetchall()
    assert got == [(f"{traced}/untraced", False)]
