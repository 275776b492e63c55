"""Descriptive statistics of per-iteration latencies, one row per group.

Every function works on whole columns (groupby, sort, searchsorted); none loops
over rows. Conventions, so that a figure can be reproduced by hand:
- std is the sample standard deviation (ddof=1);
- quantiles interpolate linearly between order statistics (numpy's default);
- ci95_mean is the t interval mean +- t(0.975, n-1) * std / sqrt(n), except where that
  reaches below zero for values that cannot be negative (a heavy tail, a component that is
  mostly zero): there it is the percentile interval of POISSON_REPLICATES Poisson-bootstrap
  means (seeded), which stays within what was measured, and none below MIN_BOOTSTRAP values;
- ci95_median is the distribution-free interval [x(j+1), x(n-j)] of order
  statistics with j the largest count for which P(Binomial(n, 1/2) <= j) <= 0.025,
  so its coverage is at least 95 %; it does not exist below n = 6;
- runs_ci95_mean is the t interval over the means of the runs: it shows how
  much a figure moves from run to run, the way repeated measurements did; none below
  MIN_RUNS runs (two means give an interval of t(0.975, 1) = 12.7 standard errors, mostly
  below zero), and on the log scale (the geometric mean's interval, exp(mean(log m) +-
  t * std(log m) / sqrt(k))) where the plain one would reach below zero for positive means;
- iqr_mask keeps x with q1 - 1.5 IQR <= x <= q3 + 1.5 IQR within each group.
A statistic that does not exist (too few values) is NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import special
from scipy import stats as sps

if TYPE_CHECKING:
    import numpy.typing as npt

QUANTILES = {"median": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}
POISSON_REPLICATES = 2000
MIN_BOOTSTRAP = 10  # fewer values: no bootstrap interval
MIN_RUNS = 3
COLUMNS = [
    "n",
    "mean",
    "std",
    "min",
    "max",
    *QUANTILES,
    "ci95_mean_lo",
    "ci95_mean_hi",
    "ci95_median_lo",
    "ci95_median_hi",
    "runs",
    "runs_ci95_mean_lo",
    "runs_ci95_mean_hi",
]


def t_interval(
    mean: npt.ArrayLike, std: npt.ArrayLike, n: npt.ArrayLike, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided t interval of the mean; arrays in, (lo, hi) arrays out, NaN where n < 2."""
    mean, std, n = (np.asarray(a, dtype=float) for a in (mean, std, n))
    with np.errstate(invalid="ignore", divide="ignore"):
        half = special.stdtrit(n - 1, 0.5 + level / 2) * std / np.sqrt(n)
    half = np.where(n >= 2, half, np.nan)
    return mean - half, mean + half


