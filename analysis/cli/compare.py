"""ipctrace compare DIR DIR...: one table, metric by metric, against the first directory, and
why each run differs from it.

For each metric and directory: n, median, mean with its 95 % interval, the ratio of means
and of medians to the first directory, and whether the 95 % intervals of the mean (and of
the median) overlap those of the first. Then, per run after the first: the difference of the
medians with its bootstrap interval and Mood's median test, the difference of the means, the
components whose mean moved (traced runs), and the settings that differ.
"""

import dataclasses
import json

from analysis.errors import UsageError
from analysis.model.breakdown import COMPONENTS
from analysis.model.compare import comparison, explain_differences
from analysis.render.compare import HEADER, compare_rows, difference_lines
from analysis.render.table import render
from analysis.store.results import read_summary


def register(sub):
    p = sub.add_parser("compare", help="compare the results of several runs", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("dirs", nargs="+", metavar="DIR", help="results directories; the first is the baseline")


def run(args):
    if len(args.dirs) < 2:
        raise UsageError("compare needs at least two results directories")
    summaries = [read_summary(d) for d in args.dirs]
    labelled = list(zip(args.dirs, summaries))
    diffs = explain_differences(args.dirs, summaries, COMPONENTS)
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
                for name, entries in comparison(labelled).items()
            },
            "differences": {m: [dataclasses.asdict(r) for r in runs] for m, runs in diffs.items()},
        }
        print(json.dumps(doc, indent=1))
        return 0
    for line in render(compare_rows(labelled), HEADER, left=2):
        print(line)
    print(f"ratios and overlaps are against {args.dirs[0]}; * derived, not measured")
    for line in difference_lines(args.dirs[0], diffs):
        print(line)
    return 0
