"""bench-analysis: the synthetic run written in chunks is the one written whole before; its
analysis is the real one by either path (the same statistics, the files written alongside the
breakdown whole when it returns); the verdicts, the estimate of the whole path's memory and the
clean-up of the command on small, hand-made cases."""

import argparse
import io
import json
import re
from contextlib import redirect_stdout

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from analysis.cli import bench_analysis as cli
from analysis.errors import UsageError
from analysis.model import breakdown
from analysis.run import analysis_benchmark as bench
from analysis.run import bench_analysis
from analysis.store import events, synthetic
from analysis.store.jsonfiles import Thread, Workload
from analysis.store.results import read_trace, written_alongside

N = 3000
GiB = 1 << 30


def _writer_before_chunks(outdir, n, seed=7):
    """The writer as it was before it wrote in chunks (the whole record array at once), kept as
    the reference the chunked one must match byte for byte."""
    from analysis.store.results import write_iterations

    rng = np.random.default_rng(seed)
    code = {name: i + 1 for i, name in enumerate(("sys_enter", "sys_exit", "switch", "waking"))}
    gap = rng.gamma(4.0, 250.0, size=(n, 12)).astype(np.int64) + 50
    t = np.cumsum(gap, axis=1)
    period = t[:, -1] + 300
    start = np.concatenate(([10_000], 10_000 + np.cumsum(period[:-1])))
    ts = start[:, None] + t
    a, b = synthetic.A_TID, synthetic.B_TID
    pattern = [
        ("sys_enter", a, 1, 0),
        ("waking", b, 0, a | a << 32),
        ("sys_exit", a, 1, 1),
        ("sys_enter", a, 0, 0),
        ("switch", a, 1, b | b << 32),
        ("sys_exit", b, 0, 1),
        ("sys_enter", b, 1, 0),
        ("waking", a, 0, b | b << 32),
        ("sys_exit", b, 1, 1),
        ("sys_enter", b, 0, 0),
        ("switch", b, 1, a | a << 32),
        ("sys_exit", a, 0, 1),
    ]
    rec = np.zeros(ts.size, events.REC)
    rec["ts"] = ts.ravel()
    rec["type"] = np.tile(np.array([code[p[0]] for p in pattern], np.uint16), n)
    rec["tid"] = np.tile(np.array([p[1] for p in pattern], np.uint32), n)
    rec["pid"] = rec["tid"]
    rec["aux"] = np.tile(np.array([p[2] for p in pattern], np.uint32), n)
    rec["a0"] = np.tile(np.array([p[3] for p in pattern], np.uint64), n)
    h = np.zeros(1, events.HEADER)
    h["magic"], h["version"], h["rec_size"], h["count"], h["ncpus"] = events.MAGIC, events.VERSION, 32, len(rec), 2
    with open(outdir / "events.bin", "wb") as f:
        f.write(h.tobytes())
        rec.tofile(f)
    t_start, t_end = ts[:, 0] - 40, ts[:, -1] + 40
    write_iterations(
        outdir / "iterations.parquet",
        pd.DataFrame(
            {
                "run": np.zeros(n, np.int32),
                "iteration": np.arange(n, dtype=np.int64),
                "seq": np.arange(n, dtype=np.int64),
                "metric": pd.Categorical(["rtt"] * n),
                "t_start_ns": t_start,
                "t_end_ns": t_end,
                "latency_ns": t_end - t_start,
                "cpu": np.zeros(n, np.int16),
                "tid": np.full(n, a, np.int32),
            }
        ),
    )


@pytest.mark.parametrize(
    "n, chunk, seed",
    [
        (1, 1, 7),
        (7, 3, 7),  # a last chunk shorter than the others
        (1000, 1000, 7),  # one chunk, exactly
        (2500, 1000, 7),
        (3001, 250, 11),
        (40, synthetic.CHUNK, 7),  # the default: one chunk
    ],
)
def test_chunks_write_the_file_written_whole(tmp_path, n, chunk, seed):
    (tmp_path / "whole").mkdir()
    (tmp_path / "chunks").mkdir()
    _writer_before_chunks(tmp_path / "whole", n, seed)
    assert synthetic.write_synthetic(tmp_path / "chunks", n, seed=seed, chunk=chunk) == 12 * n
    assert (tmp_path / "chunks" / "events.bin").read_bytes() == (tmp_path / "whole" / "events.bin").read_bytes()
    got = pq.read_table(tmp_path / "chunks" / "iterations.parquet").to_pandas()
    want = pq.read_table(tmp_path / "whole" / "iterations.parquet").to_pandas()
    pd.testing.assert_frame_equal(got, want)


