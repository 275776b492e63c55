"""A suite's table: each experiment of the seed reports (model/seeds.py) and this machine's
figures of it, one row per experiment, metric and report figure (suite.csv and suite.json hold
these rows, suite.md and the report page show them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from analysis.model import seeds
from analysis.store.jsonfiles import Stats
from analysis.store.summaryfile import RunSummary

CSV_FIELDS = [
    "experiment",
    "title",
    "workload",
    "options",
    "metric",
    "status",
    "n",
    "mean_ns",
    "ci95_lo_ns",
    "ci95_hi_ns",
    "median_ns",
    "runs_ci95_lo_ns",
    "runs_ci95_hi_ns",
    "iqr_mean_ns",
    "iqr_ci95_lo_ns",
    "iqr_ci95_hi_ns",
    "iqr_removed",
    "measured",
    "traced_median_ns",
    "probe_effect",
    "report",
    "machine",
    "report_value_ns",
    "report_ci95_lo_ns",
    "report_ci95_hi_ns",
    "report_statistic",
    "note",
]


@dataclasses.dataclass
class Row:
    """One experiment of a suite: what it measures, how its run ended and its summary."""

    experiment: seeds.Experiment
    metrics: list[str]
    status: str = "not run"  # complete, interrupted, failed: ..., not run
    summary: RunSummary | None = None
    resdir: Path | None = None
    untraced: RunSummary | None = None  # the untraced twin's summary, of a traced run


def measured(r: Row) -> str:
    """Which run the row's figures come from: the seed reports measured without probes, so a
    traced experiment is compared through its untraced twin where it has one."""
    if r.untraced:
        return "untraced twin"
    return "traced" if r.summary and r.summary.trace else "untraced"


def here(r: Row, metric: str) -> Stats | None:
    """This machine's figure of metric, to set beside the reports': the untraced twin's
    summary.json entry where there is one, else the run's own; None if not measured."""
    s = r.untraced or r.summary
    return s.stats(metric) if s else None


def traced_here(r: Row, metric: str) -> tuple[float | None, float | None]:
    """The traced median and the probe effect (traced / untraced) of a row with a twin."""
    if not r.untraced or not r.summary:
        return None, None
    traced = r.summary.stats(metric)
    effect = r.summary.probe_effect.metrics.get(metric) if r.summary.probe_effect else None
    return traced.median if traced else None, effect.ratio if effect else None


def table_rows(rows: list[Row]) -> Iterator[dict[str, Any]]:
    """The table's rows: per experiment and metric, ours beside each report's figure of it."""
    for r in rows:
        e = r.experiment
        for metric in r.metrics:
            measured_here = here(r, metric)
            m = measured_here or Stats()
            none: list[float | None] = [None, None]  # an interval not known
            ci, rci = m.ci95_mean or none, m.runs_ci95_mean or none
            q = m.iqr or Stats()
            qci = q.ci95_mean or none
            traced_median, effect = traced_here(r, metric)
            base = {
                "experiment": e.id,
                "title": e.title,
                "workload": e.workload,
                "options": e.options_text(),
                "metric": metric,
                "status": r.status,
                "n": m.n,
                "mean_ns": m.mean,
                "ci95_lo_ns": ci[0],
                "ci95_hi_ns": ci[1],
                "median_ns": m.median,
                "runs_ci95_lo_ns": rci[0],
                "runs_ci95_hi_ns": rci[1],
                "iqr_mean_ns": q.mean,
                "iqr_ci95_lo_ns": qci[0],
                "iqr_ci95_hi_ns": qci[1],
                "iqr_removed": q.removed,
                "measured": measured(r) if measured_here is not None else None,
                "traced_median_ns": traced_median,
                "probe_effect": effect,
            }
            figs = [f for f in seeds.figures_for(e.id) if f.metric == metric]
            if not figs:
                yield base
            for f in figs:
                lo, hi = f.ci95_ns or (None, None)
                yield {
                    **base,
                    "report": f.report,
                    "machine": f.machine,
                    "report_value_ns": f.value_ns,
                    "report_ci95_lo_ns": lo,
                    "report_ci95_hi_ns": hi,
                    "report_statistic": f.statistic,
                    "note": f.note,
                }
