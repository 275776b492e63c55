"""What the heat maps and histograms show, computed apart from drawing them.

Every function takes DataFrames (iterations.parquet, breakdown.parquet) and
returns counts or shares; analysis/render/plots.py only draws what comes back here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy.signal import find_peaks

from analysis.model import stats
from analysis.store.itercolumns import BLOCK, IterationColumns

if TYPE_CHECKING:
    import numpy.typing as npt

# The components of breakdown.parquet, in the order the tail is read from the bottom up.
COMPONENTS = (
    "user",
    "entry",
    "syscall",
    "copy",
    "wakeup",
    "runqueue",
    "blocked",
    "irq",
    "preempted",
    "steal",
    "residual",
)

# Percentile buckets of the breakdown heat map: coarse in the body, fine in the tail.
PERCENTILE_EDGES = (0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.9, 100)


@dataclass
class Grid:
    """A 2-D histogram: counts[y, x] over the given bucket edges."""

    counts: np.ndarray
    x_edges: np.ndarray
    y_edges: np.ndarray
    x_label: str
    y_label: str
    title: str = ""
    y_names: list = field(default_factory=list)  # categorical y axis (components)
    x_names: list = field(default_factory=list)  # categorical x axis (percentile buckets)
    # latency over time: where each run after the first starts, and where the one before it
    # ended (x units): the blank between them is the next run's set-up and warm-up, untimed
    run_gaps: list = field(default_factory=list)


@dataclass
class Histogram:
    counts: np.ndarray
    edges: np.ndarray  # ns, log-spaced when log=True
    log: bool
    peaks_ns: np.ndarray  # latency of each mode, highest count first
    peak_shares: np.ndarray  # fraction of iterations in the valley-to-valley span of each mode
    n: int
    metric: str


def log_edges(lo_ns: float, hi_ns: float, per_decade: int) -> np.ndarray:
    """Log-spaced edges covering [lo_ns, hi_ns], at least one bucket."""
    lo = np.floor(np.log10(max(lo_ns, 1)) * per_decade) / per_decade
    hi = np.ceil(np.log10(max(hi_ns, 1)) * per_decade) / per_decade
    if hi <= lo:
        hi = lo + 1.0 / per_decade
    nb = int(round((hi - lo) * per_decade))
    return 10.0 ** np.linspace(lo, hi, nb + 1)


def _bucket(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bucket index of each value; the last edge is inclusive so the maximum is counted."""
    idx = np.searchsorted(edges, values, side="right") - 1
    return np.clip(idx, 0, len(edges) - 2)


def _metric_blocks(iterations: pd.DataFrame | IterationColumns, metric: str) -> Callable[[], Iterator[tuple]]:
    """A function giving (t_start_ns, latency_ns) of metric's iterations a block at a time
    (a frame: one block)."""
    if isinstance(iterations, IterationColumns):
        code = iterations.metrics.index(metric) if metric in iterations.metrics else -1

        def blocks() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            for a in range(0, len(iterations), BLOCK):
                mine = iterations.column("metric", a, a + BLOCK) == code
                yield (
                    iterations.column("t_start_ns", a, a + BLOCK)[mine],
                    iterations.column("latency_ns", a, a + BLOCK)[mine],
                )

        return blocks
    it = iterations[iterations["metric"] == metric]
    whole = (it["t_start_ns"].to_numpy(np.int64), it["latency_ns"].to_numpy())
    return lambda: iter([whole])


def latency_heatmap(
    iterations: pd.DataFrame | IterationColumns, metric: str, time_buckets: int = 120, per_decade: int = 24
) -> Grid:
    """x: time since the first iteration (s), y: latency in log buckets, colour: count. A long
    run's iterations (IterationColumns) are counted a block at a time."""
    blocks = _metric_blocks(iterations, metric)
    n, t_lo, t_hi, lat_lo, lat_hi = 0, None, None, None, None
    for t, lat in blocks():
        if len(t):
            n += len(t)
            t_lo = t.min() if t_lo is None else min(t_lo, t.min())
            t_hi = t.max() if t_hi is None else max(t_hi, t.max())
            lat_lo = lat.min() if lat_lo is None else min(lat_lo, lat.min())
            lat_hi = lat.max() if lat_hi is None else max(lat_hi, lat.max())
    if n == 0 or t_lo is None or t_hi is None or lat_lo is None or lat_hi is None:  # all set when n > 0
        raise ValueError(f"no iterations of metric {metric}")
    span = max(float((t_hi - t_lo) / 1e9), 1e-9)
    x_edges = np.linspace(0.0, span, time_buckets + 1)
    y_edges = log_edges(float(lat_lo), float(lat_hi), per_decade)
    counts = np.zeros((len(y_edges) - 1) * time_buckets, np.int64)
    for t, lat in blocks():
        xi = _bucket((t - t_lo) / 1e9, x_edges)
        yi = _bucket(lat.astype(np.float64), y_edges)
        counts += np.bincount(yi * time_buckets + xi, minlength=len(counts))
    return Grid(
        counts.reshape(len(y_edges) - 1, time_buckets),
        x_edges,
        y_edges,
        "time since first iteration (s)",
        f"{metric} latency (ns)",
        title=f"{metric}: latency over time",
        run_gaps=_run_gaps(iterations, metric, t_lo),
    )