def test_trace_json_is_valid_and_counts_the_records(tmp_path):
    synthetic.write_synthetic(tmp_path, 10)
    tj = read_trace(tmp_path)  # checked against schema.TRACE
    assert tj["records"] == 120 and sum(tj["events"].values()) == 120
    assert (tj["events"]["sys_enter"], tj["events"]["switch"], tj["events"]["waking"]) == (40, 20, 20)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    """Each path's analysis of the same synthetic run, with the files it wrote read back."""
    out = {}
    for path in bench_analysis.PATHS:
        d = tmp_path_factory.mktemp(path)
        nev = synthetic.write_synthetic(d, N)
        out[path] = (d, nev, bench_analysis.analyse(d, path))
    return out


COMMON = ["breakdown flame graph (folded)", "heat maps and histogram"]


@pytest.mark.parametrize(
    "path, stages",
    [
        (
            "whole",
            ["imports", "statistics", "decode events.bin", "breakdown (+ events.parquet)", "events.parquet (rest)"]
            + COMMON,
        ),
        ("streaming", ["imports", "statistics", "events and breakdown (analyse_run.finish)"] + COMMON),
    ],
)
def test_every_stage_is_timed_and_the_breakdown_closes(analysed, path, stages):
    _, _, r = analysed[path]
    assert r["path"] == path
    assert list(r["times"]) == stages
    assert [s for s in bench_analysis.STAGES if s in stages] == stages  # the order the table prints
    assert all(wall > 0 and rss > 0 for wall, _, rss in r["times"].values())  # each stage does work
    assert r["peak_rss_bytes"] == max(v[2] for v in r["times"].values()) >= r["base_rss_bytes"] > 0
    # The synthetic round trips are made of known states, but for the time before the
    # peer's first event (part of the first iteration).
    assert 0 <= r["closure_residual_pct"] < 0.1


def test_both_paths_give_the_same_statistics(analysed):
    w, s = analysed["whole"][2], analysed["streaming"][2]
    assert w["breakdown_digest"] == s["breakdown_digest"]
    assert w["closure_residual_pct"] == s["closure_residual_pct"]


@pytest.mark.parametrize("path", bench_analysis.PATHS)
def test_files_written_alongside_hold_every_row(analysed, path):
    out, nev, _ = analysed[path]
    iters = pq.read_table(out / "iterations.parquet").to_pandas()
    ev, _, _ = events.load(out / "events.bin", iters, "rtt")
    assert len(ev) == nev == 12 * N
    assert pq.read_table(out / "events.parquet").to_pandas().equals(ev)
    frame, _ = breakdown.compute(
        iters,
        ev,
        Workload(
            workload="synthetic",
            metrics=["rtt"],
            threads=[
                Thread(role="measuring", pid=synthetic.A_TID, tid=synthetic.A_TID, cpu=-1),
                Thread(role="peer", pid=synthetic.B_TID, tid=synthetic.B_TID, cpu=-1),
            ],
        ),
    )
    assert pq.read_table(out / "breakdown.parquet").to_pandas().equals(frame)
    for name in ("breakdown.folded", "heatmap-latency.png", "heatmap-breakdown.png", "histogram-rtt.png"):
        assert (out / name).stat().st_size > 0


def test_an_unknown_path_is_refused(tmp_path):
    with pytest.raises(Exception, match="no analysis path 'half'"):
        bench_analysis.analyse(tmp_path, "half")


@pytest.mark.parametrize(
    "peak, base, measured, events, want",
    [
        (2 << 30, 0, 1000, 2000, 4 << 30),  # bytes per event, doubled
        (1200, 200, 10, 50, 200 + 100 * 50),  # what the imports hold is counted once
        (300, 300, 10, 10**9, 300),  # nothing above the imports: nothing more
    ],
)
def test_memory_estimate(peak, base, measured, events, want):
    r = {"peak_rss_bytes": peak, "base_rss_bytes": base}
    assert bench_analysis.memory_estimate(r, measured, events) == pytest.approx(want)


