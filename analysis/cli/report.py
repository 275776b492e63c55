"""ipctrace report DIR... [--open]: one self-contained HTML page per results directory.

DIR/report.html holds everything inline (images as data URIs, d3 and
d3-flame-graph from analysis/render/vendor, no network): the summary with its
intervals, the breakdown bar, heat maps, histograms with their peaks, flame
graphs, the explanation of the median and p99 iterations, the copy cost as
measured, swept and sampled, attach modes, drops, probe-effect calibration and
the environment. The files behind the page (folded stacks, SVGs, PNGs) are
written next to it. Several DIRs: also one comparison page. The directory of a
`sweep` gets the fit and a page per size; that of a `suite` one page with every
experiment beside the seed reports' figures.
"""

import argparse
import sys
import webbrowser
from pathlib import Path

from analysis.run.report import is_suite, write_comparison, write_report, write_suite_report, write_sweep_report
from analysis.store.jsonfiles import SuiteFile
from analysis.store.results import suite_file, summary_file
from analysis.store.summaryfile import RunSummary, SweepSummary


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("dirs", metavar="DIR", type=Path, nargs="+", help="results directory (several: also a comparison)")
    p.add_argument("--open", action="store_true", help="open the page in the default browser")
    p.add_argument(
        "--hist-scale", choices=("log", "linear"), default="log", help="latency axis of the histograms (default log)"
    )
    p.add_argument(
        "--compare-out",
        type=Path,
        metavar="FILE",
        help="comparison page of several DIRs (default: report-compare.html beside the first DIR)",
    )


def run(args: argparse.Namespace) -> int:
    # Every DIR is checked before anything is written; a suite's directory has suite.json instead.
    summaries = [suite_file(d) if is_suite(d) else summary_file(d) for d in args.dirs]
    pages = []
    log_hist = args.hist_scale == "log"
    for resdir, summary in zip(args.dirs, summaries):
        if isinstance(summary, SuiteFile):
            pages.append(write_suite_report(resdir, summary, log_hist))
        elif isinstance(summary, SweepSummary):
            pages.append(write_sweep_report(resdir, summary, log_hist))
        else:
            pages.append(write_report(resdir, summary, log_hist))
        print(pages[-1])
    if len(args.dirs) > 1 and not any(map(is_suite, args.dirs)):
        # A whole trace (no iterations) or a sweep has its own page but no latencies to set
        # beside the others': said, and compared without it.
        pairs = [(d, s) for d, s in zip(args.dirs, summaries) if isinstance(s, RunSummary) and _has_iterations(d)]
        left = [str(d) for d in args.dirs if d not in {p for p, _ in pairs}]
        if left:
            print(f"ipctrace report: left out of the comparison (no iterations): {', '.join(left)}", file=sys.stderr)
        if len(pairs) > 1:
            out = args.compare_out or pairs[0][0].resolve().parent / "report-compare.html"
            pages.insert(0, write_comparison(out, [d for d, _ in pairs], [s for _, s in pairs]))
            print(pages[0])
    if args.open and not webbrowser.open(pages[0].resolve().as_uri()):
        # the pages are written: nothing failed, there is only no browser here
        print(f"ipctrace report: no browser to open it with here; open {pages[0]} yourself", file=sys.stderr)
    return 0


def _has_iterations(resdir: Path | str) -> bool:
    return (Path(resdir) / "iterations.parquet").exists()
