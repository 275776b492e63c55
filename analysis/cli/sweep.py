"""ipctrace sweep WORKLOAD --sizes 1,64,4096 [run options]: copy cost from a message-size sweep.

Runs the workload once per size (one results sub-directory each), then fits the
in-kernel time per iteration against the bytes copied per iteration with a
robust line (Theil-Sen over the per-size medians) and a bootstrap 95 %
interval over sizes and iterations: the slope is the copy cost in ns per byte, the intercept the fixed
cost. Each size's breakdown is then recomputed with that slope, its copy
component marked estimated.
"""

import argparse
import json
import os

from analysis.errors import IpctraceError, UsageError
from analysis.render.table import fmt, render
from analysis.run import runner, sweep
from analysis.run.options import RunOptions, add_run_options, run_options, size
from analysis.run.runner import RunDir
from analysis.store.results import INCOMPLETE
from analysis.store.summaryfile import SweepSummary

DEFAULT_SIZES = "1,64,512,4096,16384,65536"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sweep", description=__doc__.split("\n\n")[0])
    p.add_argument("workload", metavar="WORKLOAD", help="a workload that takes --size (ipctrace list)")
    p.add_argument(
        "--sizes",
        default=DEFAULT_SIZES,
        metavar="B,B,...",
        help=f"message sizes in bytes, at least two different (default {DEFAULT_SIZES})",
    )
    add_run_options(p, out_help="results directory, one sub-directory per size (default results/sweep-WORKLOAD-...)")
    # a run's options that a sweep does not take: not offered (refused in run() if given)
    for a in p._actions:
        if a.dest in NOT_FOR_A_SWEEP:
            a.help = argparse.SUPPRESS


NOT_FOR_A_SWEEP = {"size": "give the sizes with --sizes", "hist": "see each size's run", "break_at": "use ipctrace run"}


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [size(part) for part in text.split(",") if part.strip()]
    except Exception as e:  # argparse.ArgumentTypeError carries the message
        raise UsageError(f"--sizes: {e}") from None
    sizes = sorted(set(sizes))
    if len(sizes) < 2:
        raise UsageError("--sizes: give at least two different sizes, e.g. 1,64,4096")
    return sizes


def run(args: argparse.Namespace) -> int:
    for dest, why in NOT_FOR_A_SWEEP.items():
        if getattr(args, dest) not in (None, False, 0):
            raise UsageError(f"sweep: --{dest.replace('_', '-')} does not apply; {why}")
    sizes = parse_sizes(args.sizes)
    opts = run_options(args)
    info = runner.workload_info(args.workload)
    for s in sizes:
        runner.check_options(info, sweep.with_size(opts, s))
    # Made (under sudo: with the invoking user's rights), opened once and locked; we write
    # through rd.path, its pinned name.
    rd = runner.open_new_outdir(args.out, f"sweep-{args.workload}")
    try:
        runner.mark_incomplete(rd, "a sweep")
        return _run(args, sizes, opts, rd)
    except IpctraceError as e:
        e.args = (rd.show(str(e)),)
        raise
    finally:
        rd.close()


def _run(args: argparse.Namespace, sizes: list[int], opts: RunOptions, rd: RunDir) -> int:
    out, work = rd.shown, rd.path
    dirs, status, interrupted = sweep.measure(args.workload, sizes, opts, work, out, not args.no_trace, args.quiet)
    summary = sweep.finish(work, args.workload, dirs, opts, status, shown=out)
    os.unlink(INCOMPLETE, dir_fd=rd.fd)
    c = summary.copy
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        for line in size_table(summary):
            print(line)
        print(
            f"{args.workload}: copy cost {c.ns_per_byte.value:.4f} ns/byte "
            f"(95 % CI {c.ns_per_byte.ci95[0]:.4f}..{c.ns_per_byte.ci95[1]:.4f}), "
            f"fixed {c.fixed_ns.value:,.0f} ns (95 % CI {c.fixed_ns.ci95[0]:,.0f}.."
            f"{c.fixed_ns.ci95[1]:,.0f}); y = {summary.y}, x = {summary.x}"
        )
        print(f"results: {out}")
    if interrupted:
        raise interrupted
    return 0


def size_table(summary: SweepSummary) -> list[str]:
    """One aligned row per size (of a SweepSummary): the bytes copied, the fitted y's median, the
    metric's own median (the round trip) and the copy the slope gives."""
    per = summary.per_size or {}
    rows = []
    for s, e in per.items():
        rows.append(
            [
                s,
                f"{e.bytes_per_iteration:,.0f}",
                f"{fmt(e.median_ns, 1000)} us",
                "-" if e.metric_median_ns is None else f"{fmt(e.metric_median_ns, 1000)} us",
                f"{fmt(e.copy_ns_estimated, 1000)} us",
            ]
        )
    metric = summary.metric
    y = "in-kernel median" if "kernel" in str(summary.y) else f"{metric} median (y)"
    return render(rows, ["size (B)", "bytes copied", y, f"{metric} median", "copy (estimated)"], left=1)


# --- measurement per size --------------------------------------------------------
