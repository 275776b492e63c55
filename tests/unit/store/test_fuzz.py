"""Fuzzing: the binary event decoder (analysis/store/events.py), the results readers
(analysis/store/results.py) and the argument parsers of the C programs, fed what hypothesis
makes up. A reader either decodes consistently or raises the project's error with a
one-line message; a C program exits 0, 1 or 2 and never crashes or trips a sanitizer
(`make SANITIZE=1 test` runs this against the ASan/UBSan build)."""

import atexit
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from analysis import DRIVER, LOADER
from analysis.errors import UsageError
from analysis.model import lost
from analysis.store import events, records, results

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
SLOW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


SCRATCH = Path(tempfile.mkdtemp(prefix="ipctrace-fuzz."))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)


def scratch(data, name):
    """A directory holding only name = data (the same one, emptied, every time)."""
    for p in SCRATCH.iterdir():
        p.unlink()
    (SCRATCH / name).write_bytes(data)
    return SCRATCH


def one_line(e):
    msg = str(e)
    assert msg and "\n" not in msg, msg


# --- events.bin ----------------------------------------------------------------------


def events_header(count, drops=0, magic=events.MAGIC, version=events.VERSION, rec_size=events.REC.itemsize):
    h = np.zeros(1, events.HEADER)
    h["magic"], h["version"], h["rec_size"], h["count"], h["drops"], h["ncpus"] = (
        magic,
        version,
        rec_size,
        count,
        drops,
        2,
    )
    return h.tobytes()


record_lists = st.lists(
    st.tuples(
        st.integers(0, 20),
        st.integers(0, 3),
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**64 - 1),
    ),
    max_size=40,
)


def pack(recs):
    a = np.zeros(len(recs), events.REC)
    for i, r in enumerate(recs):
        a[i] = r
    return a.tobytes()


@FUZZ
@given(raw=st.binary(max_size=300))
def test_events_bin_of_random_bytes(raw):
    d = scratch(raw, "events.bin")
    try:
        rec, header, warnings = events.read_events_bin(d / "events.bin")
    except UsageError as e:
        one_line(e)
        return
    # Only a file with the right magic, version and record size gets here.
    assert raw[:8] == events.MAGIC and len(raw) >= events.HEADER.itemsize
    assert len(rec) <= (len(raw) - events.HEADER.itemsize) // events.REC.itemsize


@FUZZ
@given(recs=record_lists, count_delta=st.integers(-3, 3), tail=st.binary(max_size=40), zero_count=st.booleans())
def test_events_bin_structured(recs, count_delta, tail, zero_count):
    """A valid header over records of any type, a count that is off, a cut-short tail."""
    count = 0 if zero_count else max(0, len(recs) + count_delta)
    d = scratch(events_header(count) + pack(recs) + tail, "events.bin")
    try:
        rec, header, warnings = events.read_events_bin(d / "events.bin")
    except UsageError as e:
        one_line(e)
        assert count > len(recs) + len(tail) // events.REC.itemsize
        return
    whole = len(recs) + len(tail) // events.REC.itemsize
    assert len(rec) == (whole if count == 0 else count)
    if count != whole or len(tail) % events.REC.itemsize:
        assert warnings, "a mismatch between header and file went unsaid"
    try:
        df = events.to_frame(rec)
    except UsageError as e:
        one_line(e)
        assert ((rec["type"] < 1) | (rec["type"] > len(records.TYPES))).any()
        return
    assert len(df) == len(rec) and list(df.columns) == list(events.COLUMNS)
    assert (np.diff(df["ts"].to_numpy()) >= 0).all()