def _stages(**peaks):
    """An analyse() result with these stages' peaks (bytes), 0.25 GiB after the imports."""
    times = {"imports": [1.0, 1.0, GiB // 4]} | {k.replace("_", " "): [1.0, 1.0, v] for k, v in peaks.items()}
    return {"times": times, "peak_rss_bytes": max(v[2] for v in times.values()), "base_rss_bytes": GiB // 4}


@pytest.mark.parametrize(
    "known, events, want",
    [
        # one size: bytes per event above the imports' memory
        ([(1000, _stages(statistics=GiB // 4 + 1000 * 100))], 4000, {"statistics": GiB // 4 + 4000 * 100}),
        # two sizes: the line through them; a bounded stage stays where it is
        (
            [(1000, _stages(statistics=GiB, decode=2 * GiB)), (2000, _stages(statistics=GiB, decode=3 * GiB))],
            10_000,
            {"statistics": GiB, "decode": 11 * GiB},
        ),
        # a stage whose memory fell does not fall further
        ([(1000, _stages(statistics=2 * GiB)), (2000, _stages(statistics=GiB))], 10**9, {"statistics": GiB}),
        # a stage left out at the largest size grows with the events
        (
            [(1000, {**_stages(statistics=GiB), "skipped": {"heat maps and histogram": 4 * GiB}})],
            3000,
            {"statistics": GiB // 4 + 3 * (GiB - GiB // 4), "heat maps and histogram": 12 * GiB},
        ),
    ],
)
def test_peak_estimates(known, events, want):
    got = bench_analysis.peak_estimates(known, events)
    assert got == pytest.approx(want)


WHOLE_STAGES = ["statistics", "decode events.bin", "breakdown (+ events.parquet)", "events.parquet (rest)"]


def _fake_measure(calls):
    """analyse() as measured: the whole path's decode 0.2 MB per event, the report's stages
    0.19 MB per event, the streaming breakdown 1 GiB at any size."""

    def measure(d, path, report=True, limit=None):
        nev = 12 * int(d.name[1:])
        calls.append((nev // 12, path, report))
        stages = WHOLE_STAGES if path == "whole" else ["statistics", "events and breakdown (analyse_run.finish)"]
        peaks = {s: GiB for s in stages}
        if path == "whole":
            peaks["decode events.bin"] = GiB // 4 + 200_000 * nev
        if report:
            peaks.update({s: GiB // 4 + 190_000 * nev for s in bench_analysis.REPORT_STAGES})
        times = {"imports": [1.0, 1.0, GiB // 4]} | {s: [nev / 1e6, nev / 1e6, v] for s, v in peaks.items()}
        return {
            "times": times,
            "peak_rss_bytes": max(v[2] for v in times.values()),
            "base_rss_bytes": GiB // 4,
            "stage_peaks": True,
            "closure_residual_pct": 0.0,
            "breakdown_digest": "x",
        }

    return measure


def test_what_would_not_fit_is_left_out_and_said(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(bench, "_measure", _fake_measure(calls))
    monkeypatch.setattr(bench, "mem_available", lambda: 10 * GiB)  # 8 GiB usable
    monkeypatch.setattr(bench, "CALIBRATION", 1000)
    out = io.StringIO()
    args = argparse.Namespace(iterations=[4000, 2000], paths=["whole", "streaming"], dir=tmp_path, production=0)
    with redirect_stdout(out):
        rc = cli.run(args)
    text = out.getvalue()
    assert calls == [
        (1000, "whole", True),  # nothing smaller than 2000 to estimate from: 1000 first
        (1000, "streaming", True),
        (2000, "whole", True),  # 24 000 events: 4.8 GB, fits
        (2000, "streaming", True),
        # 48 000 events: the whole path's decode 9.19 GiB, the report 8.74 GiB: over 8 GiB
        (4000, "streaming", False),
    ]
    assert "whole path: skipped: decode events.bin needs ~9.19 GiB" in text
    assert "streaming path: without breakdown flame graph (folded) and heat maps and histogram" in text
    assert re.search(r"heat maps and histogram +not run: needs ~8\.74 GiB", text)
    assert re.search(r"^ +4,000 +48,000 .* skipped +\(needs ~9\.19 GiB\)", text, re.M)
    assert "OVER: heat maps and histogram not run: it needs ~8.74 GiB (estimated)" in text
    assert rc == 1
    assert list(tmp_path.iterdir()) == []


def test_an_analysis_over_the_memory_limit_is_stopped(tmp_path):
    synthetic.write_synthetic(tmp_path, 1000)
    r = bench._measure(tmp_path, "streaming", limit=1)  # any process holds more than a byte
    assert r["stopped_at"] > 1 and r["after_s"] < 5
    assert not (tmp_path / "breakdown.parquet").exists()


def test_a_stopped_streaming_path_misses_the_target(tmp_path, monkeypatch):
    def measure(d, path, report=True, limit=None):
        return {"stopped_at": 3 * GiB, "after_s": 2.0}

    monkeypatch.setattr(bench, "_measure", measure)
    monkeypatch.setattr(bench, "mem_available", lambda: 10 * GiB)
    out = io.StringIO()
    args = argparse.Namespace(iterations=[1000], paths=["whole", "streaming"], dir=tmp_path, production=0)
    with redirect_stdout(out):
        assert cli.run(args) == 1
    text = out.getvalue()
    assert "streaming path stopped after 2 s: it held 3.00 GiB, more than 80% of the 10.00 GiB available" in text
    assert re.search(r"^ +1,000 +12,000 +- .* skipped +\(stopped at 3\.00 GiB\)", text, re.M)
    assert "1,000 iterations / 12,000 events: OVER TARGET: OVER: the streaming path stopped at 3.00 GiB" in text
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "text, want",
    [
        ("whole", ["whole"]),
        ("streaming", ["streaming"]),
        ("streaming,whole", ["whole", "streaming"]),  # always measured in this order
        ("whole, streaming,whole", ["whole", "streaming"]),
        ("half", None),
        ("", None),
        ("whole,", ["whole"]),
    ],
)
def test_paths_option(text, want):
    if want is None:
        with pytest.raises(argparse.ArgumentTypeError):
            cli._paths(text)
    else:
        assert cli._paths(text) == want


def _result(wall, peak, stages=None):
    """An analyse() result with its wall time in one stage (and the imports, not counted)."""
    times = {"imports": [9.0, 9.0, int(0.2 * GiB)], "events and breakdown (analyse_run.finish)": [wall, wall, peak]}
    return {"times": {**times, **(stages or {})}, "peak_rss_bytes": peak, "stage_peaks": True}


@pytest.mark.parametrize(
    "rows, rc, said",
    [
        # within every target: peak, 20 s up to 5 M, no slower than whole, linear
        (
            [
                (1_000_000, 12_000_000, {"whole": _result(6.0, 2 * GiB), "streaming": _result(5.0, GiB)}, {}),
                (5_000_000, 60_000_000, {"streaming": _result(19.0, GiB)}, {"whole": "needs ~9.00 GiB"}),
            ],
            0,
            ["1,000,000 iterations / 12,000,000 events: within target", "skipped", "(needs ~9.00 GiB)"],
        ),
        # slower than the whole path
        (
            [(1_000_000, 12_000_000, {"whole": _result(5.0, 2 * GiB), "streaming": _result(6.0, GiB)}, {})],
            1,
            ["OVER TARGET", "OVER: streaming/whole wall 1.20"],
        ),
        # over the peak, in the stage that holds it
        (
            [(5_000_000, 60_000_000, {"streaming": _result(10.0, 2 * GiB)}, {})],
            1,
            ["OVER: peak 2.00 GiB in events and breakdown (analyse_run.finish)"],
        ),
        # over 20 s at 5 M iterations; above 5 M the time is held to linearity only
        (
            [(5_000_000, 60_000_000, {"streaming": _result(21.0, GiB)}, {})],
            1,
            ["OVER: wall 21.0 s (target <= 20 s)"],
        ),
        (
            [
                (5_000_000, 60_000_000, {"streaming": _result(18.0, GiB)}, {}),
                (50_000_000, 600_000_000, {"streaming": _result(180.0, GiB)}, {"whole": "needs ~90.00 GiB"}),
            ],
            0,
            ["50,000,000 iterations / 600,000,000 events: within target", "1.00 x 5,000,000 iterations'"],
        ),
        # not linear: 1.3 x the smallest size's ns per event
        (
            [
                (5_000_000, 60_000_000, {"streaming": _result(18.0, GiB)}, {}),
                (50_000_000, 600_000_000, {"streaming": _result(234.0, GiB)}, {}),
            ],
            1,
            ["OVER: 390 ns per event, 1.30 x"],
        ),
        # the whole path alone: no streaming figure to judge
        (
            [(1_000_000, 12_000_000, {"whole": _result(5.0, 2 * GiB)}, {})],
            0,
            ["no streaming figure"],
        ),
        # the trace path alone (the streaming one with the whole-trace view): the same peak target
        (
            [(50_000_000, 600_000_000, {"trace": _result(336.0, int(1.36 * GiB))}, {})],
            0,
            ["50,000,000 iterations / 600,000,000 events: within target: with the whole-trace view (trace) peak 1.36"],
        ),
        (
            [(1_000_000, 12_000_000, {"streaming": _result(5.0, GiB), "trace": _result(9.0, 2 * GiB)}, {})],
            1,
            ["OVER TARGET: peak 1.00 GiB", "OVER: with the whole-trace view (trace) peak 2.00 GiB"],
        ),
    ],
)
def test_verdicts(rows, rc, said):
    out = io.StringIO()
    with redirect_stdout(out):
        assert bench._verdicts(rows, ["whole", "streaming"]) == rc
    text = out.getvalue()
    for s in said:
        assert s in text, text


def test_too_little_disk_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.shutil, "disk_usage", lambda p: type("U", (), {"free": 10**9})())
    args = argparse.Namespace(iterations=[50_000_000], paths=["streaming"], dir=tmp_path, production=0)
    with pytest.raises(UsageError, match=r"50,000,000 iterations need about 40.0 GB in .* which has 1.0 GB free"):
        cli.run(args)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_the_synthetic_runs_are_removed_also_when_interrupted(tmp_path, monkeypatch, stop):
    seen = []

    def measure(d, path, report=True, limit=None):
        seen.append(sorted(p.name for p in d.iterdir()))
        raise stop()

    monkeypatch.setattr(bench, "_measure", measure)
    args = argparse.Namespace(iterations=[1000], paths=["streaming"], dir=tmp_path, production=0)
    with pytest.raises(stop), redirect_stdout(io.StringIO()):
        cli.run(args)
    assert seen == [["events.bin", "iterations.parquet", "trace.json", "workload.json"]]
    assert list(tmp_path.iterdir()) == []


def test_the_command_prints_the_three_paths_and_cleans_up(tmp_path):
    out = io.StringIO()
    args = argparse.Namespace(iterations=[1000], paths=list(bench_analysis.PATHS), dir=tmp_path, production=0)
    with redirect_stdout(out):
        rc = cli.run(args)
    text = out.getvalue()
    assert rc in (0, 1)  # the verdict is the machine's; what is printed is checked here
    assert list(tmp_path.iterdir()) == []
    table = text[text.index("1,000 iterations / 12,000 events: synthesised") :]
    assert re.search(r"^ +whole +streaming +trace *$", table, re.M)
    for stage in bench_analysis.STAGES[1:]:  # each stage's row, "-" where the path has none
        assert re.search(rf"^  {re.escape(stage)} +(-|[0-9.]+s) ", table, re.M), stage
    assert re.search(r"streaming / whole: wall [0-9.]+, CPU [0-9.]+, peak [0-9.]+; breakdown statistics the same", text)
    assert re.search(r"trace / streaming: wall [0-9.]+, peak [0-9.]+", text)
    assert re.search(r"with the whole-trace view \(trace\) peak [0-9.]+ GiB, wall [0-9.]+ s", text)
    assert re.search(r"^ +1,000 +12,000 +[0-9.]+s", text, re.M)  # the summary row
    assert re.search(r"^1,000 iterations / 12,000 events: (within target|OVER TARGET): peak ", text, re.M)


def test_a_failed_write_is_raised_after_the_block(tmp_path):
    def fail():
        raise OSError("disk full")

    done = []
    with pytest.raises(OSError, match="disk full"), written_alongside(fail):
        done.append(np.arange(3).sum())
    assert done == [3]


def test_the_block_error_wins_and_the_write_is_waited_for(tmp_path):
    finished = []

    def slow_write():
        import time

        time.sleep(0.2)
        finished.append(True)

    with pytest.raises(ValueError, match="breakdown failed"), written_alongside(slow_write):
        raise ValueError("breakdown failed")
    assert finished == [True]


def test_the_result_crosses_the_process_boundary(analysed):
    _, _, r = analysed["streaming"]
    assert json.loads(json.dumps(r)) == r