def median_ci_ranks(n: npt.ArrayLike, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """0-based ranks (lo, hi) of the order statistics bounding the median, -1 where none exists."""
    n = np.asarray(n, dtype=np.int64)
    tail = (1 - level) / 2
    nf = np.maximum(n, 1).astype(np.float64)
    # bdtrik inverts the binomial cdf continuously; the floor is within one of j.
    with np.errstate(invalid="ignore"):
        j = np.floor(np.nan_to_num(special.bdtrik(tail, nf, 0.5), nan=-1.0)).astype(np.int64)
    nn = np.maximum(n, 1)
    j = np.where(special.bdtr(j + 1, nn, 0.5) <= tail, j + 1, j)
    j = np.where((j >= 0) & (special.bdtr(np.maximum(j, 0), nn, 0.5) > tail), j - 1, j)
    ok = (j >= 0) & (n > 0)
    return np.where(ok, j, -1), np.where(ok, n - 1 - j, -1)


def _sorted_by_group(x: np.ndarray, codes: np.ndarray, ngroups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x sorted within each group, the groups one after another in code order, and each
    group's first place. One np.sort per group: far cheaper than a lexsort of (code, x)."""
    sizes = np.bincount(codes, minlength=ngroups)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    xs = x.copy() if ngroups == 1 else x[np.argsort(codes, kind="stable")]
    for lo, size in zip(starts, sizes):
        xs[lo : lo + size].sort()  # NaN last, as pandas leaves it out at the end
    return xs, sizes, starts


def _group_quantiles(xs: np.ndarray, valid: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """QUANTILES of each group from its sorted values (NaN last; valid: how many are not),
    by pandas' linear interpolation, operation for operation: the value at position
    q (valid - 1), plus the next one's difference times the fraction where not whole."""
    q = np.array(list(QUANTILES.values()))[None, :]
    pos = q * (valid[:, None] - 1).astype(np.float64)
    idx = pos.astype(np.int64)
    frac = pos % 1
    base = starts[:, None]
    val = xs[np.clip(base + idx, 0, max(len(xs) - 1, 0))]
    nxt = xs[np.clip(base + idx + 1, 0, max(len(xs) - 1, 0))]
    with np.errstate(invalid="ignore"):
        out = np.where(frac == 0.0, val, val + (nxt - val) * frac)
    return np.where(valid[:, None] > 0, out, np.nan)


def describe(df: pd.DataFrame, value: str = "latency_ns", by: str = "metric", run: str = "run") -> pd.DataFrame:
    """Statistics of df[value] per group of df[by]; returns a DataFrame indexed by group.

    df needs the columns value, by and run (run index of each row).
    """
    return describe_columns(df, [value], by, run)[value]


def describe_columns(
    df: pd.DataFrame, values: Sequence[str], by: str = "metric", run: str = "run"
) -> dict[str, pd.DataFrame]:
    """describe() of each of several value columns: {value: DataFrame indexed by group}.
    The groups and the runs are worked out once for all of them. Each column is
    aggregated apart: pandas' mean of several columns at once can differ in the last
    bit from that of each one."""
    if len(df) == 0:
        return {v: pd.DataFrame(columns=COLUMNS, index=pd.Index([], name=by), dtype=np.float64) for v in values}
    key = df[by]
    codes, groups = pd.factorize(key, sort=False)
    # Mean of each (group, run), keyed by one integer: a groupby on two keys builds a
    # MultiIndex and costs several times as much. Same rows in the same order, so the
    # same sums.
    run_codes, run_names = pd.factorize(df[run], sort=False)
    nruns = max(len(run_names), 1)
    pair = codes.astype(np.int64) * nruns + run_codes
    lo, hi = median_ci_ranks(np.bincount(codes, minlength=len(groups)))
    tables = {}
    for v in values:
        x = df[v].astype(np.float64)
        g = x.groupby(key, observed=True, sort=False)
        out = pd.DataFrame({"n": g.size(), "mean": g.mean(), "std": g.std(ddof=1), "min": g.min(), "max": g.max()})
        out["ci95_mean_lo"], out["ci95_mean_hi"] = t_interval(out["mean"], out["std"], out["n"])
        _nonnegative_means(out, xv := x.to_numpy(), codes, groups)
        index = pd.Index(groups, name=out.index.name)

        # Order statistics of each group (quantiles, median interval): sort each group once.
        xs, sizes, starts = _sorted_by_group(xv, codes, len(groups))
        valid = sizes - np.bincount(codes, weights=np.isnan(xv), minlength=len(groups)).astype(np.int64)
        order_stats = pd.DataFrame(_group_quantiles(xs, valid, starts), columns=list(QUANTILES), index=index)
        ok = lo >= 0
        order_stats["ci95_median_lo"] = np.where(ok, xs[np.where(ok, starts + lo, 0)], np.nan)
        order_stats["ci95_median_hi"] = np.where(ok, xs[np.where(ok, starts + hi, 0)], np.nan)
        del xs
        out = out.join(order_stats)

        run_means = x.groupby(pair, sort=False).mean()
        runs = runs_interval(run_means, run_means.index.to_numpy() // nruns)
        runs.index = pd.Index(groups[runs.index.to_numpy()], name=out.index.name)
        out = out.join(runs)
        out["n"] = out["n"].astype(np.int64)
        out["runs"] = out["runs"].astype(np.int64)
        tables[v] = out[COLUMNS]
    return tables


def poisson_bootstrap_means(x: np.ndarray, reps: int = POISSON_REPLICATES, seed: int = 1) -> np.ndarray:
    """Bootstrap replicates of the mean of x, each value drawn Poisson(1) times (the bootstrap
    of a large sample, without resampling index arrays): only the values that are not zero
    cost anything, so a component that is mostly zero is quick whatever n is."""
    x = np.asarray(x, np.float64)
    nz = x[x != 0]
    rng = np.random.default_rng(seed)
    out = np.empty(reps)
    step = max(1, int(2e7 // max(len(nz), 1)))  # replicates per block: ~20 M draws at a time
    for a in range(0, reps, step):
        b = min(a + step, reps)
        w = rng.poisson(1.0, size=(b - a, len(nz)))
        out[a:b] = (w @ nz) / len(x)
    return out


def _nonnegative_means(out: pd.DataFrame, x: np.ndarray, codes: np.ndarray, groups: pd.Index) -> None:
    """ci95_mean of each group of non-negative values whose t interval reaches below zero:
    the percentile interval of Poisson-bootstrap means instead (in place)."""
    low = out["ci95_mean_lo"].to_numpy() < 0
    if not low.any():
        return
    position = {g: k for k, g in enumerate(groups)}
    for k, name in enumerate(out.index):
        if not low[k]:
            continue
        values = x[codes == position[name]]
        values = values[~np.isnan(values)]
        if values.min() < 0:
            continue
        if len(values) < MIN_BOOTSTRAP:
            # too few for a bootstrap to mean anything, and the t interval goes below zero
            out.iloc[k, out.columns.get_loc("ci95_mean_lo")] = np.nan
            out.iloc[k, out.columns.get_loc("ci95_mean_hi")] = np.nan
            continue
        lo, hi = np.percentile(poisson_bootstrap_means(values), [2.5, 97.5])
        out.iloc[k, out.columns.get_loc("ci95_mean_lo")] = lo
        out.iloc[k, out.columns.get_loc("ci95_mean_hi")] = hi


def runs_interval(run_means: pd.Series, group_of_run: np.ndarray) -> pd.DataFrame:
    """Per group (in the order groupby(sort=False) gives): runs, and runs_ci95_mean (see the
    module's conventions): the t interval of the runs' means, none below MIN_RUNS, on the log
    scale where the plain one reaches below zero for positive means."""
    rg = run_means.groupby(group_of_run, sort=False)
    k = rg.size().to_numpy(np.float64)
    lo, hi = t_interval(rg.mean().to_numpy(), rg.std(ddof=1).to_numpy(), k)
    lo, hi = np.where(k >= MIN_RUNS, lo, np.nan), np.where(k >= MIN_RUNS, hi, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log(run_means.where(run_means > 0)).groupby(group_of_run, sort=False)
        llo, lhi = t_interval(lg.mean().to_numpy(), lg.std(ddof=1).to_numpy(), k)
    lowest = rg.min().to_numpy()
    use_log = (lo < 0) & (lowest > 0)
    # a run's mean of zero (a component no run touched): no log scale, and no interval below zero
    lo, hi = np.where((lo < 0) & (lowest == 0), np.nan, lo), np.where((lo < 0) & (lowest == 0), np.nan, hi)
    with np.errstate(over="ignore"):
        elo, ehi = np.exp(llo), np.exp(lhi)
    finite = np.isfinite(elo) & np.isfinite(ehi)  # runs spanning hundreds of decades: none
    return pd.DataFrame(
        {
            "runs": k,
            "runs_ci95_mean_lo": np.where(use_log, np.where(finite, elo, np.nan), lo),
            "runs_ci95_mean_hi": np.where(use_log, np.where(finite, ehi, np.nan), hi),
        },
        index=rg.size().index,
    )


def iqr_mask(df: pd.DataFrame, value: str = "latency_ns", by: str = "metric") -> pd.Series:
    """Boolean Series: True for rows inside [q1 - 1.5 IQR, q3 + 1.5 IQR] of their group."""
    x = df[value].astype(np.float64)
    g = x.groupby(df[by], observed=True, sort=False)
    q1 = g.transform("quantile", 0.25)
    q3 = g.transform("quantile", 0.75)
    iqr = q3 - q1
    return (x >= q1 - 1.5 * iqr) & (x <= q3 + 1.5 * iqr)


def median_replicates(values: npt.ArrayLike, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap replicates of the median of values without resampling n values each time: the
    median of a resample of n values from sorted y is the order statistic at rank J, where
    P(J <= j) = P(Binomial(n, (j+1)/n) >= (n+1)/2); J is drawn by inverting that distribution
    (exact for odd n, the lower median otherwise)."""
    y = np.sort(np.asarray(values, dtype=np.float64))
    n = len(y)
    cdf = sps.binom.sf((n + 1) // 2 - 1, n, np.arange(1, n + 1) / n)
    j = np.searchsorted(cdf, rng.random(reps))
    return y[np.minimum(j, n - 1)]


def median_interval(x: npt.ArrayLike) -> tuple[float, float, float]:
    """The median of x and its distribution-free 95 % interval (order statistics,
    median_ci_ranks): NaN bounds below 6 values, where no such interval exists."""
    x = np.sort(np.asarray(x, float))
    lo, hi = median_ci_ranks(len(x))
    if lo < 0:
        return float(np.median(x)), float("nan"), float("nan")
    return float(np.median(x)), float(x[lo]), float(x[hi])
