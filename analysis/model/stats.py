"""Descriptive statistics of per-iteration latencies, one row per group.

Every function works on whole columns (partition, bincount, searchsorted); none loops over
rows. One group is described at a time from its own float64 copy, partitioned in place: 8 bytes
a value beside the column, whatever the run's length. Conventions, so that a figure can be
reproduced by hand:
- the mean is numpy's (pairwise) sum over the count; std is the sample standard deviation
  (ddof=1) from the sum of squared differences to the mean (two passes);
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
- values_at_ranks and group_sum give what np.partition and pandas' sum give, bit for bit,
  a block at a time: no copy of a long run's column beside it.
A statistic that does not exist (too few values) is NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, SupportsFloat

import numpy as np
import pandas as pd
from scipy import special

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

# A metric's entry in summary.json (metric_entry): these statistics, then these intervals.
QUANTILE_KEYS = ["median", "p90", "p95", "p99", "p999"]
STAT_KEYS = ["n", "mean", "std", "min", "max", *QUANTILE_KEYS]
INTERVALS = ["ci95_mean", "ci95_median", "runs_ci95_mean"]


def _num(v: SupportsFloat | None) -> int | float | None:
    """A JSON number: int where exact, None for NaN."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    f = float(v)
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def _interval(row: Mapping[str, Any], name: str) -> list[int | float] | None:
    lo, hi = _num(row[f"{name}_lo"]), _num(row[f"{name}_hi"])
    return None if lo is None or hi is None else [lo, hi]


def metric_entry(row: Mapping[str, Any]) -> dict[str, Any]:
    """summary.json's entry of one group's statistics (COLUMNS: a describe_group dict or a
    describe_table row)."""
    m: dict[str, Any] = {"unit": "ns"}
    m.update({k: _num(row[k]) for k in STAT_KEYS})
    m["n"] = int(row["n"])
    for name in INTERVALS:
        m[name] = _interval(row, name)
    m["runs"] = int(row["runs"])
    return m


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


def group_values(x: np.ndarray, rows: slice | np.ndarray, factor: float) -> np.ndarray:
    """A float64 copy of x[rows] times factor: the one copy of the group the statistics own
    (and partition in place)."""
    # A slice is a view: made a copy. Selected rows are a copy already.
    v = x[rows].astype(np.float64) if isinstance(rows, slice) else x[rows].astype(np.float64, copy=False)
    if factor != 1:
        v *= factor
    return v


