"""ipctrace compare DIR DIR...: one table, metric by metric, against the first directory.

For each metric and directory: n, median, mean with its 95 % interval, the
ratio of means and of medians to the first directory, and whether the 95 %
intervals of the mean (and of the median) overlap those of the first.
"""

import json

from analysis.errors import UsageError
from analysis.model.compare import comparison
from analysis.render.table import fmt, fmt_pm, pick_unit, render
from analysis.store.results import read_summary


def register(sub):
    p = sub.add_parser("compare", help="compare the results of several runs", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results directories; the first is the baseline")


def _ratio(r):
    return "-" if r is None else f"{r:.3f}"


def _yes(overlap):
    return "-" if overlap is None else "yes" if overlap else "no"


def compare_rows(summaries):
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


def run(args):
    if len(args.dirs) < 2:
        raise UsageError("compare needs at least two results directories")
    summaries = [(d, read_summary(d)) for d in args.dirs]
    if args.json:
        keys = ("n", "median", "mean", "p99", "ci95_median", "ci95_mean")
        doc = {
            "baseline": args.dirs[0],
            "metrics": {
                name: [
                    {
                        "dir": e.label,
                        **{k: (e.stats or {}).get(k) for k in keys},
                        "mean_ratio": e.mean_ratio,
                        "median_ratio": e.median_ratio,
                        "mean_cis_overlap": e.mean_cis_overlap,
                        "median_cis_overlap": e.median_cis_overlap,
                    }
                    for e in entries
                ]
                for name, entries in comparison(summaries).items()
            },
        }
        print(json.dumps(doc, indent=1))
        return 0
    header = [
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
    for line in render(compare_rows(summaries), header, left=2):
        print(line)
    print(f"ratios and overlaps are against {args.dirs[0]}; * derived, not measured")
    return 0
