"""Several runs side by side, metric by metric, against the first (the baseline): one rule
for the text table of `ipctrace compare` and the report's comparison page; and why a run
differs from the baseline, the effect first: the difference of the medians of the runs'
medians (robust to a run's tail) with its interval from the run-to-run variance where each
side has MIN_RUNS runs, and a stated caveat where not; then each component's shift, the
typical iteration's (the difference of its medians) before the tail's (of its means); and
the settings that differ as the runs ran them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats as sps

from analysis.model import stats
from analysis.store.jsonfiles import Stats

if TYPE_CHECKING:
    import numpy.typing as npt
    import pandas as pd

    from analysis.store.summaryfile import RunSummary


@dataclass
class Entry:
    """One directory's figures of one metric against the baseline's. stats: the summary's
    entry of the metric (None: this run has no such metric); the ratios and overlaps are
    None where either side lacks the figure (or the baseline lacks the metric)."""

    label: str
    stats: Stats | None
    mean_ratio: float | None = None
    median_ratio: float | None = None
    mean_cis_overlap: bool | None = None
    median_cis_overlap: bool | None = None


def _ratio(x: float | None, base: float | None) -> float | None:
    return None if x is None or not base else x / base


def _overlap(a: list | None, b: list | None) -> bool | None:
    return None if a is None or b is None else bool(a[0] <= b[1] and b[0] <= a[1])


def comparison(summaries: list[tuple[str, RunSummary]]) -> dict[str, list[Entry]]:
    """{metric: [Entry per directory, in order]} of [(label, summary)], the first the baseline;
    metrics in the order the directories first name them."""
    names = list(dict.fromkeys(m for _, s in summaries for m in s.metrics))
    out = {}
    for name in names:
        base = summaries[0][1].stats(name)
        entries = []
        for label, s in summaries:
            m = s.stats(name)
            e = Entry(label, s.metrics.get(name))
            if m is not None and base is not None:
                e.mean_ratio = _ratio(m.mean, base.mean)
                e.median_ratio = _ratio(m.median, base.median)
                e.mean_cis_overlap = _overlap(m.ci95_mean, base.ci95_mean)
                e.median_cis_overlap = _overlap(m.ci95_median, base.ci95_median)
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
    """Why one run's metric differs from the baseline's. The effect: the difference of the
    medians of the runs' medians (run_medians) and its share of the baseline's (relative), its
    interval from the run-to-run variance (None below MIN_RUNS runs a side: caveat says so).
    Within the runs, every iteration taken as independent: the difference of the medians with
    its bootstrap interval and Mood's median test, and of the means. Per component: the
    difference of its means (the means add up to the latency's mean) and of its medians (the
    typical iteration's shift: component_medians); and the settings that differ as run."""

    label: str
    n: tuple[int, int]  # iterations of the baseline and of this run
    median: Difference
    median_test_p: float | None
    mean: Difference
    components: dict[str, Difference]
    settings: dict[str, tuple[Any, Any]]  # name -> (baseline's, this run's)
    runs: tuple[int, int] = (1, 1)  # repetitions (--runs) of the baseline and of this run
    run_medians: Difference | None = None
    relative: float | None = None
    caveat: str | None = None
    component_medians: dict[str, float] = field(default_factory=dict)
    both_traced: bool = False  # both runs have a breakdown (components may still share no name)

    def ranked_components(self) -> tuple[list[str], list[str], list[str]]:
        """(components whose mean moved, the typical iteration's largest shift first; those
        that moved in the tail only, their medians equal; those with no difference shown)."""
        moved = [c for c, d in self.components.items() if _moved(d)]
        typical = [c for c in moved if abs(self.component_medians.get(c, 0.0)) >= 1]
        typical.sort(key=lambda c: (-abs(self.component_medians[c]), -abs(self.components[c].value)))
        tail = sorted((c for c in moved if c not in typical), key=lambda c: -abs(self.components[c].value))
        return typical, tail, [c for c in self.components if c not in moved]


def _moved(d: Difference) -> bool:
    """A component moved: its interval leaves out zero, by at least a nanosecond."""
    return d.ci95 is not None and (d.ci95[0] > 0 or d.ci95[1] < 0) and abs(d.value) >= 1


@dataclass(frozen=True)
class RunData:
    """What the differences are computed from: a run's summary, the latencies of one metric, and
    its breakdown rows of that metric (None: not traced)."""

    label: str
    summary: RunSummary
    latencies: np.ndarray
    components: pd.DataFrame | None
    runs: np.ndarray | None = None  # the repetition of each latency (None: one run)


def run_medians(values: npt.ArrayLike, runs: npt.ArrayLike | None) -> np.ndarray:
    """The median of each run's values (one value per run, in run order)."""
    v = np.asarray(values, np.float64)
    if runs is None or not len(v):
        return np.array([np.median(v)]) if len(v) else np.array([])
    r = np.asarray(runs)
    return np.array([np.median(v[r == k]) for k in np.unique(r)])


def run_medians_difference(base: RunData, other: RunData) -> tuple[Difference, float | None, str | None]:
    """median(other's run medians) - median(base's), its share of the base's, and the caveat
    when there is no interval. The interval is Welch's t interval of the runs' medians (the
    difference of their means, the spread from run to run), given only when each side has
    MIN_RUNS runs: with fewer, how much a run's median moves from run to run is unknown."""
    a, b = run_medians(base.latencies, base.runs), run_medians(other.latencies, other.runs)
    value = float(np.median(b) - np.median(a))
    base_median = float(np.median(a))
    relative = value / base_median if base_median else None
    if min(len(a), len(b)) >= stats.MIN_RUNS:
        d = mean_difference(a, b)
        return Difference(value, d.ci95), relative, None
    caveat = (
        f"{len(a)} and {len(b)} runs: the run-to-run variance is not known (an interval needs "
        f"{stats.MIN_RUNS} runs a side); the interval and the test within the runs take every iteration as "
        "independent and are too narrow if runs differ"
    )
    return Difference(value, None), relative, caveat


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
    base, other = np.asarray(base), np.asarray(other)
    if min(len(base), len(other)) < 2:
        return None
    try:
        return float(sps.median_test(base, other)[1])
    except ValueError:
        return None


SETTINGS = ("workload", "mode", "placement")
HOST = ("hostname", "kernel", "cpu_model", "cores", "clocksource", "hypervisor")
# Parameters that say what was asked, not what ran (the summary's placement and the threads'
# CPUs say that), or that change nothing measured (a twin made after, raw files kept).
AS_ASKED = ("placement", "cpus", "calibrate", "keep_raw")


def settings_difference(base: RunSummary, other: RunSummary) -> dict[str, tuple[Any, Any]]:
    """The settings of two runs that differ as the runs ran them: workload, mode, placement
    and the CPU of each thread (as run, not as asked: a default placement that ran cross-CPU
    equals --cross-cpu), the other parameters and the machine (kernel, CPU model, cores)."""
    out = {}

    def differ(name: str, a: Any, b: Any) -> None:  # noqa: ANN401 - JSON values
        if a != b:
            out[name] = (a, b)

    for k in SETTINGS:
        differ(k, getattr(base, k), getattr(other, k))
    differ("cpus", _cpus(base), _cpus(other))
    bp, op = base.params, other.params
    for k in dict.fromkeys([*bp, *op]):
        if k not in AS_ASKED:
            differ(k, bp.get(k), op.get(k))
    for k in HOST:
        differ(f"host {k}", getattr(base.host, k), getattr(other.host, k))
    return out


def _cpus(summary: RunSummary) -> str:
    return ",".join(f"{t.role}@{t.cpu}" for t in summary.threads if t.cpu >= 0)


def differences(base: RunData, other: RunData, components: Sequence[str]) -> RunDifference:
    """Why other's metric differs from base's (see RunDifference); components only where both
    runs were traced."""
    comps, comp_medians = {}, {}
    if base.components is not None and other.components is not None:
        for c in components:
            if c in base.components and c in other.components:
                a, b = base.components[c].to_numpy(np.float64), other.components[c].to_numpy(np.float64)
                comps[c] = mean_difference(a, b)
                comp_medians[c] = float(np.nanmedian(b) - np.nanmedian(a)) if len(a) and len(b) else 0.0
    effect, relative, caveat = run_medians_difference(base, other)
    return RunDifference(
        label=other.label,
        n=(len(base.latencies), len(other.latencies)),
        median=median_difference(base.latencies, other.latencies),
        median_test_p=median_test_p(base.latencies, other.latencies),
        mean=mean_difference(base.latencies, other.latencies),
        components=comps,
        settings=settings_difference(base.summary, other.summary),
        runs=(len(run_medians(base.latencies, base.runs)), len(run_medians(other.latencies, other.runs))),
        run_medians=effect,
        relative=relative,
        caveat=caveat,
        component_medians=comp_medians,
        both_traced=base.components is not None and other.components is not None,
    )


@dataclass(frozen=True)
class Run:
    """One run as compare reads it: from a results directory or from a collected dataset."""

    label: str
    summary: RunSummary
    iterations: pd.DataFrame
    breakdown: pd.DataFrame | None


def metric_data(run: Run, metric: str) -> RunData | None:
    """A run's latencies of metric and its breakdown rows of it (None: no iterations of it)."""
    it = run.iterations
    rows = it["metric"].astype(str) == metric
    lat = it.loc[rows, "latency_ns"].to_numpy(np.float64)
    if not len(lat):
        return None
    reps = it.loc[rows, "run"].to_numpy() if "run" in it.columns else None
    bd = run.breakdown
    if bd is not None:
        bd = bd[bd["metric"].astype(str) == metric]
    return RunData(run.label, run.summary, lat, bd, reps)


def explain_differences(runs: Sequence[Run], components: Sequence[str]) -> dict[str, list[RunDifference]]:
    """{metric: [RunDifference of each run after the first]}, for the metrics every run
    measured (derived ones left out: they scale a measured one)."""
    summaries = [r.summary for r in runs]
    names = [
        m
        for m in summaries[0].metrics
        if not (summaries[0].stats(m) or Stats()).derived and all(m in s.metrics for s in summaries[1:])
    ]
    out = {}
    for m in names:
        data = [metric_data(r, m) for r in runs]
        if data[0] is None:
            continue
        out[m] = [differences(data[0], x, components) for x in data[1:] if x is not None]
    return out
