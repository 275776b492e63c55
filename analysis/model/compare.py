"""Several runs side by side, metric by metric, against the first (the baseline): one rule
for the text table of `ipctrace compare` and the report's comparison page."""

from dataclasses import dataclass
from typing import Any


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
