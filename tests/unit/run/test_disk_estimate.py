"""Before a sweep or a suite: the disk its results will take, and a warning (not a refusal)
when that is more than is free; the bars of a sweep and of the analysis (run/progress.py)."""

import io

import pytest

from analysis.run import progress


@pytest.mark.parametrize(
    "iterations, traced, raw, twin, want",
    [
        (1_000_000, True, False, False, 90_000_000),  # ~90 B a traced iteration (pipe's figure)
        (1_000_000, False, False, False, 22_000_000),  # iterations.parquet only
        (1_000_000, False, True, False, 62_000_000),  # and iterations.bin kept: 40 B more
        (1_000_000, True, True, False, 514_000_000),  # and events.bin: 12 records x 32 B more
        (1_000_000, True, False, True, 112_000_000),  # the untraced twin's iterations
        (1_000_000, True, True, True, 576_000_000),  # all of it, the twin's iterations.bin too
        (0, True, True, True, 0),
    ],
)
def test_disk_estimate(iterations, traced, raw, twin, want):
    assert progress.disk_estimate(iterations, traced, raw, twin) == want


def test_announce_warns_when_it_does_not_fit(tmp_path):
    out = io.StringIO()
    progress.announce("sweep", 3, 300_000, 10**18, tmp_path, stream=out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("ipctrace sweep: 3 runs, 300,000 timed iterations, about 1,000,000,000,000 MB")
    assert "GB free" in lines[0]
    assert lines[1].startswith("ipctrace: warning: sweep may need more disk space than is free")
    out = io.StringIO()
    progress.announce("suite", 1, 1000, 100_000, tmp_path, stream=out)
    assert len(out.getvalue().splitlines()) == 1  # fits: no warning


def test_overall_bar():
    assert progress.overall(0, 4, 0.0).startswith("[" + "." * progress.WIDTH + "] 0/4 done")
    bar = progress.overall(2, 4, 0.0)
    assert bar.startswith("[" + "#" * (progress.WIDTH // 2)) and "2/4 done" in bar and "left" in bar


@pytest.mark.parametrize(
    "done, bar",
    [
        (None, ""),
        (0.0, "[" + "." * progress.WIDTH + "] 0% "),
        (0.5, "[" + "#" * (progress.WIDTH // 2)),
        (1.0, "] 100% "),
    ],
)
def test_analysis_stage_bar(done, bar):
    stages = progress.Stages("pipe: analysing", show=False)
    stages("the kernel events", done)
    line = stages.line()
    assert line.startswith("pipe: analysing: ") and bar in line and "the kernel events (" in line
    assert ("[" in line) == (done is not None)