def _run_gaps(iterations: pd.DataFrame | IterationColumns, metric: str, t_lo: int) -> list[tuple[float, float, int]]:
    """[(end of run k-1, start of run k, k)] in seconds since t_lo, for each run after the first."""
    if isinstance(iterations, IterationColumns):
        code = iterations.metrics.index(metric) if metric in iterations.metrics else -1
        firsts: dict[int, int] = {}
        lasts: dict[int, int] = {}
        for a in range(0, len(iterations), BLOCK):
            mine = iterations.column("metric", a, a + BLOCK) == code
            runs = iterations.column("run", a, a + BLOCK)[mine]
            t0 = iterations.column("t_start_ns", a, a + BLOCK)[mine]
            t1 = iterations.column("t_end_ns", a, a + BLOCK)[mine]
            for r in np.unique(runs):
                k = runs == r
                firsts[int(r)] = min(firsts.get(int(r), int(t0[k].min())), int(t0[k].min()))
                lasts[int(r)] = max(lasts.get(int(r), int(t1[k].max())), int(t1[k].max()))
    else:
        it = iterations[iterations["metric"] == metric]
        if "run" not in it.columns or not len(it):
            return []
        g = it.groupby("run", sort=True)
        firsts = g["t_start_ns"].min().astype("int64").to_dict()
        lasts = g["t_end_ns"].max().astype("int64").to_dict()
    runs = sorted(firsts)
    return [((lasts[a] - t_lo) / 1e9, (firsts[b] - t_lo) / 1e9, int(b)) for a, b in zip(runs, runs[1:])]


def component_columns(breakdown: pd.DataFrame) -> list[str]:
    """The breakdown's components: a run's, or the parts of a round trip across two hosts
    (ipctrace merge)."""
    from analysis.model.crosshost import PARTS

    return [c for c in COMPONENTS if c in breakdown.columns] or [c for c in PARTS if c in breakdown.columns]


def breakdown_heatmap(
    breakdown: pd.DataFrame, metric: str, edges: Sequence[float] = PERCENTILE_EDGES
) -> tuple[Grid, np.ndarray]:
    """x: latency percentile bucket, y: component, colour: share of the bucket's time.

    The share is the component's ns summed over the bucket's iterations divided by
    their summed latency, so a column shows what iterations of that rank are made of;
    a column need not add up to 1 where the breakdown does not close.
    """
    # The rows of the metric, column by column: not a copy of the whole frame (30 columns).
    sel = (breakdown["metric"] == metric).to_numpy()
    comps = component_columns(breakdown)
    if not sel.any() or not comps:
        raise ValueError(f"no breakdown of metric {metric}")
    rows = slice(None) if sel.all() else sel
    del sel  # the mask (1 B an iteration) is kept only where it picks rows
    # As read (int64 in the file): exact ranks without a float64 copy.
    lat = breakdown["latency_ns"].to_numpy()[rows]
    # Rank-based percentile so that ties do not collapse buckets: an iteration's rank is its
    # place in the stable sort, its percentile (rank + 0.5) * 100 / n; the ranks of a bucket
    # are consecutive, so each bucket is a range of the sorting permutation.
    n, nx = len(lat), len(edges) - 1
    firsts = [_first_rank_at(e, n) for e in np.asarray(edges, dtype=np.float64)[1:-1]]
    xi = _rank_buckets(lat, firsts)
    lat_sum = _bucket_sums(xi, lat, slice(None), nx)
    del lat
    share = np.zeros((len(comps), nx))
    for row, c in enumerate(comps):
        comp_sum = _bucket_sums(xi, breakdown[c].to_numpy(), rows, nx)
        share[row] = np.divide(comp_sum, lat_sum, out=np.zeros(nx), where=lat_sum > 0)
    names = [f"p{edges[i]:g}-{edges[i + 1]:g}" for i in range(nx)]
    return Grid(
        share,
        np.asarray(edges, dtype=np.float64),
        np.arange(len(comps) + 1),
        "latency percentile",
        "component",
        title=f"{metric}: what each percentile is made of",
        y_names=comps,
        x_names=names,
    ), np.bincount(xi, minlength=nx)


def _bucket_sums(
    xi: np.ndarray, column: np.ndarray, rows: slice | np.ndarray, nx: int, block: int = 1 << 16
) -> np.ndarray:
    """np.bincount(xi, weights=column[rows] as float64, minlength=nx) bit for bit, a block at
    a time: no float64 copy of the column, nor bincount's int64 copy of xi. np.add.at adds in
    index order into the running sums as bincount does."""
    sums, done = np.zeros(nx), 0
    for a in range(0, len(column), block):
        w = column[a : a + block] if isinstance(rows, slice) else column[a : a + block][rows[a : a + block]]
        np.add.at(sums, xi[done : done + len(w)], np.asarray(w, np.float64))
        done += len(w)
    return sums


