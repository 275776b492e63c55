"""The layouts and constants the analysis shares with the C side are the headers': the C
library exports them (analysis/store/layout.c), the ctypes structures of timeline.c's passes are
built from that table, and what Python states itself (events.py's and results.py's dtypes and
magics, records.py's flags) is checked against it when the library loads."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from analysis.errors import UsageError
from analysis.store import clib, events, records, results
from conftest import HOME


def test_the_python_side_says_what_the_headers_do():
    layouts, constants = clib.c_layouts(), clib.c_constants()
    assert clib.layout_differences(layouts, constants) == []
    assert layouts["rec"].dtype() == events.REC and layouts["rec"].size == 32
    assert layouts["iter_rec"].dtype() == results.ITER_REC and layouts["iter_file_header"].size == 64
    assert constants["EVENTS_FILE_MAGIC"] == b"IPTEVT01" and constants["WAKE_IN_HARDIRQ"] == 1 << 31
    # every constant the library exports has its Python mirror, and the reverse
    assert set(constants) == set(records.CONSTANTS)


def test_the_readers_use_what_is_checked():
    """The files' readers and the flags' users take records.py's objects, those checked."""
    assert events.REC is records.LAYOUTS["rec"] and events.HEADER is records.LAYOUTS["events_file_header"]
    assert results.ITER_REC is records.LAYOUTS["iter_rec"]
    assert results.ITER_HEADER is records.LAYOUTS["iter_file_header"]
    assert (events.MAGIC, events.VERSION) == (
        records.CONSTANTS["EVENTS_FILE_MAGIC"],
        records.CONSTANTS["EVENTS_FILE_VERSION"],
    )
    assert (results.ITER_MAGIC, results.ITER_VERSION) == (
        records.CONSTANTS["ITER_FILE_MAGIC"],
        records.CONSTANTS["ITER_FILE_VERSION"],
    )
    assert all(getattr(records, name) == value for name, value in records.CONSTANTS.items() if hasattr(records, name))
    # events.parquet's columns are those ipt_decode writes, in its order
    assert events.COLUMNS == tuple(name for name, _ in clib.decoded_columns())


@pytest.mark.parametrize(
    "table, name, value, says",
    [
        # aux and pid swapped: the same size, other offsets
        (
            "LAYOUTS",
            "rec",
            np.dtype([(n, events.REC[n]) for n in ("type", "cpu", "tid", "ts", "aux", "pid", "a0")]),
            "records.py's struct rec has aux \\(<u4\\) at byte 16 as its field 4, the header pid",
        ),
        ("CONSTANTS", "ITER_FILE_MAGIC", b"IPTITER2", "records.py's ITER_FILE_MAGIC is"),
        ("CONSTANTS", "WAKE_IN_HARDIRQ", 1 << 30, "records.py's WAKE_IN_HARDIRQ is"),
        ("CONSTANTS", "MARK_END", 3, "records.py's MARK_END is"),
        ("CONSTANTS", "MARK_NEW", 3, "records.py mirrors MARK_NEW, which the library does not export"),
    ],
)
def test_a_python_side_that_drifted_is_refused_at_load(monkeypatch, table, name, value, says):
    monkeypatch.setattr(clib, "_lib", None)
    monkeypatch.setitem(getattr(records, table), name, value)
    with pytest.raises(UsageError, match=f"other layouts or constants than analysis/ reads \\({says}"):
        clib.library()
    monkeypatch.undo()
    clib._lib = None
    clib.library()


def test_a_constant_the_library_exports_and_python_does_not_mirror_is_refused(monkeypatch):
    monkeypatch.setattr(clib, "_lib", None)
    monkeypatch.delitem(records.CONSTANTS, "MSG_UNREAD")
    with pytest.raises(UsageError, match="the library exports MSG_UNREAD, which records.py does not mirror"):
        clib.library()
    monkeypatch.undo()
    clib._lib = None
    clib.library()


# layout.c and the headers beside it in analysis/, which it includes by their paths
OWN = ("analysis/store/layout.c", "analysis/store/decode.h", "analysis/model/timeline.h")


def compile_layout(tmp_path, header, change):
    """layout.c compiled (syntax only) against a copy of one of its headers changed by `change`;
    the files of analysis/ copied as they lie in the checkout, the others found first in tmp_path."""
    for path in OWN:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HOME / path, tmp_path / path)
    text = (HOME / header).read_text()
    assert change[0] in text, change
    (tmp_path / (header if header in OWN else Path(header).name)).write_text(text.replace(*change, 1))
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    return subprocess.run(
        [cc, "-fsyntax-only", "-std=gnu11", f"-I{tmp_path}", f"-I{HOME / 'bpf'}", f"-I{HOME / 'workloads'}",
         str(tmp_path / OWN[0])],
        capture_output=True,
        text=True,
    )  # fmt: skip


@pytest.mark.parametrize(
    "header, change, struct",
    [
        ("bpf/ipctrace.h", ("\t__u64 a0;\n", "\t__u64 a0;\n\t__u64 a1;\n"), "struct rec"),
        ("workloads/iterfile.h", ("\tuint32_t nmetrics;", "\tuint32_t nmetrics, flags;"), "struct iter_file_header"),
        (
            "analysis/model/timeline.h",
            ("\tsize_t ncarve;\n", "\tsize_t ncarve;\n\tint64_t *more;\n"),
            "struct ipt_thread_out",
        ),
        (
            "analysis/store/decode.h",
            ("\tint64_t *iteration;\n", "\tint64_t *iteration, *more;\n"),
            "struct ipt_decoded",
        ),
    ],
)
def test_a_header_field_the_table_does_not_list_stops_the_build(tmp_path, header, change, struct):
    """The table is checked against the headers by the compiler: a field a header gains that
    layout.c does not list (even one that takes reserved bytes) fails to compile, naming the
    struct; the headers as they are compile."""
    same = compile_layout(tmp_path / "same", header, ("\n", "\n"))
    assert same.returncode == 0, same.stderr
    r = compile_layout(tmp_path / "changed", header, change)
    assert r.returncode != 0 and f"lists fewer fields than {struct}" in r.stderr, r.stderr


def test_a_struct_is_filled_by_name_with_arrays_of_the_type_the_c_reads():
    ts = np.arange(4, dtype=np.int64)
    cols = {
        "ts": ts,
        "type": np.zeros(4, np.int8),
        "tid": np.zeros(4, np.int32),
        "next_tid": np.zeros(4, np.int32),
        "cpu": np.zeros(4, np.int16),
        "aux": np.zeros(4, np.int64),
        "a0": np.zeros(4, np.int64),
    }
    s = clib.struct("ipt_events", n=4, **cols)
    assert s.n == 4 and s.ts == ts.ctypes.data and s.cpu == cols["cpu"].ctypes.data
    with pytest.raises(TypeError, match=r"ipt_events.tid: a int64 array, the C reads contiguous int32"):
        clib.struct("ipt_events", n=4, **{**cols, "tid": cols["ts"]})  # two columns swapped
    with pytest.raises(TypeError, match=r"ipt_events.ts: a int64 array, the C reads contiguous"):
        clib.struct("ipt_events", n=4, **{**cols, "ts": np.arange(8, dtype=np.int64)[::2]})
    with pytest.raises(TypeError, match=r"missing \['a0'\], unknown \['a1'\]"):
        clib.struct("ipt_events", n=4, **{k: v for k, v in cols.items() if k != "a0"}, a1=cols["a0"])