@FUZZ
@given(
    ts=st.lists(st.integers(0, 1000), max_size=50),
    windows=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 30)), max_size=20),
)
def test_events_fall_into_the_window_that_contains_them(ts, windows):
    """The decoder's window of each event (records in any order) against the obvious loop,
    for disjoint windows."""
    windows = sorted(windows)
    disjoint, last = [], -1
    for a, w in windows:
        if a > last:
            disjoint.append((a, a + w))
            last = a + w
    rec = np.zeros(len(ts), events.REC)
    rec["type"], rec["ts"] = 1, ts
    iters = pd.DataFrame(
        {
            "run": np.zeros(len(disjoint), np.int32),
            "iteration": np.arange(len(disjoint)) + 10,
            "metric": pd.Categorical(["rtt"] * len(disjoint)),
            "t_start_ns": [a for a, _ in disjoint],
            "t_end_ns": [b for _, b in disjoint],
        }
    )
    df = events.to_frame(rec, iters if len(disjoint) else None)
    assert list(df["ts"]) == sorted(ts)
    for t, r, i in zip(df["ts"], df["run"], df["iteration"]):
        want = next((k for k, (a, b) in enumerate(disjoint) if a <= t <= b), -1)
        assert i == (want + 10 if want >= 0 else -1) and r == (0 if want >= 0 else -1)


@FUZZ
@given(
    iters=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**4)), max_size=40),
    spans=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**4)), max_size=10),
)
def test_iterations_overlapping_lost_records(iters, spans):
    it = pd.DataFrame({"t_start_ns": [a for a, _ in iters], "t_end_ns": [a + w for a, w in iters]}, dtype=np.int64)
    sp = [[a, a + w, 64] for a, w in spans]
    got = lost.overlaps_lost(it, sp, 0)
    want = [any(a <= e and b >= s for a, b, _ in sp) for s, e in zip(it["t_start_ns"], it["t_end_ns"])]
    assert got.tolist() == want
    assert lost.overlaps_lost(it, sp, 1).all()


# --- iterations.bin, summary.json, iterations.parquet --------------------------------------


def iter_header(count, nmetrics, magic=results.ITER_MAGIC, version=results.ITER_VERSION):
    h = np.zeros(1, results.ITER_HEADER)
    h["magic"], h["version"], h["rec_size"], h["count"], h["nmetrics"] = (
        magic,
        version,
        results.ITER_REC.itemsize,
        count,
        nmetrics,
    )
    return h.tobytes()


@FUZZ
@given(raw=st.binary(max_size=300), nmetrics=st.integers(1, 3))
def test_iterations_bin_of_random_bytes(raw, nmetrics):
    d = scratch(raw, "iterations.bin")
    try:
        df, warnings = results.read_iterations_bin(d / "iterations.bin", ["m0", "m1", "m2"][:nmetrics])
    except UsageError as e:
        one_line(e)
        return
    assert raw[:8] == results.ITER_MAGIC
    assert (df["latency_ns"] >= 0).all()


@FUZZ
@given(body=st.binary(max_size=400), count=st.integers(0, 12), nmetrics=st.integers(1, 3))
def test_iterations_bin_structured(body, count, nmetrics):
    """A valid header over random records: out-of-range metrics and time running backwards
    are refused, a cut-short tail is said, everything accepted is consistent."""
    metrics = ["m0", "m1", "m2"][:nmetrics]
    d = scratch(iter_header(count, nmetrics) + body, "iterations.bin")
    try:
        df, warnings = results.read_iterations_bin(d / "iterations.bin", metrics)
    except UsageError as e:
        one_line(e)
        return
    assert len(df) == count
    assert (df["t_end_ns"] >= df["t_start_ns"]).all() and (df["latency_ns"] >= 0).all()
    assert set(df["metric"].astype(str)) <= set(metrics)
    assert bool(warnings) == (len(body) > count * results.ITER_REC.itemsize)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=12,
)


@FUZZ
@given(doc=json_values | st.fixed_dictionaries({"schema_version": json_values, "metrics": json_values}))
def test_summary_of_any_json(doc):
    d = scratch(json.dumps(doc).encode(), "summary.json")
    try:
        s = results.read_summary(d)
    except UsageError as e:
        one_line(e)
        return
    assert s["schema_version"] == results.SCHEMA_VERSION and isinstance(s["metrics"], dict)


@FUZZ
@given(raw=st.binary(max_size=200))
def test_summary_of_random_bytes(raw):
    d = scratch(raw, "summary.json")
    try:
        results.read_summary(d)
    except UsageError as e:
        one_line(e)


