"""`ipctrace compare` as text: the table of the runs against the first, and why each differs
(model/compare.py computes both)."""

from __future__ import annotations

from typing import Any

from analysis.model.compare import Difference, RunDifference, comparison
from analysis.render.table import fmt, fmt_pm, pick_unit


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


def compare_rows(summaries: list[tuple[str, dict[str, Any]]]) -> list[list[str]]:
    """summaries: [(label, summary)]; rows of the comparison table."""
    rows = []
    for name, entries in comparison(summaries).items():
        scale, unit = pick_unit(next(e.stats for e in entries if e.stats is not None).get("median"))
        for i, e in enumerate(entries):
            m = e.stats
            if m is None:
                rows.append([name if i == 0 else "", e.label, "-", "-", "-", "-", "-", "-", "-"])
                continue
            ci = m.get("ci95_mean")
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
                    name + ("*" if m.get("derived") else "") if i == 0 else "",
                    e.label,
                    str(m["n"]),
                    f"{fmt(m.get('median'), scale)} {unit}",
                    f"{fmt_pm(m.get('mean'), half, scale)} {unit}",
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
    return d.ci95 is not None and (d.ci95[0] > 0 or d.ci95[1] < 0) and abs(d.value) >= 1


def difference_lines(baseline: str, diffs: dict[str, list[RunDifference]]) -> list[str]:
    """Per metric and run after the first: the difference of the medians (and means) from the
    baseline, the components that moved (those whose interval leaves out zero, largest first),
    and the settings that differ."""
    lines = []
    for metric, runs in diffs.items():
        if not runs:
            continue
        lines += ["", f"why {metric} differs from {baseline} (each run minus the baseline, 95 % intervals):"]
        for r in runs:
            scale, unit = pick_unit(max(abs(r.median.value), abs(r.mean.value)) or 1.0)
            lines.append(
                f"  {r.label}: median {difference_text(r.median, scale, unit)} ({p_text(r.median_test_p)}); "
                f"mean {difference_text(r.mean, scale, unit)}"
            )
            if r.components:
                went = sorted((d for d in r.components.items() if moved(d[1])), key=lambda x: -abs(x[1].value))
                text = ", ".join(f"{c} {difference_text(d, scale, unit)}" for c, d in went) or "none"
                lines.append(f"    components (means) that moved: {text}")
                rest = [c for c, d in r.components.items() if not moved(d)]
                if rest:
                    lines.append(f"    no difference shown in: {', '.join(rest)}")
            else:
                lines.append("    components: not both traced")
            if r.settings:
                lines.append(
                    "    settings that differ: "
                    + "; ".join(f"{k} {_plain(a)} -> {_plain(b)}" for k, (a, b) in r.settings.items())
                )
    return lines


def _plain(v: Any) -> str:  # noqa: ANN401 - a JSON value
    if isinstance(v, dict):
        return ", ".join(f"{k}={_plain(x)}" for k, x in v.items()) or "none"
    return "none" if v is None else "yes" if v is True else "no" if v is False else str(v)
