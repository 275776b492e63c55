"""bench-analysis: its analysis is the real one, and the files written alongside the
breakdown (events.parquet, breakdown.parquet) are whole when it returns."""

import numpy as np
import pyarrow.parquet as pq
import pytest

from analysis.model import breakdown
from analysis.run import bench_analysis
from analysis.store import events
from analysis.store.results import written_alongside

N = 3000


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    nev = bench_analysis.write_synthetic(out, N)
    return out, nev, bench_analysis.analyse(out)


def test_every_stage_is_timed_and_the_breakdown_closes(analysed):
    _, _, r = analysed
    assert list(r["times"]) == [
        "imports",
        "statistics",
        "decode events.bin",
        "breakdown (+ events.parquet)",
        "events.parquet (rest)",
        "breakdown flame graph (folded)",
        "heat maps and histogram",
    ]
    assert all(wall > 0 and rss > 0 for wall, _, rss in r["times"].values())  # each stage does work
    # The synthetic round trips are made of known states, but for the time before the
    # peer's first event (part of the first iteration).
    assert 0 <= r["closure_residual_pct"] < 0.1


def test_files_written_alongside_hold_every_row(analysed):
    out, nev, _ = analysed
    iters = pq.read_table(out / "iterations.parquet").to_pandas()
    ev, _, _ = events.load(out / "events.bin", iters, "rtt")
    assert len(ev) == nev == 12 * N
    assert pq.read_table(out / "events.parquet").to_pandas().equals(ev)
    frame, _ = breakdown.compute(
        iters,
        ev,
        {
            "metrics": ["rtt"],
            "threads": [
                {"role": "measuring", "pid": bench_analysis.A_TID, "tid": bench_analysis.A_TID},
                {"role": "peer", "pid": bench_analysis.B_TID, "tid": bench_analysis.B_TID},
            ],
        },
    )
    assert pq.read_table(out / "breakdown.parquet").to_pandas().equals(frame)
    for name in ("breakdown.folded", "heatmap-latency.png", "heatmap-breakdown.png", "histogram-rtt.png"):
        assert (out / name).stat().st_size > 0


def test_a_failed_write_is_raised_after_the_block(tmp_path):
    def fail():
        raise OSError("disk full")

    done = []
    with pytest.raises(OSError, match="disk full"):
        with written_alongside(fail):
            done.append(np.arange(3).sum())
    assert done == [3]


def test_the_block_error_wins_and_the_write_is_waited_for(tmp_path):
    finished = []

    def slow_write():
        import time

        time.sleep(0.2)
        finished.append(True)

    with pytest.raises(ValueError, match="breakdown failed"):
        with written_alongside(slow_write):
            raise ValueError("breakdown failed")
    assert finished == [True]
