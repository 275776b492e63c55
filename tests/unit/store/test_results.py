"""Results files: iterations.bin decoding, reading back, checked writes."""

import numpy as np
import pandas as pd
import pytest

from analysis.errors import UsageError
from analysis.store import results
from analysis.store.results import ITER_COLUMNS
from conftest import HOME, write_iterfile

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


@pytest.mark.parametrize(
    "groups, zero",
    [
        ([[0.0, 0.0], [0.0]], True),
        ([[0.0, np.nan], [0.0, -0.0]], True),  # NaN counts as nothing, -0.0 as 0
        ([[0.0, 0.0], [0.0, 3.0]], False),  # one row group's max gives it away
        ([[np.nan, np.nan], [0.0]], False),  # a group of NaN alone has no min and max to tell
        ([[-1.0, 0.0]], False),
    ],
)
def test_breakdown_zero_columns_are_told_by_the_row_groups_statistics(tmp_path, groups, zero):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetWriter(tmp_path / "breakdown.parquet", pa.schema([("copy", pa.float64())])) as w:
        for values in groups:
            w.write_table(pa.table({"copy": pa.array(values, pa.float64())}))
    bd = results.BreakdownColumns(tmp_path, ["copy"])
    assert bd.zero("copy") is zero
    assert bd.zero("missing") is False
    assert results.BreakdownColumns(tmp_path / "nothing", ["copy"]).zero("copy") is False


def test_the_components_are_listed_once():
    """The critical path's components are store.schema.COMPONENTS: the model's are that list
    itself, the heat maps' drawing order the same names in another order, and no other module
    spells the list out again."""
    import re

    from analysis.model import breakdown, breakdown_types, heatmaps
    from analysis.store import schema

    assert breakdown.COMPONENTS is schema.COMPONENTS and breakdown_types.COMPONENTS is schema.COMPONENTS
    assert breakdown.MEASURED == tuple(c for c in schema.COMPONENTS if c != "residual")
    assert sorted(heatmaps.COMPONENTS) == sorted(schema.COMPONENTS) and len(set(heatmaps.COMPONENTS)) == 11
    # a tuple of the names, one a line, in any order: only the source and the heat maps' order
    listing = re.compile(r"^\w+ = \(\n(?:\s+\"(\w+)\",\n){11}\)", re.M)
    spelled = set()
    for path in (HOME / "analysis").rglob("*.py"):
        for m in listing.finditer(path.read_text()):
            names = re.findall(r'"(\w+)"', m.group(0))
            if sorted(names) == sorted(schema.COMPONENTS):
                spelled.add(str(path.relative_to(HOME)))
    assert spelled == {"analysis/store/schema.py", "analysis/model/heatmaps.py"}


def test_breakdown_nan_only_in_a_sides_columns():
    from analysis.store import schema

    df = pd.DataFrame(
        {"run": [0, 0], "iteration": [0, 1], "metric": ["rtt", "rtt"], "latency_ns": [10.0, 12.0]}
        | {"user": [1.0, 2.0], "peer.user": [float("nan"), 1.0]}
    )
    schema.check_breakdown(df, "b.parquet")  # a side that took no part in an iteration: NaN
    for column, value in (("user", float("nan")), ("peer.user", float("inf")), ("user", -1.0)):
        with pytest.raises(UsageError, match=f"column {column}: 1 of 2 rows"):
            schema.check_breakdown(df.assign(**{column: [value, 1.0]}), "b.parquet")


def test_iterations_latency_is_end_minus_start(make_results):
    from analysis.store import schema

    d = make_results("p", [100, 200, 300])
    df = results.read_iterations(d)
    for change in ({"latency_ns": [100, 200, 301]}, {"latency_ns": [-1, 200, 300]}):
        with pytest.raises(UsageError, match="column latency_ns: 1 of 3 rows"):
            schema.check_iterations(df.assign(**change), d / "iterations.parquet")
