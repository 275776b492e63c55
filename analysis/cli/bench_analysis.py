"""ipctrace bench-analysis [--iterations N ...] [--paths whole,streaming,trace] [--dir DIR]: how
long the analysis of a large traced run takes, and in how much memory, by today's whole-trace
path and by the streaming one, side by side in one run; "trace" is the streaming one with the
whole-trace view per thread that ipctrace trace adds (held to the same peak).

Writes a synthetic traced run of N ping-pong round trips on one CPU (12 kernel
records each: the two sides' write and read syscalls, both wake-ups, both
context switches; 1 M round trips give 12 M events), then analyses it in a
fresh process per path the way a run and its report do: statistics, decode events.bin and
the per-iteration breakdown (breakdown.parquet, summary) with events.parquet written alongside,
either the whole trace at once or a piece at a time (analyse_run.finish); then heat maps,
histograms with peaks and the breakdown's folded stacks. Prints each stage's wall time, CPU
time and peak memory (VmHWM) for each path, and per size a verdict against the targets:
streaming peak <= 1.5 GiB at every size, <= 20 s wall up to 5 M iterations, no slower than the
whole path where both ran, and ns per event at most 1.25 x the smallest size's (linear in
events). Before each size, each stage's peak is estimated from the sizes measured before (a
smaller one is measured first if there is none): where one of the report's stages would not fit
in this machine's available memory, the path runs without them; where another would not, the
path is skipped; either is printed as "needs ~X GiB" and a streaming stage left out so misses
the peak target.
"""

import argparse
from pathlib import Path

from analysis.run import analysis_benchmark, bench_analysis
from analysis.run.analysis_benchmark import DEFAULT_ROOT, MAX_ITERATIONS, PRODUCTION_ITERATIONS, PRODUCTION_TARGET
from analysis.run.options import count


def _paths(text: str) -> list[str]:
    import argparse

    names = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in names if p not in bench_analysis.PATHS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{text!r}: paths are a comma-separated list of {', '.join(bench_analysis.PATHS)}"
        )
    return [p for p in bench_analysis.PATHS if p in names]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench-analysis",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument(
        "--iterations",
        type=count("iterations", 1000, MAX_ITERATIONS),
        nargs="+",
        default=[1_000_000],
        metavar="N",
        help="round trips to synthesise, one or more sizes (default 1000000, i.e. 12 M events)",
    )
    p.add_argument(
        "--paths",
        type=_paths,
        default=list(bench_analysis.PATHS),
        metavar="P,...",
        help="the analysis paths to measure: whole, streaming, trace, or several (default all three)",
    )
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        metavar="DIR",
        help=f"where to write the synthetic runs (a new directory in it, removed at the end; default {DEFAULT_ROOT})",
    )
    p.add_argument(
        "--production",
        type=count("iterations", 0, 10_000_000),
        default=PRODUCTION_ITERATIONS,
        metavar="N",
        help=f"round trips of the traced same-CPU pipe measured first, whose time per event produced each path "
        f"is held to ({PRODUCTION_TARGET:g} x; default {PRODUCTION_ITERATIONS}, 0: not measured)",
    )


def run(args: argparse.Namespace) -> int:
    return analysis_benchmark.run(args.iterations, args.paths, args.dir, args.production)
