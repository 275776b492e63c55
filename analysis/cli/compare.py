"""ipctrace compare DIR DIR...: one table, metric by metric, against the first directory, and
why each run differs from it.

For each metric and directory: n, median, mean with its 95 % interval, the ratio of means
and of medians to the first directory, and whether the 95 % intervals of the mean (and of
the median) overlap those of the first. Then, per run after the first, the effect first: the
difference of the medians of the runs' medians, with its interval from the run-to-run variance
(3 runs a side or more; a caveat with fewer); within the runs, the difference of the medians
with its bootstrap interval and Mood's median test, and of the means; the components that moved
(traced runs), the typical iteration's largest shift first; and the settings that differ as run.
"""

import argparse
import dataclasses
import json

from analysis.errors import UsageError
from analysis.model.breakdown import COMPONENTS
from analysis.model.compare import Run, comparison, explain_differences
from analysis.model.crosshost import PARTS
from analysis.render.compare import HEADER, compare_rows, difference_lines, incomplete_lines
from analysis.render.table import render
from analysis.store import dataset, rundir
from analysis.store.results import run_summary_file


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument(
        "dirs",
        nargs="+",
        metavar="DIR",
        help="results directories, the first the baseline; or a dataset FILE of `ipctrace collect` and the ids of "
        "its runs to compare (all without)",
    )


def _runs(args: argparse.Namespace) -> list[Run]:
    """The runs to compare: results directories, or a dataset of `ipctrace collect` with the
    run ids (or their prefixes) to take from it, all of its runs without."""
    if dataset.is_dataset(args.dirs[0]):
        runs = dataset.read_runs(args.dirs[0], args.dirs[1:])
        return [Run(label, s, it, bd) for label, s, it, bd in runs]
    if len(args.dirs) < 2:
        raise UsageError("compare needs at least two results directories (or a dataset of ipctrace collect)")
    return [Run(*rundir.read_compared(d, run_summary_file(d))) for d in args.dirs]


def run(args: argparse.Namespace) -> int:
    runs = _runs(args)
    if len(runs) < 2:
        raise UsageError("compare needs at least two runs: results directories, or a dataset holding two")
    labelled = [(r.label, r.summary) for r in runs]
    # a run's components, and the parts of a merged round trip across two hosts (ipctrace merge)
    diffs = explain_differences(runs, (*COMPONENTS, *PARTS))
    if args.json:
        keys = ("n", "median", "mean", "p99", "ci95_median", "ci95_mean")
        doc = {
            "baseline": runs[0].label,
            "metrics": {
                name: [
                    {
                        "dir": e.label,
                        **{k: getattr(e.stats, k) if e.stats else None for k in keys},
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
            "incomplete": {r.label: r.summary.status for r in runs if r.summary.status not in (None, "complete")},
        }
        print(json.dumps(doc, indent=1))
        return 0
    for line in render(compare_rows(labelled), HEADER, left=2):
        print(line)
    print(f"ratios and overlaps are against {runs[0].label}; * derived, not measured")
    for line in incomplete_lines(labelled):
        print(line)
    for line in difference_lines(runs[0].label, diffs):
        print(line)
    return 0
