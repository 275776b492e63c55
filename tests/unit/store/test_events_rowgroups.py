"""events.parquet in row groups: the write options, and reading only the groups that meet spans."""

import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.errors import UsageError
from analysis.store import events, records


def frame(n, step=10):
    """n events, one every `step` ns from 1000, of every column events.parquet has."""
    ts = 1000 + step * np.arange(n, dtype=np.int64)
    i32 = np.zeros(n, np.int32)
    return pd.DataFrame(
        {
            "ts": ts,
            "type": pd.Categorical.from_codes(np.arange(n) % 2, categories=list(records.TYPES)),
            "cpu": np.zeros(n, np.int16),
            "pid": i32 + 7,
            "tid": i32 + 7,
            "aux": np.zeros(n, np.int64),
            "a0": np.arange(n, dtype=np.int64),
            "next_tid": i32 - 1,
            "next_pid": i32 - 1,
            "other_tid": i32 - 1,
            "other_pid": i32 - 1,
            "run": i32,
            "iteration": np.arange(n, dtype=np.int64) // 4,
        }
    )


def write(d, df, **kw):
    events.write_table(d / "events.parquet", pa.Table.from_pandas(df, preserve_index=False), **kw)


def test_write_options_and_row_groups(tmp_path):
    opts = events.parquet_options(list(events.COLUMNS))
    assert opts["row_group_size"] == events.ROW_GROUP_ROWS
    assert opts["column_encoding"] == {"ts": "DELTA_BINARY_PACKED", "iteration": "DELTA_BINARY_PACKED"}
    assert "ts" not in opts["use_dictionary"] and "a0" not in opts["use_dictionary"] and "tid" in opts["use_dictionary"]
    write(tmp_path, frame(1000), row_group_size=100)
    meta = pq.ParquetFile(tmp_path / "events.parquet").metadata
    assert meta.num_row_groups == 10 and meta.row_group(0).num_rows == 100


# 1000 events at 1000, 1010, ... 10990 ns in groups of 100 (group g: 1000 + 1000 g .. 1990 + 1000 g)
SPANS = [
    ("inside one group", [(2500, 2600)], [1]),
    ("across a boundary", [(1990, 2000)], [0, 1]),
    ("the ends count", [(2990, 2990)], [1]),
    ("two spans", [(1000, 1000), (10500, 20000)], [0, 9]),
    ("before the trace", [(0, 999)], []),
    ("after the trace", [(11000, 12000)], []),
    ("everything", [(0, 10**12)], list(range(10))),
]


@pytest.mark.parametrize("spans,groups", [s[1:] for s in SPANS], ids=[s[0] for s in SPANS])
def test_spans_read_only_the_groups_they_meet(tmp_path, spans, groups):
    df = frame(1000)
    write(tmp_path, df, row_group_size=100)
    with events.EventsFile(tmp_path) as f:
        assert f.groups_meeting(spans) == groups
        got = f.read(f.groups_meeting(spans))
        assert f.read_groups == set(groups)
    want = df.iloc[[r for g in groups for r in range(100 * g, 100 * g + 100)]].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_categorical=False)
    pd.testing.assert_frame_equal(events.read_parquet(tmp_path, spans), got)


def test_a_file_of_one_row_group_is_read_whole(tmp_path):
    # as written before the row groups were sized
    df = frame(500)
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), tmp_path / "events.parquet")
    pd.testing.assert_frame_equal(events.read_parquet(tmp_path, [(1000, 1000)]), df, check_categorical=False)
    pd.testing.assert_frame_equal(events.read_parquet(tmp_path), df, check_categorical=False)


def test_groups_read_in_pieces_concatenate_to_the_whole(tmp_path):
    df = frame(1000)
    write(tmp_path, df, row_group_size=64)
    with events.EventsFile(tmp_path) as f:
        whole = f.frame(pa.concat_tables([f.table([g]) for g in range(f.groups)]))
        assert f.groups == 16 and f.read_groups == set(range(16))
    pd.testing.assert_frame_equal(whole, events.read_parquet(tmp_path))


def test_answer_reads_what_a_walk_asks_for_each_row_group_once(tmp_path):
    """store.events.answer: a generator asks for parts of events.parquet (as model.leadin does)
    and is sent them; a row group asked for twice is read once; the footer's RowGroups say
    which groups meet a span without the file."""
    df = frame(1000)
    write(tmp_path, df, row_group_size=100)
    got = {}

    def walk(row_groups):
        got["meeting"] = row_groups.meeting([(2500, 3500)])
        got["narrow"] = yield events.ColumnsRead(("tid", "ts"), (9,))
        got["first"] = yield events.EventsRead(tuple(got["meeting"]))
        got["wider"] = yield events.EventsRead((1, 2, 3))
        got["none"] = yield events.EventsRead(())
        return "done"

    reads = []
    with events.EventsFile(tmp_path) as f:
        table = f.table
        f.table = lambda groups=None, columns=None: reads.append(list(groups)) or table(groups, columns)
        assert events.answer(walk(f.row_groups), f) == "done"
        assert f.read_groups == {1, 2, 3}
    assert got["meeting"] == [1, 2]
    assert got["narrow"].column_names == ["tid", "ts"] and got["narrow"]["ts"][0].as_py() == 10000
    assert reads == [[9], [1], [2], [3], []]  # 1 and 2 not again for the wider part
    pd.testing.assert_frame_equal(got["wider"], df.iloc[100:400].reset_index(drop=True), check_categorical=False)
    pd.testing.assert_frame_equal(got["first"], df.iloc[100:300].reset_index(drop=True), check_categorical=False)
    assert len(got["none"]) == 0 and list(got["none"].columns) == list(df.columns)


def bad_link(d):
    write(d, frame(10))
    os.rename(d / "events.parquet", d / "real.parquet")
    os.symlink(d / "real.parquet", d / "events.parquet")


def bad_garbage(d):
    (d / "events.parquet").write_bytes(b"PAR1" + b"\0" * 64)


def bad_truncated(d):
    write(d, frame(1000), row_group_size=100)
    p = d / "events.parquet"
    p.write_bytes(p.read_bytes()[:-200])


def bad_columns(d):
    pq.write_table(pa.Table.from_pandas(frame(10).drop(columns=["a0"]), preserve_index=False), d / "events.parquet")


def bad_fifo(d):
    os.mkfifo(d / "events.parquet")


BAD = [
    ("symbolic link", bad_link, "symbolic link"),
    ("garbage", bad_garbage, "truncated or corrupted"),
    ("truncated", bad_truncated, "truncated or corrupted"),
    ("missing column", bad_columns, "lacks the columns a0"),
    ("FIFO", bad_fifo, "a FIFO"),
    ("absent", lambda d: None, "has no events.parquet"),
]


@pytest.mark.parametrize("make,msg", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
@pytest.mark.parametrize("spans", [None, [(1000, 2000)]], ids=["all", "spans"])
def test_bad_files_are_one_line(tmp_path, make, msg, spans):
    make(tmp_path)
    with pytest.raises(UsageError) as e:
        events.read_parquet(tmp_path, spans)
    assert msg in str(e.value) and "\n" not in str(e.value)
