"""Several runs side by side, metric by metric, against the first (the baseline): one rule
for the text table of `ipctrace compare` and the report's comparison page; and why a run
differs from the baseline: the difference of the medians with its interval and a test, each
component's share of the difference, and the settings that differ."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats as sps

from analysis.model import stats
from analysis.store import results

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd


@dataclass
class Entry:
    """One directory's figures of one metric against the baseline's. stats: the summary's
    entry of the metric (None: this run has no such metric); the ratios and overlaps are
    None where either side lacks the figure (or the baseline lacks the metric)."""

    label: str
    stats: dict[str, Any] | None
    mean_ratio: float | None = None
    median_ratio: float | None = None
    mean_cis_overlap: bool | None = None
    median_cis_overlap: bool | None = None


def _ratio(x: float | None, base: float | None) -> float | None:
    return None if x is None or not base else x / base


def _overlap(a: list | None, b: list | None) -> bool | None:
    return None if a is None or b is None else bool(a[0] <= b[1] and b[0] <= a[1])


def comparison(summaries: list[tuple[str, dict[str, Any]]]) -> dict[str, list[Entry]]:
    """{metric: [Entry per directory, in order]} of [(label, summary)], the first the baseline;
    metrics in the order the directories first name them."""
    names = list(dict.fromkeys(m for _, s in summaries for m in s["metrics"]))
    out = {}
    for name in names:
        base = summaries[0][1]["metrics"].get(name)
        entries = []
        for label, s in summaries:
            m = s["metrics"].get(name)
            e = Entry(label, m)
            if m is not None and base is not None:
                e.mean_ratio = _ratio(m.get("mean"), base.get("mean"))
                e.median_ratio = _ratio(m.get("median"), base.get("median"))
                e.mean_cis_overlap = _overlap(m.get("ci95_mean"), base.get("ci95_mean"))
                e.median_cis_overlap = _overlap(m.get("ci95_median"), base.get("ci95_median"))
            entries.append(e)
        out[name] = entries
    return out


# --- why two runs differ ------------------------------------------------------------

REPLICATES = 2000  # bootstrap replicates of a median


@dataclass(frozen=True)
class Difference:
    """This run's figure minus the baseline's, with its 95 % interval (None: too few values)."""

    value: float
    ci95: tuple[float, float] | None


@dataclass(frozen=True)
class RunDifference:
    """Why one run's metric differs from the baseline's: the difference of the medians with its
    interval and Mood's median test, the difference of each component's mean (the means add up
    to the latency's mean, the medians do not) and the parameters that differ."""

    label: str
    n: tuple[int, int]  # iterations of the baseline and of this run
    median: Difference
    median_test_p: float | None
    mean: Difference
    components: dict[str, Difference]
    settings: dict[str, tuple[Any, Any]]  # name -> (baseline's, this run's)


@dataclass(frozen=True)
class RunData:
    """What the differences are computed from: a run's summary, the latencies of one metric, and
    its breakdown rows of that metric (None: not traced)."""

    label: str
    summary: dict[str, Any]
    latencies: np.ndarray
    components: pd.DataFrame | None


def median_difference(base: npt.ArrayLike, other: npt.ArrayLike, reps: int = REPLICATES, seed: int = 1) -> Difference:
    """median(other) - median(base) with a percentile-bootstrap 95 % interval (each sample
    resampled on its own); no interval below 10 values a side."""
    a, b = np.asarray(base, np.float64), np.asarray(other, np.float64)
    value = float(np.median(b) - np.median(a))
    if min(len(a), len(b)) < 10:
        return Difference(value, None)
    rng = np.random.default_rng(seed)
    d = stats.median_replicates(b, reps, rng) - stats.median_replicates(a, reps, rng)
    lo, hi = np.percentile(d, [2.5, 97.5])
    return Difference(value, (float(lo), float(hi)))


def mean_difference(base: npt.ArrayLike, other: npt.ArrayLike) -> Difference:
    """mean(other) - mean(base) with Welch's 95 % interval (no interval below 2 values a side)."""
    a, b = np.asarray(base, np.float64), np.asarray(other, np.float64)
    value = float(b.mean() - a.mean())
    if min(len(a), len(b)) < 2:
        return Difference(value, None)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = float(np.sqrt(va + vb))
    if se == 0:
        return Difference(value, (value, value))
    dof = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = float(sps.t.ppf(0.975, dof)) * se
    return Difference(value, (value - half, value + half))


def median_test_p(base: npt.ArrayLike, other: npt.ArrayLike) -> float | None:
    """p-value of Mood's median test that the two samples share a median (None if it cannot
    be made: too few values, or all on one side of the grand median)."""
    if min(len(base), len(other)) < 2:
        return None
    try:
        return float(sps.median_test(base, other)[1])
    except ValueError:
        return None


SETTINGS = ("workload", "mode", "placement")
HOST = ("hostname", "kernel", "cpu_model", "cores", "clocksource", "hypervisor")


def settings_difference(base: dict[str, Any], other: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The settings of two runs that differ: workload, mode, placement, the CPUs of each thread,
    the parameters and the machine (kernel, CPU model, cores)."""
    out = {}

    def differ(name: str, a: Any, b: Any) -> None:  # noqa: ANN401 - JSON values
        if a != b:
            out[name] = (a, b)

    for k in SETTINGS:
        differ(k, base.get(k), other.get(k))
    differ("cpus", _cpus(base), _cpus(other))
    bp, op = base.get("params") or {}, other.get("params") or {}
    for k in dict.fromkeys([*bp, *op]):
        differ(k, bp.get(k), op.get(k))
    bh, oh = base.get("host") or {}, other.get("host") or {}
    for k in HOST:
        differ(f"host {k}", bh.get(k), oh.get(k))
    return out


def _cpus(summary: dict[str, Any]) -> str:
    return ",".join(f"{t.get('role')}@{t.get('cpu')}" for t in summary.get("threads") or [] if t.get("cpu", -1) >= 0)


def differences(base: RunData, other: RunData, components: Sequence[str]) -> RunDifference:
    """Why other's metric differs from base's (see RunDifference); components only where both
    runs were traced."""
    comps = {}
    if base.components is not None and other.components is not None:
        for c in components:
            if c in base.components and c in other.components:
                comps[c] = mean_difference(base.components[c].to_numpy(), other.components[c].to_numpy())
    return RunDifference(
        label=other.label,
        n=(len(base.latencies), len(other.latencies)),
        median=median_difference(base.latencies, other.latencies),
        median_test_p=median_test_p(base.latencies, other.latencies),
        mean=mean_difference(base.latencies, other.latencies),
        components=comps,
        settings=settings_difference(base.summary, other.summary),
    )


@dataclass(frozen=True)
class Run:
    """One run as compare reads it: from a results directory or from a collected dataset."""

    label: str
    summary: dict[str, Any]
    iterations: pd.DataFrame
    breakdown: pd.DataFrame | None


def read_run(resdir: Path | str, summary: dict[str, Any]) -> Run:
    return Run(str(resdir), summary, results.read_iterations(resdir), results.read_breakdown(resdir))


def metric_data(run: Run, metric: str) -> RunData | None:
    """A run's latencies of metric and its breakdown rows of it (None: no iterations of it)."""
    it = run.iterations
    lat = it.loc[it["metric"].astype(str) == metric, "latency_ns"].to_numpy(np.float64)
    if not len(lat):
        return None
    bd = run.breakdown
    if bd is not None:
        bd = bd[bd["metric"].astype(str) == metric]
    return RunData(run.label, run.summary, lat, bd)


def explain_differences(runs: Sequence[Run], components: Sequence[str]) -> dict[str, list[RunDifference]]:
    """{metric: [RunDifference of each run after the first]}, for the metrics every run
    measured (derived ones left out: they scale a measured one)."""
    summaries = [r.summary for r in runs]
    names = [
        m
        for m, e in summaries[0]["metrics"].items()
        if not e.get("derived") and all(m in s["metrics"] for s in summaries[1:])
    ]
    out = {}
    for m in names:
        data = [metric_data(r, m) for r in runs]
        if data[0] is None:
            continue
        out[m] = [differences(data[0], x, components) for x in data[1:] if x is not None]
    return out
