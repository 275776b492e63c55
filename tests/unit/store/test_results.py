"""Results files: iterations.bin decoding, summary.json building, reading back, the table."""

import json

import numpy as np
import pandas as pd
import pytest

from analysis.errors import UsageError
from analysis.model import summary
from analysis.store import results
from analysis.store.results import ITER_COLUMNS
from conftest import make_iterations, write_iterfile

RECS = [
    {"seq": 0, "t_start_ns": 1000, "t_end_ns": 1500, "run": 0, "metric": 0, "cpu": 1, "tid": 7, "iteration": 0},
    {"seq": 1, "t_start_ns": 1600, "t_end_ns": 1700, "run": 0, "metric": 1, "cpu": 1, "tid": 7, "iteration": 0},
    {"seq": 2, "t_start_ns": 2000, "t_end_ns": 2900, "run": 1, "metric": 0, "cpu": 0, "tid": 8, "iteration": 0},
]


def test_iterations_bin_decodes(tmp_path):
    p = tmp_path / "iterations.bin"
    write_iterfile(p, RECS, 2)
    df, warnings = results.read_iterations_bin(p, ["write", "read"])
    assert warnings == []
    assert list(df.columns) == list(ITER_COLUMNS)
    assert df["latency_ns"].tolist() == [500, 100, 900]
    assert df["metric"].tolist() == ["write", "read", "write"]
    assert list(df["metric"].cat.categories) == ["write", "read"]
    assert df["run"].tolist() == [0, 0, 1] and df["tid"].tolist() == [7, 7, 8] and df["cpu"].tolist() == [1, 1, 0]
    for col, dtype in ITER_COLUMNS.items():
        if dtype != "category":
            assert df[col].dtype == dtype, col


def test_parquet_round_trip(tmp_path):
    write_iterfile(tmp_path / "iterations.bin", RECS, 2)
    df, _ = results.read_iterations_bin(tmp_path / "iterations.bin", ["write", "read"])
    results.write_iterations(tmp_path / "iterations.parquet", df)
    back = results.read_iterations(tmp_path)
    pd.testing.assert_frame_equal(back, df)


def test_cut_short_tail_is_reported_not_silent(tmp_path):
    p = tmp_path / "iterations.bin"
    write_iterfile(p, RECS, 2, tail=b"\x01" * 17)
    df, warnings = results.read_iterations_bin(p, ["write", "read"])
    assert len(df) == 3
    assert len(warnings) == 1 and "17 bytes" in warnings[0]


BAD_BIN = [
    ("truncated records", dict(count=5), "truncated"),
    ("bad magic", dict(magic=b"NOTITER1"), "bad magic"),
    ("other version", dict(version=2), "version 2"),
    ("metric count", dict(nmetrics=3), "3 metrics"),
]


@pytest.mark.parametrize("name,kw,msg", BAD_BIN, ids=[b[0] for b in BAD_BIN])
def test_bad_iterations_bin(tmp_path, name, kw, msg):
    p = tmp_path / "iterations.bin"
    nmetrics = kw.pop("nmetrics", 2)
    write_iterfile(p, RECS, nmetrics, **kw)
    with pytest.raises(UsageError, match=msg):
        results.read_iterations_bin(p, ["write", "read"])


def test_short_header_and_corrupt_records(tmp_path):
    p = tmp_path / "iterations.bin"
    p.write_bytes(b"IPTITER1\x01")
    with pytest.raises(UsageError, match="shorter than its header"):
        results.read_iterations_bin(p, ["rtt"])
    write_iterfile(p, [dict(RECS[0], metric=4)], 1)
    with pytest.raises(UsageError, match="metric id 4"):
        results.read_iterations_bin(p, ["rtt"])
    write_iterfile(p, [dict(RECS[0], t_end_ns=10)], 1)
    with pytest.raises(UsageError, match="ends before it starts"):
        results.read_iterations_bin(p, ["rtt"])
    with pytest.raises(UsageError, match="does not exist"):
        results.read_iterations_bin(tmp_path / "nope.bin", ["rtt"])


def test_summary_with_derived_metric(tmp_path):
    lat = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]
    iters = make_iterations(lat, runs=2)
    wl = {
        "workload": "pipe",
        "metrics": ["rtt"],
        "primary_metric": "rtt",
        "placement": "cross-cpu",
        "threads": [{"role": "measuring", "pid": 1, "tid": 1, "cpu": 0}],
    }
    s = summary.build(
        wl, iters, {"one_way": {"from": "rtt", "factor": 0.5}}, {"iterations": 4, "runs": 2}, "complete", [], iqr=False
    )
    json.dumps(s, allow_nan=False)
    rtt, ow = s["metrics"]["rtt"], s["metrics"]["one_way"]
    assert rtt["derived"] is False and ow["derived"] is True and ow["from"] == "rtt" and ow["factor"] == 0.5
    assert rtt["n"] == ow["n"] == 8
    assert rtt["mean"] == 4500 and ow["mean"] == 2250
    assert rtt["median"] == 4500 and ow["median"] == 2250
    assert ow["ci95_mean"] == pytest.approx([v / 2 for v in rtt["ci95_mean"]])
    assert ow["ci95_median"] == [v / 2 for v in rtt["ci95_median"]]
    assert rtt["runs"] == 2 and rtt["runs_ci95_mean"] is not None
    assert s["schema_version"] == 1 and s["primary_metric"] == "rtt"
    assert set(s["host"]) >= {"kernel", "cpu_model", "cores"}
    assert list(s["metrics"]) == ["rtt", "one_way"]
    assert set(summary.STAT_KEYS) <= set(rtt)