@pytest.fixture(scope="module")
def parquet_bytes():
    import pyarrow as pa
    import pyarrow.parquet as pq

    from conftest import make_iterations

    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pandas(make_iterations([100, 200, 300, 400]), preserve_index=False), sink)
    return sink.getvalue().to_pybytes()


@SLOW
@given(cut=st.integers(0, 4000), flips=st.lists(st.tuples(st.integers(0, 4000), st.integers(1, 255)), max_size=4))
def test_iterations_parquet_damaged(parquet_bytes, cut, flips):
    raw = bytearray(parquet_bytes[:cut] if cut < len(parquet_bytes) else parquet_bytes)
    for pos, x in flips:
        if pos < len(raw):
            raw[pos] ^= x
    d = scratch(bytes(raw), "iterations.parquet")
    try:
        df = results.read_iterations(d)
    except UsageError as e:
        one_line(e)
        return
    assert set(results.ITER_COLUMNS) <= set(df.columns)


# --- the C programs' argument parsers ---------------------------------------------------


def c_program_outcome(cmd, cwd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=cwd, errors="replace")
    assert "Sanitizer" not in p.stderr and "runtime error" not in p.stderr, p.stderr
    assert p.returncode in (0, 1, 2), (cmd, p.returncode, p.stderr)
    if p.returncode == 2:
        lines = [line for line in p.stderr.split("\n") if line.strip()]
        assert len(lines) == 1, (cmd, p.stderr)
    return p


FLAGS = [
    "--size",
    "--cpus",
    "--mode",
    "--same-cpu",
    "--cross-cpu",
    "--no-pin",
    "--procs",
    "--fresh",
    "--containers",
    "--bogus",
    "--iterations=",
    "--runs=x",
    "--size=",
]
values = st.sampled_from(
    [
        "0",
        "1",
        "-1",
        "64K",
        "1M",
        "65M",
        "0,1",
        "1,0",
        "0,",
        ",1",
        "99999999999999999999",
        "4096",
        "abc",
        "",
        "=",
        "1x",
        "0x10",
        " 1",
        "lock",
        "handoff",
    ]
) | st.text(st.characters(min_codepoint=1, blacklist_categories=("Cs",)), max_size=6)
names = st.sampled_from(
    [
        "pipe",
        "pipe-self",
        "null-syscall",
        "orwc",
        "sem-threads",
        "unix-dgram",
        "mqueue",
        "nosuch",
        "",
        "--",
        "pipe pipe",
    ]
)


@pytest.mark.skipif(not DRIVER.exists(), reason=f"{DRIVER} is not built")
@SLOW
@given(name=names, flags=st.lists(st.tuples(st.sampled_from(FLAGS), values), max_size=4))
def test_driver_arguments(tmp_path, name, flags):
    """`ipcbench run` with made-up arguments: at most one iteration is ever measured."""
    args = [
        x
        for f, v in flags
        for x in ((f + v,) if f.endswith("=") else (f, v) if f in ("--size", "--cpus", "--mode") else (f,))
    ]
    out = Path(tempfile.mkdtemp(prefix="fuzz.", dir=tmp_path)) / "out"
    c_program_outcome(
        [str(DRIVER), "run", name, *args, "--iterations", "1", "--warmup", "0", "--runs", "1", "--out", str(out)],
        tmp_path,
    )


@pytest.mark.skipif(not LOADER.exists(), reason=f"{LOADER} is not built")
@SLOW
@given(
    flags=st.lists(
        st.tuples(
            st.sampled_from(
                ["--ringbuf-mb", "--sample-hz", "--user", "--out", "--floor", "-v", "-r", "-s", "-u", "--nope"]
            ),
            values,
        ),
        max_size=4,
    )
)
def test_loader_arguments(tmp_path, flags):
    """The tracer's parser; no command is ever given, so nothing is loaded."""
    args = [x for f, v in flags for x in ((f,) if f in ("--floor", "-v") else (f, v))]
    assume("--" not in args)
    p = c_program_outcome([str(LOADER), *args], tmp_path)
    assert p.returncode == 2