def _quantiles_sorted(w: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """Quantiles of sorted values (or with the ranks _quantile_ranks names in their places) by
    linear interpolation between order statistics, operation
    for operation as pandas does it: the value at position q (n - 1), plus the next one's
    difference times the fraction where that is not whole."""
    if len(w) == 0:
        return np.full(len(qs), np.nan)
    pos = np.asarray(qs, np.float64) * (len(w) - 1)
    idx = pos.astype(np.int64)
    frac = pos % 1
    val = w[idx]
    nxt = w[np.minimum(idx + 1, len(w) - 1)]
    return np.where(frac == 0.0, val, val + (nxt - val) * frac)


def _quantile_ranks(n: int, qs: Sequence[float]) -> list[int]:
    """The ranks _quantiles_sorted reads for n values."""
    if n == 0:
        return []
    idx = (np.asarray(qs, np.float64) * (n - 1)).astype(np.int64)
    return [*idx.tolist(), *np.minimum(idx + 1, n - 1).tolist()]


def _select(w: np.ndarray, ranks: Sequence[int]) -> None:
    """Put the order statistics of these ranks (those within w) in their places, in place: by a
    sort, which numpy 2's vectorised sort does quicker than a partition at a dozen ranks (1 M
    float64 here: 9-13 ms against 19-21 ms; 2 ms against 16 ms where few values repeat)."""
    if any(0 <= r < len(w) for r in ranks):
        w.sort()


def values_at_ranks(x: np.ndarray, ranks: Sequence[int], block: int = 1 << 16, bits: int = 16) -> np.ndarray:
    """np.partition(x, ranks)[ranks]: the value at each rank (0 <= rank < len(x)) of x sorted.

    An integer array is not copied: a pass a block at a time counts its values in at most
    2**bits bins of equal width over [min, max] and finds the bin of each rank from the
    cumulative counts; the next pass counts the values of those bins in narrower bins, and so
    on until a bin is one value (a 32-bit range and a dozen ranks: three passes after the one
    for min and max). Memory: the bins and one block's temporaries. Any other array (a frame's
    float column) is partitioned as a copy."""
    rank_of = np.asarray(ranks, np.int64)
    if len(rank_of) and (rank_of.min() < 0 or rank_of.max() >= len(x)):
        raise ValueError(f"ranks {rank_of.tolist()} not all within the {len(x)} values")
    if not np.can_cast(x.dtype, np.int64):
        return np.partition(x, np.unique(rank_of))[rank_of]
    if not len(rank_of):
        return np.zeros(0, x.dtype)
    blocks = range(0, len(x), block)
    lo = min(int(x[a : a + block].min()) for a in blocks)
    width = max(int(x[a : a + block].max()) for a in blocks) - lo
    # Each rank's bin is a prefix of its value's offset d = value - lo (uint64: exact however
    # wide the range): d >> shift. One pass finds the next `child` bits of every rank's prefix
    # (the first pass's one parent, prefix 0, holds every value: numpy shifts by 64 to 0);
    # `below` counts the values under its bin.
    shift = max(width.bit_length() - bits, 0)
    child = width.bit_length() - shift
    prefix = np.zeros(len(rank_of), np.uint64)
    below = np.zeros(len(rank_of), np.int64)
    while True:
        parents, slot = np.unique(prefix, return_inverse=True)
        counts = np.zeros(len(parents) << child, np.int64)
        for a in blocks:
            d = (x[a : a + block].astype(np.int64, copy=False) - np.int64(lo)).view(np.uint64)
            par = d >> np.uint64(shift + child)
            k = np.minimum(np.searchsorted(parents, par), len(parents) - 1)
            hit = parents[k] == par
            d, k = d[hit], k[hit]
            bins = (k << child) + ((d >> np.uint64(shift)) & np.uint64((1 << child) - 1)).view(np.int64)
            counts += np.bincount(bins, minlength=len(counts))
        ends = np.cumsum(counts.reshape(len(parents), 1 << child), axis=1)
        for i, (s, r) in enumerate(zip(slot.tolist(), rank_of.tolist())):
            b = int(np.searchsorted(ends[s], r - below[i], side="right"))
            below[i] += ends[s, b - 1] if b else 0
            prefix[i] = (parents[s] << np.uint64(child)) | np.uint64(b)
        if shift == 0:
            return (prefix.view(np.int64) + np.int64(lo)).astype(x.dtype)
        n_parents = len(np.unique(prefix))
        child = min(shift, max(bits - (n_parents - 1).bit_length(), 1))
        shift -= child


def group_sum(x: np.ndarray, groups: np.ndarray, group: int, leaf: int = 1 << 16) -> float:
    """pd.Series(x[groups == group] as float64).sum() (NaN skipped) bit for bit, without a copy
    of those values nor the mask.

    pandas sums a copy with NaN replaced by 0 by numpy's pairwise summation: 0.0 plus the sum
    of the whole, where a sum of more than 128 values is the sum of its first n2 = n // 2 -
    (n // 2) % 8 values plus the sum of the rest. The same halves are taken here down to
    pieces of at most `leaf` values (at least 128), each summed by numpy from its own copy
    gathered a piece of x at a time."""
    blocks = range(0, len(x), leaf)
    n = sum(int(np.count_nonzero(groups[a : a + leaf] == group)) for a in blocks)
    pieces = (x[a : a + leaf][groups[a : a + leaf] == group] for a in blocks)
    rest = np.zeros(0)

    def take(m: int) -> np.ndarray:
        """The next m values of the group, as float64 with NaN made 0: a copy."""
        nonlocal rest
        got = [rest]
        have = len(rest)
        while have < m:
            got.append(next(pieces))
            have += len(got[-1])
        whole = np.concatenate(got).astype(np.float64, copy=False)
        rest, v = whole[m:], whole[:m]
        v[np.isnan(v)] = 0.0
        return v

    return 0.0 + _pairwise_sum(n, take, max(leaf, 128))


def _pairwise_sum(m: int, take: Callable[[int], np.ndarray], leaf: int) -> float:
    """numpy's pairwise sum of the next m values take() gives, down to pieces of `leaf` (a
    function of its own: a nested recursive one would hold its caller's column in a cycle)."""
    if m <= leaf:
        return float(np.add.reduce(take(m)))
    half = m // 2 - (m // 2) % 8
    return _pairwise_sum(half, take, leaf) + _pairwise_sum(m - half, take, leaf)


def _sum_of_squares(w: np.ndarray, mean: float, block: int = 1 << 20) -> float:
    """sum((w - mean)^2) a block at a time: no temporary as long as w."""
    return float(sum(np.square(w[a : a + block] - mean).sum() for a in range(0, len(w), block)))


def _describe_values(v: np.ndarray, runs: np.ndarray, run_index: RunIndex | None = None) -> dict[str, float]:
    """COLUMNS of one group from its own float64 copy v (partitioned in place here; NaN are
    values that do not exist: counted in n, left out of the rest) and the run of each value
    (run_index: RunIndex(runs), if the caller has it already)."""
    n = len(v)
    out = dict.fromkeys(COLUMNS, np.nan)
    out["n"], out["runs"] = n, 0
    if n == 0:
        return out
    nan = np.isnan(v)
    w, rw = (v[~nan], runs[~nan]) if nan.any() else (v, runs)
    valid = len(w)
    if valid:
        out["mean"] = mean = float(w.sum()) / valid
        if valid >= 2:
            out["std"] = math.sqrt(_sum_of_squares(w, mean) / (valid - 1))
    out["ci95_mean_lo"], out["ci95_mean_hi"] = (float(a) for a in t_interval(out["mean"], out["std"], n))
    if out["ci95_mean_lo"] < 0 and valid and w.min() >= 0:
        # The order the values came in: the bootstrap's draws pair with them.
        if valid < MIN_BOOTSTRAP:
            out["ci95_mean_lo"] = out["ci95_mean_hi"] = np.nan
        else:
            out["ci95_mean_lo"], out["ci95_mean_hi"] = np.percentile(poisson_bootstrap_means(w), [2.5, 97.5])
    out.update(_runs_of(w, rw, runs, run_index))
    lo, hi = median_ci_ranks(n)
    # The order statistics these need, each in its place (_select).
    _select(w, [0, valid - 1, *_quantile_ranks(valid, list(QUANTILES.values())), int(lo), int(hi)])
    if valid:
        out["min"], out["max"] = float(w[0]), float(w[-1])
        out.update(zip(QUANTILES, _quantiles_sorted(w, list(QUANTILES.values())).tolist()))
    if lo >= 0:
        # ranks among all n values, the ones that do not exist last (as a sort puts NaN)
        out["ci95_median_lo"] = float(w[lo]) if lo < valid else np.nan
        out["ci95_median_hi"] = float(w[hi]) if hi < valid else np.nan
    return out


class RunIndex:
    """The runs of a group's values, counted once for all the columns described over them:
    key(r) numbers run numbers 0..size-1, seen counts the values of each. Counted a block at a
    time: bincount takes its input as 64-bit integers, a copy as long as it."""

    def __init__(self, runs: np.ndarray, block: int = 1 << 20):
        if np.issubdtype(runs.dtype, np.integer) and len(runs) and runs.min() >= 0 and runs.max() < 1 << 20:
            self.keys, self.size = None, int(runs.max()) + 1  # the run numbers themselves
        else:
            self.keys = np.unique(runs)
            self.size = len(self.keys)
        self.seen = np.zeros(self.size, np.int64)
        for a in range(0, len(runs), block):
            self.seen += np.bincount(self.key(runs[a : a + block]), minlength=self.size)

    def key(self, r: np.ndarray) -> np.ndarray:
        return r if self.keys is None else np.searchsorted(self.keys, r)


def _runs_of(
    w: np.ndarray, rw: np.ndarray, runs: np.ndarray, index: RunIndex | None = None, block: int = 1 << 20
) -> dict[str, float]:
    """runs and runs_ci95_mean of one group: w its values that exist, rw their runs, runs the
    run of every value (a run whose values all do not exist counts, with no mean); index:
    RunIndex(runs) if made already."""
    index = index or RunIndex(runs, block)
    key, size, seen = index.key, index.size, index.seen
    count, total = np.zeros(size, np.int64), np.zeros(size)
    for a in range(0, len(rw), block):
        k = key(rw[a : a + block])
        if rw is not runs:  # else every value exists: the counts are seen's
            count += np.bincount(k, minlength=size)
        total += np.bincount(k, weights=w[a : a + block], minlength=size)
    if rw is runs:
        count = seen
    present = seen > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        means = total[present] / count[present]
    lo, hi = _one_group_runs_interval(means)
    return {"runs": len(means), "runs_ci95_mean_lo": lo, "runs_ci95_mean_hi": hi}


def iqr_bounds(v: np.ndarray) -> tuple[float, float]:
    """[q1 - 1.5 IQR, q3 + 1.5 IQR] of the values (NaN left out; partitioned in place)."""
    nan = np.isnan(v)
    w = v[~nan] if nan.any() else v
    _select(w, _quantile_ranks(len(w), [0.25, 0.75]))
    q1, q3 = _quantiles_sorted(w, [0.25, 0.75])
    iqr = q3 - q1
    return q1 - 1.5 * iqr, q3 + 1.5 * iqr


Group = tuple[str, "slice | np.ndarray", float]


def describe_group(
    read: Callable[[], tuple[np.ndarray, np.ndarray]], iqr: bool = False, run_index: RunIndex | None = None
) -> tuple[dict[str, float], dict[str, float] | None]:
    """COLUMNS of one group whose values (float64, the caller's to reorder) and runs read() gives
    afresh each time it is called; iqr: also those of its values within iqr_bounds (else None).
    run_index: RunIndex of those runs, where several columns share them.
    Memory: the group's values and runs, once (twice for iqr: the second read after the
    first is done with)."""
    v, r = read()
    row = _describe_values(v, r, run_index)
    if not iqr:
        return row, None
    lo, hi = iqr_bounds(v) if len(v) else (np.nan, np.nan)
    del v, r
    v, r = read()
    keep = (v >= lo) & (v <= hi)
    return row, _describe_values(v[keep], r[keep])


def describe_table(rows: Sequence[dict[str, float]], names: Sequence[str]) -> pd.DataFrame:
    """Groups' COLUMNS (describe_group) as a frame indexed by name."""
    t = pd.DataFrame(list(rows), columns=COLUMNS, index=list(names), dtype=np.float64)
    t["n"], t["runs"] = t["n"].astype(np.int64), t["runs"].astype(np.int64)
    return t


def describe_groups(
    x: np.ndarray, groups: Sequence[Group], runs: np.ndarray, iqr: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Statistics of groups of the values x (COLUMNS, one row per group, indexed by name):
    groups = [(name, rows, factor)], rows a slice, mask or index of x, factor what its values
    are multiplied by (a derived metric); runs: the run of each value of x. Memory: one group's
    values at a time, as float64, partitioned in place (8 B a value beside x).
    iqr: also the statistics of each group's values within iqr_bounds (else None)."""

    def reader(rows: slice | np.ndarray, factor: float) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
        return lambda: (group_values(x, rows, factor), runs[rows])

    found = [describe_group(reader(rows, factor), iqr) for _, rows, factor in groups]
    names = [name for name, _, _ in groups]
    within = [f[1] for f in found if f[1] is not None]  # each group's with iqr, none without
    return describe_table([f[0] for f in found], names), describe_table(within, names) if iqr else None


def describe(df: pd.DataFrame, value: str = "latency_ns", by: str = "metric", run: str = "run") -> pd.DataFrame:
    """Statistics of df[value] per group of df[by] (in the order they first appear); returns a
    DataFrame indexed by group. df needs the columns value, by and run (run index of each row)."""
    return describe_columns(df, [value], by, run)[value]


def describe_columns(
    df: pd.DataFrame, values: Sequence[str], by: str = "metric", run: str = "run"
) -> dict[str, pd.DataFrame]:
    """describe() of each of several value columns: {value: DataFrame indexed by group}."""
    codes, names = pd.factorize(df[by], sort=False)
    groups = [(g, slice(None) if len(names) == 1 else codes == k, 1.0) for k, g in enumerate(names)]
    runs = df[run].to_numpy()
    tables = {}
    for v in values:
        t, _ = describe_groups(df[v].to_numpy(), groups, runs)
        t.index = pd.Index(names, name=by)
        tables[v] = t
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


def runs_interval(run_means: pd.Series, group_of_run: np.ndarray) -> pd.DataFrame:
    """Per group (in the order groupby(sort=False) gives): runs, and runs_ci95_mean (see the
    module's conventions): the t interval of the runs' means, none below MIN_RUNS, on the log
    scale where the plain one reaches below zero for positive means."""
    rg = run_means.groupby(group_of_run, sort=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log(run_means.where(run_means > 0)).groupby(group_of_run, sort=False)
    k = rg.size().to_numpy(np.float64)
    lo, hi = _runs_interval_of(
        k,
        rg.mean().to_numpy(),
        rg.std(ddof=1).to_numpy(),
        lg.mean().to_numpy(),
        lg.std(ddof=1).to_numpy(),
        rg.min().to_numpy(),
    )
    return pd.DataFrame({"runs": k, "runs_ci95_mean_lo": lo, "runs_ci95_mean_hi": hi}, index=rg.size().index)


def _one_group_runs_interval(run_means: np.ndarray) -> tuple[float, float]:
    """runs_interval of one group's run means, without pandas' groupby (the describe of a
    small group, as each request `ipctrace watch` keeps, spent most of its time there): the
    same reductions (NaN left out, as pandas leaves them out), the same interval."""
    m = np.asarray(run_means, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.log(np.where(m > 0, m, np.nan))

    def mean_std_min(v: np.ndarray) -> tuple[float, float, float]:
        v = v[~np.isnan(v)]
        if not len(v):
            return np.nan, np.nan, np.nan
        mean = float(v.mean())
        std = float(np.sqrt(np.square(v - mean).sum() / (len(v) - 1))) if len(v) >= 2 else np.nan
        return mean, std, float(v.min())

    mean, std, lowest = mean_std_min(m)
    lmean, lstd, _ = mean_std_min(logs)
    lo, hi = _runs_interval_of(
        np.array([float(len(m))]),
        np.array([mean]),
        np.array([std]),
        np.array([lmean]),
        np.array([lstd]),
        np.array([lowest]),
    )
    return float(lo[0]), float(hi[0])


def _runs_interval_of(
    k: np.ndarray, mean: np.ndarray, std: np.ndarray, lmean: np.ndarray, lstd: np.ndarray, lowest: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """runs_ci95_mean (lo, hi) per group from its runs k, their means' mean and std, the mean
    and std of their logs (the positive ones), and the lowest run mean."""
    lo, hi = t_interval(mean, std, k)
    lo, hi = np.where(k >= MIN_RUNS, lo, np.nan), np.where(k >= MIN_RUNS, hi, np.nan)
    llo, lhi = t_interval(lmean, lstd, k)
    use_log = (lo < 0) & (lowest > 0)
    # a run's mean of zero (a component no run touched): no log scale, and no interval below zero
    lo, hi = np.where((lo < 0) & (lowest == 0), np.nan, lo), np.where((lo < 0) & (lowest == 0), np.nan, hi)
    with np.errstate(over="ignore"):
        elo, ehi = np.exp(llo), np.exp(lhi)
    finite = np.isfinite(elo) & np.isfinite(ehi)  # runs spanning hundreds of decades: none
    return np.where(use_log, np.where(finite, elo, np.nan), lo), np.where(use_log, np.where(finite, ehi, np.nan), hi)


def iqr_mask(df: pd.DataFrame, value: str = "latency_ns", by: str = "metric") -> np.ndarray:
    """True for rows inside iqr_bounds of their group."""
    x = df[value].to_numpy()
    codes, names = pd.factorize(df[by], sort=False)
    keep = np.zeros(len(df), bool)
    for k in range(len(names)):
        rows = np.flatnonzero(codes == k)
        v = np.sort(x[rows].astype(np.float64))
        lo, hi = iqr_bounds(v)
        keep[rows] = (x[rows] >= lo) & (x[rows] <= hi)
    return keep


def median_replicates(values: npt.ArrayLike, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Bootstrap replicates of the median of values without resampling n values each time: the
    median of a resample of n values from sorted y is the order statistic at rank J, where
    P(J <= j) = P(Binomial(n, (j+1)/n) >= (n+1)/2); J is drawn by inverting that distribution
    (exact for odd n, the lower median otherwise)."""
    # imported here: scipy.stats costs seconds of CPU to import (its docstrings are parsed), and
    # the analysis of a run, and `ipctrace watch`'s keeper, need it nowhere else
    from scipy import stats as sps

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


def lerp_percentile(previous: float, following: float, gamma: float) -> float:
    """numpy's linear interpolation between two order statistics (np.percentile's default,
    operation for operation: from the far end where the weight is one half or more)."""
    diff = following - previous
    return following - diff * (1 - gamma) if gamma >= 0.5 else previous + diff * gamma


class ValueCounts:
    """Integer values kept as their distinct values and how often each came, merged a part at
    a time: exact order statistics of many values (wake-up delays in ns) in the memory of
    their distinct ones. percentile() gives what np.percentile gives of all of them."""

    def __init__(self) -> None:
        self.values = np.zeros(0, np.int64)
        self.counts = np.zeros(0, np.int64)

    def add(self, x: npt.ArrayLike) -> None:
        x = np.asarray(x, np.int64)
        if not len(x):
            return
        lo, hi = int(x.min()), int(x.max())
        if hi - lo < max(4 * len(x), 1 << 16):
            # values in a narrow range (delays in ns): counted in place of a sort, the same answer
            c = np.bincount(x - lo)
            v = np.flatnonzero(c)
            v, c = v + lo, c[v]
        else:
            v, c = np.unique(x, return_counts=True)
        if len(self.values):
            v, inverse = np.unique(np.concatenate((self.values, v)), return_inverse=True)
            c = np.bincount(inverse, weights=np.concatenate((self.counts, c)), minlength=len(v)).astype(np.int64)
        self.values, self.counts = v, c

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    def mean(self) -> float:
        return float(np.dot(self.values.astype(np.float64), self.counts.astype(np.float64)) / self.n)

    def percentile(self, pct: float) -> float:
        """np.percentile(all values as float64, pct); NaN if there are none."""
        n = self.n
        if n == 0:
            return float("nan")
        virtual = (n - 1) * (np.float64(pct) / 100)
        if virtual >= n - 1:
            return float(self.values[-1])
        previous = np.floor(virtual)
        ends = np.cumsum(self.counts)  # rank of each value's last copy, + 1
        lo, hi = np.searchsorted(ends, [previous, previous + 1], side="right")
        return float(lerp_percentile(float(self.values[lo]), float(self.values[hi]), float(virtual - previous)))

    def light(self) -> dict[str, float] | None:
        """{n, mean, median, p99}, or None without values."""
        if not self.n:
            return None
        return {"n": self.n, "mean": self.mean(), "median": self.percentile(50), "p99": self.percentile(99)}