def _rank_buckets(x: np.ndarray, firsts: Sequence[int], block: int = 1 << 16) -> np.ndarray:
    """For each value, how many of the ranks `firsts` (ascending) its rank in a stable sort of x
    reaches: the bucket of its rank. Without sorting: a rank r reaches f where x > the value at
    rank f, or equals it and is among those equal to it that a stable sort puts from f on (by
    their order in x). The values at the ranks by stats.values_at_ranks (no copy of an integer
    x), then passes."""
    xi: np.ndarray = np.zeros(len(x), np.int8 if len(firsts) < 127 else np.int64)
    if not len(x) or not len(firsts):
        return xi
    ranks = [min(f, len(x) - 1) for f in firsts]
    at = stats.values_at_ranks(x, ranks)
    for f, t in zip(firsts, at.tolist()):
        if f >= len(x):
            continue
        less = 0
        for a in range(0, len(x), block):
            less += int((x[a : a + block] < t).sum())
        need = f - less  # of the values equal to t, those before this many stay below rank f
        seen = 0
        for a in range(0, len(x), block):
            part = x[a : a + block]
            eq = part == t
            # rank reached: above t, or equal to t and at least `need` equal values before it
            reached = (part > t) | (eq & (seen + np.cumsum(eq) - 1 >= need))
            xi[a : a + block] += reached.astype(xi.dtype)
            seen += int(eq.sum())
    return xi


def _first_rank_at(edge: float, n: int) -> int:
    """The first rank r of n whose percentile (r + 0.5) * 100 / n is at or above edge (n if
    none): _bucket's edges, found by bisection on the same arithmetic."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if (np.int64(mid) + 0.5) * 100.0 / n >= edge:
            hi = mid
        else:
            lo = mid + 1
    return lo


def histogram(
    values: npt.ArrayLike,
    metric: str,
    log: bool = True,
    per_decade: int = 40,
    bins: int = 120,
    min_share_of_top: float = 0.02,
    min_dip: float = 0.2,
    sigmas: float = 3.0,
) -> Histogram:
    """Histogram of one metric with its modes marked: the peaks a reader sees in the drawn
    buckets. A bucket is a mode where it stands above the dips either side of it (its
    prominence) by more than counting noise could make it: `sigmas` standard deviations of a
    Poisson count (sqrt of its count), a dip of at least `min_dip` of its height (a visible
    valley, not a shoulder), and at least `min_share_of_top` of the highest bucket. Smoothing
    first would merge modes a few buckets apart (a cross-CPU round trip's wake-up paths);
    counting noise, not smoothing, decides. Each mode's share counts the iterations between
    the valleys either side of it.
    """
    v = np.asarray(values)
    if len(v) == 0:
        raise ValueError(f"no values of {metric}")
    if log:
        edges = log_edges(max(float(v.min()), 1.0), float(v.max()), per_decade)
    else:
        lo, hi = float(v.min()), float(v.max())
        edges = np.linspace(lo, hi if hi > lo else lo + 1.0, bins + 1)
    counts = np.zeros(len(edges) - 1, np.int64)
    for a in range(0, len(v), BLOCK):  # a long run's bucket numbers a block at a time
        counts += np.bincount(_bucket(v[a : a + BLOCK], edges), minlength=len(edges) - 1)
    c = counts.astype(np.float64)
    # Zero padding lets a mode in the first or last bucket count as a peak.
    idx, props = find_peaks(np.concatenate(([0.0], c, [0.0])), prominence=0)
    idx, prom = idx - 1, props["prominences"]
    real = (prom >= sigmas * np.sqrt(c[idx])) & (prom >= min_dip * c[idx]) & (prom >= min_share_of_top * c.max())
    idx = np.sort(idx[real])
    # Each mode owns the buckets from the valley before it up to the valley after it.
    bounds = [0] + [a + int(np.argmin(c[a : b + 1])) for a, b in zip(idx[:-1], idx[1:])] + [len(counts)]
    shares = np.array([counts[lo:hi].sum() for lo, hi in zip(bounds[:-1], bounds[1:])]) / len(v)
    centres = np.sqrt(edges[:-1] * edges[1:]) if log else (edges[:-1] + edges[1:]) / 2
    order = np.argsort(-c[idx], kind="stable")
    return Histogram(counts, edges, log, centres[idx][order], shares[order], len(v), metric)


def histogram_table(hist: Histogram) -> pd.DataFrame:
    """One row per mode: where it is and how many iterations it holds."""
    return pd.DataFrame({"metric": hist.metric, "peak_ns": hist.peaks_ns, "share": hist.peak_shares})
