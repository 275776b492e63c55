"""analysis.model.stats against figures worked out by hand and against scipy/numpy."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from analysis.model import stats


def frame(values, runs=None, metric="m"):
    values = np.asarray(values)
    return pd.DataFrame(
        {
            "latency_ns": values,
            "metric": metric,
            "run": np.zeros(len(values), int) if runs is None else np.asarray(runs),
        }
    )


def one(values, runs=None):
    return stats.describe(frame(values, runs)).loc["m"]


# Hand-computed: x = 1..10, runs {1..5} and {6..10}.
#   mean 5.5; std = sqrt(sum((x-5.5)^2)/9) = sqrt(82.5/9) = 3.0276504
#   p90: position 0.9*9 = 8.1 -> 9 + 0.1*(10-9) = 9.1; p99: 8.91 -> 9.91; p999: 8.991 -> 9.991
#   ci95_mean: t(0.975, 9) = 2.2621572; half = 2.2621572 * 3.0276504 / sqrt(10) = 2.1658506
#   ci95_median: P(B(10,.5) <= 1) = 11/1024 = 0.0107 <= 0.025 < P(<= 2) = 56/1024 -> j = 1: [x(2), x(9)] = [2, 9]
#   runs: two (means 3 and 8): no interval below MIN_RUNS = 3 (t(0.975, 1) = 12.7 would give
#   5.5 +- 31.8, mostly below zero)
HAND = [
    (
        "1..10",
        list(range(1, 11)),
        [0] * 5 + [1] * 5,
        {
            "n": 10,
            "mean": 5.5,
            "std": 3.0276504,
            "min": 1,
            "max": 10,
            "median": 5.5,
            "p90": 9.1,
            "p95": 9.55,
            "p99": 9.91,
            "p999": 9.991,
            "ci95_mean_lo": 5.5 - 2.1658506,
            "ci95_mean_hi": 5.5 + 2.1658506,
            "ci95_median_lo": 2,
            "ci95_median_hi": 9,
            "runs": 2,
            "runs_ci95_mean_lo": math.nan,
            "runs_ci95_mean_hi": math.nan,
        },
    ),
    # Three runs of one value each, means 1, 2, 10: the t interval 4.33 +- 4.3026527 * 4.9328829
    # / sqrt(3) reaches -7.92, so it is taken on the log scale: logs 0, 0.6931472, 2.3025851, mean
    # 0.9985774, sd 1.1812875, half 4.3026527 * 1.1812875 / sqrt(3) = 2.9344809, exp(0.9985774 -+
    # 2.9344809) = [0.1442938, 51.0629074].
    (
        "three runs",
        [1, 2, 10],
        [0, 1, 2],
        {"runs": 3, "runs_ci95_mean_lo": 0.1442938, "runs_ci95_mean_hi": 51.0629074},
    ),
    # n = 6 is the smallest with a 95 % median interval: P(B(6,.5) = 0) = 1/64 -> [x(1), x(6)]
    (
        "six",
        [10, 20, 30, 40, 50, 60],
        None,
        {
            "n": 6,
            "mean": 35,
            "median": 35,
            "ci95_median_lo": 10,
            "ci95_median_hi": 60,
            "runs": 1,
            "runs_ci95_mean_lo": math.nan,
            "runs_ci95_mean_hi": math.nan,
        },
    ),
    # below 6 values no order-statistics interval reaches 95 %
    (
        "five",
        [5, 1, 4, 2, 3],
        None,
        {"n": 5, "median": 3, "ci95_median_lo": math.nan, "ci95_median_hi": math.nan, "std": math.sqrt(2.5)},
    ),
    # one value: no spread, no interval
    ("single", [7], None, {"n": 1, "mean": 7, "median": 7, "std": math.nan, "ci95_mean_lo": math.nan, "p99": 7}),
    # constant: zero-width intervals
    (
        "constant",
        [3] * 8,
        [0, 0, 0, 0, 1, 1, 1, 1],
        {"std": 0, "ci95_mean_lo": 3, "ci95_mean_hi": 3, "runs_ci95_mean_lo": math.nan, "ci95_median_hi": 3},
    ),
]


@pytest.mark.parametrize("name,values,runs,want", HAND, ids=[h[0] for h in HAND])
def test_hand_computed(name, values, runs, want):
    got = one(values, runs)
    for key, value in want.items():
        if math.isnan(value):
            assert math.isnan(got[key]), key
        else:
            assert got[key] == pytest.approx(value, rel=1e-6, abs=1e-9), key


def test_groups_are_independent():
    df = pd.concat([frame([1, 2, 3], metric="a"), frame([100, 200, 300, 400], metric="b")])
    t = stats.describe(df)
    assert list(t.index) == ["a", "b"]
    assert t.loc["a", "mean"] == 2 and t.loc["b", "mean"] == 250
    assert t.loc["a", "n"] == 3 and t.loc["b", "max"] == 400


def test_empty_frame_has_no_rows():
    t = stats.describe(frame([]))
    assert len(t) == 0 and list(t.columns) == stats.COLUMNS


@pytest.mark.parametrize("n", [6, 7, 11, 50, 333, 1000, 4096])
def test_against_scipy_and_numpy(n):
    rng = np.random.default_rng(n)
    x = rng.lognormal(8, 0.6, n).round()
    runs = np.arange(n) % 3
    got = one(x, runs)
    assert got["std"] == pytest.approx(np.std(x, ddof=1))
    for key, q in stats.QUANTILES.items():
        assert got[key] == pytest.approx(np.quantile(x, q))
    lo, hi = sps.t.interval(0.95, n - 1, loc=x.mean(), scale=sps.sem(x))
    assert (got["ci95_mean_lo"], got["ci95_mean_hi"]) == pytest.approx((lo, hi))
    ci = sps.quantile_test(x, q=np.median(x), p=0.5).confidence_interval(0.95)
    assert (got["ci95_median_lo"], got["ci95_median_hi"]) == (ci.low, ci.high)
    m = np.array([x[runs == r].mean() for r in range(3)])
    lo, hi = sps.t.interval(0.95, 2, loc=m.mean(), scale=sps.sem(m))
    assert (got["runs_ci95_mean_lo"], got["runs_ci95_mean_hi"]) == pytest.approx((lo, hi))


def test_median_ranks_match_the_binomial_for_every_n():
    n = np.arange(0, 600)
    lo, hi = stats.median_ci_ranks(n)
    for k in range(1, 600):
        below = np.nonzero(sps.binom.cdf(np.arange(k + 1), k, 0.5) <= 0.025)[0]
        j = below.max() if len(below) else -1
        assert lo[k] == j, k
        assert hi[k] == (k - 1 - j if j >= 0 else -1), k
    assert lo[0] == -1


def test_median_ranks_for_large_n():
    n = np.array([10**5, 10**7 + 1])
    lo, _ = stats.median_ci_ranks(n)
    assert list(lo) == list(sps.binom.ppf(0.025, n, 0.5).astype(int) - 1)


IQR = [
    # q1 = 2, q3 = 4, IQR 2: keep [-1, 7]
    ("one high outlier", [1, 2, 3, 4, 100], [True, True, True, True, False]),
    ("both sides", [-50, 10, 11, 12, 13, 14, 90], [False, True, True, True, True, True, False]),
    ("nothing to remove", [5, 6, 7], [True, True, True]),
    # bounds are inclusive: q1 = 2, q3 = 4 -> 7 stays
    ("on the fence", [1, 2, 3, 4, 7], [True, True, True, True, True]),
]


@pytest.mark.parametrize("name,values,keep", IQR, ids=[c[0] for c in IQR])
def test_iqr_mask(name, values, keep):
    assert list(stats.iqr_mask(frame(values))) == keep


def test_iqr_is_per_group():
    df = pd.concat([frame([1, 2, 3, 4, 100], metric="a"), frame([100, 101, 102, 103, 104], metric="b")])
    assert stats.iqr_mask(df).tolist() == [True] * 4 + [False] + [True] * 5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 10**9), min_size=6, max_size=300))
def test_order_of_figures(values):
    got = one(values)
    assert got["min"] <= got["ci95_median_lo"] <= got["median"] <= got["ci95_median_hi"] <= got["max"]
    assert got["median"] <= got["p90"] <= got["p95"] <= got["p99"] <= got["p999"] <= got["max"]
    # an interval, where there is one, holds the mean (none: fewer than 10 values whose t interval
    # would reach below zero)
    if not np.isnan(got["ci95_mean_lo"]):
        assert got["ci95_mean_lo"] <= got["mean"] * (1 + 1e-12) and got["mean"] <= got["ci95_mean_hi"] * (1 + 1e-12)


def test_a_mean_whose_t_interval_reaches_below_zero_gets_the_bootstraps():
    # 99 zeros and one 1000 (a component that is mostly nothing): mean 10, sd 100, the t interval
    # 10 +- 1.984 * 100 / 10 = [-9.8, 29.8]. Its Poisson-bootstrap means are 1000 k / 100 for
    # k ~ Poisson(1): the 2.5 % and 97.5 % points are 0 and 30 (k = 0 and 3).
    t = stats.describe(pd.DataFrame({"metric": "c", "run": 0, "latency_ns": [0.0] * 99 + [1000.0]}))
    assert (t.loc["c", "ci95_mean_lo"], t.loc["c", "ci95_mean_hi"]) == (0.0, 30.0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1e7, allow_nan=False), min_size=2, max_size=300),
    st.integers(1, 6),
)
def test_no_interval_of_non_negative_values_reaches_below_zero(values, nruns):
    df = pd.DataFrame({"metric": "m", "latency_ns": values, "run": [i % nruns for i in range(len(values))]})
    row = stats.describe(df).loc["m"]
    for k in ("ci95_mean_lo", "ci95_median_lo", "runs_ci95_mean_lo"):
        assert not row[k] < 0, (k, row[k])


VALUE_COUNTS = [
    ("one value", [[5]]),
    ("ties across parts", [[3, 3, 1], [3, 9], [1]]),
    ("wide", [[0, 10**9], [17, 17, 17, 2**40]]),
    ("negative, counted and sorted", [[-5, -5, 3], [-70000, 2], list(range(-3, 90000, 7))]),
]


@pytest.mark.parametrize("x", [[7], [5, 5, 5], [-3, 4, 4, 65535], [0, 65536], [2, 10**6, 2]])
def test_value_counts_of_a_narrow_range_are_those_of_a_sort(x):
    # a range narrower than 65536 or 4 values each is counted by bincount, any other sorted
    vc = stats.ValueCounts()
    vc.add(x)
    v, c = np.unique(x, return_counts=True)
    assert vc.values.tolist() == v.tolist() and vc.counts.tolist() == c.tolist()


@pytest.mark.parametrize("name,parts", VALUE_COUNTS, ids=[c[0] for c in VALUE_COUNTS])
def test_value_counts_give_numpys_percentiles(name, parts):
    vc = stats.ValueCounts()
    for p in parts:
        vc.add(p)
    x = np.concatenate([np.asarray(p, np.float64) for p in parts])
    for pct in (0, 1, 25, 50, 99, 99.9, 100):
        assert vc.percentile(pct) == np.percentile(x, pct), pct
    assert vc.n == len(x) and vc.mean() == pytest.approx(x.mean(), rel=1e-15)
    assert vc.light() == {"n": len(x), "mean": vc.mean(), "median": np.percentile(x, 50), "p99": np.percentile(x, 99)}


@settings(max_examples=80, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2000), min_size=0, max_size=40), min_size=1, max_size=5))
def test_value_counts_any_parts(parts):
    vc = stats.ValueCounts()
    for p in parts:
        vc.add(p)
    x = np.array([v for p in parts for v in p], np.float64)
    if not len(x):
        assert vc.light() is None and np.isnan(vc.percentile(50))
        return
    for pct in (50, 99):
        assert vc.percentile(pct) == np.percentile(x, pct)


def test_a_derived_group_is_its_source_times_the_factor():
    rng = np.random.default_rng(3)
    x = rng.integers(100, 10**6, 500)
    runs = np.arange(500) % 4
    table, _ = stats.describe_groups(x, [("rtt", slice(None), 1.0), ("one_way", slice(None), 0.5)], runs)
    want = one(x * 0.5, runs)
    for key in stats.COLUMNS:
        assert table.loc["one_way", key] == pytest.approx(want[key], rel=1e-12, nan_ok=True), key
        if key not in ("runs_ci95_mean_lo", "runs_ci95_mean_hi"):  # the log scale's interval is not linear
            assert table.loc["one_way", key] == pytest.approx(
                table.loc["rtt", key] * (0.5 if key not in ("n", "runs") else 1), rel=1e-12, nan_ok=True
            ), key


def test_iqr_groups_are_the_statistics_of_the_values_inside_the_fences():
    x = np.array([1, 2, 3, 4, 100, 5, 6, -80, 7, 8], np.int64)
    runs = np.zeros(len(x), int)
    mask = np.array([True] * 5 + [False] * 5)
    table, filtered = stats.describe_groups(x, [("a", mask, 1.0), ("b", ~mask, 1.0)], runs, iqr=True)
    df = frame(x, runs, metric=np.where(mask, "a", "b"))
    keep = stats.iqr_mask(df)
    want = stats.describe(df[keep])
    for g in ("a", "b"):
        assert filtered.loc[g, "n"] == want.loc[g, "n"] and filtered.loc[g, "max"] == want.loc[g, "max"]
    assert filtered.loc["a", "max"] == 4 and filtered.loc["b", "min"] == 5
    assert table.loc["a", "n"] == 5 and table.loc["b", "min"] == -80


# values_at_ranks: x sorted by hand, the values at the ranks read off it. `bits` narrows the bins
# so that more passes refine them (bits=1: two bins a pass).
I64 = np.iinfo(np.int64)
AT_RANKS = [
    ("one value", [5], [0], 16, [5]),
    ("ties and negatives", [3, -1, 3, 2, -1], [0, 1, 2, 3, 4], 16, [-1, -1, 2, 3, 3]),
    ("one distinct value", [-7] * 6, [0, 3, 5], 16, [-7, -7, -7]),
    # sorted 1 2 2 3 1e12+5: the outlier puts the rest in one bin, refined by the next passes
    ("an outlier 1e12 away", [1, 2, 3, 10**12 + 5, 2], [0, 2, 3, 4], 16, [1, 2, 3, 10**12 + 5]),
    ("the whole int64 range", [I64.max, I64.min, 0, -1], [0, 1, 2, 3], 16, [I64.min, -1, 0, I64.max]),
    # sorted -100 0 50 50 100
    ("two bins a pass", [100, -100, 50, 50, 0], [2, 3, 4, 0], 1, [50, 50, 100, -100]),
    ("ranks in any order, repeated", [9, 8, 7], [2, 0, 2], 16, [9, 7, 9]),
    ("no ranks", [1, 2], [], 16, []),
    ("floats: partitioned", [2.5, -1.0, 0.5], [1, 2], 16, [0.5, 2.5]),
]


@pytest.mark.parametrize("name,x,ranks,bits,want", AT_RANKS, ids=[c[0] for c in AT_RANKS])
def test_values_at_ranks(name, x, ranks, bits, want):
    x = np.array(x)
    got = stats.values_at_ranks(x, ranks, block=2, bits=bits)
    assert got.tolist() == want and got.dtype == x.dtype


@pytest.mark.parametrize("ranks", [[-1], [3]])
def test_values_at_ranks_outside_the_values(ranks):
    with pytest.raises(ValueError):
        stats.values_at_ranks(np.array([1, 2, 3]), ranks)


def random_arrays():
    """Seeded integer arrays of several shapes: ties, a long tail with an outlier, the whole
    int64 range, a narrow dtype."""
    rng = np.random.default_rng(42)
    yield "few values", rng.integers(-3, 3, 5000)
    tail = rng.lognormal(9, 1.5, 20000).astype(np.int64)
    tail[123] = 10**12
    yield "long tail and an outlier", tail
    yield "int64 range", rng.integers(I64.min, I64.max, 3000, endpoint=True)
    yield "int32", rng.integers(-(2**31), 2**31 - 1, 3000).astype(np.int32)
    yield "two values", np.where(rng.random(999) < 0.01, 10**15, -(10**15))


@pytest.mark.parametrize("name,x", list(random_arrays()), ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("block,bits", [(1 << 16, 16), (777, 16), (100, 3)])
def test_values_at_ranks_is_what_partition_gives(name, x, block, bits):
    ranks = [0, 1, len(x) // 10, len(x) // 2, len(x) // 2 + 1, len(x) * 99 // 100, len(x) - 2, len(x) - 1]
    assert np.array_equal(stats.values_at_ranks(x, ranks, block, bits), np.partition(x, np.unique(ranks))[ranks])


# group_sum: NaN count as 0; sums of fewer than 8 values are sequential (numpy's pairwise sum).
GROUP_SUMS = [
    ("NaN as 0", [1.0, np.nan, 2.0, 4.0], [0, 0, 1, 0], 0, 5.0),
    ("one of the group", [1.0, np.nan, 2.0, 4.0], [0, 0, 1, 0], 1, 2.0),
    ("none of the group", [1.0, 2.0], [0, 0], 3, 0.0),
    ("all NaN", [np.nan, np.nan], [0, 0], 0, 0.0),
    ("integers", [3, -5, 7], [1, 1, 1], 1, 5.0),
    # in order: 1e16 + 1 rounds to 1e16, - 1e16 gives 0, + 1 gives 1
    ("in order", [1e16, 1.0, -1e16, 1.0], [0, 0, 0, 0], 0, 1.0),
]


@pytest.mark.parametrize("name,x,groups,group,want", GROUP_SUMS, ids=[c[0] for c in GROUP_SUMS])
def test_group_sum(name, x, groups, group, want):
    assert stats.group_sum(np.array(x), np.array(groups, np.int8), group, leaf=2) == want


@pytest.mark.parametrize("n", [0, 7, 128, 129, 1000, 65536, 65537, 300001])
@pytest.mark.parametrize("leaf", [128, 1000, 1 << 16])
def test_group_sum_is_pandas_sum_bit_for_bit(n, leaf):
    """pandas' sum of the group's values is the reference: pairwise summation, whose result
    depends on where the halves fall (values of many magnitudes make every rounding count)."""
    rng = np.random.default_rng(n + leaf)
    x = rng.standard_normal(n) * 10.0 ** rng.integers(0, 15, n)
    x[rng.random(n) < 0.05] = np.nan
    groups = rng.integers(0, 3, n).astype(np.int8)
    groups[: n // 2] = 1  # long runs of one group beside mixed ones
    for g in range(3):
        want = pd.Series(x[groups == g]).sum(skipna=True)
        assert stats.group_sum(x, groups, g, leaf) == want, g
