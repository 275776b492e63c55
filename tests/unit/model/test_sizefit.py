"""The copy cost's fit (model/sizefit.py) and the median's bootstrap replicates
(model/stats.py) on hand-made points."""

import numpy as np
import pandas as pd
import pytest

from analysis.errors import UsageError
from analysis.model import sizefit, stats


def test_theil_sen_recovers_an_exact_line():
    x = np.array([0.0, 100.0, 1000.0, 4000.0])
    slope, intercept = sizefit.theil_sen(x, 500 + 0.25 * x)
    assert slope == pytest.approx(0.25) and intercept == pytest.approx(500)


def test_theil_sen_ignores_one_wild_point():
    # Five sizes on the line 1000 + 0.5 x, one of them (x=300) measured 10x too slow.
    x = np.array([0.0, 100.0, 200.0, 300.0, 400.0])
    y = 1000 + 0.5 * x
    y[3] *= 10
    slope, intercept = sizefit.theil_sen(x, y)
    # Of the 10 pairwise slopes 6 do not touch the wild point and are exactly 0.5: the median is 0.5.
    assert slope == pytest.approx(0.5)
    assert intercept == pytest.approx(1000)


def test_theil_sen_runs_over_replicates_at_once():
    x = np.array([1.0, 2.0, 3.0])
    y = np.array([[1.0, 2.0, 3.0], [0.0, 2.0, 4.0]])
    slope, intercept = sizefit.theil_sen(x, y)
    assert slope.tolist() == [1.0, 2.0] and intercept.tolist() == [0.0, -2.0]


def test_median_bootstrap_matches_resampling():
    # The order-statistic shortcut must give the distribution that resampling gives.
    rng = np.random.default_rng(11)
    y = rng.exponential(1000, 101)
    fast = stats.median_replicates(y, 20000, np.random.default_rng(1))
    slow = np.median(rng.choice(y, size=(20000, len(y)), replace=True), axis=1)
    for q in (2.5, 25, 50, 75, 97.5):
        assert np.percentile(fast, q) == pytest.approx(np.percentile(slow, q), rel=0.03)
    assert set(np.unique(fast)) <= set(y)


def test_fit_interval_covers_the_true_slope():
    rng = np.random.default_rng(5)
    sizes = np.array([64, 512, 4096, 16384, 65536], dtype=float)
    points = pd.DataFrame(
        {
            "size": sizes,
            "x": [np.full(2000, s) for s in sizes],
            "y": [2000 + 0.12 * s + rng.normal(0, 200, 2000) for s in sizes],
        }
    )
    f = sizefit.fit(points, reps=500)
    lo, hi = f["ns_per_byte_ci95"]
    assert lo < 0.12 < hi and hi - lo < 0.01
    assert f["fixed_ns_ci95"][0] < 2000 < f["fixed_ns_ci95"][1]


def test_fit_interval_widens_when_the_sizes_disagree():
    # Medians 1000, 1150, 1200 ns at 0, 1000, 2000 bytes: the pairs' slopes are 0.15, 0.1 and 0.05
    # ns/byte. Within-size noise is tiny, so only resampling the sizes can show that disagreement.
    rng = np.random.default_rng(9)
    points = pd.DataFrame(
        {
            "size": [0, 1, 2],
            "x": [np.full(500, v) for v in (0.0, 1000.0, 2000.0)],
            "y": [m + rng.normal(0, 1, 500) for m in (1000.0, 1150.0, 1200.0)],
        }
    )
    f = sizefit.fit(points, reps=2000)
    assert f["ns_per_byte"] == pytest.approx(0.1, abs=0.002)
    lo, hi = f["ns_per_byte_ci95"]
    assert lo < 0.06 and hi > 0.14


def test_theil_sen_with_x_per_replicate():
    x = np.array([[1.0, 2.0, 2.0], [3.0, 3.0, 3.0]])  # the second row has no pair of different x
    slope, intercept = sizefit.theil_sen(x, np.array([[2.0, 4.0, 4.0], [1.0, 1.0, 1.0]]))
    assert slope[0] == 2.0 and intercept[0] == 0.0 and np.isnan(slope[1])


def test_fit_refuses_sizes_that_moved_the_same_bytes():
    points = pd.DataFrame(
        {"size": [1, 2], "x": [np.full(10, 4.0), np.full(10, 4.0)], "y": [np.arange(10.0), np.arange(10.0)]}
    )
    with pytest.raises(UsageError, match="same number of bytes"):
        sizefit.fit(points)


def test_a_line_that_would_slope_down_is_flat_and_nothing_goes_below_zero():
    # Three sizes whose in-kernel time falls as the bytes grow (noise, not physics): Theil-Sen
    # gives slope -0.01 ns/byte; copying takes no negative time, so the line is flat at the median
    # time, 1000 ns, and every replicate's slope and intercept are >= 0.
    rng = np.random.default_rng(2)
    points = pd.DataFrame(
        {
            "size": [64, 4096, 65536],
            "x": [np.full(200, 64.0), np.full(200, 4096.0), np.full(200, 65536.0)],
            "y": [rng.normal(m, 5, 200) for m in (1010.0, 1000.0, 350.0)],
        }
    )
    f = sizefit.fit(points, reps=500)
    assert f["ns_per_byte"] == 0.0 and f["fixed_ns"] == pytest.approx(1000, abs=2)
    assert f["ns_per_byte_ci95"][0] >= 0 and f["fixed_ns_ci95"][0] >= 0
