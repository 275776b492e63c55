"""`ipctrace suite`: every experiment of the seed reports (with --all every
workload), one placement policy, one table of this machine's figures beside the
reports' (suite.md and suite.csv in the suite's results directory, one results
directory per experiment under it).

An experiment that fails does not stop the others: its row says why, and the
suite exits 1 at the end. Ctrl-C writes the table of what was measured and
exits 130.
"""

import argparse
import dataclasses
import json
import os

from analysis import LOADER
from analysis.errors import Interrupted, IpctraceError, MeasureError, UsageError
from analysis.model.suite import Row
from analysis.render.suite import terminal
from analysis.run import runner, suite
from analysis.run.options import RunOptions, add_run_options, run_options
from analysis.run.runner import RunDir

QUICK = {"iterations": 2000, "warmup": 200, "runs": 2}
VARIANT_FLAGS = ("size", "mode", "procs", "fresh", "containers")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "suite",
        description="Run every experiment of the seed reports (with --all every workload) with "
        "one placement policy and write one table: this machine's figure with its "
        "95 % interval beside the reports' figures, as suite.md and suite.csv.",
    )
    p.add_argument("--all", action="store_true", help="also every workload no report measured")
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"small counts for a smoke test: {QUICK['iterations']} iterations, {QUICK['warmup']} "
        f"warm-up, {QUICK['runs']} runs (instead of --iterations/--warmup/--runs)",
    )
    add_run_options(p, out_help="suite directory (default results/suite-YYYYmmdd-HHMMSS)")


def base_options(args: argparse.Namespace) -> RunOptions:
    for flag in VARIANT_FLAGS:
        if getattr(args, flag):
            raise UsageError(
                f"suite: --{flag} chooses one workload's variant; the suite runs the "
                "reports' variants (use ipctrace run for others)"
            )
    # The reports measured without probes: a traced suite measures each experiment's untraced
    # twin too (unless --no-calibrate), and the table compares the twin's figures with theirs.
    opts = run_options(args, calibrate_by_default=True)
    if args.quick:
        opts = dataclasses.replace(opts, iterations=QUICK["iterations"], warmup=QUICK["warmup"], runs=QUICK["runs"])
    return opts


def run(args: argparse.Namespace) -> int:
    base = base_options(args)
    trace = not args.no_trace
    if trace and not os.access(LOADER, os.X_OK):
        raise UsageError(f"tracing is not built ({LOADER} is missing); use --no-trace")
    rows = [Row(e, m) for e, m in suite.plan(args.all)]
    for r in rows:
        info = runner.workload_info(r.experiment.workload)
        runner.check_options(info, suite.experiment_options(base, r.experiment))
    # Made (under sudo: with the invoking user's rights), opened once and locked; we write
    # through rd.path, its pinned name.
    rd = runner.open_new_outdir(args.out, "suite")
    try:
        return _run(args, base, trace, rows, rd)
    except IpctraceError as e:
        e.args = (rd.show(str(e)),)
        raise
    finally:
        rd.close()


def _run(args: argparse.Namespace, base: RunOptions, trace: bool, rows: list[Row], rd: RunDir) -> int:
    out, work = rd.shown, rd.path
    started = suite.now()
    interrupted = suite.measure(rows, base, trace, work, out, args.quiet)
    facts = suite.head(base, trace, args.quick, started, interrupted is not None)
    _, doc = suite.write_files(work, rows, facts)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        # the terminal gets aligned columns; suite.md (Markdown) is for pages and pull requests
        print(terminal(rows, facts), end="")
        print(f"results: {out} (the table as Markdown: {out / 'suite.md'})")
    if interrupted:
        raise Interrupted(interrupted.signum, f"interrupted; the table of what was measured is in {out}")
    failed = [r.experiment.id for r in rows if r.status.startswith("failed")]
    if failed:
        raise MeasureError(
            f"{len(failed)} of {len(rows)} experiments failed ({', '.join(failed)}); see {out / 'suite.md'}"
        )
    return 0
