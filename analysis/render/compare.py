"""`ipctrace compare` as text: the table of the runs against the first, and why each differs
(model/compare.py computes both)."""

from __future__ import annotations

from typing import Any

from analysis.model.compare import Difference, RunDifference, _moved, comparison
from analysis.render.table import fmt, fmt_pm, pick_unit, render
from analysis.store.summaryfile import RunSummary


def _ratio(r: float | None) -> str:
    return "-" if r is None else f"{r:.3f}"


def _yes(overlap: bool | None) -> str:
    return "-" if overlap is None else "yes" if overlap else "no"


HEADER = [
    "metric",
    "results",
    "n",
    "median",
    "mean ± 95% CI",
    "mean ratio",
    "median ratio",
    "mean CIs overlap",
    "median CIs overlap",
]


def incomplete_lines(summaries: list[tuple[str, RunSummary]]) -> list[str]:
    """One line per run that did not complete (interrupted, stopped, failed): what it measured of
    what was asked, so that a smaller n beside the others is read for what it is."""
    out = []
    for label, s in summaries:
        if s.status in (None, "complete"):
            continue
        p = s.params or {}
        asked = (p.get("iterations") or 0) * (p.get("runs") or 1)
        done = s.iterations_completed
        what = f"{done:,} iterations" if done is not None else "some iterations"
        if asked and done is not None:
            what += f" of the {asked:,} asked"
        if s.runs_completed is not None and p.get("runs"):
            what += f" ({s.runs_completed} of {p['runs']} runs complete)"
        out.append(f"note: {label} was {s.status}: it measured {what}; compare it as such")
    return out


def compare_rows(summaries: list[tuple[str, RunSummary]]) -> list[list[str]]:
    """summaries: [(label, summary)]; rows of the comparison table."""
    rows = []
    for name, entries in comparison(summaries).items():
        scale, unit = pick_unit(next(e.stats for e in entries if e.stats is not None).median)
        for i, e in enumerate(entries):
            if e.stats is None:
                rows.append([name if i == 0 else "", e.label, "-", "-", "-", "-", "-", "-", "-"])
                continue
            m = e.stats
            ci = m.ci95_mean
            half = None if ci is None else (ci[1] - ci[0]) / 2
            if i == 0:
                vs = ["1", "1", "", ""]
            else:
                vs = [
                    _ratio(e.mean_ratio),
                    _ratio(e.median_ratio),
                    _yes(e.mean_cis_overlap),
                    _yes(e.median_cis_overlap),
                ]
            rows.append(
                [
                    name + ("*" if m.derived else "") if i == 0 else "",
                    e.label,
                    str(m.n),
                    f"{fmt(m.median, scale)} {unit}",
                    f"{fmt_pm(m.mean, half, scale)} {unit}",
                    *vs,
                ]
            )
    return rows


def signed(v: float, scale: float) -> str:
    text = fmt(abs(v), scale)
    return ("+" if v >= 0 else "-") + text


def difference_text(d: Difference, scale: float, unit: str) -> str:
    """+1.80 us [+1.62, +1.95]"""
    ci = "" if d.ci95 is None else f" [{signed(d.ci95[0], scale)}, {signed(d.ci95[1], scale)}]"
    return f"{signed(d.value, scale)} {unit}{ci}"


def p_text(p: float | None) -> str:
    if p is None:
        return "no median test (too few values)"
    return "Mood's median test p < 0.001" if p < 0.001 else f"Mood's median test p = {p:.3f}"


def moved(d: Difference) -> bool:
    """A component moved: its interval leaves out zero, by at least a nanosecond."""
    return _moved(d)


def effect_text(r: RunDifference, scale: float, unit: str) -> str:
    """The effect: the difference of the medians of the runs' medians, its share of the
    baseline's, and its interval from the run-to-run variance (or why there is none)."""
    d = r.run_medians or r.median
    share = "" if r.relative is None else f" ({100 * r.relative:+.1f} %)"
    text = f"median {signed(d.value, scale)} {unit}{share}"
    if d.ci95 is not None:
        return (
            text + f", 95 % CI [{signed(d.ci95[0], scale)}, {signed(d.ci95[1], scale)}] "
            f"from the run-to-run variance ({r.runs[0]} and {r.runs[1]} runs)"
        )
    return text


def difference_lines(baseline: str, diffs: dict[str, list[RunDifference]]) -> list[str]:
    """Per metric and run after the first, the effect first: the difference of the medians of
    the runs' medians (with its interval from run to run, or the caveat where there are too few
    runs); then within the runs (medians, Mood's test, means); the components that moved, the
    largest shift of the typical iteration first and those that moved in the tail only after;
    and the settings that differ as the runs ran them."""
    lines = []
    for metric, runs in diffs.items():
        if not runs:
            continue
        lines += ["", f"why {metric} differs from {baseline} (each run minus the baseline):"]
        for r in runs:
            scale, unit = pick_unit(max(abs(r.median.value), abs(r.mean.value)) or 1.0)
            lines.append(f"  {r.label}: {effect_text(r, scale, unit)}")
            if r.caveat:
                lines.append(f"    caveat: {r.caveat}")
            lines.append(
                f"    within the runs: median {difference_text(r.median, scale, unit)} "
                f"({p_text(r.median_test_p)}); mean {difference_text(r.mean, scale, unit)}"
            )
            if r.components:
                typical, tail, rest = r.ranked_components()
                rows = [
                    [
                        c,
                        f"{signed(r.component_medians[c], scale)} {unit}",
                        difference_text(r.components[c], scale, unit),
                    ]
                    for c in typical
                ]
                if rows:
                    lines.append("    components that moved, the typical iteration's largest shift first:")
                    lines += ["      " + x for x in render(rows, ["component", "median", "mean [95 % CI]"], left=1)]
                else:
                    lines.append("    components that moved in the typical iteration: none")
                if tail:
                    lines.append(
                        "    in the tail only (medians equal, means moved): "
                        + ", ".join(f"{c} {difference_text(r.components[c], scale, unit)}" for c in tail)
                    )
                if rest:
                    lines.append(f"    no difference shown in: {', '.join(rest)}")
            elif r.both_traced:
                lines.append("    components: none in common (a merged round trip's parts against a run's components)")
            else:
                lines.append("    components: not both traced")
            if r.settings:
                lines.append(
                    "    settings that differ (as run): "
                    + "; ".join(f"{k} {_plain(a)} -> {_plain(b)}" for k, (a, b) in r.settings.items())
                )
    return lines


def _plain(v: Any) -> str:  # noqa: ANN401 - a JSON value
    if isinstance(v, dict):
        return ", ".join(f"{k}={_plain(x)}" for k, x in v.items()) or "none"
    return "none" if v is None else "yes" if v is True else "no" if v is False else str(v)