def test_summary_keys_follow_stats():
    from analysis.model import stats

    assert summary.QUANTILE_KEYS == list(stats.QUANTILES)


def test_summary_iqr_keeps_raw_figures():
    iters = make_iterations([100, 101, 102, 103, 104, 105, 106, 10000])
    wl = {"workload": "x", "metrics": ["rtt"]}
    s = summary.build(wl, iters, {}, {}, "complete", [], iqr=True)
    m = s["metrics"]["rtt"]
    assert m["max"] == 10000 and m["n"] == 8
    assert m["iqr"]["removed"] == 1 and m["iqr"]["n"] == 7 and m["iqr"]["max"] == 106


def test_summary_of_a_metric_without_iterations():
    iters = make_iterations([500, 600], metrics=("write", "read"), metric="write")
    s = summary.build({"workload": "x", "metrics": ["write", "read"]}, iters, {}, {}, "interrupted", [], False)
    assert s["metrics"]["read"]["n"] == 0 and s["metrics"]["read"]["mean"] is None
    assert s["metrics"]["write"]["n"] == 2
    json.dumps(s, allow_nan=False)
    assert "interrupted" in summary.table(s)


def test_table_prints_what_summary_holds(make_results):
    d = make_results("a", [1500] * 50 + [2500] * 50, derived={"one_way": {"from": "rtt", "factor": 0.5}})
    s = results.read_summary(d)
    text = summary.table(s)
    lines = text.splitlines()
    row = next(line for line in lines if line.startswith("rtt "))
    assert " us " in row and "100" in row.split()
    assert row.split()[3] == summary.fmt(s["metrics"]["rtt"]["median"], 1000) == "2.00"
    assert any(line.startswith("one_way*") for line in lines)
    assert "one_way = rtt x 0.5" in text


def test_table_shows_the_breakdown_of_a_traced_run(make_results):
    s = results.read_summary(make_results("t", [10_000] * 10))
    comp = dict(s["metrics"]["rtt"], mean=2500.0, median=2400.0, ci95_mean=[2400.0, 2600.0])
    s["breakdown"] = {
        "rtt": {
            "components": {"user": comp, "syscall": dict(comp, mean=7500.0)},
            "closure_residual_pct": 0.5,
            "critical_path": True,
            "copy_source": "estimated: calls x 15 ns",
        }
    }
    lines = summary.table(s).splitlines()
    assert lines[lines.index("where rtt goes (critical path of the round trip, from kernel events):") + 1].split() == [
        "component",
        "unit",
        "median",
        "mean",
        "±",
        "95%",
        "CI",
        "share",
        "of",
        "mean",
    ]
    assert next(line for line in lines if line.startswith("user")).split() == [
        "user",
        "us",
        "2.40",
        "2.50",
        "±",
        "0.10",
        "25.0",
        "%",
    ]
    assert next(line for line in lines if line.startswith("syscall")).split()[-2:] == ["75.0", "%"]
    assert any("0.50 %" in line for line in lines) and lines[-1] == "copy is estimated: calls x 15 ns"


@pytest.mark.parametrize(
    "mean,half,scale,text",
    [
        (6570, 11.5, 1000, "6.57 ± 0.01"),
        (86700, 4420, 1000, "86.7 ± 4.4"),
        (6570, 1, 1000, "6.57 ± <0.01"),
        (347, 0, 1, "347 ± 0"),
        (52.25, 1.25, 1, "52.2 ± 1.2"),
        (None, None, 1, "-"),
    ],
)
def test_mean_and_half_width(mean, half, scale, text):
    assert summary.fmt_pm(mean, half, scale) == text


@pytest.mark.parametrize(
    "ns,unit", [(None, "ns"), (12, "ns"), (999, "ns"), (1000, "us"), (6710, "us"), (2.5e6, "ms"), (3e9, "s")]
)
def test_units(ns, unit):
    assert summary.pick_unit(ns)[1] == unit


def test_read_summary_rejects(make_results, tmp_path):
    with pytest.raises(UsageError, match="schema_version 99"):
        results.read_summary(make_results("future", [1, 2, 3], schema_version=99))
    d = make_results("cut", [1, 2, 3])
    text = (d / "summary.json").read_text()
    (d / "summary.json").write_text(text[: len(text) // 2])
    with pytest.raises(UsageError, match="truncated or corrupted"):
        results.read_summary(d)
    (d / "summary.json").write_text("[1, 2]")
    with pytest.raises(UsageError, match="no schema_version"):
        results.read_summary(d)
    with pytest.raises(UsageError, match="does not exist"):
        results.read_summary(tmp_path / "missing")
    half = tmp_path / "half"
    half.mkdir()
    (half / results.INCOMPLETE).write_text("")
    with pytest.raises(UsageError, match="INCOMPLETE"):
        results.read_summary(half)


def test_read_iterations_rejects_corrupt_parquet(make_results):
    d = make_results("p", list(range(1, 100)))
    raw = (d / "iterations.parquet").read_bytes()
    (d / "iterations.parquet").write_bytes(raw[: len(raw) // 3])
    with pytest.raises(UsageError, match="truncated or corrupted"):
        results.read_iterations(d)


def test_write_json_refuses_nan(tmp_path):
    with pytest.raises(ValueError):
        results.write_json(tmp_path / "x.json", {"v": np.nan})
    assert list(tmp_path.iterdir()) == []
